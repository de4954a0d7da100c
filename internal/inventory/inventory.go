// Package inventory reads which objects a HelmRelease or a Kustomization deployed, from its status.inventory:
// helm-controller records there the objects of the Helm release, kustomize-controller the objects it applied.
// Labels say less: anyone who may create objects in a target namespace can put a deployment's label on them.
package inventory

import (
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ref is an object an inventory lists; Group is empty for the core group.
type Ref struct {
	Namespace, Name, Group, Kind string
}

// IsService tells whether ref is a Service (of the core group).
func (r Ref) IsService() bool { return r.Group == "" && r.Kind == "Service" }

// Of returns the objects in obj's inventory, in the order Flux stored them: of a HelmRelease or a Kustomization,
// none for another object or one without an inventory (yet).
func Of(obj client.Object) []Ref {
	switch o := obj.(type) {
	case *helmv2.HelmRelease:
		if inv := o.Status.Inventory; inv != nil {
			return refs(inv.Entries, func(e helmv2.ResourceRef) string { return e.ID })
		}
	case *kustomizev1.Kustomization:
		if inv := o.Status.Inventory; inv != nil {
			return refs(inv.Entries, func(e kustomizev1.ResourceRef) string { return e.ID })
		}
	}
	return nil
}

// refs reads the IDs of helm-controller's or kustomize-controller's inventory entries (two types of one shape).
func refs[E any](entries []E, id func(E) string) []Ref {
	out := make([]Ref, len(entries))
	for i, e := range entries {
		out[i] = Parse(id(e))
	}
	return out
}

// Parse reads an inventory entry's ID, "<namespace>_<name>_<group>_<kind>" (names and namespaces hold no "_"); an
// ID that does not read so is an object of kind "?" named by the ID.
func Parse(id string) Ref {
	parts := strings.SplitN(id, "_", 4)
	if len(parts) != 4 {
		return Ref{Kind: "?", Name: id}
	}
	return Ref{Namespace: parts[0], Name: parts[1], Group: parts[2], Kind: parts[3]}
}
