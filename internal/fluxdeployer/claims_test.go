package fluxdeployer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestTargetNameConflict: reusable artifacts get the same name in every namespace, so with a
// configured targetNamespace two namespaces' ArtifactDeployments would share one Helm release, or one
// Kustomization's object names, in the target. The oldest claimant deploys; the other applies nothing, says
// TargetNameConflict with a warning, has the Flux objects it had from before suspended, and deploys once the
// claim is released.
func TestTargetNameConflict(t *testing.T) {
	h := testHarness(t)
	const (
		older, younger = "claims-z", "claims-a" // the younger sorts first: age, not the tiebreak, decides
		shared         = "claims-shared"
		release        = "shop-frontend-1-0-0-claim0hash"
	)
	ctx := context.Background()
	for _, ns := range []string{older, younger, shared} {
		h.namespace(t, ns)
	}
	h.configMap(t, "claims", nil)
	h.startDeployer(t, h.env.Config, "claims")
	chart := resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.0.0"))
	bundle := resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/config:1.0.0"))
	helmAD := func(ns string) *konfidencev1.ArtifactDeployment {
		return claimTestAD(ns, release, HelmManifestType, "claim0hash", chart)
	}

	// Before a shared target: each namespace deploys into itself, no clash.
	first := helmAD(older)
	h.create(t, first)
	waitForFlux(t, h, older, release, &helmv2.HelmRelease{}, func(client.Object) error { return nil })
	waitForNextSecond(t, h, first)
	second := helmAD(younger)
	h.create(t, second)
	waitForFlux(t, h, younger, release, &helmv2.HelmRelease{}, func(client.Object) error { return nil })

	t.Run("turning on a shared target namespace stops the younger release", func(t *testing.T) {
		setConfig(t, h, "claims", map[string]string{targetNamespaceKey: shared})
		waitForReady(t, h, second, False, konfidencev1.TargetNameConflictReason)
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, younger, release, got)
		assertCondition(t, got, meta.StalledCondition, True, konfidencev1.TargetNameConflictReason)
		// The claim is named, the other tenant is not.
		if msg := conditions.GetMessage(got, meta.ReadyCondition); !strings.Contains(msg, "-claim0hash") || strings.Contains(msg, older) {
			t.Errorf("Ready message %q: want the claimed names, and not the holder's namespace %s", msg, older)
		}
		waitForWarning(t, h, younger, release, konfidencev1.TargetNameConflictReason)
		waitForFlux(t, h, younger, release, &helmv2.HelmRelease{}, func(obj client.Object) error {
			hr := obj.(*helmv2.HelmRelease)
			return differs("loser's HelmRelease, suspended as it was", placement{true, younger}, placement{hr.Spec.Suspend, hr.Spec.TargetNamespace})
		})
		waitForFlux(t, h, older, release, &helmv2.HelmRelease{}, func(obj client.Object) error {
			hr := obj.(*helmv2.HelmRelease)
			return differs("holder's HelmRelease, deployed to the shared namespace", placement{false, shared}, placement{hr.Spec.Suspend, hr.Spec.TargetNamespace})
		})
	})

	t.Run("a Kustomization name suffix is claimed like a release", func(t *testing.T) {
		// Different names, the same suffix: -1-0-0-claim1hash.
		holder := claimTestAD(older, "config-1-0-0-claim1hash", KustomizeManifestType, "claim1hash", bundle)
		h.create(t, holder)
		waitForFlux(t, h, older, holder.Name, &kustomizev1.Kustomization{}, func(client.Object) error { return nil })
		waitForNextSecond(t, h, holder)
		assertKustomizationRefused(t, h, claimTestAD(younger, "settings-1-0-0-claim1hash", KustomizeManifestType, "claim1hash", bundle))
	})

	t.Run("a Kustomization cannot render another namespace's Helm release names", func(t *testing.T) {
		// The same component and version as the release, as a kustomize artifact: its suffix -1-0-0-claim0hash
		// turns a bundle object shop-frontend into shop-frontend-1-0-0-claim0hash, the release's Service.
		assertKustomizationRefused(t, h, claimTestAD(younger, "frontend-1-0-0-claim0hash", KustomizeManifestType, "claim0hash", bundle))
	})

	t.Run("an edited annotation moves no claim", func(t *testing.T) {
		// An older ArtifactDeployment of one tenant, a younger one of another, deployed.
		attacker := claimTestAD(older, "tool-1-0-0-claim2hash", KustomizeManifestType, "claim2hash", bundle)
		h.create(t, attacker)
		waitForFlux(t, h, older, attacker.Name, &kustomizev1.Kustomization{}, func(client.Object) error { return nil })
		waitForNextSecond(t, h, attacker)
		victim := claimTestAD(younger, "config-1-0-0-claim3hash", KustomizeManifestType, "claim3hash", bundle)
		h.create(t, victim)
		deployed := func(obj client.Object) error {
			ks := obj.(*kustomizev1.Kustomization)
			return differs("victim's Kustomization", placement{false, "-1-0-0-claim3hash"}, placement{ks.Spec.Suspend, ks.Spec.NameSuffix})
		}
		waitForFlux(t, h, younger, victim.Name, &kustomizev1.Kustomization{}, deployed)

		// The older one's annotations now say the victim's hash; both are reconciled, the older one first.
		requestReconcile(t, h, attacker, "edited", func(ad *konfidencev1.ArtifactDeployment) {
			ad.Annotations[konfidencev1.ArtifactHashAnnotation] = "claim3hash"
		})
		requestReconcile(t, h, victim, "after-the-edit", nil)
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, younger, victim.Name, got)
		if c := conditions.Get(got, meta.ReadyCondition); c != nil && c.Reason == konfidencev1.TargetNameConflictReason {
			t.Errorf("the victim lost its names to an edited annotation: %s", c.Message)
		}
		waitForFlux(t, h, younger, victim.Name, &kustomizev1.Kustomization{}, deployed)
		waitForFlux(t, h, older, attacker.Name, &kustomizev1.Kustomization{}, func(obj client.Object) error {
			if suffix := obj.(*kustomizev1.Kustomization).Spec.NameSuffix; suffix != "-1-0-0-claim2hash" {
				return fmt.Errorf("the edited ArtifactDeployment's suffix is %s, want its own -1-0-0-claim2hash", suffix)
			}
			return nil
		})
	})

	t.Run("deleting the holder hands the name on", func(t *testing.T) {
		if err := h.env.Client.Delete(ctx, first); err != nil {
			t.Fatal(err)
		}
		waitForFlux(t, h, younger, release, &helmv2.HelmRelease{}, func(obj client.Object) error {
			hr := obj.(*helmv2.HelmRelease)
			return differs("new holder's HelmRelease, resumed into the shared namespace", placement{false, shared}, placement{hr.Spec.Suspend, hr.Spec.TargetNamespace})
		})
		waitForReady(t, h, second, Unknown, meta.ProgressingReason)
	})
}

// assertKustomizationRefused creates clash and waits until it is refused with TargetNameConflict and a warning,
// without a Kustomization.
func assertKustomizationRefused(t *testing.T, h *harness, clash *konfidencev1.ArtifactDeployment) {
	t.Helper()
	h.create(t, clash)
	waitForReady(t, h, clash, False, konfidencev1.TargetNameConflictReason)
	waitForWarning(t, h, clash.Namespace, clash.Name, konfidencev1.TargetNameConflictReason)
	if err := h.env.Client.Get(context.Background(), client.ObjectKeyFromObject(clash), &kustomizev1.Kustomization{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Kustomization was applied for the loser %s/%s: %v", clash.Namespace, clash.Name, err)
	}
}

func claimTestAD(namespace, name, manifestType, hash string, resources ...konfidencev1.Resource) *konfidencev1.ArtifactDeployment {
	ad := artifactDeployment(namespace, name, manifestType, resources...)
	ad.Annotations[konfidencev1.ArtifactVersionAnnotation] = "1.0.0"
	ad.Annotations[konfidencev1.ArtifactHashAnnotation] = hash
	ad.Spec.Component.Version = "1.0.0"
	return ad
}

// requestReconcile changes ad with edit (if any), asks for a reconcile with token and waits until the deployer
// has handled it.
func requestReconcile(t *testing.T, h *harness, ad *konfidencev1.ArtifactDeployment, token string, edit func(*konfidencev1.ArtifactDeployment)) {
	t.Helper()
	ctx := context.Background()
	got := &konfidencev1.ArtifactDeployment{}
	h.get(t, ad.Namespace, ad.Name, got)
	before := got.DeepCopy()
	if edit != nil {
		edit(got)
	}
	got.Annotations[meta.ReconcileRequestAnnotation] = token
	if err := h.env.Client.Patch(ctx, got, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		h.get(t, ad.Namespace, ad.Name, got)
		if handled := got.Status.GetLastHandledReconcileRequest(); handled != token {
			return fmt.Errorf("%s/%s handled reconcile request %q, want %q", ad.Namespace, ad.Name, handled, token)
		}
		return nil
	})
}

// waitForFlux waits until the Flux object exists and check accepts it.
func waitForFlux(t *testing.T, h *harness, namespace, name string, obj client.Object, check func(client.Object) error) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
			return err
		}
		return check(obj)
	})
}

// waitForNextSecond waits until an object created now is younger than ad: creation timestamps have seconds.
func waitForNextSecond(t *testing.T, h *harness, ad *konfidencev1.ArtifactDeployment) {
	t.Helper()
	got := &konfidencev1.ArtifactDeployment{}
	h.get(t, ad.Namespace, ad.Name, got)
	testenv.Eventually(t, 5*time.Second, func() error {
		if now := metav1.Now().Rfc3339Copy(); !got.CreationTimestamp.Before(&now) {
			return fmt.Errorf("still the second %s was created in", got.CreationTimestamp)
		}
		return nil
	})
}

func setConfig(t *testing.T, h *harness, name string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	h.get(t, configNamespace, name, cm)
	cm.Data = data
	if err := h.env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

func waitForWarning(t *testing.T, h *harness, namespace, name, reason string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		list := &corev1.EventList{}
		if err := h.env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no warning %s on %s/%s", reason, namespace, name)
	})
}

// placement is whether a Flux object is suspended, and where its workloads go (a target namespace, or a
// Kustomization's name suffix).
type placement struct {
	Suspend bool
	Where   string
}
