package operating

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
	"unsafe"

	fluxcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestDurationMetricsOneHistogramPerNamespace: the reconciles of many objects of a kind recorded per namespace
// make one gotk_reconcile_duration_seconds series per namespace, without a name, which outlives the objects;
// the full recorder keeps a histogram per object, and its condition gauges, until the object is forgotten.
func TestDurationMetricsOneHistogramPerNamespace(t *testing.T) {
	type series struct{ kind, name, namespace string }
	record := func(perNamespace bool) (durations, conditions []series) {
		rec := metrics.NewRecorder()
		reg := prometheus.NewRegistry()
		reg.MustRegister(rec.Collectors()...)
		m := ReconcileMetrics{Metrics: fluxcontroller.Metrics{MetricsRecorder: rec}, kind: "ArtifactDeployment", perNamespace: perNamespace}
		if !perNamespace {
			m.Scheme = runtime.NewScheme()
			if err := konfidencev1.AddToScheme(m.Scheme); err != nil {
				t.Fatal(err)
			}
		}
		for _, ns := range []string{"a", "b"} {
			for _, name := range []string{"x", "y", "z"} {
				ad := &konfidencev1.ArtifactDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
				m.Record(context.Background(), ad, time.Now(), false)
			}
		}
		m.Forget(types.NamespacedName{Namespace: "a", Name: "x"})
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, s := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				got := series{labels["kind"], labels["name"], labels["namespace"]}
				switch f.GetName() {
				case "gotk_reconcile_duration_seconds":
					durations = append(durations, got)
				case "gotk_reconcile_condition":
					conditions = append(conditions, got)
				}
			}
		}
		return durations, slices.Compact(conditions)
	}

	durations, conditions := record(true)
	if want := []series{{"ArtifactDeployment", "", "a"}, {"ArtifactDeployment", "", "b"}}; !slices.Equal(durations, want) || len(conditions) != 0 {
		t.Errorf("per namespace: durations %v (want %v), conditions %v (want none)", durations, want, conditions)
	}
	durations, conditions = record(false)
	if len(durations) != 5 || len(conditions) != 5 {
		t.Errorf("per object: %d duration and %d condition series for 6 objects, one forgotten; want 5 each", len(durations), len(conditions))
	}
}

// TestIndexFieldKeepsOneKeyPerValue: an index registered with IndexField answers the lookups of its kind through
// the cache's List (within a namespace, or across namespaces) and holds one key per object, not two.
func TestIndexFieldKeepsOneKeyPerValue(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	for _, ns := range []string{"index-a", "index-b"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"one", "two"} {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"value": name}}}
			if err := env.Client.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	label := func(obj client.Object) []string { return []string{obj.GetLabels()["value"]} }
	if err := IndexField(ctx, c, &corev1.ConfigMap{}, "inNamespace", false, label); err != nil {
		t.Fatal(err)
	}
	if err := IndexField(ctx, c, &corev1.ConfigMap{}, "acrossNamespaces", true, label); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}

	found := func(opts ...client.ListOption) []string {
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list, opts...); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, cm := range list.Items {
			keys = append(keys, cm.Namespace+"/"+cm.Name)
		}
		slices.Sort(keys)
		return keys
	}
	for _, l := range []struct {
		name string
		opts []client.ListOption
		want []string
	}{
		{"within a namespace", []client.ListOption{client.InNamespace("index-a"), client.MatchingFields{"inNamespace": "one"}}, []string{"index-a/one"}},
		{"across namespaces", []client.ListOption{client.MatchingFields{"acrossNamespaces": "one"}}, []string{"index-a/one", "index-b/one"}},
		{"a within-namespace index across namespaces", []client.ListOption{client.MatchingFields{"inNamespace": "one"}}, nil},
	} {
		if got := found(l.opts...); !slices.Equal(got, l.want) {
			t.Errorf("%s: found %v, want %v", l.name, got, l.want)
		}
	}

	informer, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	indexer := informer.(toolscache.SharedIndexInformer).GetIndexer()
	for index, want := range map[string][]string{
		"field:inNamespace":      {"index-a/one", "index-a/two", "index-b/one", "index-b/two"},
		"field:acrossNamespaces": {"__all_namespaces/one", "__all_namespaces/two"},
	} {
		keys := indexer.ListIndexFuncValues(index)
		slices.Sort(keys)
		// Other namespaces' ConfigMaps (kube-root-ca.crt) have no value label: their key is "<namespace>/".
		keys = slices.DeleteFunc(keys, func(k string) bool { return k[len(k)-1] == '/' })
		if !slices.Equal(keys, want) {
			t.Errorf("index %s holds %v, want %v", index, keys, want)
		}
	}
}

// TestShareRepeatedStringsKeepsTheObject: two objects decoded apart share their namespace, label and annotation
// keys, owner kind and condition strings after the transform, and each equals what was decoded; their conditions
// fill their slice.
func TestShareRepeatedStringsKeepsTheObject(t *testing.T) {
	const raw = `{"metadata":{"name":"app","namespace":"tenant","labels":{"konfidence.cloud/artifact-identity":"abc"},
		"annotations":{"konfidence.cloud/artifact-component":"acme.org/app"},
		"ownerReferences":[{"apiVersion":"konfidence.cloud/v1alpha1","kind":"VectorDeployment","name":"vd","uid":"u"}]},
		"status":{"conditions":[
			{"type":"Ready","status":"True","reason":"Succeeded","message":"a","lastTransitionTime":"2026-01-01T00:00:00Z"},
			{"type":"Stalled","status":"False","reason":"Succeeded","message":"b","lastTransitionTime":"2026-01-01T00:00:00Z"},
			{"type":"ArtifactFetched","status":"True","reason":"Succeeded","message":"c","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	var objs []*konfidencev1.ArtifactDeployment
	for range 2 {
		ad := &konfidencev1.ArtifactDeployment{}
		if err := json.Unmarshal([]byte(raw), ad); err != nil {
			t.Fatal(err)
		}
		decoded := ad.DeepCopy()
		if _, err := ShareRepeatedStrings(ad); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(ad, decoded) {
			t.Fatalf("the transform changed the object:\n%+v\nwant\n%+v", ad, decoded)
		}
		if n := len(ad.Status.Conditions); cap(ad.Status.Conditions) != n {
			t.Errorf("%d conditions in a slice of capacity %d", n, cap(ad.Status.Conditions))
		}
		objs = append(objs, ad)
	}
	a, b := objs[0], objs[1]
	keys := func(m map[string]string) string {
		for k := range m {
			return k
		}
		return ""
	}
	for what, pair := range map[string][2]string{
		"namespace":      {a.Namespace, b.Namespace},
		"label key":      {keys(a.Labels), keys(b.Labels)},
		"annotation key": {keys(a.Annotations), keys(b.Annotations)},
		"owner kind":     {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		"condition type": {a.Status.Conditions[2].Type, b.Status.Conditions[2].Type},
		"reason":         {a.Status.Conditions[0].Reason, b.Status.Conditions[1].Reason},
	} {
		if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("the %s %q is two strings in memory", what, pair[0])
		}
	}
	if unsafe.StringData(a.Name) == unsafe.StringData(b.Name) {
		t.Errorf("the name, which differs per object, is shared")
	}
}
