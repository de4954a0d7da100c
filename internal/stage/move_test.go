package stage

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func mt(minutes int) *metav1.Time { return &metav1.Time{Time: at(minutes)} }

func entry(vd, vector, outcome string, started int, ended *metav1.Time) konfidencev1.StageHistoryEntry {
	return konfidencev1.StageHistoryEntry{Vector: vector, VectorDeployment: vd, Started: metav1.Time{Time: at(started)}, Ended: ended, Outcome: outcome}
}

func vd(name, vector string, created int, state string) deployment {
	d := deployment{name: name, vector: vector, created: at(created), reason: "Progressing", message: "1/2 artifacts ready"}
	switch state {
	case "ready":
		d.ready, d.reason, d.message = true, "Succeeded", "2/2 artifacts ready"
	case "failed":
		d.failed, d.reason, d.message = true, "InstallFailed", "app: crash loop"
	case "deleting":
		d.deleting = true
	}
	return d
}

func owned(ds ...deployment) map[string]deployment {
	m := map[string]deployment{}
	for _, d := range ds {
		m[d.name] = d
	}
	return m
}

// TestDecide walks the move's state machine: each case is one reconcile of a Stage in one situation.
func TestDecide(t *testing.T) {
	const v1, v2, v3 = "r//acme.org/shop:1", "r//acme.org/shop:2", "r//acme.org/shop:3"
	running1 := entry("vd1", v1, konfidencev1.MovePromoted, 0, nil)
	const late = "VectorDeployment vd2 was not Ready within 10m0s: Progressing: 1/2 artifacts ready; VectorDeployment vd1 keeps running"
	tests := []struct {
		name string
		s    situation
		want step
	}{{
		name: "the first vector: its VectorDeployment is created",
		s:    situation{desired: v1, desiredName: "vd1", owned: owned(), now: at(0)},
		want: step{create: true, candidate: "vd1", history: []konfidencev1.StageHistoryEntry{entry("vd1", v1, konfidencev1.MoveProgressing, 0, nil)},
			ready: condition("Unknown", "Progressing", "deploying vector %s: creating VectorDeployment vd1", v1), recheck: 10 * time.Minute},
	}, {
		name: "the first vector Ready: promoted, nothing removed",
		s: situation{status: konfidencev1.StageStatus{CandidateVectorDeployment: "vd1", History: []konfidencev1.StageHistoryEntry{entry("vd1", v1, konfidencev1.MoveProgressing, 0, nil)}},
			desired: v1, desiredName: "vd1", owned: owned(vd("vd1", v1, 0, "ready")), now: at(2)},
		want: step{active: "vd1", deployed: true, history: []konfidencev1.StageHistoryEntry{running1},
			ready: condition("True", "Promoted", "vector %s runs as VectorDeployment vd1", v1)},
	}, {
		name: "a new vector: the candidate is created beside the active one",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", History: []konfidencev1.StageHistoryEntry{running1}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready")), now: at(5)},
		want: step{create: true, active: "vd1", candidate: "vd2",
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1},
			ready:   condition("Unknown", "Progressing", "moving from VectorDeployment vd1 to vector %s: creating VectorDeployment vd2", v2), recheck: 10 * time.Minute},
	}, {
		name: "the candidate on its way: the active one stays, looked at again by the deadline",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", CandidateVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd2", v2, 5, "")), now: at(8)},
		want: step{active: "vd1", candidate: "vd2",
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1},
			ready:   condition("Unknown", "Progressing", "moving from VectorDeployment vd1 to vector %s: VectorDeployment vd2: 1/2 artifacts ready", v2), recheck: 7 * time.Minute},
	}, {
		name: "the candidate Ready: promoted, the previous one removed",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", CandidateVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd2", v2, 5, "ready")), now: at(9)},
		want: step{active: "vd2", remove: []string{"vd1"}, deployed: true,
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MovePromoted, 5, nil), entry("vd1", v1, konfidencev1.MovePromoted, 0, mt(9))},
			ready:   condition("True", "Promoted", "vector %s runs as VectorDeployment vd2", v2)},
	}, {
		name: "the candidate stalled: the move fails, both stay",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", CandidateVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd2", v2, 5, "failed")), now: at(7)},
		want: step{active: "vd1", candidate: "vd2", failed: true,
			history: []konfidencev1.StageHistoryEntry{failedEntry("vd2", v2, 5, 7, "VectorDeployment vd2 stalled: InstallFailed: app: crash loop; VectorDeployment vd1 keeps running"), running1},
			ready:   condition("False", "UpgradeFailed", "moving to vector %s failed: VectorDeployment vd2 stalled: InstallFailed: app: crash loop; VectorDeployment vd1 keeps running", v2)},
	}, {
		name: "the candidate past its deadline: the move fails, both stay",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", CandidateVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd2", v2, 5, "")), now: at(15)},
		want: step{active: "vd1", candidate: "vd2", failed: true,
			history: []konfidencev1.StageHistoryEntry{failedEntry("vd2", v2, 5, 15, late), running1},
			ready:   condition("False", "ProgressDeadlineExceeded", "moving to vector %s failed: %s", v2, late)},
	}, {
		name: "a newer vector during a move: the candidate is superseded and removed",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", CandidateVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1}},
			desired: v3, desiredName: "vd3", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd2", v2, 5, "")), now: at(6)},
		want: step{create: true, active: "vd1", candidate: "vd3", remove: []string{"vd2"},
			history: []konfidencev1.StageHistoryEntry{entry("vd3", v3, konfidencev1.MoveProgressing, 6, nil), entry("vd2", v2, konfidencev1.MoveSuperseded, 5, mt(6)), running1},
			ready:   condition("Unknown", "Progressing", "moving from VectorDeployment vd1 to vector %s: creating VectorDeployment vd3", v3), recheck: 10 * time.Minute},
	}, {
		name: "the vector set back to the active one: the failed candidate is removed, it stays failed",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", CandidateVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{failedEntry("vd2", v2, 5, 7, "m"), running1}},
			desired: v1, desiredName: "vd1", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd2", v2, 5, "failed")), now: at(20)},
		want: step{active: "vd1", remove: []string{"vd2"}, deployed: true,
			history: []konfidencev1.StageHistoryEntry{failedEntry("vd2", v2, 5, 7, "m"), running1},
			ready:   condition("True", "Promoted", "vector %s runs as VectorDeployment vd1", v1)},
	}, {
		name: "a status lost: the Ready VectorDeployment is taken as active, not removed",
		s:    situation{desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready")), now: at(30)},
		want: step{create: true, active: "vd1", candidate: "vd2",
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 30, nil)},
			ready:   condition("Unknown", "Progressing", "moving from VectorDeployment vd1 to vector %s: creating VectorDeployment vd2", v2), recheck: 10 * time.Minute},
	}, {
		name: "a restart after the candidate was created: its entry is recorded once, from its creation",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", History: []konfidencev1.StageHistoryEntry{running1}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd2", v2, 5, "")), now: at(6)},
		want: step{active: "vd1", candidate: "vd2",
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1},
			ready:   condition("Unknown", "Progressing", "moving from VectorDeployment vd1 to vector %s: VectorDeployment vd2: 1/2 artifacts ready", v2), recheck: 9 * time.Minute},
	}, {
		name: "a restart after the previous one was deleted: the promotion is recorded, nothing removed twice",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", CandidateVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "deleting"), vd("vd2", v2, 5, "ready")), now: at(9)},
		want: step{active: "vd2", deployed: true,
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MovePromoted, 5, nil), entry("vd1", v1, konfidencev1.MovePromoted, 0, mt(9))},
			ready:   condition("True", "Promoted", "vector %s runs as VectorDeployment vd2", v2)},
	}, {
		name: "back to a vector whose VectorDeployment is still being torn down: wait",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd2", History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MovePromoted, 5, nil)}},
			desired: v1, desiredName: "vd1", owned: owned(vd("vd1", v1, 0, "deleting"), vd("vd2", v2, 5, "ready")), now: at(10)},
		want: step{active: "vd2", candidate: "vd1",
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MovePromoted, 5, nil)},
			ready:   condition("Unknown", "Progressing", "waiting for VectorDeployment vd1 of an earlier move of vector %s to be deleted before it is created again", v1)},
	}, {
		name: "back to an earlier vector: a new entry, the old one kept",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd2",
			History: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MovePromoted, 5, nil), entry("vd1", v1, konfidencev1.MovePromoted, 0, mt(9))}},
			desired: v1, desiredName: "vd1", owned: owned(vd("vd2", v2, 5, "ready")), now: at(20)},
		want: step{create: true, active: "vd2", candidate: "vd1",
			history: []konfidencev1.StageHistoryEntry{
				entry("vd1", v1, konfidencev1.MoveProgressing, 20, nil), entry("vd2", v2, konfidencev1.MovePromoted, 5, nil), entry("vd1", v1, konfidencev1.MovePromoted, 0, mt(9)),
			},
			ready: condition("Unknown", "Progressing", "moving from VectorDeployment vd2 to vector %s: creating VectorDeployment vd1", v1), recheck: 10 * time.Minute},
	}, {
		name: "a VectorDeployment left over: removed",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", History: []konfidencev1.StageHistoryEntry{running1}},
			desired: v1, desiredName: "vd1", owned: owned(vd("vd1", v1, 0, "ready"), vd("vd9", v3, 1, "")), now: at(9)},
		want: step{active: "vd1", remove: []string{"vd9"}, deployed: true, history: []konfidencev1.StageHistoryEntry{running1},
			ready: condition("True", "Promoted", "vector %s runs as VectorDeployment vd1", v1)},
	}, {
		name: "the history is kept to its limit",
		s: situation{status: konfidencev1.StageStatus{ActiveVectorDeployment: "vd1", History: []konfidencev1.StageHistoryEntry{running1, entry("vd0", v3, konfidencev1.MovePromoted, -10, mt(0))}},
			desired: v2, desiredName: "vd2", owned: owned(vd("vd1", v1, 0, "ready")), now: at(5), limit: 2},
		want: step{create: true, active: "vd1", candidate: "vd2",
			history: []konfidencev1.StageHistoryEntry{entry("vd2", v2, konfidencev1.MoveProgressing, 5, nil), running1},
			ready:   condition("Unknown", "Progressing", "moving from VectorDeployment vd1 to vector %s: creating VectorDeployment vd2", v2), recheck: 10 * time.Minute},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.s.deadline == 0 {
				tt.s.deadline = 10 * time.Minute
			}
			if tt.s.limit == 0 {
				tt.s.limit = 10
			}
			got := decide(tt.s)
			assertStep(t, got, tt.want)
			// Decided again on the status it wrote, with nothing changed, the step writes the same status: a
			// reconcile repeated after a restart neither adds an entry nor moves on.
			again := tt.s
			again.status = konfidencev1.StageStatus{ActiveVectorDeployment: got.active, CandidateVectorDeployment: got.candidate, History: got.history}
			for _, name := range got.remove {
				d := again.owned[name]
				d.deleting = true
				again.owned = cloneOwned(again.owned)
				again.owned[name] = d
			}
			if got.create {
				again.owned = cloneOwned(again.owned)
				again.owned[tt.s.desiredName] = vd(tt.s.desiredName, tt.s.desired, int(tt.s.now.Sub(t0)/time.Minute), "")
			}
			repeated := decide(again)
			if repeated.active != got.active || repeated.candidate != got.candidate || !slices.EqualFunc(repeated.history, got.history, sameEntry) {
				t.Errorf("repeated: active %q candidate %q history %v, want %q %q %v", repeated.active, repeated.candidate, repeated.history, got.active, got.candidate, got.history)
			}
		})
	}
}

func failedEntry(vd, vector string, started, ended int, msg string) konfidencev1.StageHistoryEntry {
	e := entry(vd, vector, konfidencev1.MoveFailed, started, mt(ended))
	e.Message = msg
	return e
}

func cloneOwned(m map[string]deployment) map[string]deployment {
	c := make(map[string]deployment, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func sameEntry(a, b konfidencev1.StageHistoryEntry) bool {
	return a.Vector == b.Vector && a.VectorDeployment == b.VectorDeployment && a.Started.Equal(&b.Started) && a.Ended.Equal(b.Ended) &&
		a.Outcome == b.Outcome && a.Message == b.Message && a.Digest == b.Digest
}

func assertStep(t *testing.T, got, want step) {
	t.Helper()
	if got.create != want.create || got.active != want.active || got.candidate != want.candidate || got.failed != want.failed ||
		got.deployed != want.deployed || got.recheck != want.recheck || !slices.Equal(got.remove, want.remove) {
		t.Errorf("step: create %v active %q candidate %q remove %v failed %v deployed %v recheck %v\nwant: create %v active %q candidate %q remove %v failed %v deployed %v recheck %v",
			got.create, got.active, got.candidate, got.remove, got.failed, got.deployed, got.recheck,
			want.create, want.active, want.candidate, want.remove, want.failed, want.deployed, want.recheck)
	}
	if got.ready.Status != want.ready.Status || got.ready.Reason != want.ready.Reason || got.ready.Message != want.ready.Message {
		t.Errorf("ready: %s %s %q\nwant:  %s %s %q", got.ready.Status, got.ready.Reason, got.ready.Message, want.ready.Status, want.ready.Reason, want.ready.Message)
	}
	if !slices.EqualFunc(got.history, want.history, sameEntry) {
		t.Errorf("history:\n%v\nwant:\n%v", got.history, want.history)
	}
}
