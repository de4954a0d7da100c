package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestSuspendAndReconcileRequestReachHelmRelease: suspending an ArtifactDeployment suspends its HelmRelease for
// helm-controller, resuming lifts it, and a reconcile request on the ArtifactDeployment (what `flux reconcile`
// does to a Flux object) is handled by helm-controller itself, which records it in the HelmRelease's status.
func TestSuspendAndReconcileRequestReachHelmRelease(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	frontend := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.0.0", true, ocmtest.WebChart("frontend", "1.0.0"))
	reg.Push(t, "", frontend, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend))
	ns := newNamespace(t, "operate")
	startFluxdeployer(t, nil)
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	waitReady(t, 3*time.Minute, vd)
	if vd.Status.ReadySummary != "1/1" {
		t.Errorf("Artifacts column %q, want 1/1", vd.Status.ReadySummary)
	}
	key := client.ObjectKey{Namespace: ns, Name: adName(t, frontend, nil)}
	patchAD := func(mutate func(*konfidencev1.ArtifactDeployment)) {
		t.Helper()
		ad := &konfidencev1.ArtifactDeployment{}
		if err := env.Client.Get(ctx, key, ad); err != nil {
			t.Fatal(err)
		}
		before := ad.DeepCopy()
		mutate(ad)
		if err := env.Client.Patch(ctx, ad, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	helmRelease := func(check func(*helmv2.HelmRelease) error) {
		t.Helper()
		testenv.Eventually(t, 2*time.Minute, func() error {
			hr := &helmv2.HelmRelease{}
			if err := env.Client.Get(ctx, key, hr); err != nil {
				return err
			}
			return check(hr)
		})
	}

	patchAD(func(ad *konfidencev1.ArtifactDeployment) { ad.Spec.Suspend = true })
	helmRelease(func(hr *helmv2.HelmRelease) error {
		if !hr.Spec.Suspend {
			return fmt.Errorf("HelmRelease not suspended")
		}
		return nil
	})
	patchAD(func(ad *konfidencev1.ArtifactDeployment) { ad.Spec.Suspend = false })
	helmRelease(func(hr *helmv2.HelmRelease) error {
		if hr.Spec.Suspend {
			return fmt.Errorf("HelmRelease still suspended")
		}
		return nil
	})

	token := metav1.Now().Format(time.RFC3339Nano)
	patchAD(func(ad *konfidencev1.ArtifactDeployment) { ad.Annotations[meta.ReconcileRequestAnnotation] = token })
	helmRelease(func(hr *helmv2.HelmRelease) error {
		if hr.Status.LastHandledReconcileAt != token {
			return fmt.Errorf("helm-controller handled request %q, want %q", hr.Status.LastHandledReconcileAt, token)
		}
		return nil
	})
	ad := &konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}
	waitReady(t, time.Minute, ad)
	if ad.Status.LastHandledReconcileAt != token {
		t.Errorf("ArtifactDeployment lastHandledReconcileAt %q, want %q", ad.Status.LastHandledReconcileAt, token)
	}
}
