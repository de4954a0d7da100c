package vectordeployment

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// shardKey is an object's sharding.fluxcd.io/key as a selector sees it: a value, or none at all.
type shardKey struct {
	value string
	set   bool
}

func shardKeyOf(obj client.Object) shardKey {
	value, set := obj.GetLabels()[konfidencev1.ShardKeyLabel]
	return shardKey{value: value, set: set}
}

func (k shardKey) String() string {
	if !k.set {
		return "no shard key"
	}
	return fmt.Sprintf("shard key %q", k.value)
}

// setShardKey gives ad the shard key k: an ArtifactDeployment is in the shard of its VectorDeployments, so that the
// instance that reconciles them sees it and its Flux deployer applies it. It tells whether ad changed.
func setShardKey(ad *konfidencev1.ArtifactDeployment, k shardKey) bool {
	if shardKeyOf(ad) == k {
		return false
	}
	if k.set {
		metav1.SetMetaDataLabel(&ad.ObjectMeta, konfidencev1.ShardKeyLabel, k.value)
	} else {
		delete(ad.Labels, konfidencev1.ShardKeyLabel)
	}
	return true
}

// checkShardKey refuses vd when its shard key is not its namespace's: that of the oldest VectorDeployment there
// (ties go to the smaller name, so every instance decides alike), read from every shard. All VectorDeployments
// of a namespace are in one shard, and so are the ArtifactDeployments they create: a reusable ArtifactDeployment
// is shared only within a namespace, and the workload names deployed into a namespace are claimed among its
// ArtifactDeployments, so one instance sees every object either decision needs. Moving a namespace to another
// shard is relabelling each of its VectorDeployments; until the oldest has moved, those moved before it wait.
func (r *Reconciler) checkShardKey(ctx context.Context, vd *konfidencev1.VectorDeployment) error {
	list := &konfidencev1.VectorDeploymentList{}
	// Read, not changed: the cache's objects themselves, rather than a copy of every VectorDeployment of the
	// namespace on every reconcile.
	if err := r.peers.List(ctx, list, client.InNamespace(vd.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing the VectorDeployments of namespace %s: %w", vd.Namespace, err)
	}
	oldest := vd
	for i := range list.Items {
		if peer := &list.Items[i]; peer.DeletionTimestamp.IsZero() && createdEarlier(peer, oldest) {
			oldest = peer
		}
	}
	if own, namespaces := shardKeyOf(vd), shardKeyOf(oldest); own != namespaces {
		return outcome.Stallingf(konfidencev1.ShardKeyConflictReason,
			"the VectorDeployments of namespace %s are in one shard, that of the oldest (%s, %s); this one has %s: nothing is created, adopted or relabelled for it until the keys agree",
			vd.Namespace, oldest.Name, namespaces, own)
	}
	return nil
}

// createdEarlier tells whether a was created before b: earlier, or at the same second and first by name.
func createdEarlier(a, b *konfidencev1.VectorDeployment) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return strings.Compare(a.Name, b.Name) < 0
}

// trimToShardKey keeps, of a VectorDeployment in the cache of every shard's (see operating.AcrossShards), what
// checkShardKey decides by: its name, age, deletion and shard key.
func trimToShardKey(obj any) (any, error) {
	vd, ok := obj.(*konfidencev1.VectorDeployment)
	if !ok {
		return obj, nil
	}
	trimmed := &konfidencev1.VectorDeployment{TypeMeta: vd.TypeMeta, ObjectMeta: operating.AcrossShardsMeta(vd)}
	if k := shardKeyOf(vd); k.set {
		trimmed.Labels = map[string]string{konfidencev1.ShardKeyLabel: k.value}
	}
	return trimmed, nil
}

// refusedPeers requeues the VectorDeployments of this shard refused with ShardKeyConflict in the namespace of a
// VectorDeployment whose shard key changed or that went away: the namespace's shard may be theirs now.
func (r *Reconciler) refusedPeers(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &konfidencev1.VectorDeploymentList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if vd := &list.Items[i]; vd.Name != obj.GetName() && conditions.GetReason(vd, konfidencev1.ReadyCondition) == konfidencev1.ShardKeyConflictReason {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(vd)})
		}
	}
	return reqs
}
