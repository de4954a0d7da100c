package vectordeployment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// outcome is what syncArtifact did for one artifact.
type outcome int

const (
	// adopted: an ArtifactDeployment of the same identity exists (reuse, or a resync); the VectorDeployment owns it.
	adopted outcome = iota
	// created: the ArtifactDeployment was created under the computed name.
	created
	// collided: the computed name is taken by another identity; the slot's counter must be bumped.
	collided
	// collisionLimit: the name still collides after MaxCollisionCount salts; the controller gives up on the slot.
	collisionLimit
)

// slotResult is the state of one artifact's slot after syncArtifact.
type slotResult struct {
	outcome        outcome
	name           string
	collisionCount int32
	// deployment is the ArtifactDeployment that serves the slot, for adopted and created.
	deployment *konfidencev1.ArtifactDeployment
	// message explains a collision.
	message string
	// described names the ArtifactDeployment and its identity, for the event of a creation or adoption.
	described string
	// adoptedNow: adopt made vd an owner in this reconcile.
	adoptedNow bool
}

// syncArtifact makes sure an artifact has its ArtifactDeployment and that vd owns it.
//
// An ArtifactDeployment of the same identity is adopted under whatever name it has: a reusable artifact that was
// deployed under a salted name while a squatter held its unsalted one keeps that one deployment even once the
// squatter is gone (the limitation ADR-0034 leaves open). Otherwise the name is computed from the identity and
// the slot's collision count, as the Deployment controller names ReplicaSets; a name held by another identity is
// a collision the caller recovers from by bumping the count.
func (r *Reconciler) syncArtifact(ctx context.Context, vd *konfidencev1.VectorDeployment, a Artifact, collisionCount int32) (slotResult, error) {
	if err := checkLimits(a); err != nil {
		return slotResult{}, err
	}
	id := identityOf(a, vd)
	// From the cache. Asking the API server before every creation would cost a namespace-wide LIST each time
	// (measured with benchstat: +47% API requests and twice the wall time for a cold start of 1,000 slots) to
	// close a window of milliseconds in which another VectorDeployment's salted creation is not yet cached.
	existing, err := r.findByIdentity(ctx, vd.Namespace, id)
	if err != nil {
		return slotResult{}, err
	}
	if existing != nil {
		return r.adopt(ctx, vd, id, a.Source, existing, collisionCount)
	}

	desired, err := desiredArtifactDeployment(r.Scheme(), vd, a, collisionCount, r.hashLength)
	if err != nil {
		return slotResult{}, err
	}
	namesBuilt.Inc()
	name := desired.Name
	err = r.Create(ctx, desired)
	switch {
	case err == nil:
		creations.Inc()
		log.FromContext(ctx).Info("created ArtifactDeployment", "artifactDeployment", name, "component", id.component, "version", id.version)
		return slotResult{outcome: created, name: name, collisionCount: collisionCount, deployment: desired, described: describe(name, id)}, nil
	case apierrors.IsInvalid(err):
		// A rule of the CRD checkLimits does not know (yet): retrying the same object cannot succeed either.
		return slotResult{}, refuse(konfidencev1.ArtifactLimitsExceededReason, "the API server refused ArtifactDeployment %s for %s: %v", name, id, err)
	case !apierrors.IsAlreadyExists(err):
		return slotResult{}, fmt.Errorf("creating ArtifactDeployment %s: %w", name, err)
	}

	// The name is taken. Read the truth from the API server: the cache may not have the holder yet.
	holder := &konfidencev1.ArtifactDeployment{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: vd.Namespace, Name: name}, holder); err != nil {
		return slotResult{}, fmt.Errorf("reading ArtifactDeployment %s that holds the name: %w", name, err)
	}
	if id.matches(holder) {
		return r.adopt(ctx, vd, id, a.Source, holder, collisionCount)
	}

	msg := fmt.Sprintf("ArtifactDeployment name %s for %s is taken by %s (collision count %d)", name, id, identityOfObject(holder), collisionCount)
	if collisionCount >= konfidencev1.MaxCollisionCount {
		// Reported once, as HashCollisionLimitExceeded, rather than on every resync of a stalled slot.
		return slotResult{outcome: collisionLimit, name: name, collisionCount: collisionCount, message: msg}, nil
	}
	result := slotResult{outcome: collided, name: name, collisionCount: collisionCount + 1, message: msg}
	if bumped, err := r.counterMovedOn(ctx, vd, a.Component, collisionCount); err != nil || bumped {
		// This reconcile read a stale counter: the collision is already handled. Its status write will fail on
		// the resourceVersion precondition and the next reconcile sees the bumped counter; no second event.
		return result, err
	}
	collisionsRecovered.Inc()
	r.event(vd, corev1.EventTypeWarning, konfidencev1.ArtifactDeploymentHashCollisionReason, "%s", msg)
	log.FromContext(ctx).Info("ArtifactDeployment name collision", "artifactDeployment", name, "component", id.component, "version", id.version, "collisionCount", collisionCount)
	return result, nil
}

// counterMovedOn tells whether the API server already holds a higher collision count for the slot than the one
// this reconcile computed with.
func (r *Reconciler) counterMovedOn(ctx context.Context, vd *konfidencev1.VectorDeployment, component string, collisionCount int32) (bool, error) {
	latest := &konfidencev1.VectorDeployment{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(vd), latest); err != nil {
		return false, fmt.Errorf("reading the latest collision count: %w", err)
	}
	return collisionCountOfSlot(latest, component) > collisionCount, nil
}

// findByIdentity returns the ArtifactDeployment of an identity, if any: one this controller created, found by its
// identity label, else one Konfidence created, found by the annotations alone (Konfidence writes no such label).
// Should there be several (only a bug could make them), the least salted one wins, so every reconciler picks the
// same.
func (r *Reconciler) findByIdentity(ctx context.Context, namespace string, id identity) (*konfidencev1.ArtifactDeployment, error) {
	found, err := r.listByIdentity(ctx, id, client.InNamespace(namespace), client.MatchingFields{identityIndex: id.label()})
	if err == nil && len(found) == 0 {
		found, err = r.listByIdentity(ctx, id, client.InNamespace(namespace), client.MatchingFields{componentIndex: id.component})
	}
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return slices.MinFunc(found, func(a, b *konfidencev1.ArtifactDeployment) int {
		if c := collisionCountOf(a) - collisionCountOf(b); c != 0 {
			return int(c)
		}
		return strings.Compare(a.Name, b.Name)
	}), nil
}

// listByIdentity lists the ArtifactDeployments of an identity that are not being deleted.
func (r *Reconciler) listByIdentity(ctx context.Context, id identity, opts ...client.ListOption) ([]*konfidencev1.ArtifactDeployment, error) {
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing ArtifactDeployments of %s: %w", id, err)
	}
	var found []*konfidencev1.ArtifactDeployment
	for i := range list.Items {
		if ad := &list.Items[i]; id.matches(ad) && ad.DeletionTimestamp.IsZero() {
			found = append(found, ad)
		}
	}
	return found, nil
}

// adopt adds vd as an owner of an ArtifactDeployment of its identity built from the same source. The
// owner-reference list is written with an optimistic lock, so two VectorDeployments adopting at once cannot drop
// each other's reference.
//
// The identity (and so the name) leaves the source out, since names are a persistence format; the source
// annotation is what tells the same artifact from different content published under its name elsewhere, or
// re-published under it. Such an ArtifactDeployment is neither shared nor changed. One created before sources
// were recorded has none, and gets the adopter's: upgrades keep their deployments. One Konfidence created lacks
// the identity label too, and gets it.
func (r *Reconciler) adopt(ctx context.Context, vd *konfidencev1.VectorDeployment, id identity, source string,
	ad *konfidencev1.ArtifactDeployment, collisionCount int32) (slotResult, error) {
	recorded, hasSource := ad.Annotations[konfidencev1.ArtifactSourceAnnotation]
	if hasSource && recorded != source {
		return slotResult{}, refuse(konfidencev1.ArtifactSourceConflictReason,
			"ArtifactDeployment %s of %s was built from %s, not from %s; it is neither shared nor changed", ad.Name, id, recorded, source)
	}
	result := slotResult{outcome: adopted, name: ad.Name, collisionCount: max(collisionCount, collisionCountOf(ad)), deployment: ad}
	labelled := ad.Labels[konfidencev1.ArtifactIdentityLabel] == id.label()
	owned := IsOwnedBy(ad, vd)
	if owned && hasSource && labelled {
		return result, nil
	}
	before := ad.DeepCopy()
	metav1.SetMetaDataAnnotation(&ad.ObjectMeta, konfidencev1.ArtifactSourceAnnotation, source)
	if err := setOwner(r.Scheme(), vd, id, ad); err != nil {
		return slotResult{}, err
	}
	if !labelled {
		// Taken over from Konfidence: the label makes the next lookup as cheap as for this controller's own.
		metav1.SetMetaDataLabel(&ad.ObjectMeta, konfidencev1.ArtifactIdentityLabel, id.label())
	}
	if err := r.Patch(ctx, ad, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return slotResult{}, fmt.Errorf("adopting ArtifactDeployment %s: %w", ad.Name, err)
	}
	if owned {
		log.FromContext(ctx).Info("recorded the source and identity label of ArtifactDeployment", "artifactDeployment", ad.Name, "source", source)
		return result, nil
	}
	adoptions.Inc()
	log.FromContext(ctx).Info("adopted ArtifactDeployment", "artifactDeployment", ad.Name, "component", id.component, "version", id.version)
	result.adoptedNow, result.described = true, describe(ad.Name, id)
	return result, nil
}

func describe(name string, id identity) string { return fmt.Sprintf("%s for %s", name, id) }

// setOwner makes vd an owner of ad: the controller of a non-reusable ArtifactDeployment, one of several
// non-controlling owners of a reusable one, so Kubernetes garbage collection removes a shared ArtifactDeployment
// only with its last VectorDeployment.
func setOwner(scheme *runtime.Scheme, vd *konfidencev1.VectorDeployment, id identity, ad *konfidencev1.ArtifactDeployment) error {
	if id.allowReuse {
		return controllerutil.SetOwnerReference(vd, ad, scheme)
	}
	return controllerutil.SetControllerReference(vd, ad, scheme)
}

// IsOwnedBy tells whether vd is among ad's owners.
func IsOwnedBy(ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment) bool {
	return slices.ContainsFunc(ad.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == vd.UID })
}

// DesiredArtifactDeployment is the ArtifactDeployment the reconciler creates for artifact a of vd in a slot whose
// collision count is collisionCount: named, labelled, annotated and owned as the reconciler creates it. It reads
// nothing from a cluster, so `fluxdeployer render` shows exactly what the reconciler would create.
func DesiredArtifactDeployment(scheme *runtime.Scheme, vd *konfidencev1.VectorDeployment, a Artifact, collisionCount int32) (*konfidencev1.ArtifactDeployment, error) {
	if err := checkLimits(a); err != nil {
		return nil, err
	}
	return desiredArtifactDeployment(scheme, vd, a, collisionCount, naming.HashLength)
}

func desiredArtifactDeployment(scheme *runtime.Scheme, vd *konfidencev1.VectorDeployment, a Artifact, collisionCount int32, hashLength int) (*konfidencev1.ArtifactDeployment, error) {
	id := identityOf(a, vd)
	name, hash, err := id.name(collisionCount, hashLength)
	if err != nil {
		return nil, err
	}
	ad := newArtifactDeployment(vd, a, id, name, hash, collisionCount)
	if err := setOwner(scheme, vd, id, ad); err != nil {
		return nil, err
	}
	return ad, nil
}

func newArtifactDeployment(vd *konfidencev1.VectorDeployment, a Artifact, id identity, name, hash string, collisionCount int32) *konfidencev1.ArtifactDeployment {
	ad := &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   vd.Namespace,
			Labels:      map[string]string{konfidencev1.ArtifactIdentityLabel: id.label()},
			Annotations: id.annotations(hash, collisionCount),
		},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest:      a.Manifest,
			TaskManifests: a.Tasks,
			Component:     konfidencev1.Component{Name: a.Component, Version: a.Version, Resources: a.Resources},
		},
	}
	metav1.SetMetaDataAnnotation(&ad.ObjectMeta, konfidencev1.ArtifactSourceAnnotation, a.Source)
	return ad
}
