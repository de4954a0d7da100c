// Package tree reads, through any client, what a VectorDeployment became: its ArtifactDeployments, the Flux objects
// each one has, and the workloads Flux applied for them (from the HelmRelease's and the Kustomization's
// inventory), each with its Ready state; and for a Stage, the same below each of its VectorDeployments. `make demo`
// prints it.
package tree

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/inventory"
	"github.com/fluxdeployer/fluxdeployer/internal/podstatus"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// Node is one object of the tree.
type Node struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Role is what a Stage's VectorDeployment is to it: active, candidate, or deleting (neither, on its way out).
	Role string `json:"role,omitempty"`
	// Ready is "True", "False" or "Unknown" for objects with a Ready condition, empty for the rest.
	Ready   string `json:"ready,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Replicas is a Deployment's "<ready>/<wanted> ready", whose pods are its children.
	Replicas string `json:"replicas,omitempty"`
	// Status is a Deployment's kstatus: Current, InProgress or Failed (its progress deadline exceeded).
	Status string `json:"status,omitempty"`
	// Suspended is a Flux object's or one of this project's objects' spec.suspend.
	Suspended bool `json:"suspended,omitempty"`
	// Revision is what a Flux object last handled: a source's artifact revision, a Kustomization's last applied
	// revision, a HelmRelease's last attempted chart version.
	Revision string `json:"revision,omitempty"`
	// LastHandledReconcile is a Flux object's status.lastHandledReconcileAt: the last reconcile request it acted on.
	LastHandledReconcile string `json:"lastHandledReconcile,omitempty"`
	// Unreadable names the kinds below this object the client may not list (the reader's RBAC): they are left out
	// rather than failing the whole tree.
	Unreadable []string `json:"unreadable,omitempty"`
	Children   []*Node  `json:"children,omitempty"`
}

type withConditions interface {
	client.Object
	conditions.Getter
}

func node(kind string, obj withConditions) *Node {
	n := &Node{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Ready: string(metav1.ConditionUnknown)}
	if c := conditions.Get(obj, konfidencev1.ReadyCondition); c != nil {
		n.Ready, n.Reason, n.Message = string(c.Status), c.Reason, c.Message
	}
	return n
}

// Roles of a Stage's VectorDeployments.
const (
	RoleActive    = "active"
	RoleCandidate = "candidate"
	RoleDeleting  = "deleting"
)

// Build reads the VectorDeployment namespace/name and everything below it.
func Build(ctx context.Context, c client.Reader, namespace, name string) (*Node, error) {
	vd := &konfidencev1.VectorDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vd); err != nil {
		return nil, err
	}
	return buildVectorDeployment(ctx, c, vd)
}

// BuildStage reads the Stage namespace/name, the VectorDeployments it controls and everything below each: the
// active one first, then the candidate, then any other (a superseded or replaced one not yet gone), by name. An
// active or candidate VectorDeployment the status names but the cluster lacks is listed as NotFound.
func BuildStage(ctx context.Context, c client.Reader, namespace, name string) (*Node, error) {
	st := &konfidencev1.Stage{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, st); err != nil {
		return nil, err
	}
	root := node("Stage", st)
	root.Suspended = st.Spec.Suspend
	vds, err := vectorDeploymentsOf(ctx, c, st)
	if err != nil {
		return nil, err
	}
	for _, want := range []struct{ name, role string }{
		{st.Status.ActiveVectorDeployment, RoleActive}, {st.Status.CandidateVectorDeployment, RoleCandidate},
	} {
		if want.name == "" {
			continue
		}
		i := slices.IndexFunc(vds, func(vd *konfidencev1.VectorDeployment) bool { return vd.Name == want.name })
		if i < 0 {
			root.Children = append(root.Children, &Node{Kind: "VectorDeployment", Namespace: namespace, Name: want.name, Role: want.role,
				Ready: string(metav1.ConditionUnknown), Reason: "NotFound"})
			continue
		}
		n, err := buildVectorDeployment(ctx, c, vds[i])
		if err != nil {
			return nil, err
		}
		n.Role = want.role
		root.Children = append(root.Children, n)
		vds = slices.Delete(vds, i, i+1)
	}
	for _, vd := range vds {
		n, err := buildVectorDeployment(ctx, c, vd)
		if err != nil {
			return nil, err
		}
		if !vd.DeletionTimestamp.IsZero() {
			n.Role = RoleDeleting
		}
		root.Children = append(root.Children, n)
	}
	return root, nil
}

// vectorDeploymentsOf lists the VectorDeployments the Stage controls (its controller owner reference, with its UID,
// as the Stage reconciler writes it), by name.
func vectorDeploymentsOf(ctx context.Context, c client.Reader, st *konfidencev1.Stage) ([]*konfidencev1.VectorDeployment, error) {
	list := &konfidencev1.VectorDeploymentList{}
	if err := c.List(ctx, list, client.InNamespace(st.Namespace)); err != nil {
		return nil, err
	}
	var vds []*konfidencev1.VectorDeployment
	for i := range list.Items {
		ref := metav1.GetControllerOfNoCopy(&list.Items[i])
		if ref != nil && ref.Kind == "Stage" && ref.APIVersion == konfidencev1.GroupVersion.String() && ref.UID == st.UID {
			vds = append(vds, &list.Items[i])
		}
	}
	slices.SortFunc(vds, func(a, b *konfidencev1.VectorDeployment) int { return strings.Compare(a.Name, b.Name) })
	return vds, nil
}

// buildVectorDeployment builds the tree below a VectorDeployment read already.
func buildVectorDeployment(ctx context.Context, c client.Reader, vd *konfidencev1.VectorDeployment) (*Node, error) {
	namespace := vd.Namespace
	root := node("VectorDeployment", vd)
	root.Suspended = vd.Spec.Suspend
	components := make([]string, 0, len(vd.Status.ResultingArtifactDeployments))
	for component := range vd.Status.ResultingArtifactDeployments {
		components = append(components, component)
	}
	slices.Sort(components)
	for _, component := range components {
		adName := vd.Status.ResultingArtifactDeployments[component].Name
		ad := &konfidencev1.ArtifactDeployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: adName}, ad); err != nil {
			if apierrors.IsNotFound(err) {
				root.Children = append(root.Children, &Node{Kind: "ArtifactDeployment", Namespace: namespace, Name: adName, Ready: string(metav1.ConditionUnknown), Reason: "NotFound"})
				continue
			}
			return nil, err
		}
		n, err := buildArtifactDeployment(ctx, c, ad)
		if err != nil {
			return nil, err
		}
		root.Children = append(root.Children, n)
	}
	return root, nil
}

// BuildArtifactDeployment reads the ArtifactDeployment namespace/name, its Flux objects and the workloads they
// applied.
func BuildArtifactDeployment(ctx context.Context, c client.Reader, namespace, name string) (*Node, error) {
	ad := &konfidencev1.ArtifactDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ad); err != nil {
		return nil, err
	}
	return buildArtifactDeployment(ctx, c, ad)
}

func buildArtifactDeployment(ctx context.Context, c client.Reader, ad *konfidencev1.ArtifactDeployment) (*Node, error) {
	n := node("ArtifactDeployment", ad)
	n.Suspended = ad.Spec.Suspend
	var err error
	n.Children, n.Unreadable, err = fluxObjects(ctx, c, ad)
	return n, err
}

// fluxObjects are the Flux objects labelled with the ArtifactDeployment's name, in the order Flux uses them:
// sources, then what applies them with its inventory; and the Flux kinds the client may not list.
func fluxObjects(ctx context.Context, c client.Reader, ad *konfidencev1.ArtifactDeployment) ([]*Node, []string, error) {
	opts := []client.ListOption{client.InNamespace(ad.Namespace), client.MatchingLabels{konfidencev1.ArtifactDeploymentLabel: ad.Name}}
	var nodes []*Node
	helmRepos := &sourcev1.HelmRepositoryList{}
	ociRepos := &sourcev1.OCIRepositoryList{}
	releases := &helmv2.HelmReleaseList{}
	kustomizations := &kustomizev1.KustomizationList{}
	var unreadable []string
	for _, l := range []struct {
		kind string
		list client.ObjectList
	}{{sourcev1.HelmRepositoryKind, helmRepos}, {sourcev1.OCIRepositoryKind, ociRepos}, {helmv2.HelmReleaseKind, releases}, {kustomizev1.KustomizationKind, kustomizations}} {
		if err := c.List(ctx, l.list, opts...); apierrors.IsForbidden(err) {
			unreadable = append(unreadable, l.kind)
		} else if err != nil {
			return nil, nil, err
		}
	}
	for i := range helmRepos.Items {
		r := &helmRepos.Items[i]
		n := fluxNode(sourcev1.HelmRepositoryKind, r, r.Spec.Suspend, "", r.Status.LastHandledReconcileAt)
		if r.Spec.Type == sourcev1.HelmRepositoryTypeOCI {
			n.Ready = "" // static: an OCI HelmRepository has no status (flux-facts §1)
		}
		nodes = append(nodes, n)
	}
	for i := range ociRepos.Items {
		r := &ociRepos.Items[i]
		revision := ""
		if r.Status.Artifact != nil {
			revision = r.Status.Artifact.Revision
		}
		nodes = append(nodes, fluxNode(sourcev1.OCIRepositoryKind, r, r.Spec.Suspend, revision, r.Status.LastHandledReconcileAt))
	}
	for i := range releases.Items {
		hr := &releases.Items[i]
		n := fluxNode(helmv2.HelmReleaseKind, hr, hr.Spec.Suspend, hr.Status.LastAttemptedRevision, hr.Status.LastHandledReconcileAt)
		var err error
		if n.Children, err = withPods(ctx, c, workloads(inventory.Of(hr))); err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, n)
	}
	for i := range kustomizations.Items {
		ks := &kustomizations.Items[i]
		n := fluxNode(kustomizev1.KustomizationKind, ks, ks.Spec.Suspend, ks.Status.LastAppliedRevision, ks.Status.LastHandledReconcileAt)
		var err error
		if n.Children, err = withPods(ctx, c, workloads(inventory.Of(ks))); err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, n)
	}
	return nodes, unreadable, nil
}

// fluxNode is the node of a Flux object: its Ready state, whether it is suspended, the revision it handled and
// the last reconcile request it acted on.
func fluxNode(kind string, obj withConditions, suspended bool, revision, lastHandled string) *Node {
	n := node(kind, obj)
	n.Suspended, n.Revision, n.LastHandledReconcile = suspended, revision, lastHandled
	return n
}

// workloads lists an inventory's objects by kind, then namespace and name, whatever order Flux stored them in.
func workloads(refs []inventory.Ref) []*Node {
	nodes := make([]*Node, 0, len(refs))
	for _, r := range refs {
		nodes = append(nodes, &Node{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	slices.SortFunc(nodes, func(a, b *Node) int {
		return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
	return nodes
}

// withPods adds to each Deployment among the workloads its replicas' readiness and its pods, each Ready as the
// kubelet reports it: what shows that a workload really runs. A Deployment the client may not read, or no longer
// finds, is listed as the inventory names it.
func withPods(ctx context.Context, c client.Reader, nodes []*Node) ([]*Node, error) {
	for _, n := range nodes {
		if n.Kind != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		err := c.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: n.Name}, d)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		wanted := int32(1)
		if d.Spec.Replicas != nil {
			wanted = *d.Spec.Replicas
		}
		n.Replicas = fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, wanted)
		if n.Status, err = kstatusOf(d); err != nil {
			return nil, err
		}
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, err
		}
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: selector}); apierrors.IsForbidden(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			pod := &Node{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, Ready: string(metav1.ConditionUnknown)}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady {
					pod.Ready, pod.Reason, pod.Message = string(cond.Status), cond.Reason, cond.Message
				}
			}
			if f, ok := podstatus.ContainerFailure(&p); ok {
				pod.Reason, pod.Message = f.Reason, failureMessage(f)
			}
			n.Children = append(n.Children, pod)
		}
		slices.SortFunc(n.Children, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	}
	return nodes, nil
}

// kstatusOf computes a Deployment's status as kstatus (and so kustomize-controller's health check) does.
func kstatusOf(d *appsv1.Deployment) (string, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return "", err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	res, err := status.Compute(obj)
	if err != nil {
		return "", err
	}
	return res.Status.String(), nil
}

// failureMessage says how a pod's container failed: its exit code, then the kubelet's message of the state it
// waits in.
func failureMessage(f podstatus.Failure) string {
	if f.Exited {
		return strings.TrimSuffix(f.Exit()+": "+f.Message, ": ")
	}
	return f.Message
}

// Print writes the tree with box-drawing branches, one object per line.
func Print(w io.Writer, root *Node) error {
	return printTree(w, root, "")
}

// PrintNamespaced writes the tree as Print does, its root naming its namespace: for trees of several namespaces,
// where the same name may stand for different objects.
func PrintNamespaced(w io.Writer, root *Node) error {
	return printTree(w, root, " (namespace "+root.Namespace+")")
}

func printTree(w io.Writer, root *Node, namespace string) error {
	if _, err := fmt.Fprintln(w, root.line(namespace)); err != nil {
		return err
	}
	return printChildren(w, root, "")
}

func printChildren(w io.Writer, n *Node, indent string) error {
	for i, child := range n.Children {
		branch, next := "├── ", "│   "
		if i == len(n.Children)-1 {
			branch, next = "└── ", "    "
		}
		if _, err := fmt.Fprintln(w, indent+branch+child.line("")); err != nil {
			return err
		}
		if err := printChildren(w, child, indent+next); err != nil {
			return err
		}
	}
	return nil
}

// line is the node's line; namespace, when not empty, follows its name.
func (n *Node) line(namespace string) string {
	s := n.Kind + "/" + n.Name + namespace
	if n.Role != "" {
		s += " (" + n.Role + ")"
	}
	if n.Suspended {
		s += " (suspended)"
	}
	if n.Replicas != "" {
		s += "  " + n.Replicas
	}
	if n.Ready == "" {
		return s
	}
	s += "  Ready=" + n.Ready
	if n.Reason != "" {
		s += " " + n.Reason
	}
	if n.Ready != "True" && n.Message != "" {
		s += ": " + sanitize.Printable(n.Message)
	}
	return s
}
