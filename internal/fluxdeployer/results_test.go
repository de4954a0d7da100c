package fluxdeployer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestDeploymentResults: annotated Services of a deployment become its results, two Services claiming one
// result name are refused, a remote target's Services are read through its kubeconfig, and in a shared target
// namespace a Service that carries the deployment's label but is not in its Kustomization's inventory (another
// tenant's) is no result.
func TestDeploymentResults(t *testing.T) {
	h := testHarness(t)
	// service is what kustomize-controller applies from a bundle, with the deployer's commonMetadata label and the
	// nameSuffix.
	service := func(ns, name, adName, result string, ports ...corev1.ServicePort) *corev1.Service {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
				konfidencev1.ArtifactDeploymentLabel: adName, kustomizeNamespaceLabel: ns,
			}},
			Spec: corev1.ServiceSpec{Ports: ports},
		}
		if result != "-" {
			svc.Annotations = map[string]string{konfidencev1.DeploymentResultLabel: result}
		}
		return svc
	}
	http := corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}
	grpc := corev1.ServicePort{Name: "grpc", Port: 9090, Protocol: corev1.ProtocolTCP}

	t.Run("from annotated Services", func(t *testing.T) {
		ns := "results"
		h.namespace(t, ns)
		h.configMap(t, ns, nil)
		r, _ := h.direct(ns)
		ad := deployed(t, h, r, ns, serviceID(ns, "api-1-2-3-e1mvwibzp5"), serviceID(ns, "web-1-2-3-e1mvwibzp5"),
			serviceID(ns, "metrics-1-2-3-e1mvwibzp5"), ns+"_web-1-2-3-e1mvwibzp5_apps_Deployment")
		h.create(t,
			service(ns, "api-1-2-3-e1mvwibzp5", ad.Name, "api", http, grpc),
			service(ns, "web-1-2-3-e1mvwibzp5", ad.Name, "", http),             // empty: the Service's name
			service(ns, "metrics-1-2-3-e1mvwibzp5", ad.Name, "-", http),        // not a result
			service(ns, "other-1-2-3-e1mvwibzp5", "someone-else", "api", http), // another deployment's
		)
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, konfidencev1.DeploymentResultCreatedCondition, True, meta.SucceededReason)
		assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
		assertResults(t, got, map[string]serviceResultSpec{
			"api": {Namespace: ns, K8sName: "api-1-2-3-e1mvwibzp5", Ports: []servicePort{
				{Name: "http", Port: 80, Protocol: "TCP"}, {Name: "grpc", Port: 9090, Protocol: "TCP"}}},
			"web-1-2-3-e1mvwibzp5": {Namespace: ns, K8sName: "web-1-2-3-e1mvwibzp5", Ports: []servicePort{{Name: "http", Port: 80, Protocol: "TCP"}}},
		})
	})

	t.Run("duplicate result names", func(t *testing.T) {
		ns := "results-duplicate"
		h.namespace(t, ns)
		h.configMap(t, ns, nil)
		r, recorder := h.direct(ns)
		ad := deployed(t, h, r, ns, serviceID(ns, "api-a"), serviceID(ns, "api-b"))
		h.create(t, service(ns, "api-a", ad.Name, "api", http), service(ns, "api-b", ad.Name, "api", http))
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatalf("a duplicate is terminal, not retried: %v", err)
		}
		assertResultsRefused(t, got, konfidencev1.DuplicateDeploymentResultReason)
		if len(got.Status.DeploymentResult) != 0 {
			t.Errorf("results recorded despite the duplicate: %+v", got.Status.DeploymentResult)
		}
		assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.DuplicateDeploymentResultReason)
	})

	t.Run("a Service the cache has not seen yet", func(t *testing.T) {
		ns := "results-lagging-cache"
		h.namespace(t, ns)
		h.configMap(t, ns, nil)
		r, _ := h.direct(ns)
		// The Flux object reports the Service applied before the deployer's cache has seen it.
		r.serviceReader = laggingCache{r.serviceReader}
		ad := deployed(t, h, r, ns, serviceID(ns, "api-1-2-3-e1mvwibzp5"))
		h.create(t, service(ns, "api-1-2-3-e1mvwibzp5", ad.Name, "api", http))
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
		assertResults(t, got, map[string]serviceResultSpec{
			"api": {Namespace: ns, K8sName: "api-1-2-3-e1mvwibzp5", Ports: []servicePort{{Name: "http", Port: 80, Protocol: "TCP"}}},
		})
	})

	t.Run("remote target through its kubeconfig", func(t *testing.T) {
		ns := "results-remote"
		h.namespace(t, ns)
		h.namespace(t, "remote-apps")
		// The "remote" cluster is this API server, reached only through the kubeconfig in the Secret.
		h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"},
			Data: map[string][]byte{"value": kubeconfig(t, h)}})
		h.configMap(t, ns, map[string]string{
			targetNamespaceKey:   "remote-apps",
			deploymentTargetsKey: ns + ":\n  secretRef:\n    name: landscape\n",
		})
		r, _ := h.direct(ns)
		r.serviceReader = unusableReader{t}
		r.remote.AllowedTargetHosts = []string{loopback}
		ad := deployed(t, h, r, ns, serviceID("remote-apps", "api-1-2-3-e1mvwibzp5"))
		h.create(t, service("remote-apps", "api-1-2-3-e1mvwibzp5", ad.Name, "api", http))
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
		assertResults(t, got, map[string]serviceResultSpec{
			"api": {Namespace: "remote-apps", K8sName: "api-1-2-3-e1mvwibzp5", Ports: []servicePort{{Name: "http", Port: 80, Protocol: "TCP"}}},
		})
	})

	t.Run("another tenant's Service in a shared target namespace", func(t *testing.T) {
		ns := "results-shared"
		h.namespace(t, ns)
		h.namespace(t, "shared-apps")
		h.configMap(t, ns, map[string]string{targetNamespaceKey: "shared-apps"})
		r, _ := h.direct(ns)
		// Every ArtifactDeployment of this name would deploy into the shared namespace with this configuration:
		// the older ones of the other subtests would hold the claim on its names.
		ad := deployedAs(t, h, r, ns, "backend-1-2-3-sh4r3dt3nt", serviceID("shared-apps", "api-1-2-3-sh4r3dt3nt"))
		// Another tenant deploys into the same namespace Services labelled with this deployment's name: one
		// claims its result name, one adds a result.
		h.create(t,
			service("shared-apps", "api-1-2-3-sh4r3dt3nt", ad.Name, "api", http),
			service("shared-apps", "impostor", ad.Name, "api", http),
			service("shared-apps", "admin", ad.Name, "admin", grpc),
		)
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
		assertResults(t, got, map[string]serviceResultSpec{
			"api": {Namespace: "shared-apps", K8sName: "api-1-2-3-sh4r3dt3nt", Ports: []servicePort{{Name: "http", Port: 80, Protocol: "TCP"}}},
		})
	})
}

// serviceID is a Service's ID in a Flux inventory.
func serviceID(namespace, name string) string { return namespace + "_" + name + "__Service" }

// deployed creates a kustomize ArtifactDeployment whose Flux objects report success, the Kustomization having
// applied the objects of the inventory IDs, so that the next reconcile collects its results.
func deployed(t *testing.T, h *harness, r *Reconciler, ns string, inventory ...string) *konfidencev1.ArtifactDeployment {
	t.Helper()
	return deployedAs(t, h, r, ns, "backend-1-2-3-e1mvwibzp5", inventory...)
}

// deployedAs is deployed with the ArtifactDeployment's name.
func deployedAs(t *testing.T, h *harness, r *Reconciler, ns, name string, inventory ...string) *konfidencev1.ArtifactDeployment {
	t.Helper()
	ad := artifactDeployment(ns, name, KustomizeManifestType,
		resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
	h.create(t, ad)
	if _, err := h.reconcile(t, r, ad); err != nil {
		t.Fatal(err)
	}
	h.deployedStatus(t, ad, inventory...)
	return ad
}

// deployedStatus writes the status source-controller and kustomize-controller report once ad is deployed, the
// Kustomization's inventory listing the objects of the IDs.
func (h *harness) deployedStatus(t *testing.T, ad *konfidencev1.ArtifactDeployment, inventory ...string) {
	t.Helper()
	testenv.SetFluxStatus(t, h.env.Client, &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}},
		cond(meta.ReadyCondition, True, meta.SucceededReason, "stored artifact"))
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}}
	applied := func() {
		ks.Status.Inventory = &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{}}
		for _, id := range inventory {
			ks.Status.Inventory.Entries = append(ks.Status.Inventory.Entries, kustomizev1.ResourceRef{ID: id, Version: "v1"})
		}
	}
	testenv.Eventually(t, time.Minute, func() error {
		return testenv.UpdateFluxStatus(context.Background(), h.env.Client, ks, applied,
			cond(meta.ReadyCondition, True, meta.ReconciliationSucceededReason, "Applied revision: 1.2.3"),
			cond(meta.HealthyCondition, True, meta.SucceededReason, "Health check passed"))
	})
}

// assertResultsRefused fails unless ad's deployment results were refused for good with the reason.
func assertResultsRefused(t *testing.T, ad *konfidencev1.ArtifactDeployment, reason string) {
	t.Helper()
	assertCondition(t, ad, konfidencev1.DeploymentResultCreatedCondition, False, reason)
	assertCondition(t, ad, meta.ReadyCondition, False, reason)
	assertCondition(t, ad, meta.StalledCondition, True, reason)
}

func assertResults(t *testing.T, ad *konfidencev1.ArtifactDeployment, want map[string]serviceResultSpec) {
	t.Helper()
	if len(ad.Status.DeploymentResult) != len(want) {
		t.Errorf("results %+v, want %d", ad.Status.DeploymentResult, len(want))
	}
	for _, res := range ad.Status.DeploymentResult {
		var spec serviceResultSpec
		if err := json.Unmarshal(res.Spec.Raw, &spec); err != nil {
			t.Fatal(err)
		}
		w, ok := want[res.Name]
		if !ok || res.Type != ServiceResultType {
			t.Errorf("unexpected result %s of type %s", res.Name, res.Type)
			continue
		}
		gotJSON, _ := json.Marshal(spec)
		wantJSON, _ := json.Marshal(w)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("result %s: %s, want %s", res.Name, gotJSON, wantJSON)
		}
	}
}

// kubeconfig renders the test API server's admin credentials as a kubeconfig file.
func kubeconfig(t *testing.T, h *harness) []byte {
	t.Helper()
	return write(t, kubeconfigConfig(h))
}

// laggingCache is a cache that has not yet seen any Service: it lists none.
type laggingCache struct{ client.Reader }

func (laggingCache) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if _, ok := list.(*corev1.ServiceList); !ok {
		return fmt.Errorf("laggingCache lists only Services, not %T", list)
	}
	return nil
}

// unusableReader fails the test when the local cluster is read where only the remote one may be.
type unusableReader struct{ t *testing.T }

func (u unusableReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	u.t.Error("read the local cluster for a remote target")
	return errors.New("unusable")
}

func (u unusableReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	u.t.Error("listed the local cluster for a remote target")
	return errors.New("unusable")
}
