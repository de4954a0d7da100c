package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// aggregationBound bounds how long kube-controller-manager's clusterrole-aggregation controller takes to copy a
// new aggregated role's rules into view, edit and admin (it reacts to the roles' watch events).
const aggregationBound = 30 * time.Second

// TestTenantRolesAggregateIntoViewAndEdit: with config/default installed, a user bound to the cluster's default
// `edit` role in a namespace may create VectorDeployments there and not in another namespace, and only read
// ArtifactDeployments; a user bound to `view` may list both kinds and create neither. The rights reach `edit` and
// `view` only through kube-controller-manager's aggregation of config/rbac's tenant roles. Writes are server-side
// dry runs: the API server authorizes them as real ones, and nothing is left for the operator to reconcile.
func TestTenantRolesAggregateIntoViewAndEdit(t *testing.T) {
	ctx := context.Background()
	mine, other := newNamespace(t, "tenant-a"), newNamespace(t, "tenant-b")
	for user, role := range map[string]string{"tenant-editor": "edit", "tenant-viewer": "view"} {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if err := env.Client.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
	editor, viewer := impersonate(t, "tenant-editor"), impersonate(t, "tenant-viewer")
	vd := func(namespace string) *konfidencev1.VectorDeployment {
		return &konfidencev1.VectorDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "shop"},
			Spec:       konfidencev1.VectorDeploymentSpec{Vector: "registry.example/acme.org/vectors/shop:1.0.0"},
		}
	}
	testenv.Eventually(t, aggregationBound, func() error {
		if err := editor.Create(ctx, vd(mine), client.DryRunAll); err != nil {
			return fmt.Errorf("edit in %s, creating a VectorDeployment there: %w", mine, err)
		}
		return nil
	})

	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want it allowed", what, err)
		}
	}
	forbidden("edit in "+mine+", creating a VectorDeployment in "+other, editor.Create(ctx, vd(other), client.DryRunAll))
	forbidden("edit in "+mine+", listing VectorDeployments in "+other, editor.List(ctx, &konfidencev1.VectorDeploymentList{}, client.InNamespace(other)))
	ad := &konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "chart"}}
	forbidden("edit, creating an ArtifactDeployment (the operator's)", editor.Create(ctx, ad, client.DryRunAll))
	allowed("edit, listing ArtifactDeployments", editor.List(ctx, &konfidencev1.ArtifactDeploymentList{}, client.InNamespace(mine)))
	// Status is the operator's alone: a teardown reads from Ready's reason whether the operator suspended the Flux
	// objects on purpose (and then deletes them without resuming, leaving their workloads), so a tenant who
	// could write it would orphan workloads in a shared target namespace. Authorization comes before the object
	// is looked up, so a right to write it would answer NotFound here.
	suspendedOnPurpose := client.RawPatch(types.MergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"TargetNameConflict","message":"m","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`))
	forbidden("edit, writing an ArtifactDeployment's status", editor.Status().Patch(ctx, ad, suspendedOnPurpose, client.DryRunAll))
	forbidden("edit, writing a VectorDeployment's status", editor.Status().Patch(ctx, vd(mine), suspendedOnPurpose, client.DryRunAll))

	allowed("view, listing VectorDeployments", viewer.List(ctx, &konfidencev1.VectorDeploymentList{}, client.InNamespace(mine)))
	allowed("view, listing ArtifactDeployments", viewer.List(ctx, &konfidencev1.ArtifactDeploymentList{}, client.InNamespace(mine)))
	forbidden("view, creating a VectorDeployment", viewer.Create(ctx, vd(mine), client.DryRunAll))
	forbidden("view, listing VectorDeployments in "+other, viewer.List(ctx, &konfidencev1.VectorDeploymentList{}, client.InNamespace(other)))
}

// impersonate returns a client of the admin's that acts as user, as `kubectl --as` does.
func impersonate(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
