package fluxdeployer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// standInUninstallFinalizer stands in for helm-controller's finalizer, which no helm-controller removes here: the
// test removes it when "the uninstall" is done, or never.
const standInUninstallFinalizer = "stand-in.helm.toolkit.fluxcd.io/uninstall"

// testTeardown: a deleted ArtifactDeployment deletes its Flux objects and stays until they are gone; it gives up
// after teardownTimeout with a TeardownTimeout event, and does not wait at all with the skip annotation.
func testTeardown(t *testing.T, h *harness) {
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
