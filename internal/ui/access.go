package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// resource is a kind the view watches, when the viewer may list and watch it.
type resource struct {
	kind      string
	resource  schema.GroupResource
	newObject func() client.Object
	// required kinds are the view itself: without them there is nothing to show.
	required bool
}

// resources are every kind the view reads. Secrets and ConfigMaps are not among them: the view never reads their
// contents, it shows only the names a status gives.
var resources = []resource{
	{kindVectorDeployment, konfidencev1.GroupVersion.WithResource("vectordeployments").GroupResource(), func() client.Object { return &konfidencev1.VectorDeployment{} }, true},
	{kindArtifactDeployment, konfidencev1.GroupVersion.WithResource("artifactdeployments").GroupResource(), func() client.Object { return &konfidencev1.ArtifactDeployment{} }, true},
	{kindStage, konfidencev1.GroupVersion.WithResource("stages").GroupResource(), func() client.Object { return &konfidencev1.Stage{} }, false},
	{sourcev1.HelmRepositoryKind, sourcev1.GroupVersion.WithResource("helmrepositories").GroupResource(), func() client.Object { return &sourcev1.HelmRepository{} }, false},
	{sourcev1.OCIRepositoryKind, sourcev1.GroupVersion.WithResource("ocirepositories").GroupResource(), func() client.Object { return &sourcev1.OCIRepository{} }, false},
	{helmv2.HelmReleaseKind, helmv2.GroupVersion.WithResource("helmreleases").GroupResource(), func() client.Object { return &helmv2.HelmRelease{} }, false},
	{kustomizev1.KustomizationKind, kustomizev1.GroupVersion.WithResource("kustomizations").GroupResource(), func() client.Object { return &kustomizev1.Kustomization{} }, false},
	{"Event", corev1.Resource("events"), func() client.Object { return &corev1.Event{} }, false},
	{"Deployment", appsv1.Resource("deployments"), func() client.Object { return &appsv1.Deployment{} }, false},
	{"Pod", corev1.Resource("pods"), func() client.Object { return &corev1.Pod{} }, false},
}

// readable asks the API server, as the viewer, which of the resources it may list and watch in namespace (every
// namespace when empty): the view watches exactly those and never more. A required kind it may not read is an
// error that says which and where.
func readable(ctx context.Context, c client.Client, namespace string) ([]resource, map[string]bool, error) {
	var may []resource
	denied := map[string]bool{}
	where := "namespace " + namespace
	if namespace == "" {
		where = "every namespace (-A)"
	}
	for _, r := range resources {
		ok := true
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: r.resource.Group, Resource: r.resource.Resource},
			}}
			if err := c.Create(ctx, review); err != nil {
				return nil, nil, fmt.Errorf("asking the API server what you may read: %w", err)
			}
			ok = ok && review.Status.Allowed
		}
		switch {
		case ok:
			may = append(may, r)
		case r.required:
			return nil, nil, fmt.Errorf("you may not list and watch %s in %s: the view shows only what your RBAC lets you read", r.resource, where)
		default:
			denied[r.kind] = true
		}
	}
	return may, denied, nil
}

// gated is the cache as the viewer may read it: a kind the viewer may not list, or a namespace outside the one
// the view was started for, answers Forbidden, as the API server would, so that readers leave it out rather than
// wait for an informer that can never sync.
type gated struct {
	client.Reader
	scheme    *runtime.Scheme
	denied    map[string]bool
	namespace string
}

var errNotWatched = errors.New("not readable by this view")

func (g *gated) check(obj runtime.Object, namespace, name string) error {
	gvk, err := apiutil.GVKForObject(obj, g.scheme)
	if err != nil {
		return err
	}
	kind := strings.TrimSuffix(gvk.Kind, "List")
	if g.denied[kind] || (g.namespace != "" && namespace != "" && namespace != g.namespace) {
		return apierrors.NewForbidden(schema.GroupResource{Resource: kind}, name, errNotWatched)
	}
	return nil
}

func (g *gated) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := g.check(obj, key.Namespace, key.Name); err != nil {
		return err
	}
	return g.Reader.Get(ctx, key, obj, opts...)
}

func (g *gated) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if err := g.check(list, o.Namespace, ""); err != nil {
		return err
	}
	return g.Reader.List(ctx, list, opts...)
}
