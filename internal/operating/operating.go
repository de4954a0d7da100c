// Package operating holds what the binary's reconcilers share so that they are operated like Flux's controllers:
// where their events go, how many workers each runs, and the GitOps Toolkit reconcile metrics. It knows neither
// reconciler; each applies it to its own kind.
package operating

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unique"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	fluxcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/metrics"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/pkg/allowlist"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// Options are the binary's settings every reconciler applies.
type Options struct {
	// EventsAddr is notification-controller's event endpoint (--events-addr); empty sends Kubernetes events only.
	EventsAddr string
	// Concurrent is the number of objects each reconciler works on at once (--concurrent).
	Concurrent int
	// RequeueDependency is how soon an object waiting for the objects it depends on is reconciled again, whether or
	// not an event arrives (--requeue-dependency, Flux's flag for the same wait).
	RequeueDependency time.Duration
	// WatchNamespace is the only namespace the reconcilers watch (--watch-all-namespaces=false); empty: all.
	WatchNamespace string
	// RuntimeNamespace is the namespace the operator runs in (RUNTIME_NAMESPACE, as for Flux's controllers), where
	// a bare name of a Secret or ConfigMap of the operator's own is looked up; empty out of a cluster.
	RuntimeNamespace string
	// Metrics records gotk_reconcile_duration_seconds and, for VectorDeployments, gotk_reconcile_condition and
	// gotk_suspend_status; nil records nothing.
	Metrics *metrics.Recorder
	// Shard selects the objects of this instance's shard (--watch-label-selector); nil: the operator is not
	// sharded, and its cache holds every object of the kinds it watches.
	Shard labels.Selector
	// AllowedRegistries are the registry hosts (host[:port]) the operator reads and has Flux pull from
	// (--allowed-registries): both reconcilers check the hosts a tenant's objects name against this one list.
	// Empty allows every host.
	AllowedRegistries allowlist.Hosts
	// SkipNameValidation lets several managers in one process (benchmarks, tests) register controllers of the
	// same name.
	SkipNameValidation bool
}

// NewEventRecorder returns a recorder that writes Kubernetes events and, with EventsAddr, posts them to
// notification-controller, reporting as controllerName.
func (o Options) NewEventRecorder(mgr ctrl.Manager, controllerName string) (*events.Recorder, error) {
	return events.NewRecorder(mgr, ctrl.Log.WithName(controllerName), o.EventsAddr, controllerName)
}

// ControllerOptions are the controller-runtime options that follow from the settings.
func (o Options) ControllerOptions() controller.Options {
	// controller-runtime v0.24's priority queue can deadlock on shutdown: its dispatcher hands an item to a
	// worker that has stopped waiting while holding the lock the worker's Done needs, and the manager then
	// exceeds its grace period (seen in the test managers' goroutine dumps). The plain rate-limited queue is
	// what Flux's controllers use.
	opts := controller.Options{MaxConcurrentReconciles: max(1, o.Concurrent), UsePriorityQueue: new(false)}
	if o.SkipNameValidation {
		opts.SkipNameValidation = &o.SkipNameValidation
	}
	return opts
}

// ReconcileMetrics returns the recorder of Flux's reconcile metrics for the reconciler of kind: the duration of
// each reconcile and, per object, its Ready, Reconciling and Stalled conditions and whether it is suspended.
func (o Options) ReconcileMetrics(mgr ctrl.Manager, kind string) ReconcileMetrics {
	return ReconcileMetrics{Metrics: fluxcontroller.NewMetrics(mgr, o.Metrics), kind: kind}
}

// DurationMetrics returns the recorder of the reconcile duration alone, one histogram per namespace, for a kind
// whose objects are too many for series of their own: Flux's condition gauges are 10 series per object and its
// duration histogram another 12 (its buckets, sum and count), all kept in the operator's memory until the object
// is gone (at 1,000 ArtifactDeployments the gauges were a third of the heap, at 10,000 the histograms 13.5 MB).
// The histogram keeps Flux's name and labels, with an empty name, so that Flux's dashboards show the kind's
// reconcile times by namespace. Flux's own controllers record no condition gauges either; their conditions reach
// Prometheus through kube-state-metrics.
func (o Options) DurationMetrics(mgr ctrl.Manager, kind string) ReconcileMetrics {
	m := o.ReconcileMetrics(mgr, kind)
	m.perNamespace = true
	return m
}

// ReconcileMetrics records Flux's reconcile metrics for the objects of one kind. The zero value records nothing.
type ReconcileMetrics struct {
	fluxcontroller.Metrics
	kind string
	// perNamespace records only the duration, in one histogram per namespace.
	perNamespace bool
}

// Record records a reconcile of obj that began at start: its duration and, unless durations are recorded per
// namespace, the Ready, Reconciling and Stalled conditions it left and whether obj is suspended.
func (m ReconcileMetrics) Record(ctx context.Context, obj conditions.Getter, start time.Time, suspended bool) {
	if m.perNamespace {
		if m.MetricsRecorder != nil {
			m.MetricsRecorder.RecordDuration(corev1.ObjectReference{Kind: m.kind, Namespace: obj.GetNamespace()}, start)
		}
		return
	}
	m.RecordDuration(ctx, obj, start)
	m.RecordReadiness(ctx, obj)
	m.RecordReconciling(ctx, obj)
	m.RecordStalled(ctx, obj)
	m.RecordSuspend(ctx, obj, suspended)
}

// Forget deletes the series of an object that is gone. The reconcilers hold no finalizer, so the last they see
// of an object may be its absence; the request's key is then all there is. A namespace's histogram stays: it is
// its other objects' too.
func (m ReconcileMetrics) Forget(key types.NamespacedName) {
	if m.MetricsRecorder == nil || m.perNamespace {
		return
	}
	ref := corev1.ObjectReference{Kind: m.kind, Namespace: key.Namespace, Name: key.Name}
	for _, condition := range []string{meta.ReadyCondition, meta.ReconcilingCondition, meta.StalledCondition} {
		m.MetricsRecorder.DeleteCondition(ref, condition)
	}
	m.MetricsRecorder.DeleteDuration(ref)
	m.MetricsRecorder.DeleteSuspend(ref)
}

// Event records an event on obj with the metadata notification-controller reads: the revision an alert shows,
// and a token (the generation) so that events of different specs are not rate-limited as one. The keys carry the
// API group of obj, as notification-controller keeps only metadata prefixed with the involved object's group.
// The message is bounded, printable text (sanitize.Text): it repeats text from outside the operator (a registry's
// error answer, a Flux controller's message), which reaches Kubernetes events, notification-controller's alerts
// and the terminals that show them.
func Event(r record.EventRecorder, obj client.Object, revision, eventtype, reason, messageFmt string, args ...any) {
	metadata := map[string]string{
		konfidencev1.GroupVersion.Group + "/" + eventv1.MetaRevisionKey: revision,
		konfidencev1.GroupVersion.Group + "/" + eventv1.MetaTokenKey:    strconv.FormatInt(obj.GetGeneration(), 10),
	}
	r.AnnotatedEventf(obj, metadata, eventtype, reason, "%s", sanitize.Text(fmt.Sprintf(messageFmt, args...)))
}

// CacheOptions are the options of the manager's cache: VectorDeployments and Stages matching vdSelector (nil: all), and
// only namespace when it is not empty. Every object is cached without its managed fields, which no reconciler
// reads: they are the largest part of a server-side applied object's metadata, and the cache holds every
// ArtifactDeployment and its Flux objects (10,000 ArtifactDeployments must fit in 150 MiB); their repeated
// strings are shared (ShareRepeatedStrings). trims run on every object after that, for what a reconciler
// knows it does not read of its kinds.
func CacheOptions(vdSelector labels.Selector, namespace string, trims ...toolscache.TransformFunc) cache.Options {
	strip := cache.TransformStripManagedFields()
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{&konfidencev1.VectorDeployment{}: {Label: vdSelector}, &konfidencev1.Stage{}: {Label: vdSelector}},
		DefaultTransform: func(obj any) (any, error) {
			obj, err := strip(obj)
			if err == nil {
				obj, err = ShareRepeatedStrings(obj)
			}
			for _, trim := range trims {
				if err != nil {
					return obj, err
				}
				obj, err = trim(obj)
			}
			return obj, err
		},
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return opts
}

// ShareRepeatedStrings is a cache transform that makes the strings every object of a kind repeats one string in
// memory instead of one per object: its namespace, the keys of its labels and annotations, its owners' apiVersion
// and kind, and its conditions' type, status and reason. The decoder gives each object copies of its own, and the
// cache keeps every ArtifactDeployment and its Flux objects. Strings that differ per object (names, UIDs, values,
// messages) are left alone: sharing them saves nothing and costs an entry each in the table of shared strings.
// The conditions are also copied into a slice of their length, where the decoder leaves room for more.
func ShareRepeatedStrings(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	o.SetNamespace(share(o.GetNamespace()))
	o.SetLabels(shareKeys(o.GetLabels()))
	o.SetAnnotations(shareKeys(o.GetAnnotations()))
	refs := o.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = share(refs[i].APIVersion), share(refs[i].Kind)
	}
	o.SetOwnerReferences(refs)
	if s, ok := obj.(conditions.Setter); ok && len(s.GetConditions()) > 0 {
		conds := slices.Clone(s.GetConditions())
		for i := range conds {
			c := &conds[i]
			c.Type, c.Status, c.Reason = share(c.Type), metav1.ConditionStatus(share(string(c.Status))), share(c.Reason)
		}
		s.SetConditions(conds)
	}
	return obj, nil
}

// share returns the one copy of s that unique keeps.
func share(s string) string { return unique.Make(s).Value() }

// shareKeys returns m with shared keys; its values stay.
func shareKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	shared := make(map[string]string, len(m))
	for k, v := range m {
		shared[share(k)] = v
	}
	return shared
}

// AddFinalizer puts finalizer on obj unless it is there. The patch carries obj's resourceVersion, so that it
// cannot drop a finalizer someone else added meanwhile.
func AddFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string, opts ...client.PatchOption) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("adding finalizer %s: %T cannot be copied", finalizer, obj)
	}
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), opts...); err != nil {
		return fmt.Errorf("adding finalizer %s: %w", finalizer, err)
	}
	return nil
}

// IndexField registers a field index of obj's kind on c's informer, as client.FieldIndexer.IndexField does, but
// for one kind of lookup: within a namespace (client.InNamespace with client.MatchingFields) or, acrossNamespaces,
// in all at once (client.MatchingFields alone). controller-runtime's IndexField keeps every key twice, once for
// each kind of lookup, and each key is a string and a set in the index of its own: for an index with one value
// per object, as the ones on ArtifactDeployments are, that doubles what the index holds of every object, in a cache
// that holds every ArtifactDeployment. The keys are the ones controller-runtime's cache reader looks up; a lookup
// of the other kind finds nothing.
func IndexField(ctx context.Context, c cache.Informers, obj client.Object, field string, acrossNamespaces bool, extract client.IndexerFunc) error {
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("indexing %s: %w", field, err)
	}
	return informer.AddIndexers(toolscache.Indexers{fieldIndexName(field): func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("indexing %s: %T is not an object", field, raw)
		}
		namespace := o.GetNamespace()
		if acrossNamespaces || namespace == "" {
			namespace = allNamespaces
		}
		values := extract(o)
		keys := make([]string, len(values))
		for i, v := range values {
			keys[i] = namespace + "/" + v
		}
		return keys, nil
	}})
}

// fieldIndexName and allNamespaces name an index and the namespace of its cluster-wide keys as controller-runtime's
// cache reader does (sigs.k8s.io/controller-runtime/pkg/cache/internal: FieldIndexName, KeyToNamespacedKey).
const allNamespaces = "__all_namespaces"

func fieldIndexName(field string) string { return "field:" + field }
