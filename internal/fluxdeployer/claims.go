package fluxdeployer

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// workloadNameIndex indexes ArtifactDeployments by workloadName, across namespaces.
const workloadNameIndex = "fluxdeployer.konfidence.cloud/workload-name"

// workloadName is what every name an ArtifactDeployment's workloads get in their target namespace ends in: the
// hash that ends the ArtifactDeployment's name (nameHash). A Helm release is named like the ArtifactDeployment,
// <basename>-<version>-<hash>, and its chart names its objects after it; a Kustomization appends -<version>-<hash>
// or -<hash> to the name of every object of its bundle. Names are unique per namespace only, and a configured
// targetNamespace gathers many namespaces' workloads in one, where two ArtifactDeployments rendering one name
// would share objects, and each one's upgrade and prune would act on the other's. Whatever the kinds, two of them
// can render one name only if they have one hash (a bundle's object frontend-1-2-3 with the suffix -<hash>, or
// frontend with -1-2-3-<hash>, is the release frontend-1-2-3-<hash>), so Helm and Kustomize claim in one space,
// by the hash alone. It comes from the name, which cannot change, never from an annotation, which a tenant can
// edit to move an older ArtifactDeployment's claim onto a name another one deploys under.
func workloadName(ad *konfidencev1.ArtifactDeployment) (string, bool) {
	if !handled(ad) || checkName(ad.Name) != nil {
		return "", false
	}
	return nameHash(ad.Name), true
}

// nameHash is the last dash-separated part of an ArtifactDeployment's name: the hash this project's names and
// Konfidence's end in (see internal/vectordeployment/naming), or the whole name when it has no dash.
func nameHash(name string) string {
	return name[strings.LastIndexByte(name, '-')+1:]
}

// indexWorkloadNames registers workloadNameIndex with the cache the claims are read from, for lookups across
// namespaces (a target namespace gathers the workloads of many).
func indexWorkloadNames(ctx context.Context, informers cache.Informers) error {
	return operating.IndexField(ctx, informers, &konfidencev1.ArtifactDeployment{}, workloadNameIndex, true, func(obj client.Object) []string {
		if name, ok := workloadName(obj.(*konfidencev1.ArtifactDeployment)); ok {
			return []string{name}
		}
		return nil
	})
}

// checkClaim refuses to deploy an ArtifactDeployment whose workload name another one, created earlier, already
// claims in the same target namespace of this cluster: the oldest claimant keeps the name (ties go to the smaller
// namespace/name, so every replica decides alike), the others apply nothing and say why. A remote target is left
// out: from here the cluster behind a kubeconfig cannot be told apart from another one.
func (r *Reconciler) checkClaim(ctx context.Context, cfg config, ad *konfidencev1.ArtifactDeployment, t target) error {
	name, ok := workloadName(ad)
	if !ok || t.kubeConfig != nil {
		return nil
	}
	claimants, err := r.claimants(ctx, name)
	if err != nil {
		return err
	}
	for i := range claimants {
		other := &claimants[i]
		// The namespace first: without a shared target namespace, the claimants of other namespaces are told
		// apart without reading their kubeconfig Secrets.
		if !claimsEarlier(other, ad) || targetNamespace(cfg, other) != t.namespace {
			continue
		}
		ot, err := resolveTarget(cfg, other, r.secrets.lookup(ctx, other.Namespace, false))
		if err != nil {
			return err
		}
		if ot.kubeConfig == nil {
			// Which namespace holds the claim is another tenant's business: the message names only the claim.
			return outcome.Stallingf(konfidencev1.TargetNameConflictReason,
				"the workload names ending in -%s in target namespace %s are claimed by an ArtifactDeployment created earlier; nothing is applied for this one",
				name, t.namespace)
		}
	}
	return nil
}

// trimToClaim keeps, of an ArtifactDeployment in the cache of every shard's (see operating.AcrossShards), what a
// claim is decided by: its name, namespace, creation and deletion, and manifest type. Claims span namespaces
// when a targetNamespace gathers their workloads, and so span shards; the ArtifactDeployments of the others are
// held this small.
func trimToClaim(obj any) (any, error) {
	ad, ok := obj.(*konfidencev1.ArtifactDeployment)
	if !ok {
		return obj, nil
	}
	return &konfidencev1.ArtifactDeployment{
		TypeMeta:   ad.TypeMeta,
		ObjectMeta: operating.AcrossShardsMeta(ad),
		Spec:       konfidencev1.ArtifactDeploymentSpec{Manifest: konfidencev1.ArtifactManifest{Type: ad.Spec.Manifest.Type}},
	}, nil
}

// claimants lists the live ArtifactDeployments of a workload name, in every namespace.
func (r *Reconciler) claimants(ctx context.Context, name string) ([]konfidencev1.ArtifactDeployment, error) {
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := r.claims.List(ctx, list, client.MatchingFields{workloadNameIndex: name}); err != nil {
		return nil, outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("listing the ArtifactDeployments of %s: %w", name, err))
	}
	live := list.Items[:0]
	for _, ad := range list.Items {
		if ad.DeletionTimestamp.IsZero() && handled(&ad) {
			live = append(live, ad)
		}
	}
	return live, nil
}

// claimsEarlier tells whether a holds its workload name before b: created earlier, or at the same second and first
// by namespace/name. An object never claims before itself.
func claimsEarlier(a, b *konfidencev1.ArtifactDeployment) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) < 0
}

// releasedClaims requeues the other claimants of a deleted ArtifactDeployment's workload name: the next oldest
// now holds it and deploys.
func (r *Reconciler) releasedClaims(ctx context.Context, obj client.Object) []reconcile.Request {
	name, ok := workloadName(obj.(*konfidencev1.ArtifactDeployment))
	if !ok {
		return nil
	}
	claimants, err := r.claimants(ctx, name)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(claimants))
	for i := range claimants {
		if key := client.ObjectKeyFromObject(&claimants[i]); key != client.ObjectKeyFromObject(obj) {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

// onDelete lets only deletions through: a claim is released by the deletion of its holder, and a new
// ArtifactDeployment never claims before the existing ones.
var onDelete = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
