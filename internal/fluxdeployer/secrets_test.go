package fluxdeployer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	reads atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestSecretPresence: the ArtifactDeployments of a namespace share one answer for presenceTTL; a fresh
// lookup (a requested reconcile) and an expired answer read the API server, and see a Secret created meanwhile.
func TestSecretPresence(t *testing.T) {
	h := testHarness(t)
	ctx := context.Background()
	ns, other := "secret-presence", "secret-presence-other"
	h.namespace(t, ns)
	reader := &countingReader{Reader: h.env.Client}
	now := time.Now()
	s := newPresence(reader, "Secret")
	s.now = func() time.Time { return now }
	expect := func(lookup secretLookup, want bool, reads int32) {
		t.Helper()
		exists, err := lookup("deployment-target")
		if err != nil {
			t.Fatal(err)
		}
		if exists != want || reader.reads.Load() != reads {
			t.Fatalf("exists %v after %d reads, want %v after %d", exists, reader.reads.Load(), want, reads)
		}
	}
	for range 3 {
		expect(s.lookup(ctx, ns, false), false, 1)
	}
	h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployment-target"}})
	expect(s.lookup(ctx, ns, false), false, 1) // shared: the Secret is noticed later
	expect(s.lookup(ctx, ns, true), true, 2)   // requested: read afresh, and the answer is shared from then on
	expect(s.lookup(ctx, ns, false), true, 2)
	if err := h.env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployment-target"}}); err != nil {
		t.Fatal(err)
	}
	expect(s.lookup(ctx, other, false), false, 3) // another namespace has an answer of its own
	now = now.Add(presenceTTL)
	expect(s.lookup(ctx, ns, false), false, 4)
	if len(s.answers) != 1 {
		t.Fatalf("%d answers remembered, want only the one just read: the other namespace's expired", len(s.answers))
	}
}
