package fluxdeployer

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/inventory"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// fluxObject is a Flux object whose status the deployer reads.
type fluxObject interface {
	client.Object
	conditions.Getter
}

// timeoutField is the spec field of every owned Flux kind that bounds how long its controller waits.
const timeoutField = "timeout"

// fluxKind is everything the deployer does differently per Flux kind. fluxKindTable lists every kind it writes or
// reads, so that apply, pass-on, teardown, the watches, the cache transform and the status mapping cover the same
// kinds: adding a kind is one entry there.
type fluxKind struct {
	gvk schema.GroupVersionKind
	// new returns an empty object of the kind.
	new func() fluxObject
	// observedGeneration is the generation the object's status was written for.
	observedGeneration func(fluxObject) int64
	// trim keeps, of the object, what the deployer reads (see TrimFluxStatus): its metadata, of its status the
	// conditions, observedGeneration and the Services of an inventory, of its spec only the fields read from the
	// cache (suspend, and what workload reads); of a kind it does not own, nothing of the spec or annotations.
	trim func(fluxObject)
	// owned kinds are the deployer's: it applies them, passes suspend and reconcile requests on to them and
	// deletes them in a teardown. The others are created by a Flux controller and only read.
	owned bool
	// tuning are the spec fields, as dotted paths below spec, that a platform may set on the deployer's objects
	// of the kind: every other field the deployer leaves unset is taken back (see takeBack).
	tuning []string
	// healthy is the condition a deployment kind reports its workloads' health in; "" for a source.
	healthy string
	// waitsForSource tells whether a deployment kind's Ready condition says only that its source has no artifact
	// yet: progress on every fresh install, not a failure (a failing fetch is the source's own Ready); nil for a
	// source.
	waitsForSource func(ready *metav1.Condition) bool
	// workload records, for the printer columns, what a deployment kind deploys under; nil for a source.
	workload func(*konfidencev1.ArtifactDeployment, fluxObject)
	// statusFrom is set for a source without a status of its own: it names the object that reports the fetch.
	statusFrom func(key types.NamespacedName) (kind string, _ types.NamespacedName)
	// enqueue leads from an object of a kind the deployer does not own to its ArtifactDeployment; owned kinds are
	// led there by their controller reference.
	enqueue func(context.Context, client.Object) []reconcile.Request
}

// fluxKindTable lists the Flux kinds, in teardown order: a deployment before its source, so that helm-controller and
// kustomize-controller still find the source while they uninstall or prune.
var fluxKindTable = []*fluxKind{
	{ //nolint:dupl // the deployment kinds' entries are of one shape: the table is the one place that lists the kinds
		gvk: helmv2.GroupVersion.WithKind(helmv2.HelmReleaseKind),
		new: func() fluxObject { return &helmv2.HelmRelease{} },
		observedGeneration: func(o fluxObject) int64 {
			return o.(*helmv2.HelmRelease).Status.ObservedGeneration
		},
		trim: func(o fluxObject) {
			hr := o.(*helmv2.HelmRelease)
			inv := hr.Status.Inventory
			hr.Spec = helmv2.HelmReleaseSpec{Suspend: hr.Spec.Suspend, ReleaseName: hr.Spec.ReleaseName}
			hr.Status = helmv2.HelmReleaseStatus{ObservedGeneration: hr.Status.ObservedGeneration, Conditions: hr.Status.Conditions}
			if inv != nil {
				hr.Status.Inventory = &helmv2.ResourceInventory{Entries: servicesOnly(inv.Entries, func(e helmv2.ResourceRef) string { return e.ID })}
			}
		},
		owned: true,
		// How long Helm waits (install and upgrade have the deployer's timeout; uninstall and rollback wait for
		// finalizers and slow workloads), how many release revisions it keeps, how often the chart is looked at,
		// and whether helm-controller keeps its client between reconciles.
		tuning:  []string{timeoutField, "uninstall.timeout", "rollback.timeout", "maxHistory", "chart.spec.interval", "persistentClient"},
		healthy: helmv2.ReleasedCondition,
		// helm-controller's reason while the chart's source is not ready (it has no constant in the API).
		waitsForSource: func(c *metav1.Condition) bool {
			return c.Status == metav1.ConditionFalse && c.Reason == "SourceNotReady"
		},
		workload: func(ad *konfidencev1.ArtifactDeployment, o fluxObject) {
			ad.Status.FluxKind, ad.Status.ReleaseName = helmv2.HelmReleaseKind, o.(*helmv2.HelmRelease).Spec.ReleaseName
		},
	},
	{ //nolint:dupl // as above
		gvk: kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind),
		new: func() fluxObject { return &kustomizev1.Kustomization{} },
		observedGeneration: func(o fluxObject) int64 {
			return o.(*kustomizev1.Kustomization).Status.ObservedGeneration
		},
		trim: func(o fluxObject) {
			ks := o.(*kustomizev1.Kustomization)
			inv := ks.Status.Inventory
			ks.Spec = kustomizev1.KustomizationSpec{Suspend: ks.Spec.Suspend, NameSuffix: ks.Spec.NameSuffix}
			ks.Status = kustomizev1.KustomizationStatus{ObservedGeneration: ks.Status.ObservedGeneration, Conditions: ks.Status.Conditions}
			if inv != nil {
				ks.Status.Inventory = &kustomizev1.ResourceInventory{Entries: servicesOnly(inv.Entries, func(e kustomizev1.ResourceRef) string { return e.ID })}
			}
		},
		owned: true,
		// How soon a failed apply is tried again, and further objects whose health Ready waits for: they can only
		// hold Ready back (with wait, the deployer's default, kustomize-controller checks every object anyway).
		tuning:  []string{"retryInterval", "healthChecks"},
		healthy: meta.HealthyCondition,
		// kustomize-controller's words for a source without an artifact ("Source artifact not found, retrying …",
		// "Source is not ready, artifact not found"), under a reason it also gives real fetch failures.
		waitsForSource: func(c *metav1.Condition) bool {
			return c.Status == metav1.ConditionFalse && c.Reason == meta.ArtifactFailedReason &&
				strings.Contains(strings.ToLower(c.Message), "artifact not found")
		},
		workload: func(ad *konfidencev1.ArtifactDeployment, o fluxObject) {
			ad.Status.FluxKind, ad.Status.NameSuffix = kustomizev1.KustomizationKind, o.(*kustomizev1.Kustomization).Spec.NameSuffix
		},
	},
	{
		gvk: sourcev1.GroupVersion.WithKind(sourcev1.HelmRepositoryKind),
		new: func() fluxObject { return &sourcev1.HelmRepository{} },
		observedGeneration: func(o fluxObject) int64 {
			return o.(*sourcev1.HelmRepository).Status.ObservedGeneration
		},
		trim: func(o fluxObject) {
			repo := o.(*sourcev1.HelmRepository)
			repo.Spec = sourcev1.HelmRepositorySpec{Suspend: repo.Spec.Suspend}
			repo.Status = sourcev1.HelmRepositoryStatus{ObservedGeneration: repo.Status.ObservedGeneration, Conditions: repo.Status.Conditions}
		},
		owned:  true,
		tuning: []string{timeoutField}, // how long a fetch may take
		// An OCI HelmRepository has no status: the HelmChart helm-controller creates for the HelmRelease's
		// chart.spec, <namespace>-<name> in the HelmRepository's namespace, reports the fetch.
		statusFrom: func(key types.NamespacedName) (string, types.NamespacedName) {
			return sourcev1.HelmChartKind, types.NamespacedName{Namespace: key.Namespace, Name: key.Namespace + "-" + key.Name}
		},
	},
	{
		gvk: sourcev1.GroupVersion.WithKind(sourcev1.OCIRepositoryKind),
		new: func() fluxObject { return &sourcev1.OCIRepository{} },
		observedGeneration: func(o fluxObject) int64 {
			return o.(*sourcev1.OCIRepository).Status.ObservedGeneration
		},
		trim: func(o fluxObject) {
			repo := o.(*sourcev1.OCIRepository)
			repo.Spec = sourcev1.OCIRepositorySpec{Suspend: repo.Spec.Suspend}
			repo.Status = sourcev1.OCIRepositoryStatus{ObservedGeneration: repo.Status.ObservedGeneration, Conditions: repo.Status.Conditions}
		},
		owned:  true,
		tuning: []string{timeoutField}, // how long a fetch may take
	},
	{
		gvk: sourcev1.GroupVersion.WithKind(sourcev1.HelmChartKind),
		new: func() fluxObject { return &sourcev1.HelmChart{} },
		observedGeneration: func(o fluxObject) int64 {
			return o.(*sourcev1.HelmChart).Status.ObservedGeneration
		},
		trim: func(o fluxObject) {
			c := o.(*sourcev1.HelmChart)
			// Its labels lead to the ArtifactDeployment (helmChartOwner); its spec is helm-controller's.
			c.Spec, c.Annotations = sourcev1.HelmChartSpec{}, nil
			c.Status = sourcev1.HelmChartStatus{ObservedGeneration: c.Status.ObservedGeneration, Conditions: c.Status.Conditions}
		},
		enqueue: helmChartOwner,
	},
}

// fluxKindTypes finds a kind by its Go type, for typed objects (which come without apiVersion and kind).
var fluxKindTypes = func() map[reflect.Type]*fluxKind {
	m := map[reflect.Type]*fluxKind{}
	for _, k := range fluxKindTable {
		m[reflect.TypeOf(k.new())] = k
	}
	return m
}()

// ownedFluxKinds are the kinds the deployer writes, in teardown order.
func ownedFluxKinds() []*fluxKind {
	var owned []*fluxKind
	for _, k := range fluxKindTable {
		if k.owned {
			owned = append(owned, k)
		}
	}
	return owned
}

// HelmChartSelector selects the HelmCharts of the deployer's HelmReleases, of shard when it is not nil:
// helm-controller labels a HelmChart with its HelmRelease's chart template labels, which the deployer sets to those
// of its own Flux objects (the ArtifactDeployment label and the shard key).
func HelmChartSelector(shard labels.Selector) labels.Selector {
	own, err := labels.NewRequirement(konfidencev1.ArtifactDeploymentLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // the label is a constant and valid
	}
	if shard == nil {
		return labels.NewSelector().Add(*own)
	}
	return shard.Add(*own)
}

// OwnedObjects returns an empty object of each kind the deployer writes: they carry their ArtifactDeployment's
// shard key, so a sharded operator narrows its cache of them to its shard.
func OwnedObjects() []client.Object {
	owned := ownedFluxKinds()
	objs := make([]client.Object, 0, len(owned))
	for _, k := range owned {
		objs = append(objs, k.new())
	}
	return objs
}

// kindNamed returns the kind called name, or nil.
func kindNamed(name string) *fluxKind {
	for _, k := range fluxKindTable {
		if k.gvk.Kind == name {
			return k
		}
	}
	return nil
}

// kindOf returns obj's kind: by apiVersion and kind for an unstructured object, by Go type for a typed one. Any
// other object is not one the deployer knows how to handle, which is an error rather than a guess.
func kindOf(obj runtime.Object) (*fluxKind, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		if k := kindNamed(gvk.Kind); k != nil && k.gvk == gvk {
			return k, nil
		}
		return nil, unknownKind(gvk.String())
	}
	if k, ok := fluxKindTypes[reflect.TypeOf(obj)]; ok {
		return k, nil
	}
	return nil, unknownKind(fmt.Sprintf("%T", obj))
}

// unknownKind is the failure of an object whose kind is not in fluxKinds: the deployer built or read something it
// has no entry for, which a retry does not change.
func unknownKind(what string) error {
	return outcome.Stallingf(konfidencev1.ApplyFailedReason, "%s is not a Flux kind the deployer handles", what)
}

// TrimFluxStatus is a cache transform that keeps, of a Flux object, what the deployer reads from the cache. Of the
// status that is the conditions, observedGeneration and, of an inventory, the Services (the deployment results
// are read from them); the rest is Flux's record of its own work and can be most of the object: a Kustomization's
// inventory lists every object it applied, a HelmRelease's history its last releases, a source its artifact. Of
// the spec of a kind the deployer applies only suspend and the names the status reports stay: whether a Flux
// object is still as applied is told by its metadata and its generation, which the API server raises on every
// change of the spec (see apply), and the spec is read from the API server only when that says it changed. Of a HelmChart, which helm-controller creates and the deployer only reads the
// fetch's status of, the spec and annotations go. The cache holds two or three Flux objects per
// ArtifactDeployment, and 10,000 ArtifactDeployments must fit in 150 MiB. Other objects pass unchanged.
func TrimFluxStatus(obj any) (any, error) {
	if o, ok := obj.(fluxObject); ok {
		if k, ok := fluxKindTypes[reflect.TypeOf(o)]; ok {
			k.trim(o)
		}
	}
	return obj, nil
}

// servicesOnly keeps, of a HelmRelease's or a Kustomization's inventory entries (two types of one shape), the
// Services', which the deployment results are read from (see collectResults).
func servicesOnly[E any](entries []E, id func(E) string) []E {
	var services []E
	for _, e := range entries {
		if inventory.Parse(id(e)).IsService() {
			services = append(services, e)
		}
	}
	return services
}

// helmChartOwner maps the HelmChart helm-controller creates (without an owner reference) to the
// ArtifactDeployment named like its HelmRelease.
func helmChartOwner(_ context.Context, obj client.Object) []reconcile.Request {
	name, namespace := obj.GetLabels()[helmNameLabel], obj.GetLabels()[helmNamespaceLabel]
	if name == "" || namespace == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}
