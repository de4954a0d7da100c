package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
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

const helmType = "cloud.konfidence.flux.helm"

// helmArtifact pushes the chart to the registry and returns an artifact component whose helmChart resource
// names it.
func helmArtifact(t *testing.T, reg *ocmtest.Registry, component, version string, reuse bool, chart ocmtest.Chart) ocmtest.ComponentVersion {
	t.Helper()
	ref, err := ocmtest.PushHelmChart(context.Background(), reg.Host, "charts", chart)
	if err != nil {
		t.Fatal(err)
	}
	a := ocmtest.Artifact(component, version, helmType, reuse)
	a.Resources[1] = ocmtest.ChartResource(chart.Version, ref)
	return a
}

func adName(t *testing.T, a ocmtest.ComponentVersion, vd *konfidencev1.VectorDeployment) string {
	t.Helper()
	uid := ""
	if vd != nil {
		uid = string(vd.UID)
	}
	name, _, err := naming.ArtifactDeploymentName(a.Name, a.Version, uid, 0)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// releases lists the Helm releases stored in a namespace as name → revisions, from helm-controller's storage
// Secrets (Helm's own record, whatever the HelmRelease says).
func releases(t *testing.T, namespace string) map[string][]string {
	t.Helper()
	secrets := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), secrets, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range secrets.Items {
		out[s.Labels["name"]] = append(out[s.Labels["name"]], s.Labels["version"])
	}
	return out
}

// TestHelmPaths installs a chart through each Helm source mode with the real helm-controller, the workloads in a
// configured target namespace, and checks what Helm itself recorded: the release is named like the
// ArtifactDeployment, stored in the target namespace, its objects carry the name and the deployer's label, and
// the Service's deployment result reaches both custom resources, while a Service another tenant labelled with
// the same name (not in the HelmRelease's inventory) is no result. Every condition comes from Flux's own status.
func TestHelmPaths(t *testing.T) {
	for _, mode := range []string{"helmRepository", "chartRef"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			reg := newRegistry(t)
			frontend := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.2.3+build.5", true, ocmtest.WebChart("frontend", "1.2.3+build.5"))
			reg.Push(t, "", frontend, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend))

			ns := newNamespace(t, "helm")
			target := newNamespace(t, "apps")
			name := adName(t, frontend, nil)
			// Another tenant of the shared target namespace labels a Service of its own with this deployment's
			// name and claims its result: neither a result nor a clash, since the release did not deploy it.
			impostor := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "impostor", Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: name},
					Annotations: map[string]string{konfidencev1.DeploymentResultLabel: "web"}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
			}
			if err := env.Client.Create(ctx, impostor); err != nil {
				t.Fatal(err)
			}
			startFluxdeployer(t, map[string]string{"helmSource": mode, "targetNamespace": target})
			vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
			t.Logf("Helm path (%s): VectorDeployment Ready %s after creation", mode, waitReady(t, 3*time.Minute, vd).Round(100*time.Millisecond))

			// On an existing cluster (E2E_KUBECONFIG) the installed operator may have applied the HelmRelease
			// before it saw this test's configuration; it re-applies on the ConfigMap change, so wait for that.
			hr := &helmv2.HelmRelease{}
			testenv.Eventually(t, 2*time.Minute, func() error {
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hr); err != nil {
					return err
				}
				if hr.Spec.ReleaseName != name || hr.Spec.StorageNamespace != target || !conditions.IsReady(hr) || hr.Status.ObservedGeneration != hr.Generation {
					return fmt.Errorf("HelmRelease: releaseName %q, storageNamespace %q, Ready %+v", hr.Spec.ReleaseName, hr.Spec.StorageNamespace, conditions.Get(hr, "Ready"))
				}
				return nil
			})
			waitReady(t, time.Minute, vd)
			ad := &konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			waitReady(t, time.Minute, ad)
			// The chart carries a kubeVersion constraint, as most public charts do: helm-controller installed it
			// against the control plane's reported version.
			assertNoWarnings(t, ns)
			for _, c := range []string{konfidencev1.ArtifactFetchedCondition, konfidencev1.ArtifactDeployedCondition, konfidencev1.AppHealthyCondition} {
				if !conditions.IsTrue(ad, c) {
					t.Errorf("ArtifactDeployment condition %s: %+v", c, conditions.Get(ad, c))
				}
			}
			var source client.Object = &sourcev1.HelmRepository{}
			if mode == "chartRef" {
				source = &sourcev1.OCIRepository{}
				if hr.Spec.ChartRef == nil {
					t.Errorf("chartRef mode: HelmRelease without chartRef: %+v", hr.Spec)
				}
			}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, source); err != nil {
				t.Errorf("%T %s: %v", source, name, err)
			}

			// What Helm recorded: one release of that name, in the storage namespace, at revision 1.
			if got := releases(t, target); !slices.Equal(got[name], []string{"1"}) || len(got) != 1 {
				t.Errorf("Helm releases in %s: %v, want only %s at revision 1", target, got, name)
			}
			if got := releases(t, ns); len(got) != 0 {
				t.Errorf("Helm releases stored in the ArtifactDeployment's namespace %s: %v", ns, got)
			}
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: target, Name: name + "-config"}, cm); err != nil {
				t.Fatalf("ConfigMap rendered from the release name: %v", err)
			}
			if cm.Data["release"] != name || cm.Labels[konfidencev1.ArtifactDeploymentLabel] != name {
				t.Errorf("ConfigMap %s: data %v, labels %v", cm.Name, cm.Data, cm.Labels)
			}

			// The Service is the deployment result, on the ArtifactDeployment and the VectorDeployment.
			svc := &corev1.Service{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: target, Name: name}, svc); err != nil {
				t.Fatal(err)
			}
			if svc.Labels[konfidencev1.ArtifactDeploymentLabel] != name {
				t.Errorf("Service labels %v", svc.Labels)
			}
			want := fmt.Sprintf(`[{"name":"web","type":"http-k8s-service","spec":{"k8sName":%q,"namespace":%q,"ports":[{"name":"http","port":80,"protocol":"TCP"}]}}]`, name, target)
			if got := resultsJSON(t, ad.Status.DeploymentResult); got != want {
				t.Errorf("ArtifactDeployment deployment results:\n got %s\nwant %s", got, want)
			}
			// The VectorDeployment gathers its ArtifactDeployments' results when one of them changes, which may be
			// after it became Ready.
			testenv.Eventually(t, 30*time.Second, func() error {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
					return err
				}
				if got := resultsJSON(t, vd.Status.DeploymentResults[frontend.Name]); got != want {
					return fmt.Errorf("VectorDeployment deployment results of %s:\n got %s\nwant %s", frontend.Name, got, want)
				}
				return nil
			})
			sourceLine := "HelmRepository/" + name // OCI HelmRepositories have no status
			if mode == "chartRef" {
				sourceLine = "OCIRepository/" + name + "  Ready=True Succeeded"
			}
			assertTree(t, vd, fmt.Sprintf(`VectorDeployment/shop  Ready=True Succeeded
└── ArtifactDeployment/%[1]s  Ready=True Succeeded
    ├── %[2]s
    └── HelmRelease/%[1]s  Ready=True InstallSucceeded
        ├── ConfigMap/%[1]s-config
        └── Service/%[1]s
`, name, sourceLine))
		})
	}
}

func resultsJSON(t *testing.T, results []konfidencev1.DeploymentResult) string {
	t.Helper()
	b, err := json.Marshal(results)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHelmReuseAndTeardown: two VectorDeployments of one vector in one namespace. The reusable chart is installed
// once; the non-reusable one twice, under two release names side by side. Deleting a VectorDeployment has the
// garbage collector remove its ArtifactDeployments and helm-controller uninstall their releases; the shared
// release stays until the last VectorDeployment is gone.
func TestHelmReuseAndTeardown(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	shared := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.0.0", true, ocmtest.WebChart("frontend", "1.0.0"))
	private := helmArtifact(t, reg, "acme.org/artifacts/database", "16.4.0", false, ocmtest.WebChart("database", "16.4.0"))
	reg.Push(t, "", shared, private, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", shared, private))

	ns := newNamespace(t, "reuse")
	startFluxdeployer(t, nil)
	vds := map[string]*konfidencev1.VectorDeployment{}
	for _, name := range []string{"a", "b"} {
		vds[name] = createVectorDeployment(t, ns, name, reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	}
	for _, vd := range vds {
		waitReady(t, 3*time.Minute, vd)
	}
	sharedName, privateA, privateB := adName(t, shared, nil), adName(t, private, vds["a"]), adName(t, private, vds["b"])
	want := map[string][]string{sharedName: {"1"}, privateA: {"1"}, privateB: {"1"}}
	if got := releases(t, ns); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Helm releases: %v, want %v (the shared chart once, the private one per VectorDeployment)", got, want)
	}
	for _, name := range []string{privateA, privateB} {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-config"}, cm); err != nil || cm.Data["release"] != name {
			t.Errorf("ConfigMap of release %s: %v, data %v", name, err, cm.Data)
		}
	}

	gone := func(names ...string) func() error {
		return func() error {
			for _, name := range names {
				for _, obj := range []client.Object{&konfidencev1.ArtifactDeployment{}, &helmv2.HelmRelease{}, &corev1.ConfigMap{}} {
					key := client.ObjectKey{Namespace: ns, Name: name}
					if _, ok := obj.(*corev1.ConfigMap); ok {
						key.Name += "-config"
					}
					if err := env.Client.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
						return fmt.Errorf("%T %s still there (%v)", obj, key.Name, err)
					}
				}
				if r := releases(t, ns)[name]; len(r) > 0 {
					return fmt.Errorf("release %s still stored: %v", name, r)
				}
			}
			return nil
		}
	}
	deleteBackground := func(vd *konfidencev1.VectorDeployment) {
		t.Helper()
		if err := env.Client.Delete(ctx, vd, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}

	deleteBackground(vds["a"])
	testenv.Eventually(t, 2*time.Minute, gone(privateA))
	if got := releases(t, ns); fmt.Sprint(got) != fmt.Sprint(map[string][]string{sharedName: {"1"}, privateB: {"1"}}) {
		t.Fatalf("after deleting a: Helm releases %v, want %s and %s untouched", got, sharedName, privateB)
	}

	deleteBackground(vds["b"])
	testenv.Eventually(t, 2*time.Minute, gone(sharedName, privateB))
}

// TestFailingChartFailsAlone: a chart whose template is not YAML fails to install; helm-controller's reason and
// message reach its ArtifactDeployment and the VectorDeployment, while the vector's other chart is installed.
func TestFailingChartFailsAlone(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	good := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.0.0", true, ocmtest.WebChart("frontend", "1.0.0"))
	broken := helmArtifact(t, reg, "acme.org/artifacts/broken", "0.1.0", true, ocmtest.Chart{Name: "broken", Version: "0.1.0",
		Files: map[string]string{"templates/broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata: [unclosed\n"}})
	reg.Push(t, "", good, broken, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", good, broken))

	ns := newNamespace(t, "failing")
	startFluxdeployer(t, nil)
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	goodName, brokenName := adName(t, good, nil), adName(t, broken, nil)

	brokenAD := &konfidencev1.ArtifactDeployment{}
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: brokenName}, brokenAD); err != nil {
			return err
		}
		c := conditions.Get(brokenAD, konfidencev1.ArtifactDeployedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != helmv2.InstallFailedReason {
			return fmt.Errorf("ArtifactDeployed of %s: %+v", brokenName, c)
		}
		return nil
	})
	deployed := conditions.Get(brokenAD, konfidencev1.ArtifactDeployedCondition)
	if !strings.Contains(deployed.Message, "broken.yaml") {
		t.Errorf("ArtifactDeployed message does not name the failing template: %q", deployed.Message)
	}
	if ready := conditions.Get(brokenAD, konfidencev1.ReadyCondition); ready == nil || ready.Status != metav1.ConditionFalse || ready.Message == "" {
		t.Errorf("Ready of %s: %+v", brokenName, ready)
	}

	goodAD := &konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: goodName}}
	waitReady(t, 3*time.Minute, goodAD)
	testenv.Eventually(t, time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		ready := conditions.Get(vd, konfidencev1.ReadyCondition)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason == "Progressing" ||
			!strings.Contains(ready.Message, "1/2 artifacts ready") || !strings.Contains(ready.Message, brokenName) || !strings.Contains(ready.Message, "broken.yaml") {
			return fmt.Errorf("VectorDeployment Ready does not carry the failure: %+v", ready)
		}
		return nil
	})
	if got := releases(t, ns); len(got[goodName]) != 1 {
		t.Errorf("the good chart's release: %v", got)
	}
}
