package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
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
	// Name is the ArtifactDeployment's; for a created non-reusable artifact it is named for a placeholder UID,
	// since the name depends on the new VectorDeployment's UID.
	Name       string `json:"name,omitempty"`
	AllowReuse bool   `json:"allowReuse"`
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
}

// plan is the output of `diff -o json|yaml`.
type plan struct {
	VectorDeployment string            `json:"vectorDeployment"`
	From             string            `json:"from"`
	To               string            `json:"to"`
	Artifacts        []plannedArtifact `json:"artifacts"`
}

func newDiffCommand() *cobra.Command {
	var flags clusterFlags
	var registry registryFlags
	var vector string
	var output *outputFormat
	cmd := &cobra.Command{
		Use:   "diff vd NAME --vector REF [-o json|yaml]",
		Short: "Show what moving a VectorDeployment to another vector would keep, create and remove",
		Long: "A VectorDeployment's vector cannot change: moving to another vector is a VectorDeployment of the new vector,\n" +
			"created before the old one is deleted. diff plans that move for VectorDeployment NAME with the reconciler's own\n" +
			"naming, against the ArtifactDeployments in the cluster: which ArtifactDeployments (releases) the new one keeps\n" +
			"(reusable artifacts of the same version: same name), which it creates (new versions, and every non-reusable\n" +
			"artifact, named for the new VectorDeployment's UID), and which go away with the old one (deleted, or released\n" +
			"to another VectorDeployment that owns them too). Exits 1 when an artifact of the new vector would not deploy.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("want vd NAME")
			}
			if k, err := parseKind(args[0]); err != nil || k.kind != vectorDeploymentKind.kind {
				return fmt.Errorf("diff plans VectorDeployments (vd), not %q", args[0])
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
			obj, err := c.get(cmd.Context(), vectorDeploymentKind, args[1])
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
			p, err := c.planMove(cmd.Context(), obj.(*konfidencev1.VectorDeployment), vector, vectordeployment.ArtifactsOf(v))
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

// planMove plans replacing old by a VectorDeployment of vector in its namespace: the new one's ArtifactDeployments
// are built by the reconciler's code for a placeholder UID, and an existing ArtifactDeployment of the same identity
// is adopted, as the reconciler adopts it, whatever its name.
func (c *cluster) planMove(ctx context.Context, old *konfidencev1.VectorDeployment, vector string, artifacts []vectordeployment.ResolvedArtifact) (plan, error) {
	p := plan{VectorDeployment: old.Namespace + "/" + old.Name, From: old.Spec.Vector, To: vector}
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := c.client.List(ctx, list, client.InNamespace(old.Namespace)); err != nil {
		return p, c.explain(err)
	}
	scheme, err := newScheme()
	if err != nil {
		return p, err
	}
	next := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name, UID: placeholderUID},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: vector},
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
		} else if !planned.AllowReuse {
			planned.Message = "named for the new VectorDeployment's UID"
		}
		p.Artifacts = append(p.Artifacts, planned)
	}
	for i := range list.Items {
		ad := &list.Items[i]
		if kept[ad.Name] || !vectordeployment.IsOwnedBy(ad, old) {
			continue
		}
		planned := plannedArtifact{Action: actionDelete, Component: ad.Spec.Component.Name, Version: ad.Spec.Component.Version,
			Name: ad.Name, AllowReuse: ad.Spec.Manifest.AllowReuse}
		if others := otherOwners(ad, old); len(others) > 0 {
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

// otherOwners names the VectorDeployments other than vd that own ad.
func otherOwners(ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment) []string {
	var names []string
	for _, ref := range ad.OwnerReferences {
		if ref.Kind == "VectorDeployment" && ref.UID != vd.UID {
			names = append(names, ref.Name)
		}
	}
	return names
}

// printPlan writes the plan as a table, the order of applying it first.
func printPlan(out io.Writer, p plan) error {
	_, _ = fmt.Fprintf(out, "VectorDeployment %s: %s -> %s\n", p.VectorDeployment, p.From, p.To)
	_, _ = fmt.Fprintln(out, "Create the new VectorDeployment before deleting the old one: deleted first, the old one tears down what the new one would keep.")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "ACTION\tCOMPONENT\tVERSION\tREUSE\tARTIFACTDEPLOYMENT\tNOTE")
	for _, a := range p.Artifacts {
		note := a.Message
		if a.Reason != "" {
			note = a.Reason + ": " + a.Message
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\n", a.Action, a.Component, a.Version, a.AllowReuse, orDash(a.Name), orDash(note))
	}
	return w.Flush()
}
