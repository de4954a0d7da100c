package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestOwnerReferencesDriveGarbageCollection: a reusable ArtifactDeployment shared by two VectorDeployments
// outlives the first and goes with the last; a non-reusable one goes with its VectorDeployment; the Flux objects
// go with their ArtifactDeployment. Kubernetes' own garbage collector decides, from the owner references alone.
func TestOwnerReferencesDriveGarbageCollection(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	kustomize := func(name string, reuse bool) ocmtest.ComponentVersion {
		a := ocmtest.Artifact(name, "1.0.0", "cloud.konfidence.flux.kustomize", reuse)
		a.Resources[1] = ocmtest.Resource{Name: "bundle", Version: "1.0.0", Type: "kustomize",
			Access: map[string]string{"type": "ociArtifact", "imageReference": "http://" + reg.Host + "/bundles/unused:1.0.0"}}
		return a
	}
	shared, private := kustomize("acme.org/artifacts/shared", true), kustomize("acme.org/artifacts/private", false)
	reg.Push(t, "", shared, private, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", shared, private))

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "gc")
	vds := map[string]*konfidencev1.VectorDeployment{}
	for _, name := range []string{"a", "b"} {
		vds[name] = createVectorDeployment(t, ns, name, reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	}
	sharedName, _, err := naming.ArtifactDeploymentName(shared.Name, shared.Version, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	privateName := map[string]string{}
	for name, vd := range vds {
		if privateName[name], _, err = naming.ArtifactDeploymentName(private.Name, private.Version, string(vd.UID), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The Flux objects are read as metadata: their kind is all this test needs of them.
	ociRepository := func() client.Object {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(sourcev1.GroupVersion.WithKind(sourcev1.OCIRepositoryKind))
		return obj
	}
	exists := func(obj client.Object, name string) error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	}
	gone := func(obj client.Object, name string) error {
		if err := exists(obj, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s still there (%v)", obj, name, err)
		}
		return nil
	}
	testenv.Eventually(t, time.Minute, func() error {
		ad := &konfidencev1.ArtifactDeployment{}
		if err := exists(ad, sharedName); err != nil || len(ad.OwnerReferences) != 2 {
			return fmt.Errorf("shared ArtifactDeployment %s: %v, owners %v", sharedName, err, ad.OwnerReferences)
		}
		for _, name := range []string{sharedName, privateName["a"], privateName["b"]} {
			if err := exists(ociRepository(), name); err != nil {
				return fmt.Errorf("OCIRepository %s: %v", name, err)
			}
		}
		return nil
	})

	deleteVD := func(name string) {
		t.Helper()
		if err := env.Client.Delete(ctx, vds[name], client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
	deleteVD("a")
	testenv.Eventually(t, time.Minute, func() error {
		if err := gone(&konfidencev1.ArtifactDeployment{}, privateName["a"]); err != nil {
			return err
		}
		return gone(ociRepository(), privateName["a"])
	})
	ad := &konfidencev1.ArtifactDeployment{}
	if err := exists(ad, sharedName); err != nil || len(ad.OwnerReferences) != 1 || ad.OwnerReferences[0].Name != "b" {
		t.Fatalf("the shared ArtifactDeployment must outlive its first owner: %v, owners %+v", err, ad.OwnerReferences)
	}
	if err := exists(&konfidencev1.ArtifactDeployment{}, privateName["b"]); err != nil {
		t.Fatalf("b's own ArtifactDeployment went with a: %v", err)
	}

	deleteVD("b")
	testenv.Eventually(t, time.Minute, func() error {
		for _, name := range []string{sharedName, privateName["b"]} {
			if err := gone(&konfidencev1.ArtifactDeployment{}, name); err != nil {
				return err
			}
			if err := gone(ociRepository(), name); err != nil {
				return err
			}
		}
		return nil
	})
}
