package fluxdeployer

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

const (
	True    = metav1.ConditionTrue
	False   = metav1.ConditionFalse
	Unknown = metav1.ConditionUnknown
)

// TestStatusMapping writes the status subresources of the Flux objects as Flux's controllers would and checks
// that the ArtifactDeployment's conditions follow, in both directions.
func TestStatusMapping(t *testing.T) {
	h := testHarness(t)
	t.Run("kustomize", func(t *testing.T) {
		ns := "status-kustomize"
		h.namespace(t, ns)
		h.configMap(t, ns, nil)
		r, recorder := h.direct(ns)
		ad := artifactDeployment(ns, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
			resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
		h.create(t, ad)
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		// Just created: Flux has not looked at the objects yet.
		assertCondition(t, got, konfidencev1.ArtifactFetchedCondition, Unknown, meta.ProgressingReason)
		assertCondition(t, got, meta.ReadyCondition, Unknown, meta.ProgressingReason)
		assertCondition(t, got, meta.ReconcilingCondition, True, meta.ProgressingReason)

		repo, ks := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}}, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}}
		testenv.SetFluxStatus(t, h.env.Client, repo, cond(meta.ReadyCondition, True, meta.SucceededReason, "stored artifact for digest '1.2.3@sha256:abc'"))
		testenv.SetFluxStatus(t, h.env.Client, ks,
			cond(meta.ReadyCondition, True, meta.ReconciliationSucceededReason, "Applied revision: 1.2.3@sha256:abc"),
			cond(meta.HealthyCondition, True, meta.SucceededReason, "Health check passed"))
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactFetchedCondition, True, meta.SucceededReason)
		assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, True, meta.ReconciliationSucceededReason)
		assertCondition(t, got, konfidencev1.AppHealthyCondition, True, meta.SucceededReason)
		assertCondition(t, got, konfidencev1.DeploymentResultCreatedCondition, True, meta.SucceededReason)
		assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
		if c := conditionOf(got, konfidencev1.ArtifactDeployedCondition); c.Message != "Applied revision: 1.2.3@sha256:abc" {
			t.Errorf("ArtifactDeployed message %q not carried over", c.Message)
		}
		for _, gone := range []string{meta.ReconcilingCondition, meta.StalledCondition} {
			if c := conditionOf(got, gone); c != nil {
				t.Errorf("%s still set on a ready ArtifactDeployment: %+v", gone, c)
			}
		}
		assertEvent(t, drainEvents(recorder), corev1.EventTypeNormal, meta.SucceededReason)

		// The workloads turn unhealthy: back to False, with Flux's reason on Ready.
		testenv.SetFluxStatus(t, h.env.Client, ks,
			cond(meta.ReadyCondition, False, meta.HealthCheckFailedReason, "timeout waiting for: [Deployment/apps/backend status: 'InProgress']"),
			cond(meta.HealthyCondition, False, meta.HealthCheckFailedReason, "health check failed"))
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactFetchedCondition, True, meta.SucceededReason)
		assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, False, meta.HealthCheckFailedReason)
		assertCondition(t, got, konfidencev1.AppHealthyCondition, False, meta.HealthCheckFailedReason)
		assertCondition(t, got, meta.ReadyCondition, False, meta.HealthCheckFailedReason)
		assertCondition(t, got, meta.ReconcilingCondition, True, meta.ProgressingWithRetryReason)
		assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, meta.HealthCheckFailedReason)

		// Flux gives up: Stalled carries over.
		testenv.SetFluxStatus(t, h.env.Client, ks, cond(meta.StalledCondition, True, meta.InvalidCELExpressionReason, "invalid health check expression"))
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, meta.StalledCondition, True, meta.InvalidCELExpressionReason)
		assertCondition(t, got, meta.ReadyCondition, False, meta.InvalidCELExpressionReason)
		if c := conditionOf(got, meta.ReconcilingCondition); c != nil {
			t.Errorf("Reconciling set next to Stalled: %+v", c)
		}

		// The source fails to pull: ArtifactFetched False.
		testenv.SetFluxStatus(t, h.env.Client, repo, cond(meta.ReadyCondition, False, sourcev1.AuthenticationFailedReason, "401 Unauthorized"))
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactFetchedCondition, False, sourcev1.AuthenticationFailedReason)

		// A failure Flux reports for the current generation while it retries, before it records
		// status.observedGeneration (helm-controller does this for an install that fails), is shown.
		retrying := &kustomizev1.Kustomization{}
		h.get(t, ns, ad.Name, retrying)
		retrying.Status.ObservedGeneration = retrying.Generation - 1
		if err := h.env.Client.Status().Update(t.Context(), retrying); err != nil {
			t.Fatal(err)
		}
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, False, meta.HealthCheckFailedReason)

		// A status whose conditions were written for an older generation says nothing about the current spec.
		stale := &kustomizev1.Kustomization{}
		h.get(t, ns, ad.Name, stale)
		for i := range stale.Status.Conditions {
			stale.Status.Conditions[i].ObservedGeneration = stale.Generation - 1
		}
		if err := h.env.Client.Status().Update(t.Context(), stale); err != nil {
			t.Fatal(err)
		}
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, Unknown, meta.ProgressingReason)
	})

	t.Run("helm", func(t *testing.T) {
		ns := "status-helm"
		h.namespace(t, ns)
		h.configMap(t, ns, nil)
		r, _ := h.direct(ns)
		ad := artifactDeployment(ns, "frontend-1-2-3-e1mvwibzp5", HelmManifestType,
			resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
		h.create(t, ad)
		if _, err := h.reconcile(t, r, ad); err != nil {
			t.Fatal(err)
		}
		// The HelmChart helm-controller would create for chart.spec: named <namespace>-<name>, no owner reference.
		chart := &sourcev1.HelmChart{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + "-" + ad.Name, Labels: map[string]string{
				helmNameLabel: ad.Name, helmNamespaceLabel: ns,
			}},
			Spec: sourcev1.HelmChartSpec{
				Chart: "frontend", Version: "1.2.3", Interval: metav1.Duration{Duration: 10 * 60e9},
				SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: ad.Name},
			},
		}
		h.create(t, chart)
		testenv.SetFluxStatus(t, h.env.Client, chart, cond(meta.ReadyCondition, True, sourcev1.ChartPullSucceededReason, "pulled 'frontend' chart with version '1.2.3'"))
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}}
		testenv.SetFluxStatus(t, h.env.Client, hr,
			cond(meta.ReadyCondition, True, helmv2.InstallSucceededReason, "Helm install succeeded for release status-helm/frontend-1-2-3-e1mvwibzp5.v1"),
			cond(helmv2.ReleasedCondition, True, helmv2.InstallSucceededReason, "Helm install succeeded"))
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactFetchedCondition, True, sourcev1.ChartPullSucceededReason)
		assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, True, helmv2.InstallSucceededReason)
		assertCondition(t, got, konfidencev1.AppHealthyCondition, True, helmv2.InstallSucceededReason)
		assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)

		testenv.SetFluxStatus(t, h.env.Client, hr,
			cond(meta.ReadyCondition, False, helmv2.UpgradeFailedReason, "Helm upgrade failed: context deadline exceeded"),
			cond(helmv2.ReleasedCondition, False, helmv2.UpgradeFailedReason, "Helm upgrade failed"))
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, False, helmv2.UpgradeFailedReason)
		assertCondition(t, got, konfidencev1.AppHealthyCondition, False, helmv2.UpgradeFailedReason)
		assertCondition(t, got, meta.ReadyCondition, False, helmv2.UpgradeFailedReason)

		testenv.SetFluxStatus(t, h.env.Client, chart, cond(meta.ReadyCondition, False, sourcev1.AuthenticationFailedReason, "failed to login to OCI registry"))
		got, err = h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.ArtifactFetchedCondition, False, sourcev1.AuthenticationFailedReason)
	})
}

func conditionOf(ad *konfidencev1.ArtifactDeployment, t string) *metav1.Condition {
	for i := range ad.Status.Conditions {
		if ad.Status.Conditions[i].Type == t {
			return &ad.Status.Conditions[i]
		}
	}
	return nil
}

// TestFluxProgressIsNoFailure: what Flux reports on every healthy install or at every interval is progress, not a
// failure: no Warning event, and a Ready ArtifactDeployment stays Ready.
//   - A deployment whose source has no artifact yet (helm-controller's SourceNotReady, kustomize-controller's
//     "Source artifact not found") is on its way: ArtifactDeployed Unknown, Progressing.
//   - A deployment reconciling a spec it has reconciled before (Ready Unknown "Reconciliation in progress" at
//     Flux's interval, the same generation) leaves the ArtifactDeployment Ready.
func TestFluxProgressIsNoFailure(t *testing.T) {
	h := testHarness(t)
	for _, tc := range []struct {
		kind, manifestType string
		resource           konfidencev1.Resource
		// source is the object that reports the fetch, created by the test where Flux would create it.
		source     func(ns, name string) testenv.FluxObject
		deployment testenv.FluxObject
		released   string
		waiting    metav1.Condition
	}{
		{
			kind: "helm", manifestType: HelmManifestType,
			resource: resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")),
			source: func(ns, name string) testenv.FluxObject {
				chart := &sourcev1.HelmChart{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + "-" + name, Labels: map[string]string{helmNameLabel: name, helmNamespaceLabel: ns}},
					Spec: sourcev1.HelmChartSpec{Chart: "frontend", Version: "1.2.3", Interval: metav1.Duration{Duration: 10 * 60e9},
						SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: name}},
				}
				h.create(t, chart)
				return chart
			},
			deployment: &helmv2.HelmRelease{}, released: helmv2.ReleasedCondition,
			waiting: cond(meta.ReadyCondition, False, "SourceNotReady", "HelmChart 'ns/chart' is not ready: latest generation of object has not been reconciled"),
		},
		{
			kind: "kustomize", manifestType: KustomizeManifestType,
			resource: resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")),
			source: func(ns, name string) testenv.FluxObject {
				return &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			},
			deployment: &kustomizev1.Kustomization{}, released: meta.HealthyCondition,
			waiting: cond(meta.ReadyCondition, False, meta.ArtifactFailedReason, "Source artifact not found, retrying in 30s"),
		},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := "progress-" + tc.kind
			h.namespace(t, ns)
			h.configMap(t, ns, nil)
			r, recorder := h.direct(ns)
			ad := artifactDeployment(ns, "app-1-2-3-e1mvwibzp5", tc.manifestType, tc.resource)
			h.create(t, ad)
			if _, err := h.reconcile(t, r, ad); err != nil {
				t.Fatal(err)
			}
			source := tc.source(ns, ad.Name)
			deployment := tc.deployment
			deployment.SetNamespace(ns)
			deployment.SetName(ad.Name)
			reconcile := func() *konfidencev1.ArtifactDeployment {
				t.Helper()
				got, err := h.reconcile(t, r, ad)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}

			testenv.SetFluxStatus(t, h.env.Client, deployment, tc.waiting)
			got := reconcile()
			assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, Unknown, meta.ProgressingReason)
			assertNoWarning(t, drainEvents(recorder))

			testenv.SetFluxStatus(t, h.env.Client, source, cond(meta.ReadyCondition, True, meta.SucceededReason, "stored artifact"))
			testenv.SetFluxStatus(t, h.env.Client, deployment,
				cond(meta.ReadyCondition, True, meta.ReconciliationSucceededReason, "Applied revision: 1.2.3"),
				cond(tc.released, True, meta.SucceededReason, "Health check passed"))
			assertCondition(t, reconcile(), meta.ReadyCondition, True, meta.SucceededReason)

			testenv.SetFluxStatus(t, h.env.Client, deployment,
				cond(meta.ReadyCondition, Unknown, meta.ProgressingReason, "Reconciliation in progress"),
				cond(tc.released, Unknown, meta.ProgressingReason, "Running health checks"))
			got = reconcile()
			assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
			assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, True, meta.ReconciliationSucceededReason)
			assertNoWarning(t, drainEvents(recorder))
		})
	}
}

func assertNoWarning(t *testing.T, events []string) {
	t.Helper()
	for _, e := range events {
		if strings.HasPrefix(e, corev1.EventTypeWarning+" ") {
			t.Errorf("a Warning event for progress: %s", e)
		}
	}
}
