package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// Actions of a move plan, for each ArtifactDeployment.
const (
	// actionKeep: the new VectorDeployment adopts the existing ArtifactDeployment, whose release keeps running.
	actionKeep = "keep"
	// actionCreate: a new ArtifactDeployment, and so a new release.
	actionCreate = "create"
	// actionDelete: the old VectorDeployment alone owns it; it is torn down (uninstalled) with it.
	actionDelete = "delete"
	// actionRelease: another VectorDeployment owns it too, and keeps it.
	actionRelease = "release"
	// actionFail: the artifact deploys nothing; Reason and Message say why.
	actionFail = "fail"
)

// plannedArtifact is one line of a move plan; the field names are part of the CLI's output contract.
type plannedArtifact struct {
	Action    string `json:"action"`
	Component string `json:"component"`
	Version   string `json:"version"`
	// Name is the ArtifactDeployment's; for a created non-reusable artifact of a VectorDeployment's move it is named
	// for a placeholder UID, since the name depends on the new VectorDeployment's UID (a Stage's are named for the
	// Stage's UID, which is known).
	Name       string `json:"name,omitempty"`
	AllowReuse bool   `json:"allowReuse"`
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
}

// plan is the output of `diff -o json|yaml`.
type plan struct {
	// Stage is set for a Stage's move, whose VectorDeployment is the active one.
	Stage            string `json:"stage,omitempty"`
	VectorDeployment string `json:"vectorDeployment"`
	// NewVectorDeployment is the VectorDeployment a Stage creates for the vector, the active one when the Stage runs
	// the vector already (a VectorDeployment's move is named by whoever creates it).
	NewVectorDeployment string `json:"newVectorDeployment,omitempty"`
	// Supersedes is a Stage's candidate of a move under way to another vector, deleted with the move: what it owns
	// that no VectorDeployment keeps goes with it (delete).
	Supersedes string            `json:"supersedes,omitempty"`
	From       string            `json:"from"`
	To         string            `json:"to"`
	Artifacts  []plannedArtifact `json:"artifacts"`
}

func newDiffCommand() *cobra.Command {
	var flags clusterFlags
	var registry registryFlags
	var vector string
	var output *outputFormat
	cmd := &cobra.Command{
		Use:   "diff vd|st NAME --vector REF [-o json|yaml]",
		Short: "Show what moving a VectorDeployment or a Stage to another vector would keep, create and remove",
		Long: "A VectorDeployment's vector cannot change: moving to another vector is a VectorDeployment of the new vector,\n" +
			"created before the old one is deleted. diff plans that move for VectorDeployment NAME with the reconciler's own\n" +
			"naming, against the ArtifactDeployments in the cluster: which ArtifactDeployments (releases) the new one keeps\n" +
			"(reusable artifacts of the same version: same name), which it creates (new versions, and every non-reusable\n" +
			"artifact, named for the new VectorDeployment's UID), and which go away with the old one (deleted, or released\n" +
			"to another VectorDeployment that owns them too). For a Stage (st NAME), diff plans the move the Stage makes when\n" +
			"its spec.vector is set to REF: from its active VectorDeployment to the one the Stage creates for REF, which the\n" +
			"Stage controls, so that its non-reusable artifacts are named for the Stage's UID and one of the same version is\n" +
			"kept. Exits 1 when an artifact of the new vector would not deploy.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("want vd NAME or st NAME")
			}
			if k, err := parseKind(args[0]); err != nil || k.kind != vectorDeploymentKind.kind && k.kind != stageKind.kind {
				return fmt.Errorf("diff plans VectorDeployments (vd) and Stages (st), not %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := flags.oneNamespace(); err != nil {
				return err
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			k, _ := parseKind(args[0])
			m, err := c.moveOf(cmd.Context(), k, args[1], vector)
			if err != nil {
				return err
			}
			opts, err := registry.options()
			if err != nil {
				return err
			}
			v, err := ocm.NewClient(opts).ResolveVector(cmd.Context(), vector, ocm.Read{})
			if v == nil {
				return err
			}
			p, err := c.planMove(cmd.Context(), m, vectordeployment.ArtifactsOf(v))
			if err != nil {
				return err
			}
			if output.structured() {
				err = printStructured(cmd.OutOrStdout(), output.value, p)
			} else {
				err = printPlan(cmd.OutOrStdout(), p)
			}
			if err != nil {
				return err
			}
			if i := slices.IndexFunc(p.Artifacts, func(a plannedArtifact) bool { return a.Action == actionFail }); i >= 0 {
				return fmt.Errorf("artifact %s:%s of %s would not deploy: %s", p.Artifacts[i].Component, p.Artifacts[i].Version, vector, p.Artifacts[i].Reason)
			}
			return nil
		},
	}
	f := cmd.Flags()
	flags.bind(f)
	registry.bind(f)
	f.StringVar(&vector, "vector", "", "OCM reference of the vector to move to")
	output = bindOutput(f, "", "output format: json or yaml (default: a table)", outputJSON, outputYAML)
	_ = cmd.MarkFlagRequired("vector")
	return cmd
}

// move is what diff plans: the VectorDeployment that runs, old, replaced by next, a VectorDeployment of the new
// vector as its creator makes it; for a Stage's move, the Stage and its candidate of a move under way, which goes
// too.
type move struct {
	old, next *konfidencev1.VectorDeployment
	stage     *konfidencev1.Stage
	// superseded is the Stage's candidate of another vector, nil when there is none (or it is gone already).
	superseded *konfidencev1.VectorDeployment
}

// going are the VectorDeployments the move deletes. (A Stage's move to the vector it runs keeps the old one, but then
// the new one keeps all it has, so none of it is planned to go.)
func (m move) going() []*konfidencev1.VectorDeployment {
	if m.superseded != nil {
		return []*konfidencev1.VectorDeployment{m.old, m.superseded}
	}
	return []*konfidencev1.VectorDeployment{m.old}
}

// moveOf reads the move of the VectorDeployment or Stage name of kind k to vector.
func (c *cluster) moveOf(ctx context.Context, k objectKind, name, vector string) (move, error) {
	if k.kind != stageKind.kind {
		obj, err := c.get(ctx, vectorDeploymentKind, name)
		if err != nil {
			return move{}, err
		}
		old := obj.(*konfidencev1.VectorDeployment)
		return move{old: old, next: &konfidencev1.VectorDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name, UID: placeholderUID},
			Spec:       konfidencev1.VectorDeploymentSpec{Vector: vector},
		}}, nil
	}
	st, err := c.getStage(ctx, name)
	if err != nil {
		return move{}, err
	}
	if st.Status.ActiveVectorDeployment == "" {
		return move{}, fmt.Errorf("%s runs no VectorDeployment yet (status.activeVectorDeployment is empty): no move to plan from", stageKind.describe(st))
	}
	obj, err := c.get(ctx, vectorDeploymentKind, st.Status.ActiveVectorDeployment)
	if err != nil {
		return move{}, fmt.Errorf("the active VectorDeployment of %s: %w", stageKind.describe(st), err)
	}
	next, err := stageVectorDeployment(st, vector)
	if err != nil {
		return move{}, err
	}
	m := move{old: obj.(*konfidencev1.VectorDeployment), next: next, stage: st}
	if candidate := st.Status.CandidateVectorDeployment; candidate != "" && candidate != next.Name {
		vd := &konfidencev1.VectorDeployment{}
		switch err := c.client.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: candidate}, vd); {
		case err == nil:
			m.superseded = vd
		case !apierrors.IsNotFound(err):
			return move{}, fmt.Errorf("the candidate VectorDeployment %s of %s: %w", candidate, stageKind.describe(st), c.explain(err))
		}
	}
	return m, nil
}

// stageVectorDeployment is the VectorDeployment the Stage reconciler creates for vector, as far as naming its
// ArtifactDeployments goes: its name, and the Stage as its controller, whose UID names the instances of its
// non-reusable artifacts (so that a move keeps one of the same version). Its own UID is not known yet.
func stageVectorDeployment(st *konfidencev1.Stage, vector string) (*konfidencev1.VectorDeployment, error) {
	name, err := stage.VectorDeploymentName(st.Name, st.UID, vector)
	if err != nil {
		return nil, err
	}
	controller := true
	return &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: st.Namespace, Name: name, UID: placeholderUID,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: konfidencev1.GroupVersion.String(), Kind: stageKind.kind, Name: st.Name, UID: st.UID,
				Controller: &controller, BlockOwnerDeletion: &controller,
			}},
		},
		Spec: konfidencev1.VectorDeploymentSpec{Vector: vector},
	}, nil
}

// planMove plans replacing m.old by m.next in its namespace: the new one's ArtifactDeployments are built by the
// reconciler's code, and an existing ArtifactDeployment of the same identity is adopted, as the reconciler adopts
// it, whatever its name.
func (c *cluster) planMove(ctx context.Context, m move, artifacts []vectordeployment.ResolvedArtifact) (plan, error) {
	old, next := m.old, m.next
	p := plan{VectorDeployment: old.Namespace + "/" + old.Name, From: old.Spec.Vector, To: next.Spec.Vector}
	if m.stage != nil {
		p.Stage, p.NewVectorDeployment = m.stage.Namespace+"/"+m.stage.Name, next.Namespace+"/"+next.Name
	}
	if m.superseded != nil {
		p.Supersedes = m.superseded.Namespace + "/" + m.superseded.Name
	}
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := c.client.List(ctx, list, client.InNamespace(old.Namespace)); err != nil {
		return p, c.explain(err)
	}
	scheme, err := newScheme()
	if err != nil {
		return p, err
	}
	kept := map[string]bool{}
	for _, d := range desiredArtifacts(scheme, next, artifacts) {
		planned := plannedArtifact{Component: d.Component, Version: strings.TrimPrefix(d.Ref, d.Component+":")}
		if d.Err != nil {
			planned.Action, planned.Reason, planned.Message = actionFail, vectordeployment.FailureReason(d.Err), d.Err.Error()
			p.Artifacts = append(p.Artifacts, planned)
			continue
		}
		planned.Version, planned.AllowReuse = d.Artifact.Version, d.Artifact.Manifest.AllowReuse
		planned.Action, planned.Name = actionCreate, d.deployment.Name
		if existing := adoptable(list.Items, d.deployment); existing != nil {
			planned.Action, planned.Name = actionKeep, existing.Name
			kept[existing.Name] = true
		} else if !planned.AllowReuse && m.stage == nil {
			planned.Message = "named for the new VectorDeployment's UID"
		}
		p.Artifacts = append(p.Artifacts, planned)
	}
	going := m.going()
	for i := range list.Items {
		ad := &list.Items[i]
		if kept[ad.Name] || !slices.ContainsFunc(going, func(vd *konfidencev1.VectorDeployment) bool { return vectordeployment.IsOwnedBy(ad, vd) }) {
			continue
		}
		planned := plannedArtifact{Action: actionDelete, Component: ad.Spec.Component.Name, Version: ad.Spec.Component.Version,
			Name: ad.Name, AllowReuse: ad.Spec.Manifest.AllowReuse}
		if others := otherOwners(ad, going); len(others) > 0 {
			planned.Action, planned.Message = actionRelease, "still owned by VectorDeployment "+strings.Join(others, ", ")
		}
		p.Artifacts = append(p.Artifacts, planned)
	}
	return p, nil
}

// adoptable is the ArtifactDeployment of desired's identity a new VectorDeployment would adopt, or nil.
func adoptable(existing []konfidencev1.ArtifactDeployment, desired *konfidencev1.ArtifactDeployment) *konfidencev1.ArtifactDeployment {
	for i := range existing {
		if ad := &existing[i]; ad.DeletionTimestamp.IsZero() && vectordeployment.SameIdentity(ad, desired) {
			return ad
		}
	}
	return nil
}

// otherOwners names the VectorDeployments that own ad and are not going.
func otherOwners(ad *konfidencev1.ArtifactDeployment, going []*konfidencev1.VectorDeployment) []string {
	var names []string
	for _, ref := range ad.OwnerReferences {
		if ref.Kind == "VectorDeployment" && !slices.ContainsFunc(going, func(vd *konfidencev1.VectorDeployment) bool { return vd.UID == ref.UID }) {
			names = append(names, ref.Name)
		}
	}
	return names
}

// printPlan writes the plan as a table, the order of applying it first: for a VectorDeployment, the person applying
// it keeps the order; a Stage keeps it itself.
func printPlan(out io.Writer, p plan) error {
	if p.Stage != "" {
		_, _ = fmt.Fprintf(out, "Stage %s: %s -> %s\n", p.Stage, sanitize.Printable(p.From), sanitize.Printable(p.To))
		if p.NewVectorDeployment == p.VectorDeployment {
			_, _ = fmt.Fprintf(out, "The Stage runs this vector already, as VectorDeployment %s: it stays.\n", p.VectorDeployment)
		} else {
			_, _ = fmt.Fprintf(out, "The Stage creates VectorDeployment %s and deletes VectorDeployment %s once it is Ready.\n", p.NewVectorDeployment, p.VectorDeployment)
		}
		if p.Supersedes != "" {
			_, _ = fmt.Fprintf(out, "VectorDeployment %s, the candidate of the move under way, is superseded: deleted too.\n", p.Supersedes)
		}
	} else {
		_, _ = fmt.Fprintf(out, "VectorDeployment %s: %s -> %s\n", p.VectorDeployment, sanitize.Printable(p.From), sanitize.Printable(p.To))
		_, _ = fmt.Fprintln(out, "Create the new VectorDeployment before deleting the old one: deleted first, the old one tears down what the new one would keep.")
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "ACTION\tCOMPONENT\tVERSION\tREUSE\tARTIFACTDEPLOYMENT\tNOTE")
	for _, a := range p.Artifacts {
		note := a.Message
		if a.Reason != "" {
			note = a.Reason + ": " + a.Message
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\n", a.Action, sanitize.Printable(a.Component), sanitize.Printable(a.Version), a.AllowReuse,
			orDash(a.Name), orDash(sanitize.Printable(note)))
	}
	return w.Flush()
}
