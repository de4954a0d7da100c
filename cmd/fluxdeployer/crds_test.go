package main

import (
	"context"
	"fmt"
	"path/filepath"
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
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestFluxCRDsInstalledLater starts both reconcilers on an API server without any Flux CRD. The operator keeps
// running: the VectorDeployment reconciler creates the ArtifactDeployments, which the Flux deployer refuses with
// FluxCRDsMissing and a warning event. Installing the source and Kustomize CRDs deploys the Kustomize artifact
// while the Helm one still waits; installing the HelmRelease CRD deploys that one too.
func TestFluxCRDsInstalledLater(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t)
	c := env.Client
	runOperator(t, env)

	reg := ocmtest.NewRegistry(t)
	chart := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	bundle := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	bundle.Resources[1] = ocmtest.BundleResource("0.4.0", "registry.example.com/bundles/config:0.4.0")
	reg.Push(t, "", chart, bundle, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", chart, bundle))
	vd := testenv.CreateVectorDeployment(t, c, "default", "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))

	var helmAD, kustomizeAD *konfidencev1.ArtifactDeployment
	testenv.Eventually(t, 2*time.Minute, func() error {
		ads, err := ownedArtifactDeployments(ctx, c, vd)
		if err != nil {
			return err
		}
		for _, ad := range ads {
			if c := conditions.Get(ad, meta.ReadyCondition); c == nil || c.Reason != konfidencev1.FluxCRDsMissingReason {
				return fmt.Errorf("%s: Ready %+v, want reason %s", ad.Name, c, konfidencev1.FluxCRDsMissingReason)
			}
			if ad.Spec.Manifest.Type == "cloud.konfidence.flux.helm" {
				helmAD = ad
			} else {
				kustomizeAD = ad
			}
		}
		if helmAD == nil || kustomizeAD == nil {
			return fmt.Errorf("%d ArtifactDeployments, want a Helm and a Kustomize one", len(ads))
		}
		return nil
	})
	t.Logf("refused: %s", conditions.GetMessage(helmAD, meta.ReadyCondition))
	assertWarning(t, c, helmAD, konfidencev1.FluxCRDsMissingReason)

	installKustomizeOnlyFlux(t, env)
	testenv.Eventually(t, 2*time.Minute, func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(kustomizeAD), &kustomizev1.Kustomization{})
	})
	waitForReason(t, c, kustomizeAD, meta.ProgressingReason)
	if err := c.Get(ctx, client.ObjectKeyFromObject(helmAD), helmAD); err != nil {
		t.Fatal(err)
	}
	if r := conditions.GetReason(helmAD, meta.ReadyCondition); r != konfidencev1.FluxCRDsMissingReason {
		t.Errorf("%s without the HelmRelease CRD: Ready reason %s, want %s", helmAD.Name, r, konfidencev1.FluxCRDsMissingReason)
	}

	installFluxCRDs(t, env, "helm.toolkit.fluxcd.io_helmreleases.yaml")
	testenv.Eventually(t, 2*time.Minute, func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(helmAD), &helmv2.HelmRelease{})
	})
	waitForReason(t, c, helmAD, meta.ProgressingReason)
}

// runOperator runs the binary's manager with both reconcilers against env until the test ends.
func runOperator(t *testing.T, env *testenv.Env) {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controlplane.OperatorNamespace}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RUNTIME_NAMESPACE", controlplane.OperatorNamespace)
	o := parseRunOptions(t, "--metrics-addr=0", "--health-addr=0")
	o.reuseControllerNames = true
	mgr, err := newManager(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
}

// installKustomizeOnlyFlux installs the CRDs of a Flux without helm-controller: source-controller's and the
// Kustomization.
func installKustomizeOnlyFlux(t *testing.T, env *testenv.Env) {
	t.Helper()
	installFluxCRDs(t, env, "source.toolkit.fluxcd.io_helmrepositories.yaml", "source.toolkit.fluxcd.io_helmcharts.yaml",
		"source.toolkit.fluxcd.io_ocirepositories.yaml", "kustomize.toolkit.fluxcd.io_kustomizations.yaml")
}

// installFluxCRDs installs the named files of internal/fluxdeployer/testdata/crds.
func installFluxCRDs(t *testing.T, env *testenv.Env, files ...string) {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds", f))
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
}

func waitForReason(t *testing.T, c client.Client, ad *konfidencev1.ArtifactDeployment, reason string) {
	t.Helper()
	waitFor(t, c, ad, func() error {
		if r := conditions.GetReason(ad, meta.ReadyCondition); r != reason {
			return fmt.Errorf("%s: Ready reason %s (%s), want %s", ad.Name, r, conditions.GetMessage(ad, meta.ReadyCondition), reason)
		}
		return nil
	})
}

func assertWarning(t *testing.T, c client.Client, obj client.Object, reason string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		events := &corev1.EventList{}
		if err := c.List(context.Background(), events, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == obj.GetName() && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no %s warning event on %s", reason, obj.GetName())
	})
}

// TestTeardownWithoutHelmReleaseCRD runs both reconcilers against a Kustomize-only Flux (source and Kustomization
// CRDs, no HelmRelease): deleting a VectorDeployment deletes its Kustomize ArtifactDeployment, whose teardown takes
// the missing HelmRelease kind for absent, deletes the Kustomization and its source, and ends.
func TestTeardownWithoutHelmReleaseCRD(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t)
	c := env.Client
	installKustomizeOnlyFlux(t, env)
	runOperator(t, env)

	reg := ocmtest.NewRegistry(t)
	bundle := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	bundle.Resources[1] = ocmtest.BundleResource("0.4.0", "registry.example.com/bundles/config:0.4.0")
	reg.Push(t, "", bundle, ocmtest.Vector("acme.org/vectors/config", "1.0.0", bundle))
	vd := testenv.CreateVectorDeployment(t, c, "default", "config", reg.Ref("", "acme.org/vectors/config", "1.0.0"))
	var ad *konfidencev1.ArtifactDeployment
	testenv.Eventually(t, 2*time.Minute, func() error {
		ads, err := ownedArtifactDeployments(ctx, c, vd)
		if err != nil || len(ads) != 1 {
			return fmt.Errorf("ArtifactDeployments %d (%v), want 1", len(ads), err)
		}
		ad = ads[0]
		return c.Get(ctx, client.ObjectKeyFromObject(ad), &kustomizev1.Kustomization{})
	})

	if err := c.Delete(ctx, vd, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		for _, obj := range []client.Object{&konfidencev1.VectorDeployment{}, &konfidencev1.ArtifactDeployment{}, &kustomizev1.Kustomization{}} {
			key := client.ObjectKeyFromObject(ad)
			if _, isVD := obj.(*konfidencev1.VectorDeployment); isVD {
				key = client.ObjectKeyFromObject(vd)
			}
			if err := c.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
				live := &konfidencev1.ArtifactDeployment{}
				_ = c.Get(ctx, client.ObjectKeyFromObject(ad), live)
				return fmt.Errorf("%T %s still there (%v); ArtifactDeployment Ready: %s", obj, key, err, conditions.GetMessage(live, meta.ReadyCondition))
			}
		}
		return nil
	})
}
