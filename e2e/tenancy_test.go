package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// escalatingBundle is a tenant's bundle that, besides a ConfigMap, binds the tenant's user to cluster-admin:
// applied with kustomize-controller's own rights, it would hand the tenant the cluster.
var escalatingBundle = map[string]string{
	"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - configmap.yaml\n  - binding.yaml\n",
	"configmap.yaml":     ocmtest.ConfigBundle["configmap.yaml"],
	"binding.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: tenant-takes-the-cluster
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: User
    name: tenant-owner
    apiGroup: rbac.authorization.k8s.io
`,
}

// TestFluxAppliesAsTheTenant: with serviceAccountName configured, kustomize-controller impersonates that account of
// the tenant's namespace. An account that may manage ConfigMaps there deploys a plain bundle, but a bundle that
// also creates a ClusterRoleBinding is refused by the API server: nothing of it is applied, and the refusal
// reaches the ArtifactDeployment and the VectorDeployment.
func TestFluxAppliesAsTheTenant(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	plain := kustomizeArtifact(t, reg, "acme.org/artifacts/config", "0.4.0", ocmtest.ConfigBundle)
	escalating := kustomizeArtifact(t, reg, "acme.org/artifacts/escalate", "0.1.0", escalatingBundle)
	reg.Push(t, "", plain, escalating, ocmtest.Vector("acme.org/vectors/tenant", "1.0.0", plain, escalating))

	ns := newNamespace(t, "tenant")
	tenantAccount(t, ns, "flux-applier")
	startFluxdeployer(t, map[string]string{"serviceAccountName": "flux-applier"})
	vd := createVectorDeployment(t, ns, "tenant", reg.Ref("", "acme.org/vectors/tenant", "1.0.0"))

	plainName, plainHash := artifactName(t, plain)
	escalatingName, escalatingHash := artifactName(t, escalating)
	waitReady(t, 3*time.Minute, &konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plainName}})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-config-0-4-0-" + plainHash}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the plain bundle's ConfigMap: %v", err)
	}

	ad := &konfidencev1.ArtifactDeployment{}
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: escalatingName}, ad); err != nil {
			return err
		}
		if c := conditions.Get(ad, konfidencev1.ArtifactDeployedCondition); c == nil || c.Status != metav1.ConditionFalse ||
			!strings.Contains(c.Message, "clusterrolebindings") {
			return fmt.Errorf("ArtifactDeployed: %+v", c)
		}
		return nil
	})
	t.Logf("refused: %s", conditions.GetMessage(ad, konfidencev1.ArtifactDeployedCondition))
	if conditions.IsReady(ad) {
		t.Errorf("%s is Ready although its bundle was refused", escalatingName)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-takes-the-cluster-0-1-0-" + escalatingHash}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crb), crb); !apierrors.IsNotFound(err) {
		t.Errorf("the tenant's ClusterRoleBinding: %v, want NotFound", err)
		// Cluster-scoped, it would outlive the namespace.
		_ = env.Client.Delete(ctx, crb)
	}
	testenv.Eventually(t, time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		if msg := conditions.GetMessage(vd, konfidencev1.ReadyCondition); conditions.IsReady(vd) || !strings.Contains(msg, escalatingName) {
			return fmt.Errorf("VectorDeployment Ready %v: %q does not name %s", conditions.IsReady(vd), msg, escalatingName)
		}
		return nil
	})
}

// kustomizeArtifact pushes the bundle and returns an artifact component that deploys it.
func kustomizeArtifact(t *testing.T, reg *ocmtest.Registry, component, version string, files map[string]string) ocmtest.ComponentVersion {
	t.Helper()
	base := component[strings.LastIndex(component, "/")+1:]
	bundle, err := ocmtest.PushKustomizeBundle(context.Background(), reg.Host, "bundles/"+base, version, files)
	if err != nil {
		t.Fatal(err)
	}
	a := ocmtest.Artifact(component, version, "cloud.konfidence.flux.kustomize", true)
	a.Resources[1] = ocmtest.BundleResource(version, bundle)
	return a
}

func artifactName(t *testing.T, a ocmtest.ComponentVersion) (name, hash string) {
	t.Helper()
	name, hash, err := naming.ArtifactDeploymentName(a.Name, a.Version, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return name, hash
}

// tenantAccount creates the ServiceAccount Flux applies a tenant's deployments with, allowed to manage ConfigMaps
// in the namespace and nothing else, as a platform team would provision it.
func tenantAccount(t *testing.T, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		},
	}
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}
