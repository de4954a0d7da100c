package testenv

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRequestRecorderCountsConflicts: an update sent with a stale resourceVersion is recorded as a request and,
// refused by the API server, as a conflict; the one that succeeds is not a conflict. The benchmarks and the write
// budgets assert on these counts.
func TestRequestRecorderCountsConflicts(t *testing.T) {
	ctx := context.Background()
	var recorder RequestRecorder
	c, err := client.New(recorder.Wrap(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "recorded"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	stale := cm.DeepCopy()
	cm.Data = map[string]string{"a": "1"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	stale.Data = map[string]string{"a": "2"}
	if err := c.Update(ctx, stale); err == nil {
		t.Fatal("an update with a stale resourceVersion succeeded")
	}
	if got := recorder.Conflicts(); !slices.Equal(got, []string{"PUT /api/v1/namespaces/default/configmaps/recorded"}) {
		t.Errorf("conflicts %q, want the stale update's only", got)
	}
	if got := Writes(recorder.Take()); got != 3 {
		t.Errorf("%d writes, want the create and both updates", got)
	}
}
