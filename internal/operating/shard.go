package operating

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Narrow narrows the manager's cache of each kind of objs to the objects selector selects: to the instance's shard,
// as Flux's controllers narrow theirs with --watch-label-selector, so that an instance never sees, reconciles or
// writes another shard's objects; or to the operator's own objects of a kind others create too. A nil selector
// leaves opts as they are. A kind opts already configures keeps its settings besides the label selector.
func Narrow(opts *cache.Options, selector labels.Selector, objs ...client.Object) {
	if selector == nil {
		return
	}
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	for _, obj := range objs {
		key := obj
		for configured := range opts.ByObject {
			if reflect.TypeOf(configured) == reflect.TypeOf(obj) {
				key = configured
			}
		}
		byObject := opts.ByObject[key]
		byObject.Label = selector
		opts.ByObject[key] = byObject
	}
}

// AcrossShards returns a cache of every object of obj's kind, whichever shard holds it, for the few decisions that
// must see all of them (who claims a workload name first, which shard a namespace is in). Unsharded, that is the
// manager's cache; sharded, a cache of its own that keeps of each object only what trim leaves, so that a shard
// does not hold every shard's objects in full.
func (o Options) AcrossShards(mgr ctrl.Manager, obj client.Object, trim toolscache.TransformFunc) (cache.Cache, error) {
	if o.Shard == nil {
		return mgr.GetCache(), nil
	}
	opts := cache.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		ByObject:   map[client.Object]cache.ByObject{obj: {Transform: trim}},
	}
	if o.WatchNamespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{o.WatchNamespace: {}}
	}
	all, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, err
	}
	return all, mgr.Add(all)
}

// AcrossShardsMeta is the metadata a trim of AcrossShards keeps of every object: its identity (name, namespace,
// UID, resourceVersion) and its age (creation and deletion), which the decisions across shards go by.
func AcrossShardsMeta(obj metav1.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(), CreationTimestamp: obj.GetCreationTimestamp(), DeletionTimestamp: obj.GetDeletionTimestamp()}
}
