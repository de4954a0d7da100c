package operating

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StaleReadRetry is how soon a reconcile that found the cache behind its own last write is tried again; the
// write's watch event usually requeues it first.
const StaleReadRetry = 100 * time.Millisecond

// OwnWrites remembers, per object, the resourceVersion this process's last status write replaced: until the cache
// holds a later one, a read of the object from the cache is stale. A status computed from it carries a
// resourceVersion the API server refuses (Conflict): a wasted write, and at many objects load on the API server.
// This is the expectations pattern of the Kubernetes controllers, for an object's own writes.
type OwnWrites struct {
	replaced sync.Map // of client.ObjectKey to string
}

// Wrote records the write of obj's status, when it changed obj: original is what the status was computed from.
func (w *OwnWrites) Wrote(original, obj client.Object) {
	if obj.GetResourceVersion() != original.GetResourceVersion() {
		w.replaced.Store(client.ObjectKeyFromObject(obj), original.GetResourceVersion())
	}
}

// Stale tells whether obj, as read from the cache, is the version this process's last status write replaced. A
// later version clears the mark.
func (w *OwnWrites) Stale(obj client.Object) bool {
	key := client.ObjectKeyFromObject(obj)
	before, ok := w.replaced.Load(key)
	if !ok {
		return false
	}
	if before == obj.GetResourceVersion() {
		return true
	}
	w.replaced.CompareAndDelete(key, before)
	return false
}

// Forget drops what is held for key, once its object is deleted.
func (w *OwnWrites) Forget(key client.ObjectKey) {
	w.replaced.Delete(key)
}
