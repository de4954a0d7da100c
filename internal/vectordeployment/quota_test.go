package vectordeployment

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

const artifactDeploymentCount corev1.ResourceName = "count/artifactdeployments.konfidence.cloud"

// TestResourceQuotaBoundsArtifactDeployments: the ResourceQuota config/quota ships, its ArtifactDeployment count
// lowered to one, in the namespace of a VectorDeployment of two artifacts. The API server's quota admission refuses
// the second ArtifactDeployment; the VectorDeployment says QuotaExceeded on ArtifactDeploymentsCreated and Ready,
// naming the quota, with a Warning event, and is retried rather than stalled; nothing beyond the quota is created.
// Once the quota is raised, the second ArtifactDeployment is created without anyone touching the VectorDeployment.
// Before, the refusal was a ReconciliationFailed of the whole VectorDeployment, with no event, the quota named
// nowhere a tenant looks.
//
// The test writes the quota's status, as kube-controller-manager's resourcequota controller would: the admission
// enforces a quota only once its status says what is used.
func TestResourceQuotaBoundsArtifactDeployments(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	quota := shippedQuota(t)
	quota.Namespace = ns
	quota.Spec.Hard[artifactDeploymentCount] = resource.MustParse("1")
	if err := env.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	setQuotaStatus(t, quota)

	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	backend := ocmtest.Artifact("acme.org/artifacts/backend", "1.0.0", helmType, true)
	startManager(t, managerOptions{})
	vd := createVectorDeployment(t, ns, "shop", pushVector(t, reg, "acme.org/vectors/shop", frontend, backend))

	vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionFalse, konfidencev1.QuotaExceededReason)
	if conditions.GetReason(vd, konfidencev1.ReadyCondition) != konfidencev1.QuotaExceededReason || conditions.IsStalled(vd) {
		t.Errorf("conditions %+v, want Ready False QuotaExceeded, not stalled", vd.Status.Conditions)
	}
	waitForEvent(t, ns, vd.Name, konfidencev1.QuotaExceededReason, "exceeded quota", quota.Name)
	if ads := listADs(t, ns); len(ads) != 1 {
		t.Errorf("ArtifactDeployments %v, want the one the quota admits", keys(ads))
	}

	quota = &corev1.ResourceQuota{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: shippedQuota(t).Name}, quota); err != nil {
		t.Fatal(err)
	}
	quota.Spec.Hard[artifactDeploymentCount] = resource.MustParse("2")
	if err := env.Client.Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	setQuotaStatus(t, quota)
	waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, meta.SucceededReason)
	if ads := listADs(t, ns); len(ads) != 2 {
		t.Errorf("ArtifactDeployments %v once the quota was raised, want both", keys(ads))
	}
}

// shippedQuota is config/quota's ResourceQuota.
func shippedQuota(t *testing.T) *corev1.ResourceQuota {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "quota", "resourcequota.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	quota := &corev1.ResourceQuota{}
	if err := yaml.UnmarshalStrict(data, quota); err != nil {
		t.Fatal(err)
	}
	if _, ok := quota.Spec.Hard[artifactDeploymentCount]; !ok {
		t.Fatalf("config/quota's ResourceQuota does not bound %s: %v", artifactDeploymentCount, quota.Spec.Hard)
	}
	return quota
}

// setQuotaStatus writes the quota's status as the resourcequota controller does: its hard limits, and what the
// namespace uses of each, counted now.
func setQuotaStatus(t *testing.T, quota *corev1.ResourceQuota) {
	t.Helper()
	ctx := context.Background()
	used := corev1.ResourceList{}
	for name := range quota.Spec.Hard {
		used[name] = resource.MustParse("0")
	}
	used[artifactDeploymentCount] = *resource.NewQuantity(int64(len(listADs(t, quota.Namespace))), resource.DecimalSI)
	vds := &konfidencev1.VectorDeploymentList{}
	if err := env.Client.List(ctx, vds, client.InNamespace(quota.Namespace)); err != nil {
		t.Fatal(err)
	}
	used["count/vectordeployments.konfidence.cloud"] = *resource.NewQuantity(int64(len(vds.Items)), resource.DecimalSI)
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard.DeepCopy(), Used: used}
	if err := env.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
}
