package fluxdeployer

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/validation/spec"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// The deployer owns every field of its Flux objects' specs, also those it leaves unset: a server-side apply
// leaves the fields it does not send to their writers, so anyone who may patch a Flux object could otherwise add
// what changes what is deployed (values, patches, post-renderers), from where (a proxy and a CA in the middle, a
// cloud provider's identity), where to and with whose rights, or what a teardown leaves behind (an orphaning
// deletion policy), and keep it there. Listing such fields would miss the next one Flux adds, so it is the other
// way round: every field of the live spec (which the API server keeps to the installed CRD's schema) that the
// deployer leaves unset is taken back, at any depth, but for
//   - the kind's tuning fields (fluxKind.tuning), which a platform may set: they change how patiently or how
//     often Flux works, never what it deploys, from where, where to, with whose rights or what is left behind;
//   - passedOnFields, which the deployer sets itself by merge patch (see passOn);
//   - a field at the default of the kind's schema, as the CRD installed in the cluster defines it (specSchemas):
//     the API server sets it again when it is removed, and a field at its default is what Flux does without it.

// passedOnFields are the spec fields the deployer passes on from the ArtifactDeployment (passOn) rather than
// applies.
var passedOnFields = []string{"suspend"}

// takeBack removes from live, which holds liveFields, every field another writer set there (foreignFields of the
// deployer's desired fields), and returns result, or updated when it removed anything.
func (r *Reconciler) takeBack(ctx context.Context, result applyOutcome, live fluxObject, desired, liveFields map[string]any) (applyOutcome, fluxObject, error) {
	k, err := kindOf(live)
	if err != nil {
		return result, nil, err
	}
	props, err := r.schemas.specSchema(k.gvk)
	if err != nil {
		return result, nil, err
	}
	return r.revertForeignFields(ctx, result, live, foreignFields(desired, liveFields, slices.Concat(k.tuning, passedOnFields), props))
}

// foreignFields lists the fields of live's spec that another writer set, each as its path from the object's root:
// every field desired leaves unset, at any depth, but for the allowed ones (dotted paths below spec, each with
// whatever lies below it) and those at their default in props, the kind's spec schema. A map desired sets is the
// deployer's whole, so keys another writer adds to it are foreign too (labels on every rendered object). A value
// desired sets is the deployer's: the apply forced it, and a list it sets is compared whole (contains) and applied
// again. Both objects are in their unstructured form.
func foreignFields(desired, live map[string]any, allowed []string, props *spec.Schema) [][]string {
	want, _ := desired["spec"].(map[string]any)
	got, _ := live["spec"].(map[string]any)
	var foreign [][]string
	walkForeign([]string{"spec"}, want, got, allowed, props, &foreign)
	return foreign
}

// walkForeign adds to foreign the fields of live, at path, that are foreign to desired (see foreignFields);
// props is live's schema, nil where it is not known.
func walkForeign(path []string, desired, live map[string]any, allowed []string, props *spec.Schema, foreign *[][]string) {
	for _, key := range slices.Sorted(maps.Keys(live)) {
		fieldPath := append(slices.Clone(path), key)
		field := strings.Join(fieldPath[1:], ".")
		value, sub := live[key], property(props, key)
		liveMap, isMap := value.(map[string]any)
		if want, set := desired[key]; set {
			if wantMap, ok := want.(map[string]any); ok && isMap {
				walkForeign(fieldPath, wantMap, liveMap, allowed, sub, foreign)
			}
			continue
		}
		switch {
		case slices.Contains(allowed, field), isDefault(sub, value):
		case isMap && slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(a, field+".") }):
			walkForeign(fieldPath, nil, liveMap, allowed, sub, foreign) // only some of its fields are allowed
		default:
			*foreign = append(*foreign, fieldPath)
		}
	}
}

// property is the schema of an object's field key, or of the values of a map; nil where props, the object's
// schema, says nothing.
func property(props *spec.Schema, key string) *spec.Schema {
	switch {
	case props == nil:
		return nil
	case props.Properties != nil:
		if p, ok := props.Properties[key]; ok {
			return &p
		}
		return nil
	case props.AdditionalProperties != nil:
		return props.AdditionalProperties.Schema
	}
	return nil
}

// isDefault tells whether value is the default props, its field's schema, gives it.
func isDefault(props *spec.Schema, value any) bool {
	return props != nil && props.Default != nil && equalJSON(props.Default, value)
}

// equalJSON tells whether a and b are the same JSON value (numbers compare alike, whatever their Go type).
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// specSchemas holds the spec schema of each Flux kind as the API server publishes it (its OpenAPI v3 document,
// which every authenticated client may read, from the CRD installed in the cluster), read once per kind and
// process: the defaults the API server sets are that CRD's, whatever Flux version is installed.
type specSchemas struct {
	openAPI openapi3.Root
	mu      sync.Mutex
	byKind  map[schema.GroupVersionKind]*spec.Schema
}

// newSpecSchemas reads the schemas from the API server cfg leads to.
func newSpecSchemas(cfg *rest.Config) (*specSchemas, error) {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &specSchemas{openAPI: openapi3.NewRoot(d.OpenAPIV3())}, nil
}

// specSchema returns the schema of gvk's spec, which it reads from the API server the first time.
func (s *specSchemas) specSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if props, ok := s.byKind[gvk]; ok {
		return props, nil
	}
	doc, err := s.openAPI.GVSpec(gvk.GroupVersion())
	if err != nil {
		return nil, outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("reading the OpenAPI schema of %s for its defaults: %w", gvk.GroupVersion(), err))
	}
	if doc.Components != nil {
		for _, kind := range doc.Components.Schemas {
			if props, ok := kind.Properties["spec"]; ok && ofKind(kind, gvk) {
				if s.byKind == nil {
					s.byKind = map[schema.GroupVersionKind]*spec.Schema{}
				}
				s.byKind[gvk] = &props
				return &props, nil
			}
		}
	}
	return nil, outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("the API server publishes no schema of %s's spec", gvk))
}

// ofKind tells whether an OpenAPI schema is that of gvk, as its x-kubernetes-group-version-kind says.
func ofKind(s *spec.Schema, gvk schema.GroupVersionKind) bool {
	kinds, _ := s.Extensions["x-kubernetes-group-version-kind"].([]any)
	for _, k := range kinds {
		m, _ := k.(map[string]any)
		if m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
			return true
		}
	}
	return false
}

// revertForeignFields removes the foreign fields from live with a JSON merge patch, whose nulls delete a field
// whoever wrote it (a server-side apply can only take back what it sends a value for), and counts that as an
// update. live is the object as the cluster holds it, and is afterwards.
func (r *Reconciler) revertForeignFields(ctx context.Context, result applyOutcome, live fluxObject, foreign [][]string) (applyOutcome, fluxObject, error) {
	if len(foreign) == 0 {
		return result, live, nil
	}
	patch := map[string]any{}
	names := make([]string, len(foreign))
	for i, path := range foreign {
		setNull(patch, path)
		names[i] = strings.Join(path, ".")
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return result, nil, err
	}
	if err := r.client.Patch(ctx, live, client.RawPatch(types.MergePatchType, data), client.FieldOwner(FieldManager)); err != nil {
		return result, nil, outcome.Retrying(konfidencev1.ApplyFailedReason,
			fmt.Errorf("taking back %s of %T %s/%s: %w", strings.Join(names, ", "), live, live.GetNamespace(), live.GetName(), err))
	}
	ctrl.LoggerFrom(ctx).Info("took back fields another writer set", "object", client.ObjectKeyFromObject(live), "fields", names)
	if result == unchanged {
		result = updated
	}
	return result, live, nil
}

// setNull sets path in the merge patch m to null.
func setNull(m map[string]any, path []string) {
	for _, key := range path[:len(path)-1] {
		next, ok := m[key].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[key] = next
		}
		m = next
	}
	m[path[len(path)-1]] = nil
}
