package fluxdeployer

import (
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestConfigurationFailsSmall: a bad edit of the ConfigMap stops nothing: an unknown key or a bad value keeps the
// last good configuration deploying, reported once, on the ConfigMap (a Warning event with the key meant) and in
// the metric, not in the ArtifactDeployments' status. Only a process that never read a good configuration refuses,
// with a short message, and deletes nothing.
func TestConfigurationFailsSmall(t *testing.T) {
	h := testHarness(t)
	ns := "config-fails-small"
	h.namespace(t, ns)
	h.configMap(t, ns, map[string]string{intervalKey: "7m"})
	r, recorder := h.direct(ns)
	ad := artifactDeployment(ns, "frontend-1-2-3-e1mvwibzp5", HelmManifestType,
		resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
	h.create(t, ad)
	interval := func() time.Duration {
		t.Helper()
		hr := &helmv2.HelmRelease{}
		h.get(t, ns, ad.Name, hr)
		return hr.Spec.Interval.Duration
	}
	problems := func(reason string) float64 { return testutil.ToFloat64(configProblems.WithLabelValues(reason)) }
	edit := func(data map[string]string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		h.get(t, configNamespace, ns, cm)
		cm.Data = data
		if err := h.env.Client.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	reconcile := func(r *Reconciler) *konfidencev1.ArtifactDeployment {
		t.Helper()
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	assertNotStopped := func(got *konfidencev1.ArtifactDeployment) {
		t.Helper()
		if c := conditionOf(got, meta.StalledCondition); c != nil || interval() != 7*time.Minute {
			t.Errorf("Stalled %+v, interval %s; want the last good configuration (7m) in use", c, interval())
		}
	}
	reconcile(r)
	if d := interval(); d != 7*time.Minute {
		t.Fatalf("interval %s, want 7m", d)
	}

	// A misspelt key.
	edit(map[string]string{"intervall": "5m"})
	assertNotStopped(reconcile(r))
	events := drainEvents(recorder)
	assertEvent(t, events, corev1.EventTypeWarning, konfidencev1.UnknownConfigurationKeyReason)
	if !strings.Contains(strings.Join(events, "\n"), "intervall: unknown key; did you mean interval? (the last good configuration stays in use)") {
		t.Errorf("no suggestion in %q", events)
	}
	if n := problems(konfidencev1.UnknownConfigurationKeyReason); n != 1 {
		t.Errorf("fluxdeployer_configuration_problems{reason=UnknownConfigurationKey} = %v, want 1", n)
	}
	h.get(t, ns, ad.Name, ad)
	ad.Annotations[meta.ReconcileRequestAnnotation] = "again"
	if err := h.env.Client.Update(t.Context(), ad); err != nil {
		t.Fatal(err)
	}
	reconcile(r)
	for _, e := range drainEvents(recorder) {
		if strings.Contains(e, konfidencev1.UnknownConfigurationKeyReason) {
			t.Errorf("the same ConfigMap reported again: %s", e)
		}
	}

	// Bad values.
	edit(map[string]string{intervalKey: "soon", waitKey: "sometimes"})
	assertNotStopped(reconcile(r))
	events = drainEvents(recorder)
	assertEvent(t, events, corev1.EventTypeWarning, konfidencev1.InvalidConfigurationReason)
	if joined := strings.Join(events, "\n"); !strings.Contains(joined, "interval: ") || !strings.Contains(joined, "wait: ") {
		t.Errorf("events %q", events)
	}
	if n := problems(konfidencev1.InvalidConfigurationReason); n != 2 {
		t.Errorf("fluxdeployer_configuration_problems{reason=InvalidConfiguration} = %v, want 2", n)
	}

	// After a restart no configuration was good: refused with a short message, the Flux objects left alone.
	restarted, recorder := h.direct(ns)
	got, err := h.reconcile(t, restarted, ad)
	if err != nil {
		t.Fatalf("a terminal failure is not retried, got error %v", err)
	}
	assertCondition(t, got, meta.StalledCondition, True, konfidencev1.InvalidConfigurationReason)
	if msg := conditionOf(got, meta.ReadyCondition).Message; len(msg) >= 256 || !strings.Contains(msg, "invalid interval, wait: nothing is deployed") {
		t.Errorf("Ready message (%d characters) %q", len(msg), msg)
	}
	if d := interval(); d != 7*time.Minute {
		t.Errorf("the HelmRelease changed: interval %s", d)
	}
	assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.InvalidConfigurationReason)

	// Fixed: deployed with it, and the metric back at 0.
	edit(map[string]string{intervalKey: "9m"})
	reconcile(restarted)
	if d := interval(); d != 9*time.Minute || problems(konfidencev1.InvalidConfigurationReason) != 0 {
		t.Errorf("after the fix: interval %s, problems %v", d, problems(konfidencev1.InvalidConfigurationReason))
	}
}

// TestConfigMessagesStayShort: however many keys are bad, a refusal names them in a few words (the list of known
// keys is `fluxdeployer check`'s and the documentation's, not every status').
func TestConfigMessagesStayShort(t *testing.T) {
	data := map[string]string{}
	for _, key := range ConfigKeys() {
		data[key] = "{not: [valid"
		data[key+"-typo-with-a-long-name"] = "x"
	}
	_, problems := readConfig(data)
	if msg := briefKeys(problems); len(msg) > 140 || !strings.Contains(msg, " more; unknown ") || !strings.HasSuffix(msg, " more") {
		t.Errorf("briefKeys: %q", msg)
	}
}

// TestServiceAccountPerNamespace: the Flux objects of a namespace run as the platform's account of that namespace,
// the default name or the namespace's own; an account that does not exist refuses that namespace's
// ArtifactDeployments only, with a reason that names it, and nothing is applied there.
func TestServiceAccountPerNamespace(t *testing.T) {
	h := testHarness(t)
	config := "service-accounts"
	h.configMap(t, config, map[string]string{
		serviceAccountNameKey:  "flux-applier",
		serviceAccountNamesKey: "sa-team-b: team-b-deployer\n",
	})
	r, recorder := h.direct(config)
	for _, tc := range []struct{ ns, account, want string }{
		{"sa-team-a", "flux-applier", "flux-applier"},
		{"sa-team-b", "team-b-deployer", "team-b-deployer"},
		{"sa-team-c", "", ""}, // the account does not exist
	} {
		h.namespace(t, tc.ns)
		if tc.account != "" {
			h.create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: tc.account}})
		}
		ad := artifactDeployment(tc.ns, "frontend-1-2-3-e1mvwibzp5", HelmManifestType,
			resource("chart", "helmChart", ociAccess("ociArtifact", "registry.example.com/charts/frontend:1.2.3")))
		h.create(t, ad)
		got, err := h.reconcile(t, r, ad)
		if tc.want == "" {
			if err != nil {
				t.Fatalf("%s: a terminal failure is not retried, got error %v", tc.ns, err)
			}
			assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.ServiceAccountNotFoundReason)
			if msg := conditionOf(got, meta.ReadyCondition).Message; !strings.Contains(msg, "ServiceAccount sa-team-c/flux-applier") {
				t.Errorf("%s: message %q names no account", tc.ns, msg)
			}
			assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.ServiceAccountNotFoundReason)
			h.assertNoFluxObjects(t, tc.ns)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.ns, err)
		}
		hr := &helmv2.HelmRelease{}
		h.get(t, tc.ns, ad.Name, hr)
		if hr.Spec.ServiceAccountName != tc.want {
			t.Errorf("%s: HelmRelease runs as %q, want %q", tc.ns, hr.Spec.ServiceAccountName, tc.want)
		}
	}
}
