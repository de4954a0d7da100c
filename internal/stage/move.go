package stage

import (
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// deployment is one of a Stage's VectorDeployments as a move decides on it.
type deployment struct {
	name, vector, digest string
	created              time.Time
	deleting             bool
	// ready: Ready for its current generation, every artifact Ready.
	ready bool
	// failed: Stalled for its current generation; retrying cannot make it Ready.
	failed bool
	// reason and message are its Ready condition's.
	reason, message string
}

// situation is what a move is decided from: the Stage's status as last written, the vector it should run now and
// the VectorDeployments it owns.
type situation struct {
	status  konfidencev1.StageStatus
	desired string // the resolved vector reference
	// desiredName is the name of desired's VectorDeployment.
	desiredName string
	owned       map[string]deployment
	now         time.Time
	deadline    time.Duration
	limit       int
}

// step is what a reconcile does about a move, decided by decide alone: the VectorDeployment to create, those to
// delete, and the Stage's status after it.
type step struct {
	// create asks for the VectorDeployment of the desired vector.
	create bool
	// remove names the VectorDeployments to delete: neither active nor candidate.
	remove    []string
	active    string
	candidate string
	history   []konfidencev1.StageHistoryEntry
	// ready is the Stage's Ready condition; failed makes it stall (a move that failed, waiting for a new vector).
	ready  metav1.Condition
	failed bool
	// deployed tells whether the desired vector runs: its VectorDeployment is active and Ready.
	deployed bool
	// recheck is when to look again without an event: the candidate's progress deadline.
	recheck time.Duration
}

// decide takes one step of a Stage's move: the candidate replaces the active VectorDeployment only once it is
// Ready, a candidate that stalls or misses its deadline fails the move and leaves the active one running, a newer
// vector supersedes the candidate, and the vector set back to the active one cancels the move. It is a pure
// function of the situation, so that a reconcile after a restart, at any point of a move, takes the same step.
func decide(s situation) step {
	st := step{active: s.status.ActiveVectorDeployment, candidate: s.status.CandidateVectorDeployment, history: slices.Clone(s.status.History)}
	st.recoverActive(s)
	if st.candidate != "" && st.candidate != s.desiredName {
		// A newer vector, or the active one again: the candidate's move ends here.
		st.endMove(st.candidate, konfidencev1.MoveSuperseded, s.now)
		st.candidate = ""
	}
	if st.active == s.desiredName {
		st.steady(s)
	} else {
		st.move(s)
	}
	st.recordDigests(s)
	st.remove = removable(s.owned, st.active, st.candidate)
	if len(st.history) > s.limit {
		st.history = st.history[:s.limit]
	}
	return st
}

// recoverActive forgets an active VectorDeployment that is gone, and when the status names none (a status lost, or
// written by an older operator) takes the newest Ready one the Stage owns: that one is running, and deleting it
// before its successor is Ready would be the outage a Stage exists to prevent.
func (st *step) recoverActive(s situation) {
	if d, ok := s.owned[st.active]; st.active != "" && (!ok || d.deleting) {
		// Deleted after a promotion whose status write was lost, or by someone else: it runs no more.
		st.endMove(st.active, konfidencev1.MovePromoted, s.now)
		st.active = ""
	}
	if st.active != "" {
		return
	}
	var newest *deployment
	for _, d := range s.owned {
		if d.ready && !d.deleting && d.name != s.desiredName && (newest == nil || d.created.After(newest.created)) {
			newest = &d
		}
	}
	if newest != nil {
		st.active = newest.name
	}
}

// steady reports a Stage whose desired vector is the active one: its VectorDeployment's readiness is the Stage's.
func (st *step) steady(s situation) {
	d := s.owned[st.active]
	switch {
	case d.ready:
		st.deployed = true
		st.ready = condition(metav1.ConditionTrue, konfidencev1.PromotedReason, "vector %s runs as VectorDeployment %s", s.desired, d.name)
	case d.failed:
		st.failed = true
		st.ready = condition(metav1.ConditionFalse, d.reason, "VectorDeployment %s of vector %s: %s", d.name, s.desired, d.message)
	default:
		st.ready = condition(metav1.ConditionUnknown, meta.ProgressingReason, "VectorDeployment %s of vector %s: %s", d.name, s.desired, d.message)
	}
}

// move takes the candidate of the desired vector one step on: created, promoted once Ready, failed when it stalls
// or its deadline passes.
func (st *step) move(s situation) {
	st.candidate = s.desiredName
	c, exists := s.owned[s.desiredName]
	switch {
	case exists && c.deleting:
		// The vector's VectorDeployment of an earlier move is still being torn down: its name is taken until then.
		st.ready = condition(metav1.ConditionUnknown, meta.ProgressingReason,
			"waiting for VectorDeployment %s of an earlier move of vector %s to be deleted before it is created again", c.name, s.desired)
		return
	case !exists:
		st.create = true
		st.startMove(s, s.now)
		st.recheck = s.deadline
		st.ready = condition(metav1.ConditionUnknown, meta.ProgressingReason, "%s: creating VectorDeployment %s", st.moving(s), s.desiredName)
		return
	}
	st.startMove(s, c.created)
	elapsed := s.now.Sub(c.created)
	switch {
	case c.ready:
		if st.active != "" {
			st.endMove(st.active, konfidencev1.MovePromoted, s.now)
		}
		st.promote(s, c.name)
		st.active, st.candidate, st.deployed = c.name, "", true
		st.ready = condition(metav1.ConditionTrue, konfidencev1.PromotedReason, "vector %s runs as VectorDeployment %s", s.desired, c.name)
	case c.failed:
		st.fail(s, c, konfidencev1.UpgradeFailedReason, fmt.Sprintf("VectorDeployment %s stalled: %s: %s", c.name, c.reason, c.message))
	case elapsed >= s.deadline:
		st.fail(s, c, konfidencev1.ProgressDeadlineExceededReason, fmt.Sprintf("VectorDeployment %s was not Ready within %s: %s: %s", c.name, s.deadline, c.reason, c.message))
	default:
		st.recheck = s.deadline - elapsed
		st.ready = condition(metav1.ConditionUnknown, meta.ProgressingReason, "%s: VectorDeployment %s: %s", st.moving(s), c.name, c.message)
	}
}

// fail ends the candidate's move as failed; the active VectorDeployment keeps running, and the candidate stays for
// inspection until the next move.
func (st *step) fail(s situation, c deployment, reason, msg string) {
	if st.active != "" {
		msg += fmt.Sprintf("; VectorDeployment %s keeps running", st.active)
	}
	st.failed = true
	st.recordFailure(s, c.name, msg)
	st.ready = condition(metav1.ConditionFalse, reason, "moving to vector %s failed: %s", s.desired, msg)
}

// moving says what the move is, for messages.
func (st *step) moving(s situation) string {
	if st.active == "" {
		return fmt.Sprintf("deploying vector %s", s.desired)
	}
	return fmt.Sprintf("moving from VectorDeployment %s to vector %s", st.active, s.desired)
}

// startMove records the candidate's move in the history unless its entry is there (see entry). The start is the
// VectorDeployment's creation when it exists, so that a reconcile after a restart records the same entry.
func (st *step) startMove(s situation, started time.Time) {
	if st.entry(s.desiredName, s.wasCandidate()) >= 0 {
		return
	}
	st.history = slices.Insert(st.history, 0, konfidencev1.StageHistoryEntry{
		Vector: s.desired, VectorDeployment: s.desiredName, Started: metav1.Time{Time: started}, Outcome: konfidencev1.MoveProgressing,
	})
}

// wasCandidate tells whether the desired vector's VectorDeployment was the candidate before this step.
func (s situation) wasCandidate() bool { return s.status.CandidateVectorDeployment == s.desiredName }

// entry is the index of name's entry of the move under way or the vector running: its newest entry when it has not
// ended, or when it failed and name is still the candidate (keepFailed); -1 when there is none. A VectorDeployment
// name comes back when a Stage returns to a vector, and then gets a new entry.
func (st *step) entry(name string, keepFailed bool) int {
	i := slices.IndexFunc(st.history, func(e konfidencev1.StageHistoryEntry) bool { return e.VectorDeployment == name })
	if i < 0 {
		return -1
	}
	if e := st.history[i]; e.Ended == nil || (keepFailed && e.Outcome == konfidencev1.MoveFailed) {
		return i
	}
	return -1
}

// promote records the candidate's entry as promoted: running, not ended.
func (st *step) promote(s situation, name string) {
	if i := st.entry(name, s.wasCandidate()); i >= 0 {
		e := &st.history[i]
		e.Outcome, e.Ended, e.Message = konfidencev1.MovePromoted, nil, ""
	}
}

// recordFailure records the candidate's entry as failed, at the time it first failed.
func (st *step) recordFailure(s situation, name, msg string) {
	if i := st.entry(name, s.wasCandidate()); i >= 0 {
		e := &st.history[i]
		if e.Outcome != konfidencev1.MoveFailed {
			e.Outcome, e.Ended = konfidencev1.MoveFailed, &metav1.Time{Time: s.now}
		}
		e.Message = sanitize.Bounded(msg, maxEntryMessage)
	}
}

// endMove ends name's entry: a running vector replaced (it stays Promoted), or a move under way superseded. An entry
// that failed has ended already.
func (st *step) endMove(name, outcome string, now time.Time) {
	i := st.entry(name, false)
	if i < 0 {
		return
	}
	e := &st.history[i]
	e.Ended = &metav1.Time{Time: now}
	if e.Outcome == konfidencev1.MoveProgressing {
		e.Outcome = outcome
	}
}

// maxEntryMessage is the API's limit on a history entry's message.
const maxEntryMessage = 1024

// recordDigests copies the digest each VectorDeployment read into its entries that lack it.
func (st *step) recordDigests(s situation) {
	for i := range st.history {
		e := &st.history[i]
		if d, ok := s.owned[e.VectorDeployment]; ok && e.Digest == "" && d.digest != "" && d.vector == e.Vector {
			e.Digest = d.digest
		}
	}
}

// removable names the VectorDeployments to delete: every one the Stage owns that is neither active nor the
// candidate, and not already going.
func removable(owned map[string]deployment, active, candidate string) []string {
	var names []string
	for name, d := range owned {
		if name != active && name != candidate && !d.deleting {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func condition(status metav1.ConditionStatus, reason, format string, args ...any) metav1.Condition {
	return metav1.Condition{Type: konfidencev1.ReadyCondition, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}
