package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestVectorDeploysThroughFlux follows a vector all the way: fluxdeployer reads it from the registry, creates
// the ArtifactDeployment, turns it into an OCIRepository and a Kustomization; the real source-controller pulls
// the bundle, the real kustomize-controller applies it under the deployer's name suffix; readiness flows back
// to the ArtifactDeployment and the VectorDeployment.
func TestVectorDeploysThroughFlux(t *testing.T) {
	ctx := context.Background()
	reg, artifact := pushConfigVector(t)

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "shop")
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))

	name, hash, err := naming.ArtifactDeploymentName(artifact.Name, artifact.Version, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Kustomize path: VectorDeployment Ready %s after creation", waitReady(t, 3*time.Minute, vd).Round(100*time.Millisecond))

	ad := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ad); err != nil {
		t.Fatalf("ArtifactDeployment %s: %v", name, err)
	}
	for _, c := range []string{konfidencev1.ArtifactFetchedCondition, konfidencev1.ArtifactDeployedCondition, konfidencev1.AppHealthyCondition} {
		if !conditions.IsTrue(ad, c) {
			t.Errorf("ArtifactDeployment condition %s: %+v", c, conditions.Get(ad, c))
		}
	}
	// kustomize-controller applied the bundle under the deployer's suffix, labelled with the ArtifactDeployment.
	cm := &corev1.ConfigMap{}
	cmName := "app-config-0-4-0-" + hash
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, cm); err != nil {
		t.Fatalf("ConfigMap %s from the bundle: %v", cmName, err)
	}
	if cm.Labels[konfidencev1.ArtifactDeploymentLabel] != name || cm.Data["greeting"] != "hello" {
		t.Errorf("ConfigMap %s: labels %v, data %v", cmName, cm.Labels, cm.Data)
	}
	assertTree(t, vd, fmt.Sprintf(`VectorDeployment/shop  Ready=True Succeeded
└── ArtifactDeployment/%[1]s  Ready=True Succeeded
    ├── OCIRepository/%[1]s  Ready=True Succeeded
    └── Kustomization/%[1]s  Ready=True ReconciliationSucceeded
        └── ConfigMap/%[2]s
`, name, cmName))
	assertNoWarnings(t, ns)
}

// pushConfigVector publishes, in a registry of its own, the vector acme.org/vectors/shop:1.0.0 with one artifact
// that deploys the kustomize bundle ocmtest.ConfigBundle, and returns the registry and the artifact.
func pushConfigVector(t *testing.T) (*ocmtest.Registry, ocmtest.ComponentVersion) {
	t.Helper()
	reg := newRegistry(t)
	bundle, err := ocmtest.PushKustomizeBundle(context.Background(), reg.Host, "bundles/config", "0.4.0", ocmtest.ConfigBundle)
	if err != nil {
		t.Fatal(err)
	}
	artifact := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	artifact.Resources[1] = ocmtest.BundleResource("0.4.0", bundle)
	reg.Push(t, "", artifact, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", artifact))
	return reg, artifact
}

// assertTree compares the tree of the VectorDeployment with want, as `fluxdeployer tree` prints it through a
// kubeconfig, and checks that its JSON form holds the same objects.
func assertTree(t *testing.T, vd *konfidencev1.VectorDeployment, want string) {
	t.Helper()
	if got := fluxdeployerCLI(t, "tree", vd.Name, "-n", vd.Namespace); got != want {
		t.Errorf("fluxdeployer tree %s:\n%s\nwant:\n%s", vd.Name, got, want)
	}
	var root tree.Node
	if err := json.Unmarshal([]byte(fluxdeployerCLI(t, "tree", vd.Name, "-n", vd.Namespace, "-o", "json")), &root); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	if err := tree.Print(&printed, &root); err != nil {
		t.Fatal(err)
	}
	if printed.String() != want {
		t.Errorf("fluxdeployer tree %s -o json, printed:\n%s\nwant:\n%s", vd.Name, printed.String(), want)
	}
}

// fluxdeployerCLI runs the fluxdeployer binary with the admin kubeconfig and returns its standard output.
func fluxdeployerCLI(t *testing.T, args ...string) string {
	t.Helper()
	bin, kubeconfig := adminCLI(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fluxdeployer %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// adminCLI returns the fluxdeployer binary and a kubeconfig file of the cluster's administrator, to run the CLI
// as a user would.
func adminCLI(t *testing.T) (bin, kubeconfig string) {
	t.Helper()
	bin, err := fluxdeployerBinary()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err = controlplane.WriteKubeconfig(t.TempDir(), "kubeconfig", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return bin, kubeconfig
}
