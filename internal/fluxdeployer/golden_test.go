package fluxdeployer

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestGoldenFluxObjects reconciles one ArtifactDeployment per case, each in its own namespace with its own
// configuration, and compares the Flux objects the API server stored (after its CRD validation and CEL rules)
// with testdata/golden/<case>.yaml. Run with -update to rewrite them.
func TestGoldenFluxObjects(t *testing.T) {
	h := testHarness(t)
	helmObjects := func() []client.Object { return []client.Object{&sourcev1.HelmRepository{}, &helmv2.HelmRelease{}} }
	chartRefObjects := func() []client.Object { return []client.Object{&sourcev1.OCIRepository{}, &helmv2.HelmRelease{}} }
	kustomizeObjects := func() []client.Object {
		return []client.Object{&sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}}
	}
	pullSecrets := map[string]string{authenticationSecretRefsKey: "registry.example.com:5000: registry-credentials\n"}

	for _, tc := range []struct {
		name    string
		config  map[string]string
		secrets []string // Secrets that exist in the case's namespace
		// kubeconfigs are kubeconfig Secrets of the case's namespace (name: key) for the allowed remote target
		// remote.example.com.
		kubeconfigs map[string]string
		ad          func(namespace string) *konfidencev1.ArtifactDeployment
		fluxKinds   func() []client.Object
	}{{
		name: "oci-helm-chart",
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com:5000/charts/frontend:1.2.3_build.5")))
		},
		fluxKinds: helmObjects,
	}, {
		// An OCI chart with a digest in the default helmSource: pinned through an OCIRepository all the same.
		name: "oci-helm-chart-pinned",
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			chart := resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com:5000/charts/frontend:1.2.3_build.5"))
			chart.Digest = testDigest
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType, chart)
		},
		fluxKinds: chartRefObjects,
	}, {
		name: "helm-repository",
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "podinfo-6-5-0-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", `{"type":"helm","helmRepository":"https://stefanprodan.github.io/podinfo","helmChart":"podinfo:6.5.0"}`))
		},
		fluxKinds: helmObjects,
	}, {
		name: "oci-kustomize",
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "backend-1-2-3-build-5-e1mvwibzp5", KustomizeManifestType,
				resource("bundle", "kustomize", ociAccess("OCIImage/v1", "oci://registry.example.com/bundles/backend:1.2.3")))
		},
		fluxKinds: kustomizeObjects,
	}, {
		name:   "insecure-registry",
		config: map[string]string{waitKey: "false"},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "backend-1-2-3-build-5-e1mvwibzp5", KustomizeManifestType,
				resource("bundle", "kustomize", ociAccess("ociRegistry", "http://localhost:5000/bundles/backend:1.2.3")))
		},
		fluxKinds: kustomizeObjects,
	}, {
		name: "digest-pinned",
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "backend-1-2-3-build-5-e1mvwibzp5", KustomizeManifestType,
				resource("bundle", "kustomize", ociAccess("ociImage", "registry.example.com/bundles/backend:1.2.3@"+testDigest)))
		},
		fluxKinds: kustomizeObjects,
	}, {
		name:        "remote-target",
		kubeconfigs: map[string]string{"landscape-kubeconfig": "value.yaml"},
		config: map[string]string{
			targetNamespaceKey:   "apps",
			deploymentTargetsKey: "golden-remote-target:\n  secretRef:\n    name: landscape-kubeconfig\n    key: value.yaml\n",
		},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("OCIImage/v1", "registry.example.com:5000/charts/frontend:1.2.3")))
		},
		fluxKinds: helmObjects,
	}, {
		// No deploymentTargets entry, but the conventional kubeconfig Secret exists in the namespace.
		name:        "remote-target-conventional-secret",
		kubeconfigs: map[string]string{"deployment-target-kubeconfig": "value"},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "backend-1-2-3-build-5-e1mvwibzp5", KustomizeManifestType,
				resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
		},
		fluxKinds: kustomizeObjects,
	}, {
		name:    "authenticated-registry-with-secret",
		config:  pullSecrets,
		secrets: []string{"registry-credentials"},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("ociArtifact/v1", "registry.example.com:5000/charts/frontend:1.2.3")))
		},
		fluxKinds: helmObjects,
	}, {
		name:   "authenticated-registry-without-secret",
		config: pullSecrets,
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("ociArtifact/v1", "registry.example.com:5000/charts/frontend:1.2.3")))
		},
		fluxKinds: helmObjects,
	}, {
		name:    "chartref-mode",
		config:  map[string]string{helmSourceKey: HelmSourceChartRef, authenticationSecretRefsKey: "registry.example.com:5000: registry-credentials\n"},
		secrets: []string{"registry-credentials"},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("OCIImage/v1", "registry.example.com:5000/charts/frontend:1.2.3@"+testDigest)))
		},
		fluxKinds: chartRefObjects,
	}, {
		// Flux applies with the tenant's account, not its own rights; the release may create its namespace.
		name:   "service-account-helm",
		config: map[string]string{serviceAccountNameKey: "flux-applier", createNamespaceKey: "true"},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "frontend-1-2-3-build-5-e1mvwibzp5", HelmManifestType,
				resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com:5000/charts/frontend:1.2.3_build.5")))
		},
		fluxKinds: helmObjects,
	}, {
		name:   "service-account-kustomize",
		config: map[string]string{serviceAccountNameKey: "flux-applier"},
		ad: func(ns string) *konfidencev1.ArtifactDeployment {
			return artifactDeployment(ns, "backend-1-2-3-build-5-e1mvwibzp5", KustomizeManifestType,
				resource("bundle", "kustomize", ociAccess("OCIImage/v1", "oci://registry.example.com/bundles/backend:1.2.3")))
		},
		fluxKinds: kustomizeObjects,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "golden-" + tc.name
			h.namespace(t, ns)
			for _, name := range tc.secrets {
				h.create(t, pullSecret(ns, name))
			}
			for name, key := range tc.kubeconfigs {
				h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Data: map[string][]byte{key: []byte(remoteExampleKubeconfig)}})
			}
			if name := tc.config[serviceAccountNameKey]; name != "" {
				h.create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
			}
			h.configMap(t, ns, tc.config)
			r, recorder := h.direct(ns)
			r.remote.AllowedTargetHosts = []string{"remote.example.com"}
			ad := tc.ad(ns)
			h.create(t, ad)
			got, err := h.reconcile(t, r, ad)
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, metav1.ConditionUnknown, "Progressing")
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
			}
			// Creating the Flux objects of a new ArtifactDeployment is no event; its status says it.
			if evs := drainEvents(recorder); len(evs) != 0 {
				t.Errorf("events %q, want none for creating the Flux objects", evs)
			}

			var stored []client.Object
			for _, obj := range tc.fluxKinds() {
				h.get(t, ns, ad.Name, obj)
				stored = append(stored, obj)
			}
			compareGolden(t, h.env.Scheme, filepath.Join("testdata", "golden", tc.name+".yaml"), stored)

			// Reconciling unchanged input again writes nothing: no apply, no status patch, no event.
			h.assertReconcileOnlyReads(t, r, ad)
			if evs := drainEvents(recorder); len(evs) != 0 {
				t.Errorf("second reconcile emitted events %q", evs)
			}
		})
	}
}

// remoteExampleKubeconfig is a tenant's kubeconfig for the remote target remote.example.com.
const remoteExampleKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: remote, cluster: {server: "https://remote.example.com:6443"}}]
users: [{name: tenant, user: {token: tenant-token}}]
contexts: [{name: remote, context: {cluster: remote, user: tenant}}]
current-context: remote
`

// assertReconcileOnlyReads reconciles ad once more, through a client that counts requests, and fails on any write.
// r reads through that client afterwards.
func (h *harness) assertReconcileOnlyReads(t *testing.T, r *Reconciler, ad *konfidencev1.ArtifactDeployment) {
	t.Helper()
	counter := &testenv.RequestRecorder{}
	c, err := client.New(counter.Wrap(h.env.Config), client.Options{Scheme: h.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r.client, r.apiReader, r.config.reader, r.serviceReader = c, c, c, c
	if _, err := h.reconcile(t, r, ad); err != nil {
		t.Fatal(err)
	}
	requests := counter.Take()
	if len(requests) == 0 {
		t.Fatal("the counting client saw no requests")
	}
	for _, req := range requests {
		if !strings.HasPrefix(req, "GET ") {
			t.Errorf("reconcile of unchanged input wrote: %s", req)
		}
	}
}

// compareGolden renders objects as YAML without what the API server assigns (UIDs, versions, timestamps,
// managed fields, status) and compares them with the file.
func compareGolden(t *testing.T, scheme *runtime.Scheme, file string, objs []client.Object) {
	t.Helper()
	var buf bytes.Buffer
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Fatal(err)
		}
		u.SetGroupVersionKind(gvk)
		delete(u.Object, "status")
		for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
			unstructured.RemoveNestedField(u.Object, "metadata", f)
		}
		refs := u.GetOwnerReferences()
		for i := range refs {
			refs[i].UID = "<uid of the ArtifactDeployment>"
		}
		u.SetOwnerReferences(refs)
		// The digest is a hash of the fields above; the files pin the fields.
		if a := u.GetAnnotations(); a[appliedDigestAnnotation] != "" {
			a[appliedDigestAnnotation] = "<digest>"
			u.SetAnnotations(a)
		}
		y, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", file, want, buf.String())
	}
}
