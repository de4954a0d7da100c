package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// stageArgs checks `stage NAME` (or st, stages) for the commands only a Stage has.
func stageArgs(_ *cobra.Command, args []string) error {
	if len(args) != 2 {
		return errors.New("want stage NAME")
	}
	if k, err := parseKind(args[0]); err != nil || k.kind != stageKind.kind {
		return fmt.Errorf("only a Stage (st) has a history of moves, not %q", args[0])
	}
	return nil
}

// getStage reads the Stage of the chosen namespace named name.
func (c *cluster) getStage(ctx context.Context, name string) (*konfidencev1.Stage, error) {
	obj, err := c.get(ctx, stageKind, name)
	if err != nil {
		return nil, err
	}
	return obj.(*konfidencev1.Stage), nil
}

// historyEntry is a history entry as `history -o json|yaml` prints it: the API's fields and its role, active or
// candidate, when it is the entry of the Stage's active or candidate VectorDeployment.
type historyEntry struct {
	konfidencev1.StageHistoryEntry
	Role string `json:"role,omitempty"`
}

func newHistoryCommand() *cobra.Command {
	var flags clusterFlags
	var output *outputFormat
	cmd := &cobra.Command{
		Use:   "history stage NAME [-n NAMESPACE] [-o json|yaml]",
		Short: "Show a Stage's moves: each vector, its VectorDeployment and what became of it",
		Long: "Prints status.history of the Stage NAME, newest first: each vector the Stage moved to, its digest (short), the\n" +
			"VectorDeployment it created for it, when the move started and ended, and its outcome (Progressing, Promoted,\n" +
			"Failed, Superseded) with the reason of a failure. The entry of the VectorDeployment the landscape runs is marked\n" +
			"(active), that of a move under way or failed (candidate). -o json or yaml prints the entries, each with its role.",
		Args: stageArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := flags.oneNamespace(); err != nil {
				return err
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			st, err := c.getStage(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			entries := historyOf(st.Status)
			if output.structured() {
				return printStructured(cmd.OutOrStdout(), output.value, entries)
			}
			return printHistory(cmd.OutOrStdout(), st, entries)
		},
	}
	flags.bind(cmd.Flags())
	output = bindOutput(cmd.Flags(), "", "output format: json or yaml (default: a table)", outputJSON, outputYAML)
	return cmd
}

// historyOf is the status' history with the roles marked: active on the newest Promoted entry of the active
// VectorDeployment, candidate on the newest entry of the candidate. A VectorDeployment's name comes back when a
// Stage returns to a vector, so older entries of the same name are neither.
func historyOf(status konfidencev1.StageStatus) []historyEntry {
	entries := make([]historyEntry, len(status.History))
	active, candidate := false, false
	for i, e := range status.History {
		entries[i].StageHistoryEntry = e
		switch {
		case !active && e.VectorDeployment == status.ActiveVectorDeployment && e.Outcome == konfidencev1.MovePromoted:
			entries[i].Role, active = tree.RoleActive, true
		case !candidate && e.VectorDeployment == status.CandidateVectorDeployment:
			entries[i].Role, candidate = tree.RoleCandidate, true
		}
	}
	return entries
}

// printHistory writes the history as a table, newest first.
func printHistory(out io.Writer, st *konfidencev1.Stage, entries []historyEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintf(out, "%s has no moves yet\n", stageKind.describe(st))
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "VECTOR\tDIGEST\tVECTORDEPLOYMENT\tSTARTED\tENDED\tOUTCOME\tMESSAGE")
	for _, e := range entries {
		vd := e.VectorDeployment
		if e.Role != "" {
			vd += " (" + e.Role + ")"
		}
		ended := "-"
		if e.Ended != nil {
			ended = timestamp(e.Ended.Time)
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Vector, orDash(strings.TrimPrefix(shortDigest(e.Digest), "@")), vd, timestamp(e.Started.Time), ended,
			e.Outcome, orDash(oneLine(e.Message)))
	}
	return w.Flush()
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// oneLine keeps a message on its table row.
func oneLine(s string) string { return strings.Join(strings.Fields(sanitize.Printable(s)), " ") }

func newRollbackCommand() *cobra.Command {
	var flags clusterFlags
	var w waitFlags
	var to string
	cmd := &cobra.Command{
		Use:   "rollback stage NAME [--to VECTOR] [--wait [--timeout D]]",
		Short: "Move a Stage back to the last vector it ran before the active one",
		Long: "Sets spec.vector of the Stage NAME to the last vector that ran successfully before the one it runs now: the\n" +
			"newest Promoted entry of status.history whose vector is not the active VectorDeployment's; --to VECTOR sets\n" +
			"that vector instead (e.g. the active one's, to call off a move under way or failed). The Stage then moves as\n" +
			"for any change of spec.vector: the VectorDeployment of the vector is created (or kept, when it still exists)\n" +
			"and becomes active once Ready. A Stage that follows spec.semver is refused: it picks its own version, the newest\n" +
			"in the range, so change the range instead to one the version to run tops. With --wait, waits until the Stage\n" +
			"is Ready for the new spec with that vector's VectorDeployment active (exit 0), Stalled (the move failed:\n" +
			"UpgradeFailed, ProgressDeadlineExceeded) or not there after --timeout (exit 1, with the reason).",
		Args: stageArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("to") && to == "" {
				return usageErrorf("--to names no vector")
			}
			if err := flags.oneNamespace(); err != nil {
				return err
			}
			ctx := cmd.Context()
			if w.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, w.timeout)
				defer cancel()
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			st, target, err := c.rollback(ctx, cmd.OutOrStdout(), args[1], to)
			if err != nil || !w.wait {
				return err
			}
			name, err := stage.VectorDeploymentName(st.Name, st.UID, target)
			if err != nil {
				return err
			}
			return c.await(ctx, cmd.OutOrStdout(), stageKind, st, goal{active: name})
		},
	}
	flags.bind(cmd.Flags())
	w.bind(cmd.Flags(), "wait until the Stage is Ready with the vector's VectorDeployment active")
	cmd.Flags().StringVar(&to, "to", "", "vector to set (default: the last Promoted vector before the active one)")
	return cmd
}

// rollback sets the Stage's spec.vector to to, or when to is empty to the rollback target its status names, and
// returns the Stage as written and the vector set. The patch carries the resourceVersion read: a Stage whose status
// or spec changed in between (a move recorded) is read again and its target chosen again, rather than rolled back
// to a target chosen from a history gone stale.
func (c *cluster) rollback(ctx context.Context, out io.Writer, name, to string) (*konfidencev1.Stage, string, error) {
	var st *konfidencev1.Stage
	var target, before string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if st, err = c.getStage(ctx, name); err != nil {
			return err
		}
		if st.Spec.Semver != "" {
			return fmt.Errorf("%s follows spec.semver %q: it runs the newest version in that range, whatever spec.vector says; "+
				"to run an older one, change spec.semver to a range that version tops", stageKind.describe(st), st.Spec.Semver)
		}
		if target = to; target == "" {
			if target, err = c.rollbackTargetOf(ctx, st); err != nil {
				return err
			}
		}
		before = st.Spec.Vector
		if before == target {
			return nil
		}
		original := st.DeepCopy()
		st.Spec.Vector = target
		return c.client.Patch(ctx, st, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return nil, "", c.explain(err)
	}
	if before == target {
		_, err = fmt.Fprintf(out, "%s: spec.vector is %s already\n", stageKind.describe(st), target)
	} else {
		_, err = fmt.Fprintf(out, "%s: spec.vector set to %s (was %s)\n", stageKind.describe(st), target, before)
	}
	return st, target, err
}

// rollbackTargetOf chooses the vector a rollback of st sets (see rollbackTarget). When the status does not say
// which vector the active VectorDeployment runs (a history cut to spec.historyLimit while a move is under way), the
// VectorDeployment itself is read.
func (c *cluster) rollbackTargetOf(ctx context.Context, st *konfidencev1.Stage) (string, error) {
	active, known := activeVector(st.Status)
	if !known {
		obj, err := c.get(ctx, vectorDeploymentKind, st.Status.ActiveVectorDeployment)
		if err != nil {
			return "", fmt.Errorf("reading the active VectorDeployment of %s: %w", stageKind.describe(st), err)
		}
		active = obj.(*konfidencev1.VectorDeployment).Spec.Vector
	}
	target, ok := rollbackTarget(st.Status.History, active)
	if !ok {
		return "", fmt.Errorf("%s has no vector to roll back to: no Promoted entry of its history has another vector than the active one (%s); "+
			"name one with --to", stageKind.describe(st), orDash(active))
	}
	return target, nil
}

// activeVector is the vector the Stage's active VectorDeployment runs: status.lastAppliedVector when no move is
// under way (the active VectorDeployment is then the one of that vector), else the vector of the active
// VectorDeployment's entry in the history. Empty and known when no VectorDeployment is active; not known when
// the entry is no longer in the history.
func activeVector(status konfidencev1.StageStatus) (vector string, known bool) {
	switch {
	case status.ActiveVectorDeployment == "":
		return "", true
	case status.CandidateVectorDeployment == "" && status.LastAppliedVector != "":
		return status.LastAppliedVector, true
	}
	for _, e := range status.History {
		if e.VectorDeployment == status.ActiveVectorDeployment {
			// The name is a hash of the vector: every entry of it has the same one.
			return e.Vector, true
		}
	}
	return "", false
}

// rollbackTarget is the vector a rollback sets: the newest Promoted entry of the history (newest first) whose vector
// is not the active one: the last vector that ran before it. Failed and superseded moves never ran, and a Promoted
// entry of the active vector itself (an earlier stay on it) is no step back.
func rollbackTarget(history []konfidencev1.StageHistoryEntry, active string) (string, bool) {
	for _, e := range history {
		if e.Outcome == konfidencev1.MovePromoted && e.Vector != active {
			return e.Vector, true
		}
	}
	return "", false
}
