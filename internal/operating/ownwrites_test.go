package operating

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestStaleReadOfItsOwnWrite: after a status write, the version it replaced is a stale read until the cache has a
// later one; then the mark is gone.
func TestStaleReadOfItsOwnWrite(t *testing.T) {
	var w OwnWrites
	read := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "obj", ResourceVersion: rv}}
	}
	w.Wrote(read("7"), read("7")) // nothing written: no mark
	if w.Stale(read("7")) {
		t.Fatal("a read is stale without a write")
	}
	w.Wrote(read("7"), read("9"))
	if !w.Stale(read("7")) {
		t.Error("the version the write replaced is not a stale read")
	}
	if w.Stale(read("9")) {
		t.Error("the written version is a stale read")
	}
	if w.Stale(read("7")) {
		t.Error("the mark outlived a read of a later version")
	}
	w.Wrote(read("9"), read("11"))
	w.Forget(client.ObjectKey{Namespace: "ns", Name: "other"})
	if !w.Stale(read("9")) {
		t.Error("forgetting another object dropped this one's mark")
	}
	w.Forget(client.ObjectKeyFromObject(read("9")))
	if w.Stale(read("9")) {
		t.Error("the mark outlived its object")
	}
}
