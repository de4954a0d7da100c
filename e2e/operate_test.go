package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestAlertsAndMetrics runs the operator with --events-addr pointing at a stand-in for notification-controller
// and --metrics-addr on a free port, deploys a vector, and checks that the events carry Flux's revision metadata
// and that /metrics serves Flux's reconcile metrics for both kinds and the project's own, with their labels; and,
// for the monitoring kit of config/monitoring, that the binary serves every metric its rules and dashboard name,
// that its Alert selects the operator's Flux objects, and (with KUBE_STATE_METRICS) what kube-state-metrics makes
// of the objects with its configuration.
func TestAlertsAndMetrics(t *testing.T) {
	if cluster == nil {
		t.Skip("sets the operator's command line, which an installed operator takes from config/manager")
	}
	ctx := context.Background()
	reg, artifact := pushConfigVector(t)

	receiver := newEventReceiver(t)
	metricsAddr := testenv.FreeAddr(t)
	startFluxdeployer(t, nil, "--events-addr="+receiver.URL, "--metrics-addr="+metricsAddr)
	ns := newNamespace(t, "operate")
	vector := reg.Ref("", "acme.org/vectors/shop", "1.0.0")
	vd := createVectorDeployment(t, ns, "shop", vector)
	waitReady(t, 3*time.Minute, vd)
	adName, _, err := naming.ArtifactDeploymentName(artifact.Name, artifact.Version, "", 0)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("events", func(t *testing.T) {
		revisionKey := konfidencev1.GroupVersion.Group + "/" + eventv1.MetaRevisionKey
		tokenKey := konfidencev1.GroupVersion.Group + "/" + eventv1.MetaTokenKey
		for kind, revision := range map[string]string{"VectorDeployment": vector, "ArtifactDeployment": artifact.Version} {
			testenv.Eventually(t, 30*time.Second, func() error {
				for _, e := range receiver.events() {
					if e.InvolvedObject.Kind == kind && e.InvolvedObject.Namespace == ns && e.Metadata[revisionKey] == revision && e.Metadata[tokenKey] == "1" {
						return nil
					}
				}
				return fmt.Errorf("no %s event with %s=%s and %s=1 among %+v", kind, revisionKey, revision, tokenKey, receiver.events())
			})
		}
	})

	t.Run("monitoring kit", func(t *testing.T) { checkMonitoringKit(t, "http://"+metricsAddr+"/metrics") })
	t.Run("alert routing", func(t *testing.T) { checkAlertRouting(t, ns, adName) })
	t.Run("kube-state-metrics", func(t *testing.T) { checkKubeStateMetrics(t, vd, adName) })

	t.Run("metrics", func(t *testing.T) {
		url := "http://" + metricsAddr + "/metrics"
		// The metrics are recorded just after the status write that the test waited for.
		vdReady := map[string]string{"kind": "VectorDeployment", "name": vd.Name, "namespace": ns, "type": "Ready", "status": "True"}
		var families map[string]*dto.MetricFamily
		testenv.Eventually(t, 10*time.Second, func() error {
			families = scrape(t, url)
			for _, m := range families["gotk_reconcile_condition"].GetMetric() {
				if matches(m, vdReady) && value(m) == 1 {
					return nil
				}
			}
			return fmt.Errorf("gotk_reconcile_condition%v is not 1", vdReady)
		})
		vdObject := map[string]string{"kind": "VectorDeployment", "name": vd.Name, "namespace": ns}
		// ArtifactDeployments' durations go into one histogram per namespace, without a name.
		adNamespace := map[string]string{"kind": "ArtifactDeployment", "name": "", "namespace": ns}
		expectSample(t, families, "gotk_reconcile_duration_seconds", vdObject, nil)
		expectSample(t, families, "gotk_reconcile_duration_seconds", adNamespace, nil)
		expectSample(t, families, "gotk_suspend_status", vdObject, ptr.To(0.0))
		// One series per status of each condition, 1 for the one that holds; an absent condition is Unknown.
		for _, c := range []struct {
			typ, status string
			want        float64
		}{{"Ready", "True", 1}, {"Ready", "False", 0}, {"Stalled", "Unknown", 1}, {"Stalled", "True", 0}} {
			expectSample(t, families, "gotk_reconcile_condition", with(vdObject, map[string]string{"type": c.typ, "status": c.status}), &c.want)
		}
		// ArtifactDeployments, many per VectorDeployment, get the duration only (their states are counted per
		// VectorDeployment below).
		for _, name := range []string{"gotk_reconcile_condition", "gotk_suspend_status"} {
			for _, m := range families[name].GetMetric() {
				if matches(m, map[string]string{"kind": "ArtifactDeployment"}) {
					t.Errorf("%s has a series of an ArtifactDeployment: %v", name, m.GetLabel())
				}
			}
		}
		for _, m := range families["gotk_reconcile_duration_seconds"].GetMetric() {
			if matches(m, map[string]string{"kind": "ArtifactDeployment", "name": adName}) {
				t.Errorf("gotk_reconcile_duration_seconds has a series of an ArtifactDeployment: %v", m.GetLabel())
			}
		}
		vdLabels := map[string]string{"namespace": ns, "name": vd.Name}
		expectSample(t, families, "fluxdeployer_vectordeployment_artifacts", with(vdLabels, map[string]string{"state": "ready"}), ptr.To(1.0))
		expectSample(t, families, "fluxdeployer_vectordeployment_artifacts", with(vdLabels, map[string]string{"state": "not_ready"}), ptr.To(0.0))
		expectSample(t, families, "fluxdeployer_vectordeployment_artifacts", with(vdLabels, map[string]string{"state": "failed"}), ptr.To(0.0))
		for _, outcome := range []string{"recovered", "limit_exceeded"} {
			expectSample(t, families, "fluxdeployer_artifactdeployment_hash_collisions_total", map[string]string{"outcome": outcome}, nil)
		}
		for _, name := range []string{"fluxdeployer_artifactdeployment_names_built_total", "fluxdeployer_artifactdeployment_creations_total",
			"fluxdeployer_artifactdeployment_adoptions_total"} {
			expectSample(t, families, name, nil, nil)
		}
		expectSample(t, families, "fluxdeployer_registry_requests_total", map[string]string{"code": "200"}, nil)
		expectSample(t, families, "fluxdeployer_registry_cache_lookups_total", map[string]string{"cache": "vector", "result": "miss"}, nil)

		// Suspending shows in gotk_suspend_status, as for Flux's kinds.
		if err := env.Client.Patch(ctx, vd, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			for _, m := range scrape(t, url)["gotk_suspend_status"].GetMetric() {
				if matches(m, vdObject) && value(m) == 1 {
					return nil
				}
			}
			return fmt.Errorf("gotk_suspend_status%v is not 1", vdObject)
		})

		// A VectorDeployment that is gone leaves no series behind.
		if err := env.Client.Delete(ctx, vd); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			for _, name := range []string{"fluxdeployer_vectordeployment_artifacts", "gotk_reconcile_condition"} {
				for _, m := range scrape(t, url)[name].GetMetric() {
					if matches(m, with(vdLabels, nil)) && (name != "gotk_reconcile_condition" || matches(m, map[string]string{"kind": "VectorDeployment"})) {
						return fmt.Errorf("%s still has a series of the deleted VectorDeployment: %v", name, m.GetLabel())
					}
				}
			}
			return nil
		})
	})
}

// eventReceiver stands in for notification-controller's event endpoint.
type eventReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	received []eventv1.Event
}

func newEventReceiver(t *testing.T) *eventReceiver {
	r := &eventReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var e eventv1.Event
		if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.received = append(r.received, e)
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *eventReceiver) events() []eventv1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.received)
}

// scrape reads the metric families the endpoint serves.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	return parseMetrics(t, resp.Body)
}

// parseMetrics reads the metric families of Prometheus' text format.
func parseMetrics(t *testing.T, text io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(text)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// expectSample fails the test unless the family has a sample with (at least) the labels and, when want is set,
// that value.
func expectSample(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string, want *float64) {
	t.Helper()
	for _, m := range families[name].GetMetric() {
		if !matches(m, labels) {
			continue
		}
		if got := value(m); want != nil && got != *want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, *want)
		}
		return
	}
	t.Errorf("no sample of %s with labels %v", name, labels)
}

func matches(m *dto.Metric, labels map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if have[k] != v {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	default:
		return float64(m.GetHistogram().GetSampleCount())
	}
}

func with(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}
