package fluxdeployer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestEndToEnd runs the deployer in a manager, as the binary does, with Flux's status writes played by the test
// (no Flux controllers run here): the watches, the caches and the request count of a steady-state reconcile.
func TestEndToEnd(t *testing.T) {
	h := testHarness(t)
	const ns = "e2e"
	h.namespace(t, ns)
	h.configMap(t, "e2e", map[string]string{retriesKey: "2"})

	counter := &testenv.RequestRecorder{}
	r := h.startDeployer(t, counter.Wrap(h.env.Config), "e2e")
	ctx := context.Background()

	name53 := "frontend-with-a-long-basename-1-2-3-build-e1mvwibzp5"
	name53 = name53[:len(name53)-len("-e1mvwibzp5")] + strings.Repeat("x", 53-len(name53)) + "-e1mvwibzp5"
	if len(name53) != 53 {
		t.Fatalf("test name has %d characters", len(name53))
	}
	ad53 := artifactDeployment(ns, name53, HelmManifestType,
		resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))

	t.Run("53-character name end to end", func(t *testing.T) {
		counter.Take()
		h.create(t, ad53)
		hr := &helmv2.HelmRelease{}
		testenv.Eventually(t, 30*time.Second, func() error {
			return h.env.Client.Get(ctx, client.ObjectKeyFromObject(ad53), hr)
		})
		if hr.Spec.ReleaseName != name53 {
			t.Errorf("releaseName %q, want %q", hr.Spec.ReleaseName, name53)
		}
		waitForReady(t, h, ad53, Unknown, meta.ProgressingReason)
		// The requests of the first reconcile(s): the applies, the status patch and the events are the writes.
		var writes []string
		for _, req := range counter.Take() {
			if !strings.HasPrefix(req, "GET ") {
				writes = append(writes, req)
			}
		}
		t.Logf("creating the Flux objects took %d write requests: %q", len(writes), writes)
		for _, want := range []string{"/helmrepositories/" + name53, "/helmreleases/" + name53} {
			if !slices.ContainsFunc(writes, func(w string) bool { return strings.HasPrefix(w, "PATCH ") && strings.HasSuffix(w, want) }) {
				t.Errorf("no apply of %s among %q", want, writes)
			}
		}

		// What helm-controller and source-controller would do: create and pull the HelmChart, install the release.
		chart := &sourcev1.HelmChart{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + "-" + name53, Labels: map[string]string{helmNameLabel: name53, helmNamespaceLabel: ns}},
			Spec: sourcev1.HelmChartSpec{Chart: "frontend", Version: "1.2.3", Interval: metav1.Duration{Duration: 10 * time.Minute},
				SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: name53}},
		}
		h.create(t, chart)
		testenv.SetFluxStatus(t, h.env.Client, chart, cond(meta.ReadyCondition, True, sourcev1.ChartPullSucceededReason, "pulled"))
		// The release's objects, among them the Service that becomes the deployment result.
		installed := func() {
			hr.Status.Inventory = &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{
				{ID: ns + "_frontend_apps_Deployment", Version: "v1"}, {ID: ns + "_frontend__Service", Version: "v1"}}}
		}
		testenv.Eventually(t, time.Minute, func() error {
			return testenv.UpdateFluxStatus(ctx, h.env.Client, hr, installed,
				cond(meta.ReadyCondition, True, helmv2.InstallSucceededReason, "Helm install succeeded"),
				cond(helmv2.ReleasedCondition, True, helmv2.InstallSucceededReason, "Helm install succeeded"))
		})
		waitForReady(t, h, ad53, True, meta.SucceededReason)

		// A Service the chart renders appears later: the Service watch brings it into the results.
		h.create(t, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "frontend", Labels: map[string]string{
				konfidencev1.ArtifactDeploymentLabel: name53, helmNameLabel: name53, helmNamespaceLabel: ns,
			}, Annotations: map[string]string{konfidencev1.DeploymentResultLabel: "frontend"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		})
		testenv.Eventually(t, 30*time.Second, func() error {
			got := &konfidencev1.ArtifactDeployment{}
			h.get(t, ns, name53, got)
			var names []string
			for _, r := range got.Status.DeploymentResult {
				names = append(names, r.Name)
			}
			return differs("deployment results", []string{"frontend"}, names)
		})
	})

	t.Run("60-character name is InvalidName", func(t *testing.T) {
		// Its own hash: one hash is one claim in a namespace, and this one must not take the 53-character one's.
		name60 := strings.Repeat("a", 49) + "-a60chrname"
		ad := artifactDeployment(ns, name60, HelmManifestType, resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
		h.create(t, ad)
		waitForReady(t, h, ad, False, konfidencev1.InvalidNameReason)
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, ns, name60, got)
		assertCondition(t, got, meta.StalledCondition, True, konfidencev1.InvalidNameReason)
		if err := h.env.Client.Get(ctx, client.ObjectKeyFromObject(ad), &helmv2.HelmRelease{}); !apierrors.IsNotFound(err) {
			t.Errorf("HelmRelease for an invalid name: %v", err)
		}
	})

	t.Run("a second reconcile only looks up the configured Secrets", func(t *testing.T) {
		req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad53)}
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		// The second reconcile reads what the first wrote from the cache: it must have arrived there (a status
		// computed from a stale read is written again, however equal to the stored one).
		testenv.Eventually(t, 30*time.Second, func() error {
			for _, obj := range []client.Object{&konfidencev1.ArtifactDeployment{}, &helmv2.HelmRelease{}} {
				stored, cached := obj.DeepCopyObject().(client.Object), obj
				if err := h.env.Client.Get(ctx, req.NamespacedName, stored); err != nil {
					return err
				}
				if err := r.client.Get(ctx, req.NamespacedName, cached); err != nil {
					return err
				}
				if stored.GetResourceVersion() != cached.GetResourceVersion() {
					return fmt.Errorf("cache holds %T %s at resourceVersion %s, the API server %s", obj, req.Name, cached.GetResourceVersion(), stored.GetResourceVersion())
				}
			}
			return nil
		})
		counter.Take()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		// The manager also reconciles the other tests' ArtifactDeployments on this API server, whenever their
		// state changes: only this namespace's requests belong to the reconcile under test. Secrets are not
		// cached (the operator may not list them), so the conventional kubeconfig Secret is looked up by name.
		var requests []string
		for _, req := range counter.Take() {
			if strings.Contains(req, "/namespaces/"+ns+"/") && req != "GET /api/v1/namespaces/"+ns+"/secrets/deployment-target-kubeconfig" {
				requests = append(requests, req)
			}
		}
		if len(requests) != 0 {
			t.Errorf("steady-state reconcile issued %d API requests: %q", len(requests), requests)
		}
	})

	t.Run("configuration change updates and leaves other writers' fields", func(t *testing.T) {
		// Another writer owns spec.maxHistory, which tunes helm-controller and changes nothing that is deployed
		// (fields that do are the deployer's: see TestForeignFields).
		history := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": helmv2.GroupVersion.String(), "kind": helmv2.HelmReleaseKind,
			"metadata": map[string]any{"name": name53, "namespace": ns},
			"spec":     map[string]any{"maxHistory": int64(7)},
		}}
		if err := h.env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(history), client.FieldOwner("platform-team")); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{}
		h.get(t, configNamespace, "e2e", cm)
		cm.Data = map[string]string{retriesKey: "2", intervalKey: "20m"}
		if err := h.env.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		hr := &helmv2.HelmRelease{}
		testenv.Eventually(t, 30*time.Second, func() error {
			h.get(t, ns, name53, hr)
			if hr.Spec.Interval.Duration != 20*time.Minute {
				return fmt.Errorf("interval %s", hr.Spec.Interval.Duration)
			}
			return nil
		})
		if diff := cmp.Diff(ptr.To(7), hr.Spec.MaxHistory); diff != "" {
			t.Errorf("maxHistory of another writer lost (-want +got):\n%s", diff)
		}
		managers := map[string]bool{}
		for _, f := range hr.ManagedFields {
			managers[f.Manager] = true
		}
		got := map[string]bool{FieldManager: managers[FieldManager], "platform-team": managers["platform-team"]}
		if diff := cmp.Diff(map[string]bool{FieldManager: true, "platform-team": true}, got); diff != "" {
			t.Errorf("field managers (-want +got):\n%s", diff)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			evs := &corev1.EventList{}
			if err := h.env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == konfidencev1.FluxObjectUpdatedReason && e.InvolvedObject.Name == name53 && strings.Contains(e.Message, "HelmRelease") {
					return nil
				}
			}
			return fmt.Errorf("no %s event for the HelmRelease among %d events", konfidencev1.FluxObjectUpdatedReason, len(evs.Items))
		})
	})
	t.Run("pull Secret referenced while it exists", func(t *testing.T) {
		cm := &corev1.ConfigMap{}
		h.get(t, configNamespace, "e2e", cm)
		cm.Data[authenticationSecretRefsKey] = "registry.example.com: pull-secret\n"
		// Secrets are not watched: a Secret that appears or goes away is noticed at the next interval.
		cm.Data[intervalKey] = "1s"
		if err := h.env.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		secretRef := func(want string) func() error {
			return func() error {
				repo := &sourcev1.HelmRepository{}
				h.get(t, ns, name53, repo)
				got := ""
				if repo.Spec.SecretRef != nil {
					got = repo.Spec.SecretRef.Name
				}
				if got != want {
					return fmt.Errorf("secretRef %q, want %q", got, want)
				}
				return nil
			}
		}
		// Configured but absent: no secretRef, so anonymous pulls keep working.
		testenv.Eventually(t, 30*time.Second, secretRef(""))
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
		h.create(t, secret)
		testenv.Eventually(t, 30*time.Second, secretRef("pull-secret"))
		// Gone again: the apply drops the field (the applied digest changes although every other field is equal).
		if err := h.env.Client.Delete(ctx, secret); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, secretRef(""))
	})
}

func waitForReady(t *testing.T, h *harness, ad *konfidencev1.ArtifactDeployment, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, ad.Namespace, ad.Name, got)
		c := conditions.Get(got, meta.ReadyCondition)
		if c == nil {
			return fmt.Errorf("no Ready condition, want %s/%s", status, reason)
		}
		return differs("Ready (message "+c.Message+")", []any{status, reason}, []any{c.Status, c.Reason})
	})
}
