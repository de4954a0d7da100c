package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestDeletingSuspendedRemovesTheWorkloads: helm-controller and kustomize-controller skip the uninstall and the
// prune of a suspended object, so deleting a suspended ArtifactDeployment would leave its workloads behind. The
// deployer resumes the Flux objects before deleting them, says so in an event, and the deletion of the
// VectorDeployment returns once the release is uninstalled and the bundle pruned.
func TestDeletingSuspendedRemovesTheWorkloads(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	chart := helmArtifact(t, reg, "acme.org/artifacts/database", "16.4.0", false, ocmtest.WebChart("database", "16.4.0"))
	config := configBundle(t, reg)
	reg.Push(t, "", chart, config, ocmtest.Vector("acme.org/vectors/suspended", "1.0.0", chart, config))
	ns := newNamespace(t, "suspended")
	startFluxdeployer(t, nil)
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/suspended", "1.0.0"))
	waitReady(t, 3*time.Minute, vd)
	release, configMap := adName(t, chart, vd), bundleConfigMap(t, config, vd)
	if got := releases(t, ns); len(got[release]) != 1 {
		t.Fatalf("Helm releases: %v", got)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: configMap}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("ConfigMap %s of the bundle: %v", configMap, err)
	}

	ads := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(ctx, ads, client.InNamespace(ns)); err != nil || len(ads.Items) != 2 {
		t.Fatalf("ArtifactDeployments: %d (%v), want 2", len(ads.Items), err)
	}
	for i := range ads.Items {
		ad := &ads.Items[i]
		before := ad.DeepCopy()
		ad.Spec.Suspend = true
		if err := env.Client.Patch(ctx, ad, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		for _, obj := range []client.Object{&helmv2.HelmRelease{}, &kustomizev1.Kustomization{}} {
			for i := range ads.Items {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(&ads.Items[i]), obj)
				if apierrors.IsNotFound(err) {
					continue
				} else if err != nil {
					return err
				}
				if hr, ok := obj.(*helmv2.HelmRelease); ok && !hr.Spec.Suspend {
					return fmt.Errorf("HelmRelease %s not suspended", hr.Name)
				}
				if k, ok := obj.(*kustomizev1.Kustomization); ok && !k.Spec.Suspend {
					return fmt.Errorf("Kustomization %s not suspended", k.Name)
				}
			}
		}
		return nil
	})

	took := deleteAndWait(t, vd)
	t.Logf("deleting the VectorDeployment with suspended ArtifactDeployments returned after %s", took.Round(100*time.Millisecond))
	assertWorkloadsGone(t, ns, []string{release}, []string{configMap})
	testenv.Eventually(t, 30*time.Second, func() error {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return err
		}
		resumed := 0
		for _, e := range events.Items {
			if e.Reason == konfidencev1.TearingDownReason && strings.Contains(e.Message, "resumed") {
				resumed++
			}
		}
		if resumed < 2 {
			return fmt.Errorf("%d events say the Flux objects were resumed, want one per ArtifactDeployment", resumed)
		}
		return nil
	})
}
