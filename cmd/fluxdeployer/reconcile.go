package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/gesture"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// selection is what reconcile, suspend, resume and wait act on: KIND NAME, or every object of KIND with --all.
type selection struct {
	cluster clusterFlags
	all     bool
}

func (s *selection) bind(f *pflag.FlagSet) {
	s.cluster.bind(f)
	f.BoolVar(&s.all, "all", false, "every object of the kind in the namespace (with -A, in every namespace)")
}

// args checks KIND NAME, or KIND alone with --all.
func (s *selection) args(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("name a kind (vd, ad or st) and an object, or a kind and --all")
	case s.all && len(args) != 1:
		return errors.New("--all takes a kind and no NAME")
	case !s.all && len(args) != 2:
		return errors.New("want KIND NAME, or KIND --all")
	}
	_, err := parseKind(args[0])
	return err
}

// resolve connects and reads the selected objects.
func (s *selection) resolve(ctx context.Context, args []string) (*cluster, objectKind, []client.Object, error) {
	k, err := parseKind(args[0])
	if err != nil {
		return nil, k, nil, err
	}
	if !s.all {
		if err := s.cluster.oneNamespace(); err != nil {
			return nil, k, nil, err
		}
	}
	c, err := s.cluster.connect()
	if err != nil {
		return nil, k, nil, err
	}
	if s.all {
		objs, err := c.list(ctx, k)
		return c, k, objs, err
	}
	obj, err := c.get(ctx, k, args[1])
	if err != nil {
		return nil, k, nil, err
	}
	return c, k, []client.Object{obj}, nil
}

// forEach acts on every selected object, each within its own timeout when it is above zero, and joins the
// errors: one object failing, or waited on until its timeout, keeps none of the others from being acted on.
func (s *selection) forEach(cmd *cobra.Command, args []string, timeout time.Duration,
	act func(ctx context.Context, c *cluster, k objectKind, obj client.Object) error) error {
	c, k, objs, err := s.resolve(cmd.Context(), args)
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range objs {
		errs = append(errs, within(cmd.Context(), timeout, func(ctx context.Context) error { return act(ctx, c, k, obj) }))
	}
	return errors.Join(errs...)
}

// within runs f with a context that ends after timeout (none when it is not above zero).
func within(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return f(ctx)
}

// waitFlags are --wait and --timeout of the commands that can wait for the outcome.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) bind(f *pflag.FlagSet, waitUsage string) {
	if waitUsage != "" {
		f.BoolVar(&w.wait, "wait", false, waitUsage)
	}
	f.DurationVar(&w.timeout, "timeout", 5*time.Minute, "how long to wait for each object to be Ready")
}

func newReconcileCommand() *cobra.Command {
	var s selection
	var w waitFlags
	var withArtifacts bool
	cmd := &cobra.Command{
		Use:   "reconcile vd|ad|st (NAME | --all) [--with-artifacts] [--wait [--timeout D]]",
		Short: "Ask the operator to reconcile a VectorDeployment, ArtifactDeployment or Stage now",
		Long: "Sets Flux's reconcile.fluxcd.io/requestedAt annotation: a VectorDeployment reads its vector from the registry\n" +
			"again (not from the cache), an ArtifactDeployment passes the request on to its Flux objects, a Stage asks the\n" +
			"registry again for spec.semver's newest version and passes the request on to its VectorDeployments. With\n" +
			"--wait, waits until the operator has handled the request (status.lastHandledReconcileAt) and the object is Ready\n" +
			"(exit 0), Stalled or still not Ready after --timeout (exit 1, with the reason). --with-artifacts also asks a\n" +
			"VectorDeployment's ArtifactDeployments, before the VectorDeployment itself.",
		Args: s.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if k, _ := parseKind(args[0]); withArtifacts && k.kind != vectorDeploymentKind.kind {
				return usageErrorf("--with-artifacts is for VectorDeployments")
			}
			return s.forEach(cmd, args, w.timeout, func(ctx context.Context, c *cluster, k objectKind, obj client.Object) error {
				return c.reconcile(ctx, cmd.OutOrStdout(), k, obj, withArtifacts, w.wait)
			})
		},
	}
	s.bind(cmd.Flags())
	w.bind(cmd.Flags(), "wait until the request is handled and the object Ready")
	cmd.Flags().BoolVar(&withArtifacts, "with-artifacts", false, "also reconcile the VectorDeployment's ArtifactDeployments")
	return cmd
}

// reconcile requests a reconcile of obj (and, for a VectorDeployment with withArtifacts, of its
// ArtifactDeployments first), and with wait waits for each request to be handled and the object to be Ready.
func (c *cluster) reconcile(ctx context.Context, out io.Writer, k objectKind, obj client.Object, withArtifacts, wait bool) error {
	type request struct {
		k         objectKind
		obj       client.Object
		requested string
	}
	var requests []request
	var errs []error
	if vd, ok := obj.(*konfidencev1.VectorDeployment); ok && withArtifacts {
		ads, err := c.artifactDeploymentsOf(ctx, vd)
		errs = append(errs, err)
		for _, ad := range ads {
			requests = append(requests, request{k: artifactDeploymentKind, obj: ad})
		}
	}
	requests = append(requests, request{k: k, obj: obj})
	for i := range requests {
		r := &requests[i]
		if stateOf(r.obj).suspended {
			errs = append(errs, fmt.Errorf("%s is suspended: resume it to reconcile it", r.k.describe(r.obj)))
			continue
		}
		requested, err := c.do(ctx, r.obj, gesture.Reconcile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.k.describe(r.obj), err))
			continue
		}
		r.requested = requested
		_, _ = fmt.Fprintf(out, "%s: reconcile requested (%s=%s)\n", r.k.describe(r.obj), meta.ReconcileRequestAnnotation, requested)
	}
	if !wait {
		return errors.Join(errs...)
	}
	for _, r := range requests {
		if r.requested != "" {
			errs = append(errs, c.awaitReady(ctx, out, r.k, r.obj, r.requested))
		}
	}
	return errors.Join(errs...)
}

// artifactDeploymentsOf reads the ArtifactDeployments a VectorDeployment's status records, by component.
func (c *cluster) artifactDeploymentsOf(ctx context.Context, vd *konfidencev1.VectorDeployment) ([]client.Object, error) {
	var ads []client.Object
	for _, component := range slices.Sorted(maps.Keys(vd.Status.ResultingArtifactDeployments)) {
		ad := &konfidencev1.ArtifactDeployment{}
		key := client.ObjectKey{Namespace: vd.Namespace, Name: vd.Status.ResultingArtifactDeployments[component].Name}
		if err := c.client.Get(ctx, key, ad); err != nil {
			return ads, fmt.Errorf("ArtifactDeployment %s of %s: %w", key, component, c.explain(err))
		}
		ads = append(ads, ad)
	}
	return ads, nil
}

// do sends one of the gestures (reconcile, suspend, resume) for obj as the kubeconfig's user and returns the
// requestedAt value it set.
func (c *cluster) do(ctx context.Context, obj client.Object, g gesture.Gesture) (string, error) {
	requested, err := gesture.Do(ctx, c.client, obj, g)
	return requested, c.explain(err)
}

func newSuspendCommand() *cobra.Command {
	var s selection
	cmd := &cobra.Command{
		Use:   "suspend vd|ad|st (NAME | --all)",
		Short: "Suspend a VectorDeployment, ArtifactDeployment or Stage (spec.suspend)",
		Long: "Sets spec.suspend: a suspended VectorDeployment is not reconciled (its ArtifactDeployments keep running); a\n" +
			"suspended ArtifactDeployment is not reconciled and suspends its Flux objects, so Flux stops too; a suspended\n" +
			"Stage does not move and suspends its VectorDeployments, so the landscape stands still.",
		Args: s.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.forEach(cmd, args, 0, func(ctx context.Context, c *cluster, k objectKind, obj client.Object) error {
				if _, err := c.do(ctx, obj, gesture.Suspend); err != nil {
					return fmt.Errorf("%s: %w", k.describe(obj), err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: suspended\n", k.describe(obj))
				return err
			})
		},
	}
	s.bind(cmd.Flags())
	return cmd
}

func newResumeCommand() *cobra.Command {
	var s selection
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "resume vd|ad|st (NAME | --all) [--wait [--timeout D]]",
		Short: "Resume a suspended VectorDeployment, ArtifactDeployment or Stage and ask for a reconcile",
		Long: "Clears spec.suspend and sets reconcile.fluxcd.io/requestedAt in one patch, as `flux resume` does. With --wait,\n" +
			"waits until the request is handled and the object Ready (exit 0), Stalled or not Ready after --timeout (exit 1).",
		Args: s.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.forEach(cmd, args, w.timeout, func(ctx context.Context, c *cluster, k objectKind, obj client.Object) error {
				requested, err := c.do(ctx, obj, gesture.Resume)
				if err != nil {
					return fmt.Errorf("%s: %w", k.describe(obj), err)
				}
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%s: resumed\n", k.describe(obj))
				if !w.wait {
					return nil
				}
				return c.awaitReady(ctx, cmd.OutOrStdout(), k, obj, requested)
			})
		},
	}
	s.bind(cmd.Flags())
	w.bind(cmd.Flags(), "wait until the reconcile is handled and the object Ready")
	return cmd
}

func newWaitCommand() *cobra.Command {
	var s selection
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "wait vd|ad|st (NAME | --all) [--timeout D]",
		Short: "Wait until a VectorDeployment, ArtifactDeployment or Stage is Ready",
		Long: "Waits until the object is Ready for its current generation (exit 0; a Stage is Ready once its spec.vector\n" +
			"runs as its active VectorDeployment), or Stalled (a Stage whose move failed: UpgradeFailed,\n" +
			"ProgressDeadlineExceeded), suspended while not Ready, or not Ready after --timeout (exit 1, printing the\n" +
			"Ready reason and message).",
		Args: s.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.forEach(cmd, args, w.timeout, func(ctx context.Context, c *cluster, k objectKind, obj client.Object) error {
				return c.awaitReady(ctx, cmd.OutOrStdout(), k, obj, "")
			})
		},
	}
	s.bind(cmd.Flags())
	w.bind(cmd.Flags(), "")
	return cmd
}

// state is what the commands read of an object of any kind.
type state struct {
	suspended          bool
	lastHandled        string
	observedGeneration int64
}

func stateOf(obj client.Object) state {
	switch o := obj.(type) {
	case *konfidencev1.VectorDeployment:
		return state{o.Spec.Suspend, o.Status.LastHandledReconcileAt, o.Status.ObservedGeneration}
	case *konfidencev1.ArtifactDeployment:
		return state{o.Spec.Suspend, o.Status.LastHandledReconcileAt, o.Status.ObservedGeneration}
	case *konfidencev1.Stage:
		return state{o.Spec.Suspend, o.Status.LastHandledReconcileAt, o.Status.ObservedGeneration}
	}
	return state{}
}

// pollInterval is how often awaitReady reads the object.
const pollInterval = 500 * time.Millisecond

// awaitReady reads obj until it is Ready for its current generation, having handled the reconcile request
// requested (when not empty): nil, reported on out. Stalled, or suspended while not Ready, is an error with the
// reason and message at once; so is ctx's deadline, with the last Ready condition.
func (c *cluster) awaitReady(ctx context.Context, out io.Writer, k objectKind, obj client.Object, requested string) error {
	return c.await(ctx, out, k, obj, goal{requested: requested})
}

// goal is what await waits for besides Ready at the object's current generation.
type goal struct {
	// requested is a reconcile request the operator must have handled (status.lastHandledReconcileAt); empty for
	// none.
	requested string
	// active is the VectorDeployment a Stage must run (status.activeVectorDeployment) once Ready: a rollback's;
	// empty for any.
	active string
}

// runsActive tells whether obj runs the goal's VectorDeployment: always, when the goal names none.
func (g goal) runsActive(obj client.Object) bool { return g.active == "" || activeOf(obj) == g.active }

// activeOf is the VectorDeployment a Stage runs; empty for the other kinds.
func activeOf(obj client.Object) string {
	if st, ok := obj.(*konfidencev1.Stage); ok {
		return st.Status.ActiveVectorDeployment
	}
	return ""
}

// await is awaitReady for any goal. A Stage Ready for its current generation that runs another VectorDeployment
// than the goal's fails at once: Ready means it runs its spec.vector, so that spec changed since, and waiting would
// not bring the goal's VectorDeployment back.
func (c *cluster) await(ctx context.Context, out io.Writer, k objectKind, obj client.Object, g goal) error {
	requested := g.requested
	name := k.describe(obj)
	getter := obj.(conditions.Getter)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	timedOut := func() error {
		if st := stateOf(obj); requested != "" && st.lastHandled != requested {
			return fmt.Errorf("%s: timed out waiting for the operator to handle the reconcile request (last handled: %q): %s", name, st.lastHandled, readyOf(getter))
		}
		if !g.runsActive(obj) {
			return fmt.Errorf("%s: timed out waiting for VectorDeployment %s to be active (active: %q): %s", name, g.active, activeOf(obj), readyOf(getter))
		}
		return fmt.Errorf("%s: timed out waiting for Ready: %s", name, readyOf(getter))
	}
	for {
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if nearDeadline(ctx) {
				return timedOut()
			}
			return fmt.Errorf("%s: %w", name, c.explain(err))
		}
		st := stateOf(obj)
		current := (requested == "" || st.lastHandled == requested) && st.observedGeneration == obj.GetGeneration()
		switch {
		case current && conditions.IsReady(getter) && !g.runsActive(obj):
			return fmt.Errorf("%s: Ready running VectorDeployment %s, not %s (spec.vector is now %s)",
				name, activeOf(obj), g.active, obj.(*konfidencev1.Stage).Spec.Vector)
		case current && conditions.IsReady(getter):
			_, _ = fmt.Fprintf(out, "%s: Ready: %s\n", name, sanitize.Printable(conditions.GetMessage(getter, meta.ReadyCondition)))
			return nil
		case current && conditions.IsStalled(getter):
			return fmt.Errorf("%s: Stalled: %s: %s", name, conditions.GetReason(getter, meta.StalledCondition), conditions.GetMessage(getter, meta.StalledCondition))
		case st.suspended && requested == "" && conditions.IsReady(getter) && g.runsActive(obj):
			// Not reconciled while suspended, so its status stays that of the generation before: still Ready.
			_, _ = fmt.Fprintf(out, "%s: Ready (suspended): %s\n", name, sanitize.Printable(conditions.GetMessage(getter, meta.ReadyCondition)))
			return nil
		case st.suspended:
			return fmt.Errorf("%s is suspended, so it does not reconcile: %s", name, readyOf(getter))
		}
		select {
		case <-ctx.Done():
			return timedOut()
		case <-ticker.C:
		}
	}
}

// nearDeadline tells whether a failed request failed for the deadline: it has passed, or is so close that the
// client's rate limiter refused to wait for it (client-go does that before the deadline, with an error that names
// neither the object nor the timeout).
func nearDeadline(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && time.Until(deadline) < 2*pollInterval
}

// readyOf words the Ready condition: "Ready=False Reason: message".
func readyOf(obj conditions.Getter) string {
	ready := conditions.Get(obj, meta.ReadyCondition)
	if ready == nil {
		return "no Ready condition yet"
	}
	return fmt.Sprintf("Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
}
