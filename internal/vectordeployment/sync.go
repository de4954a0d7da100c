package vectordeployment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// slotOutcome is what syncArtifact did for one artifact.
type slotOutcome int

const (
	// adopted: an ArtifactDeployment of the same identity exists (reuse, or a resync); the VectorDeployment owns it.
	adopted slotOutcome = iota
	// created: the ArtifactDeployment was created under the computed name.
	created
	// collided: the computed name is taken by another identity; the slot's counter must be bumped.
	collided
	// collisionLimit: the name still collides after MaxCollisionCount salts; the controller gives up on the slot.
	collisionLimit
)

// slotResult is the state of one artifact's slot after syncArtifact.
type slotResult struct {
	outcome        slotOutcome
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

// syncArtifacts syncs every artifact that was read. An artifact from which no name can be built fails alone,
// like one that could not be read; an API error on one artifact does not keep the others from being synced,
// and what was synced is returned with the errors.
func (r *Reconciler) syncArtifacts(ctx context.Context, vd *konfidencev1.VectorDeployment, artifacts []ResolvedArtifact) (map[string]slotResult, error) {
	slots := map[string]slotResult{}
	var errs []error
	for i := range artifacts {
		ra := &artifacts[i]
		if ra.Err != nil {
			continue
		}
		slot, err := r.syncArtifact(ctx, vd, ra.Artifact, collisionCountOfSlot(vd, ra.Artifact.Component))
		switch {
		case err == nil:
			slots[ra.Artifact.Component] = slot
		case outcome.Stalls(err), FailureReason(err) == konfidencev1.QuotaExceededReason:
			// The artifact fails alone, with its reason in the status and an event; the others still deploy.
			ra.Err = err
		default:
			errs = append(errs, err)
		}
	}
	r.eventOwnership(vd, slots)
	return slots, kerrors.NewAggregate(errs)
}

// eventOwnership records one event for the ArtifactDeployments this reconcile created and one for those it
// adopted, rather than one per ArtifactDeployment: at most one event per artifact, and those for what a person
// may act on.
func (r *Reconciler) eventOwnership(vd *konfidencev1.VectorDeployment, slots map[string]slotResult) {
	var made, adopted []string
	for _, slot := range slots {
		switch {
		case slot.outcome == created:
			made = append(made, slot.described)
		case slot.adoptedNow:
			adopted = append(adopted, slot.described)
		}
	}
	if len(made) > 0 {
		r.event(vd, corev1.EventTypeNormal, "ArtifactDeploymentCreated", "Created %d ArtifactDeployments: %s", len(made), joinBounded(sorted(made), "; "))
	}
	if len(adopted) > 0 {
		r.event(vd, corev1.EventTypeNormal, "ArtifactDeploymentAdopted", "Adopted %d ArtifactDeployments: %s", len(adopted), joinBounded(sorted(adopted), "; "))
	}
}

func collisionCountOfSlot(vd *konfidencev1.VectorDeployment, component string) int32 {
	return ptr.Deref(vd.Status.ResultingArtifactDeployments[component].CollisionCount, 0)
}

// recordSlots writes each slot into status.resultingArtifactDeployments and tells whether a collision counter
// was bumped. A bumped count is permanent for its slot: the name it salts is the slot's name from then on. Until
// the salted name is tried, the VectorDeployment is Reconciling, and not Ready: a slot of it has no
// ArtifactDeployment.
func recordSlots(vd *konfidencev1.VectorDeployment, slots map[string]slotResult) (bumped bool) {
	if vd.Status.ResultingArtifactDeployments == nil && len(slots) > 0 {
		vd.Status.ResultingArtifactDeployments = map[string]konfidencev1.ResultingArtifactDeployment{}
	}
	for component, slot := range slots {
		entry := vd.Status.ResultingArtifactDeployments[component]
		if slot.outcome != collided {
			entry.Name = slot.name
		}
		if slot.collisionCount > 0 {
			entry.CollisionCount = ptr.To(slot.collisionCount)
		}
		vd.Status.ResultingArtifactDeployments[component] = entry
		if slot.outcome == collided {
			bumped = true
			conditions.MarkUnknown(vd, konfidencev1.ReadyCondition, konfidencev1.ArtifactDeploymentHashCollisionReason, "%s", slot.message)
			conditions.MarkReconciling(vd, konfidencev1.ArtifactDeploymentHashCollisionReason, "%s", slot.message)
		}
	}
	return bumped
}

// syncArtifact makes sure an artifact has its ArtifactDeployment and that vd owns it.
//
// An ArtifactDeployment of the same identity is adopted under whatever name it has: a reusable artifact that was
// deployed under a salted name while a squatter held its unsalted one keeps that one deployment even once the
// squatter is gone: moving it to the unsalted name would uninstall and reinstall its workloads. Otherwise the name is computed from the identity and
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
	recorded, err := r.recordedUnderOtherName(ctx, vd, id, desired.Name)
	if err != nil {
		return slotResult{}, err
	}
	if recorded != nil {
		return r.adopt(ctx, vd, id, a.Source, recorded, collisionCount)
	}
	r.addDeployerFinalizer(desired)
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
		return slotResult{}, outcome.Stallingf(konfidencev1.ArtifactLimitsExceededReason, "the API server refused ArtifactDeployment %s for %s: %v", name, id, err)
	case isQuotaExceeded(err):
		// The namespace's bound on what its tenant makes the operator hold: retried with backoff, since the quota may
		// be raised or another ArtifactDeployment deleted, and no watch tells of either. The API server's message
		// names the quota, its limit and its use.
		return slotResult{}, outcome.Retrying(konfidencev1.QuotaExceededReason, fmt.Errorf("creating ArtifactDeployment %s for %s: %w", name, id, err))
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

// recordedUnderOtherName returns the ArtifactDeployment vd's status records for the slot of id when the cache does
// not hold it and its name is not the one computed: one adopted under whatever name it had, which is still in
// another shard's cache while vd moves to this one. Creating under the computed name would deploy it twice; an
// ArtifactDeployment of the computed name is found by the creation's conflict instead.
func (r *Reconciler) recordedUnderOtherName(ctx context.Context, vd *konfidencev1.VectorDeployment, id identity, computed string) (*konfidencev1.ArtifactDeployment, error) {
	name := vd.Status.ResultingArtifactDeployments[id.component].Name
	if name == "" || name == computed {
		return nil, nil
	}
	ad := &konfidencev1.ArtifactDeployment{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: vd.Namespace, Name: name}, ad); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading ArtifactDeployment %s of %s: %w", name, id, err)
	}
	if !id.matches(ad) || !ad.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return ad, nil
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
		return slotResult{}, outcome.Stallingf(konfidencev1.ArtifactSourceConflictReason,
			"ArtifactDeployment %s of %s was built from %s, not from %s; it is neither shared nor changed", ad.Name, id, recorded, source)
	}
	result := slotResult{outcome: adopted, name: ad.Name, collisionCount: max(collisionCount, collisionCountOf(ad)), deployment: ad}
	labelled := ad.Labels[konfidencev1.ArtifactIdentityLabel] == id.label()
	owned := IsOwnedBy(ad, vd)
	if owned && hasSource && labelled && shardKeyOf(ad) == shardKeyOf(vd) {
		return result, nil
	}
	before := ad.DeepCopy()
	metav1.SetMetaDataAnnotation(&ad.ObjectMeta, konfidencev1.ArtifactSourceAnnotation, source)
	// The ArtifactDeployment follows its VectorDeployments into their shard: checkShardKey keeps all owners of
	// one in one shard.
	moved := setShardKey(ad, shardKeyOf(vd))
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
		log.FromContext(ctx).Info("recorded the source, identity label and shard key of ArtifactDeployment", "artifactDeployment", ad.Name,
			"source", source, "moved", moved)
		return result, nil
	}
	adoptions.Inc()
	log.FromContext(ctx).Info("adopted ArtifactDeployment", "artifactDeployment", ad.Name, "component", id.component, "version", id.version)
	result.adoptedNow, result.described = true, describe(ad.Name, id)
	return result, nil
}

// addDeployerFinalizer puts on ad, before it is created, the finalizer of the deployer of this process that
// handles its manifest type: it must be in place before the deployer creates anything for ad, and setting it at
// creation spares the deployer a write of its own. An ArtifactDeployment no deployer here handles gets none, so its
// deletion never waits for a teardown nobody runs.
func (r *Reconciler) addDeployerFinalizer(ad *konfidencev1.ArtifactDeployment) {
	if finalizer, ok := r.Finalizers[ad.Spec.Manifest.Type]; ok {
		controllerutil.AddFinalizer(ad, finalizer)
	}
}

func describe(name string, id identity) string { return fmt.Sprintf("%s for %s", name, id) }

// setOwner makes vd an owner of ad: the controller of a non-reusable ArtifactDeployment, one of several
// non-controlling owners of a reusable one or of a Stage's instance, which the Stage's VectorDeployments share, so
// Kubernetes garbage collection removes a shared ArtifactDeployment only with its last VectorDeployment.
func setOwner(scheme *runtime.Scheme, vd *konfidencev1.VectorDeployment, id identity, ad *konfidencev1.ArtifactDeployment) error {
	if id.allowReuse || id.stageUID != "" {
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
	setShardKey(ad, shardKeyOf(vd))
	return ad
}

// isQuotaExceeded tells a refusal of the ResourceQuota admission: Forbidden, with its "exceeded quota" message (the
// API server gives the refusal no cause of its own).
func isQuotaExceeded(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}
