package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// The labels and annotations by which Flux's controllers mark what they apply.
const (
	helmNameLabel                  = "helm.toolkit.fluxcd.io/name"
	helmNamespaceLabel             = "helm.toolkit.fluxcd.io/namespace"
	kustomizeNameLabel             = "kustomize.toolkit.fluxcd.io/name"
	kustomizeNamespaceLabel        = "kustomize.toolkit.fluxcd.io/namespace"
	helmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	helmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

func newTraceCommand() *cobra.Command {
	var flags clusterFlags
	cmd := &cobra.Command{
		Use:   "trace KIND/NAME [-n NAMESPACE]",
		Short: "Show which Flux object, ArtifactDeployment and VectorDeployment a workload comes from, like `flux trace`",
		Long: "Reads the object KIND/NAME (any kind the API server serves, by kubectl's names: deployment/web, svc/web,\n" +
			"configmap/x; or KIND NAME) and follows it up: the Flux object that applied it (a HelmRelease, from\n" +
			"helm-controller's helm.toolkit.fluxcd.io/name and /namespace labels or Helm's meta.helm.sh/release-name and\n" +
			"release-namespace annotations; a Kustomization, from kustomize.toolkit.fluxcd.io/name and /namespace), its\n" +
			"source, the ArtifactDeployment that controls it (its owner reference), the VectorDeployments that own that,\n" +
			"with the vector each deploys and its digest, and the Stage that controls a VectorDeployment. Each step prints\n" +
			"its kind and name, namespace, revision and Ready state. An object that Flux did not apply, or that Flux\n" +
			"applied for something other than an ArtifactDeployment, fails (exit 1) after the steps found.",
		Args: func(_ *cobra.Command, args []string) error {
			_, _, err := traceTarget(args)
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := flags.oneNamespace(); err != nil {
				return err
			}
			resource, name, _ := traceTarget(args)
			c, err := flags.connect()
			if err != nil {
				return err
			}
			return c.trace(cmd.Context(), cmd.OutOrStdout(), resource, name)
		},
	}
	flags.bind(cmd.Flags())
	return cmd
}

// traceTarget reads trace's KIND/NAME, or KIND NAME.
func traceTarget(args []string) (resource, name string, err error) {
	switch len(args) {
	case 1:
		resource, name, _ = strings.Cut(args[0], "/")
	case 2:
		resource, name = args[0], args[1]
	default:
		return "", "", usageErrorf("want KIND/NAME, as deployment/web")
	}
	if resource == "" || name == "" || strings.Contains(name, "/") {
		return "", "", usageErrorf("want KIND/NAME, as deployment/web, not %q", strings.Join(args, " "))
	}
	return strings.ToLower(resource), name, nil
}

// revisionLine labels a step's revision.
const revisionLine = "Revision"

// traceStep is one object of a trace: its lines, label and value, as `flux trace` prints them.
type traceStep [][2]string

// trace reads the object resource/name and what it comes from, and prints each step; a chain that does not reach a
// VectorDeployment's ArtifactDeployment is an error, after the steps it has.
func (c *cluster) trace(ctx context.Context, out io.Writer, resource, name string) error {
	var steps []traceStep
	err := c.traceSteps(ctx, resource, name, func(s traceStep) { steps = append(steps, s) })
	w := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	for i, s := range steps {
		if i > 0 {
			_, _ = fmt.Fprintln(w, "---")
		}
		for _, line := range s {
			_, _ = fmt.Fprintf(w, "%s:\t%s\n", line[0], sanitize.Printable(line[1]))
		}
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

func (c *cluster) traceSteps(ctx context.Context, resource, name string, add func(traceStep)) error {
	obj, err := c.readAny(ctx, resource, name)
	if err != nil {
		return err
	}
	add(objectStep(obj))
	described := obj.GetKind() + " " + namespaced(obj.GetNamespace(), obj.GetName())

	flux, err := c.appliedBy(ctx, obj)
	if err != nil {
		return err
	}
	kind := kindOfFlux(flux)
	ref := metav1.GetControllerOfNoCopy(flux)
	if ref == nil || ref.Kind != artifactDeploymentKind.kind || !strings.HasPrefix(ref.APIVersion, konfidencev1.GroupVersion.Group+"/") {
		add(fluxStep(kind, flux, nil))
		return fmt.Errorf("%s %s, which applied %s, is not an ArtifactDeployment's: fluxdeployer did not deploy it",
			kind, namespaced(flux.GetNamespace(), flux.GetName()), described)
	}
	adTree, err := tree.BuildArtifactDeployment(ctx, c.client, flux.GetNamespace(), ref.Name)
	if apierrors.IsNotFound(err) {
		add(fluxStep(kind, flux, nil))
		return fmt.Errorf("ArtifactDeployment %s, which controls %s %s, not found", namespaced(flux.GetNamespace(), ref.Name), kind, flux.GetName())
	} else if err != nil {
		return c.explain(err)
	}
	add(fluxStep(kind, flux, findNode(adTree.Children, kind, flux.GetName())))
	for _, n := range adTree.Children {
		if n.Kind == sourcev1.HelmRepositoryKind || n.Kind == sourcev1.OCIRepositoryKind {
			add(nodeStep(n))
		}
	}
	ad := &konfidencev1.ArtifactDeployment{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: flux.GetNamespace(), Name: ref.Name}, ad); err != nil {
		return c.explain(err)
	}
	add(append(stepHead(artifactDeploymentKind.kind, ad.Namespace, ad.Name, [2]string{"Component", ad.Spec.Component.Name + " " + ad.Spec.Component.Version}), statusLines(adTree)...))

	owners := slices.DeleteFunc(slices.Clone(ad.OwnerReferences), func(r metav1.OwnerReference) bool {
		return r.Kind != vectorDeploymentKind.kind || !strings.HasPrefix(r.APIVersion, konfidencev1.GroupVersion.Group+"/")
	})
	slices.SortFunc(owners, func(a, b metav1.OwnerReference) int { return strings.Compare(a.Name, b.Name) })
	if len(owners) == 0 {
		return fmt.Errorf("no VectorDeployment owns ArtifactDeployment %s", namespaced(ad.Namespace, ad.Name))
	}
	var errs []error
	for _, owner := range owners {
		vd := &konfidencev1.VectorDeployment{}
		if err := c.client.Get(ctx, client.ObjectKey{Namespace: ad.Namespace, Name: owner.Name}, vd); err != nil {
			if apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("VectorDeployment %s, which owns ArtifactDeployment %s, not found", namespaced(ad.Namespace, owner.Name), ad.Name))
				continue
			}
			return c.explain(err)
		}
		add(append(stepHead(vectorDeploymentKind.kind, vd.Namespace, vd.Name, [2]string{"Vector", vd.Spec.Vector},
			[2]string{"Digest", orDash(vd.Status.VectorDigest)}), conditionLines(vd, vd.Spec.Suspend)...))
		if ref := metav1.GetControllerOfNoCopy(vd); ref != nil && ref.Kind == stageKind.kind && strings.HasPrefix(ref.APIVersion, konfidencev1.GroupVersion.Group+"/") {
			st := &konfidencev1.Stage{}
			if err := c.client.Get(ctx, client.ObjectKey{Namespace: vd.Namespace, Name: ref.Name}, st); err == nil {
				add(append(stepHead(stageKind.kind, st.Namespace, st.Name, [2]string{"Vector", st.Spec.Vector},
					[2]string{"Active", orDash(st.Status.ActiveVectorDeployment)}), conditionLines(st, st.Spec.Suspend)...))
			} else if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
				return c.explain(err)
			}
		}
	}
	return errors.Join(errs...)
}

// readAny reads the object of the resource (a kind by any of kubectl's names: plural, singular, short, with its
// group as in deployments.apps) named name, in the chosen namespace unless the kind has none.
func (c *cluster) readAny(ctx context.Context, resource, name string) (*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.config)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, func(string) {})
	gr := schema.ParseGroupResource(resource)
	gvk, err := mapper.KindFor(gr.WithVersion(""))
	if apimeta.IsNoMatchError(err) {
		return nil, fmt.Errorf("the API server serves no kind %q", resource)
	} else if err != nil {
		return nil, c.explain(err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, c.explain(err)
	}
	key := client.ObjectKey{Namespace: c.namespace, Name: name}
	if mapping.Scope.Name() == apimeta.RESTScopeNameRoot {
		key.Namespace = ""
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := c.client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s not found", gvk.Kind, namespaced(key.Namespace, name))
		}
		return nil, c.explain(err)
	}
	return obj, nil
}

// appliedBy reads the Flux object that applied obj, as its labels (or Helm's annotations) name it.
func (c *cluster) appliedBy(ctx context.Context, obj *unstructured.Unstructured) (client.Object, error) {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	described := obj.GetKind() + " " + namespaced(obj.GetNamespace(), obj.GetName())
	var flux client.Object
	switch {
	case labels[helmNameLabel] != "" && labels[helmNamespaceLabel] != "":
		flux = &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: labels[helmNamespaceLabel], Name: labels[helmNameLabel]}}
	case labels[kustomizeNameLabel] != "" && labels[kustomizeNamespaceLabel] != "":
		flux = &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: labels[kustomizeNamespaceLabel], Name: labels[kustomizeNameLabel]}}
	case annotations[helmReleaseNameAnnotation] != "":
		return c.helmReleaseOf(ctx, described, annotations[helmReleaseNameAnnotation], annotations[helmReleaseNamespaceAnnotation])
	default:
		return nil, fmt.Errorf("%s was not applied by Flux: it has neither helm-controller's nor kustomize-controller's labels (%s, %s) nor Helm's %s annotation",
			described, helmNameLabel, kustomizeNameLabel, helmReleaseNameAnnotation)
	}
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(flux), flux); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s was applied by %s %s, which is not found", described, kindOfFlux(flux), namespaced(flux.GetNamespace(), flux.GetName()))
		}
		return nil, c.explain(err)
	}
	return flux, nil
}

// helmReleaseOf finds the HelmRelease of a Helm release known only by Helm's annotations: one in the release's
// namespace (or the chosen one) whose release is the one named.
func (c *cluster) helmReleaseOf(ctx context.Context, described, release, releaseNamespace string) (client.Object, error) {
	for _, ns := range slices.Compact([]string{releaseNamespace, c.namespace}) {
		list := &helmv2.HelmReleaseList{}
		if err := c.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			if apierrors.IsForbidden(err) {
				continue
			}
			return nil, c.explain(err)
		}
		for i := range list.Items {
			if hr := &list.Items[i]; hr.GetReleaseName() == release && (releaseNamespace == "" || hr.GetReleaseNamespace() == releaseNamespace) {
				return hr, nil
			}
		}
	}
	return nil, fmt.Errorf("%s belongs to the Helm release %s, which no HelmRelease installed: Flux did not apply it", described, namespaced(releaseNamespace, release))
}

// kindOfFlux is the kind of a typed Flux object.
func kindOfFlux(obj client.Object) string {
	switch obj.(type) {
	case *helmv2.HelmRelease:
		return helmv2.HelmReleaseKind
	case *kustomizev1.Kustomization:
		return kustomizev1.KustomizationKind
	}
	return fmt.Sprintf("%T", obj)
}

func findNode(nodes []*tree.Node, kind, name string) *tree.Node {
	for _, n := range nodes {
		if n.Kind == kind && n.Name == name {
			return n
		}
	}
	return nil
}

// objectStep is the traced object's step: its kstatus, as kustomize-controller's health check computes it.
func objectStep(obj *unstructured.Unstructured) traceStep {
	s := stepHead("Object", obj.GetNamespace(), obj.GetKind()+"/"+obj.GetName())
	if res, err := status.Compute(obj); err == nil {
		s = append(s, [2]string{"Status", res.Status.String()})
		if res.Message != "" {
			s = append(s, [2]string{"Message", res.Message})
		}
	}
	return s
}

// fluxStep is the Flux object's step, with its revision and Ready state as tree reads them when n is not nil (the
// ArtifactDeployment's tree has it), else from the object.
func fluxStep(kind string, obj client.Object, n *tree.Node) traceStep {
	s := stepHead(kind, obj.GetNamespace(), obj.GetName())
	if n != nil {
		s = append(s, [2]string{revisionLine, orDash(n.Revision)})
		return append(s, statusLines(n)...)
	}
	suspended := false
	switch o := obj.(type) {
	case *helmv2.HelmRelease:
		s, suspended = append(s, [2]string{revisionLine, orDash(o.Status.LastAttemptedRevision)}), o.Spec.Suspend
	case *kustomizev1.Kustomization:
		s, suspended = append(s, [2]string{revisionLine, orDash(o.Status.LastAppliedRevision)}), o.Spec.Suspend
	}
	if getter, ok := obj.(conditions.Getter); ok {
		s = append(s, conditionLines(getter, suspended)...)
	}
	return s
}

// nodeStep is a source's step, from tree.
func nodeStep(n *tree.Node) traceStep {
	s := stepHead(n.Kind, n.Namespace, n.Name)
	if n.Revision != "" {
		s = append(s, [2]string{revisionLine, n.Revision})
	}
	return append(s, statusLines(n)...)
}

// statusLines are a tree node's Status (Ready, its reason, whether suspended) and Message lines; none for an
// object without a Ready condition (an OCI HelmRepository).
func statusLines(n *tree.Node) traceStep {
	if n.Ready == "" {
		return nil
	}
	return readyLines(n.Ready, n.Reason, n.Message, n.Suspended)
}

// conditionLines are an object's Status and Message lines from its Ready condition.
func conditionLines(obj conditions.Getter, suspended bool) traceStep {
	ready := conditions.Get(obj, konfidencev1.ReadyCondition)
	if ready == nil {
		return readyLines(string(metav1.ConditionUnknown), "", "", suspended)
	}
	return readyLines(string(ready.Status), ready.Reason, ready.Message, suspended)
}

func readyLines(ready, reason, message string, suspended bool) traceStep {
	st := "Ready=" + ready
	if reason != "" {
		st += " " + reason
	}
	if suspended {
		st += " (suspended)"
	}
	s := traceStep{{"Status", st}}
	if message != "" {
		s = append(s, [2]string{"Message", message})
	}
	return s
}

// stepHead is the first lines of a step: its kind (or label) and name, its namespace unless it has none, then
// more.
func stepHead(kind, namespace, name string, more ...[2]string) traceStep {
	s := traceStep{{kind, name}}
	if namespace != "" {
		s = append(s, [2]string{"Namespace", namespace})
	}
	return append(s, more...)
}

// namespaced is namespace/name, or name for a cluster-scoped object.
func namespaced(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
