package fluxdeployer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// standInUninstallFinalizer stands in for helm-controller's finalizer, which no helm-controller removes here: the
// test removes it when "the uninstall" is done, or never.
const standInUninstallFinalizer = "stand-in.helm.toolkit.fluxcd.io/uninstall"

// TestTeardown: a deleted ArtifactDeployment deletes its Flux objects and stays until they are gone; it gives up
// after teardownTimeout with a TeardownTimeout event, and does not wait at all with the skip annotation.
func TestTeardown(t *testing.T) {
	h := testHarness(t)
	const ns = "teardown"
	h.namespace(t, ns)
	h.configMap(t, "teardown", map[string]string{teardownTimeoutKey: "3s"})
	r, recorder := h.direct("teardown")
	ctx := context.Background()

	// deployed creates a helm ArtifactDeployment, reconciles it and puts the stand-in finalizer on its HelmRelease.
	deployed := func(t *testing.T, name string) *konfidencev1.ArtifactDeployment {
		t.Helper()
		ad := artifactDeployment(ns, name, HelmManifestType, resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
		h.create(t, ad)
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		if !controllerutil.ContainsFinalizer(got, konfidencev1.TeardownFinalizer) {
			t.Fatalf("finalizers %v", got.Finalizers)
		}
		hr := &helmv2.HelmRelease{}
		h.get(t, ns, name, hr)
		controllerutil.AddFinalizer(hr, standInUninstallFinalizer)
		if err := h.env.Client.Update(ctx, hr); err != nil {
			t.Fatal(err)
		}
		return got
	}
	deleteAndReconcile := func(t *testing.T, ad *konfidencev1.ArtifactDeployment) ctrl.Result {
		t.Helper()
		if err := h.env.Client.Delete(ctx, ad); err != nil {
			t.Fatal(err)
		}
		result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)})
		if err != nil {
			t.Fatal(err)
		}
		return result
	}
	uninstalled := func(t *testing.T, name string) {
		t.Helper()
		hr := &helmv2.HelmRelease{}
		h.get(t, ns, name, hr)
		controllerutil.RemoveFinalizer(hr, standInUninstallFinalizer)
		if err := h.env.Client.Update(ctx, hr); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(obj client.Object, name string) bool {
		return apierrors.IsNotFound(h.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj))
	}

	t.Run("waits for the uninstall", func(t *testing.T) {
		ad := deployed(t, "frontend-1-2-3-e1mvwibzp5")
		result := deleteAndReconcile(t, ad)
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, ns, ad.Name, got)
		assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.TearingDownReason)
		hr := &helmv2.HelmRelease{}
		h.get(t, ns, ad.Name, hr)
		if hr.DeletionTimestamp == nil || !gone(&sourcev1.HelmRepository{}, ad.Name) {
			t.Errorf("Flux objects not deleted: HelmRelease deletionTimestamp %v, HelmRepository gone %t", hr.DeletionTimestamp, gone(&sourcev1.HelmRepository{}, ad.Name))
		}
		if result.RequeueAfter <= 0 || result.RequeueAfter > 3*time.Second {
			t.Errorf("requeue after %s, want within the 3s teardown timeout", result.RequeueAfter)
		}
		uninstalled(t, ad.Name)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)}); err != nil {
			t.Fatal(err)
		}
		if !gone(&konfidencev1.ArtifactDeployment{}, ad.Name) {
			t.Error("the ArtifactDeployment outlived its teardown")
		}
	})

	t.Run("says when an install under way delays the uninstall", func(t *testing.T) {
		ad := deployed(t, "backend-1-2-3-e1mvwibzp5")
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}}
		testenv.SetFluxStatus(t, h.env.Client, hr,
			cond(meta.ReconcilingCondition, True, meta.ProgressingReason, "Running 'install' action with timeout of 5m0s"),
			cond(meta.ReadyCondition, Unknown, meta.ProgressingReason, "Running 'install' action with timeout of 5m0s"))
		deleteAndReconcile(t, ad)
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, ns, ad.Name, got)
		if msg := conditionOf(got, meta.ReadyCondition).Message; !strings.Contains(msg, "its install is under way: helm-controller uninstalls once it ends") {
			t.Errorf("Ready message %q does not say the install delays the teardown", msg)
		}
		uninstalled(t, ad.Name)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("gives up after teardownTimeout", func(t *testing.T) {
		ad := deployed(t, "database-16-4-0-4739810ml3")
		drainEvents(recorder)
		deleteAndReconcile(t, ad)
		start := time.Now()
		testenv.Eventually(t, 30*time.Second, func() error {
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)}); err != nil {
				return err
			}
			if !gone(&konfidencev1.ArtifactDeployment{}, ad.Name) {
				return fmt.Errorf("still waiting")
			}
			return nil
		})
		if waited := time.Since(start); waited < 2*time.Second {
			t.Errorf("gave up after %s, before the 3s timeout", waited)
		}
		events := drainEvents(recorder)
		assertEvent(t, events, "Warning", konfidencev1.TeardownTimeoutReason)
		if gone(&helmv2.HelmRelease{}, ad.Name) {
			t.Error("the HelmRelease went without its uninstall")
		}
		uninstalled(t, ad.Name)
	})

	t.Run("skip annotation", func(t *testing.T) {
		ad := deployed(t, "config-0-4-0-s8kqlvwffn")
		ad.Annotations = map[string]string{konfidencev1.SkipTeardownWaitAnnotation: "true"}
		if err := h.env.Client.Update(ctx, ad); err != nil {
			t.Fatal(err)
		}
		drainEvents(recorder)
		deleteAndReconcile(t, ad)
		if !gone(&konfidencev1.ArtifactDeployment{}, ad.Name) {
			t.Error("the ArtifactDeployment waited despite the annotation")
		}
		events := drainEvents(recorder)
		if len(events) == 0 || !strings.Contains(events[len(events)-1], konfidencev1.SkipTeardownWaitAnnotation) {
			t.Errorf("events %q", events)
		}
		hr := &helmv2.HelmRelease{}
		h.get(t, ns, ad.Name, hr)
		if hr.DeletionTimestamp == nil {
			t.Error("the HelmRelease was not deleted")
		}
		uninstalled(t, ad.Name)
	})
}

// TestTeardownSuspended: deleting a suspended ArtifactDeployment resumes its Flux objects before deleting them,
// since helm-controller and kustomize-controller skip the uninstall and the prune of a suspended object, and says
// so in an event. Flux objects suspended because another ArtifactDeployment holds their workload name are deleted
// suspended, with a Warning event: uninstalling them would remove the holder's workloads.
func TestTeardownSuspended(t *testing.T) {
	h := testHarness(t)
	const ns = "teardown-suspended"
	h.namespace(t, ns)
	ctx := context.Background()
	r, recorder := h.direct(ns)

	// suspendedAndDeleted deploys a helm ArtifactDeployment, suspends it (its HelmRelease holds the stand-in
	// uninstall finalizer, so it stays to be looked at), lets status set what the ArtifactDeployment last reported,
	// deletes it and runs the teardown.
	suspendedAndDeleted := func(t *testing.T, name string, status func(*konfidencev1.ArtifactDeployment)) *helmv2.HelmRelease {
		t.Helper()
		ad := artifactDeployment(ns, name, HelmManifestType, resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
		h.create(t, ad)
		if _, err := h.reconcile(t, r, ad); err != nil {
			t.Fatal(err)
		}
		hr := &helmv2.HelmRelease{}
		h.get(t, ns, name, hr)
		controllerutil.AddFinalizer(hr, standInUninstallFinalizer)
		if err := h.env.Client.Update(ctx, hr); err != nil {
			t.Fatal(err)
		}
		h.get(t, ns, name, ad)
		ad.Spec.Suspend = true
		if err := h.env.Client.Update(ctx, ad); err != nil {
			t.Fatal(err)
		}
		if _, err := h.reconcile(t, r, ad); err != nil {
			t.Fatal(err)
		}
		h.get(t, ns, name, hr)
		if !hr.Spec.Suspend {
			t.Fatal("the HelmRelease of the suspended ArtifactDeployment is not suspended")
		}
		if status != nil {
			status(ad)
			if err := h.env.Client.Status().Update(ctx, ad); err != nil {
				t.Fatal(err)
			}
		}
		drainEvents(recorder)
		if err := h.env.Client.Delete(ctx, ad); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)}); err != nil {
			t.Fatal(err)
		}
		h.get(t, ns, name, hr)
		if hr.DeletionTimestamp == nil {
			t.Error("the HelmRelease was not deleted")
		}
		t.Cleanup(func() {
			controllerutil.RemoveFinalizer(hr, standInUninstallFinalizer)
			_ = h.env.Client.Update(ctx, hr)
		})
		return hr
	}

	t.Run("resumed before it is deleted", func(t *testing.T) {
		hr := suspendedAndDeleted(t, "frontend-1-2-3-e1mvwibzp5", nil)
		if hr.Spec.Suspend {
			t.Error("the HelmRelease was deleted suspended: helm-controller would not uninstall the release")
		}
		events := drainEvents(recorder)
		assertEvent(t, events, corev1.EventTypeNormal, konfidencev1.TearingDownReason)
		if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "resumed") && strings.Contains(e, "HelmRelease") }) {
			t.Errorf("no event says the HelmRelease was resumed: %q", events)
		}
	})

	t.Run("kept suspended when another holds the name", func(t *testing.T) {
		hr := suspendedAndDeleted(t, "backend-1-2-3-e1mvwibzp5", func(ad *konfidencev1.ArtifactDeployment) {
			conditions.MarkFalse(ad, meta.ReadyCondition, konfidencev1.TargetNameConflictReason, "taken")
			conditions.MarkStalled(ad, konfidencev1.TargetNameConflictReason, "taken")
		})
		if !hr.Spec.Suspend {
			t.Error("the HelmRelease of a refused claimant was resumed: its uninstall would remove the holder's release")
		}
		events := drainEvents(recorder)
		assertEvent(t, events, corev1.EventTypeWarning, konfidencev1.TearingDownReason)
		if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "workloads stay") }) {
			t.Errorf("no event says the workloads stay: %q", events)
		}
	})
}

// TestTeardownEnds: a teardown ends whatever fails. The API server refuses to delete the HelmRelease (an admission
// policy): the ArtifactDeployment retries, and goes after teardownTimeout with a TeardownTimeout event naming the
// refusal; with the skip annotation it goes at once. A Kustomize-only Flux, without the HelmRelease CRD, is
// TestTeardownWithoutHelmReleaseCRD (cmd/fluxdeployer).
func TestTeardownEnds(t *testing.T) {
	h := testHarness(t)
	const ns = "teardown-refused"
	h.namespace(t, ns)
	h.configMap(t, ns, map[string]string{teardownTimeoutKey: "3s"})
	ctx := context.Background()
	r, recorder := h.direct(ns)
	refuseDeletes(t, h, ns, "helm.toolkit.fluxcd.io", "helmreleases")

	deleted := func(t *testing.T, name string, annotations map[string]string) *konfidencev1.ArtifactDeployment {
		t.Helper()
		ad := artifactDeployment(ns, name, HelmManifestType, resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
		maps.Copy(ad.Annotations, annotations)
		h.create(t, ad)
		if _, err := h.reconcile(t, r, ad); err != nil {
			t.Fatal(err)
		}
		drainEvents(recorder)
		if err := h.env.Client.Delete(ctx, ad); err != nil {
			t.Fatal(err)
		}
		return ad
	}
	gone := func(ad *konfidencev1.ArtifactDeployment) bool {
		return apierrors.IsNotFound(h.env.Client.Get(ctx, client.ObjectKeyFromObject(ad), &konfidencev1.ArtifactDeployment{}))
	}

	t.Run("gives up after teardownTimeout", func(t *testing.T) {
		ad := deleted(t, "frontend-1-2-3-e1mvwibzp5", nil)
		start := time.Now()
		var lastErr error
		testenv.Eventually(t, 30*time.Second, func() error {
			_, lastErr = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)})
			if !gone(ad) {
				return fmt.Errorf("still there (%v)", lastErr)
			}
			return nil
		})
		if waited := time.Since(start); waited < 2*time.Second {
			t.Errorf("gave up after %s, before the 3s timeout", waited)
		}
		events := drainEvents(recorder)
		assertEvent(t, events, corev1.EventTypeWarning, konfidencev1.TeardownTimeoutReason)
		if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, refusedMessage) }) {
			t.Errorf("no event names the refusal: %q", events)
		}
	})

	t.Run("skip annotation", func(t *testing.T) {
		ad := deleted(t, "database-16-4-0-4739810ml3", map[string]string{konfidencev1.SkipTeardownWaitAnnotation: "true"})
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)}); err != nil {
			t.Fatal(err)
		}
		if !gone(ad) {
			t.Error("the ArtifactDeployment waited despite the annotation")
		}
		assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.TearingDownReason)
	})
}

// refusedMessage is what the admission policy of refuseDeletes answers.
const refusedMessage = "deletes are refused in this namespace"

// refuseDeletes has the API server refuse every deletion of the resource in namespace, through a
// ValidatingAdmissionPolicy, until the test ends.
func refuseDeletes(t *testing.T, h *harness, namespace, group, resource string) {
	t.Helper()
	ctx := context.Background()
	name := "refuse-deletes-" + namespace
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: refusedMessage}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}}},
		},
	}
	h.create(t, policy, binding)
	t.Cleanup(func() {
		_ = h.env.Client.Delete(ctx, binding)
		_ = h.env.Client.Delete(ctx, policy)
	})
	// The API server takes up a policy asynchronously: wait until a dry-run deletion is refused.
	probe := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "probe"},
		Spec: helmv2.HelmReleaseSpec{ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "probe"}}}
	h.create(t, probe)
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := h.env.Client.Delete(ctx, probe, client.DryRunAll); err == nil || !strings.Contains(err.Error(), refusedMessage) {
			return fmt.Errorf("deletion not refused yet (%v)", err)
		}
		return nil
	})
}
