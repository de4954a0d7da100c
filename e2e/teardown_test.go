package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestDeleteWaitsForTheWorkloads: deleting a VectorDeployment returns (the object is gone, what `kubectl delete
// --wait` waits for) only once helm-controller has uninstalled the releases and kustomize-controller has pruned
// the bundles of the ArtifactDeployments it alone owned; a reusable ArtifactDeployment shared with another
// VectorDeployment stays, owned by that one only. The second VectorDeployment is deleted while the operator is
// down: it waits, and its teardown completes once the operator is back. The finalizers decide all of it, not the
// garbage collector.
func TestDeleteWaitsForTheWorkloads(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	shared := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.0.0", true, ocmtest.WebChart("frontend", "1.0.0"))
	private := helmArtifact(t, reg, "acme.org/artifacts/database", "16.4.0", false, ocmtest.WebChart("database", "16.4.0"))
	config := configBundle(t, reg)
	reg.Push(t, "", shared, private, config, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", shared, private, config))

	ns := newNamespace(t, "teardown")
	stop := startFluxdeployer(t, nil)
	vds := map[string]*konfidencev1.VectorDeployment{}
	for _, name := range []string{"a", "b"} {
		vds[name] = createVectorDeployment(t, ns, name, reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	}
	for _, vd := range vds {
		waitReady(t, 3*time.Minute, vd)
	}
	sharedName := adName(t, shared, nil)
	own := func(vd string) (release, configMap string) {
		return adName(t, private, vds[vd]), bundleConfigMap(t, config, vds[vd])
	}
	releaseA, configA := own("a")
	releaseB, configB := own("b")
	if got := releases(t, ns); fmt.Sprint(got) != fmt.Sprint(map[string][]string{sharedName: {"1"}, releaseA: {"1"}, releaseB: {"1"}}) {
		t.Fatalf("Helm releases: %v", got)
	}
	for _, cm := range []string{configA, configB} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cm}, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("ConfigMap %s of the bundle: %v", cm, err)
		}
	}

	took := deleteAndWait(t, vds["a"])
	t.Logf("deleting VectorDeployment a returned after %s", took.Round(100*time.Millisecond))
	// Checked once, right when the delete returned: no waiting for stragglers.
	assertWorkloadsGone(t, ns, []string{releaseA}, []string{configA})
	if got := releases(t, ns); fmt.Sprint(got) != fmt.Sprint(map[string][]string{sharedName: {"1"}, releaseB: {"1"}}) {
		t.Errorf("after deleting a: Helm releases %v, want %s and %s untouched", got, sharedName, releaseB)
	}
	ad := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharedName}, ad); err != nil || len(ad.OwnerReferences) != 1 || ad.OwnerReferences[0].Name != "b" {
		t.Errorf("the shared ArtifactDeployment must stay, owned by b alone: %v, owners %+v", err, ad.OwnerReferences)
	}

	if stop == nil {
		t.Log("on an existing cluster the installed operator cannot be stopped: the operator-down case is not run")
		return
	}
	stop()
	if err := env.Client.Delete(ctx, vds["b"], client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	// With the operator down, nothing is torn down and the VectorDeployment waits, though the garbage collector
	// has acted on the deletions made until then.
	waitGarbageCollected(t, ns)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vds["b"]), &konfidencev1.VectorDeployment{}); err != nil {
		t.Fatalf("VectorDeployment b went while the operator was down: %v", err)
	}
	if got := releases(t, ns); len(got[releaseB]) != 1 || len(got[sharedName]) != 1 {
		t.Fatalf("releases changed while the operator was down: %v", got)
	}
	startFluxdeployer(t, nil)
	took = waitGone(t, vds["b"])
	t.Logf("VectorDeployment b, deleted while the operator was down, went %s after the operator was back", took.Round(100*time.Millisecond))
	assertWorkloadsGone(t, ns, []string{releaseB, sharedName}, []string{configB})
	if got := releases(t, ns); len(got) != 0 {
		t.Errorf("Helm releases left: %v", got)
	}
}

// waitGarbageCollected waits until kube-controller-manager's garbage collector has acted on a deletion made now:
// a ConfigMap that owns another is deleted, and the owned one goes. The collector then had its chance at the
// deletions made before.
func waitGarbageCollected(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gc-owner-"}}
	if err := env.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gc-owned-", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
	}}}
	if err := env.Client.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, owner, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s, owned by a deleted ConfigMap, is still there: %v", owned.Name, err)
	})
}

// configBundle pushes the ConfigMap bundle and returns a Kustomize artifact of it that is not reusable: each
// VectorDeployment deploys its own.
func configBundle(t *testing.T, reg *ocmtest.Registry) ocmtest.ComponentVersion {
	t.Helper()
	bundle, err := ocmtest.PushKustomizeBundle(context.Background(), reg.Host, "bundles/config", "0.4.0", ocmtest.ConfigBundle)
	if err != nil {
		t.Fatal(err)
	}
	config := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", false)
	config.Resources[1] = ocmtest.BundleResource("0.4.0", bundle)
	return config
}

// bundleConfigMap is the name of the ConfigMap that vd's deployment of configBundle renders.
func bundleConfigMap(t *testing.T, config ocmtest.ComponentVersion, vd *konfidencev1.VectorDeployment) string {
	t.Helper()
	_, hash, err := naming.ArtifactDeploymentName(config.Name, config.Version, string(vd.UID), 0)
	if err != nil {
		t.Fatal(err)
	}
	return "app-config-0-4-0-" + hash
}

// deleteAndWait deletes obj as kubectl delete does (background propagation) and waits until it is gone, as
// kubectl delete --wait does; it returns how long that took.
func deleteAndWait(t *testing.T, obj client.Object) time.Duration {
	t.Helper()
	if err := env.Client.Delete(context.Background(), obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	return waitGone(t, obj)
}

func waitGone(t *testing.T, obj client.Object) time.Duration {
	t.Helper()
	start := time.Now()
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (%v)", obj.GetName(), err)
		}
		return nil
	})
	return time.Since(start)
}

// assertWorkloadsGone checks that the releases, their ArtifactDeployments, Flux objects and rendered objects, and
// the bundles' ConfigMaps are gone.
func assertWorkloadsGone(t *testing.T, namespace string, releaseNames, bundleConfigMaps []string) {
	t.Helper()
	stored := releases(t, namespace)
	for _, name := range releaseNames {
		if r := stored[name]; len(r) > 0 {
			t.Errorf("release %s still stored: %v", name, r)
		}
		for _, obj := range []client.Object{&konfidencev1.ArtifactDeployment{}, &helmv2.HelmRelease{}, &sourcev1.HelmRepository{}, &corev1.Service{}} {
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s still there (%v)", obj, name, err)
			}
		}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-config"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s-config still there (%v)", name, err)
		}
	}
	for _, name := range bundleConfigMaps {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s of a pruned bundle still there (%v)", name, err)
		}
	}
	ks := &kustomizev1.KustomizationList{}
	if err := env.Client.List(context.Background(), ks, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, k := range ks.Items {
		if slices.ContainsFunc(bundleConfigMaps, func(cm string) bool { return "app-config"+k.Spec.NameSuffix == cm }) {
			t.Errorf("Kustomization %s still there", k.Name)
		}
	}
}
