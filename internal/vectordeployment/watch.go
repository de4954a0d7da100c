package vectordeployment

import (
	"context"
	"slices"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
)

// identityIndex indexes the cached ArtifactDeployments by ArtifactIdentityLabel. Listing by label selector makes
// the cache match every ArtifactDeployment of the namespace against it, once per artifact of every reconcile:
// O(artifacts × ArtifactDeployments) per VectorDeployment; the index answers from a map.
const identityIndex = "konfidence.cloud/artifact-identity"

// indexIdentity registers identityIndex with the manager's cache, for lookups within a namespace (the only ones
// findByIdentity makes).
func indexIdentity(mgr ctrl.Manager) error {
	return operating.IndexField(context.Background(), mgr.GetCache(), &konfidencev1.ArtifactDeployment{}, identityIndex, false,
		func(obj client.Object) []string {
			if id, ok := obj.GetLabels()[konfidencev1.ArtifactIdentityLabel]; ok {
				return []string{id}
			}
			return nil
		})
}

// firstReportWait bounds how long a VectorDeployment's status write waits for the first report of the
// ArtifactDeployments a deployer of this process has taken on (awaitingFirstReport). The wait ends at the last of
// those reports, which requeues the VectorDeployment, so it usually lasts as long as the deployer takes; the bound
// is for a deployer that does not report (it fails to start, or a backlog of thousands): the status then says
// they are on their way.
const firstReportWait = time.Minute

// awaitingFirstReport is how much longer the status write of a VectorDeployment waits for its ArtifactDeployments
// whose type a deployer of this process handles (Finalizers) and which have not reported yet: created less than
// firstReportWait ago, not suspended (a suspended one reports nothing) and not being deleted. Without the wait,
// each VectorDeployment writes its status once when it has created its ArtifactDeployments, and again as they
// report; with it, once, telling each one's state, and no fixed delay holds the report back.
func (r *Reconciler) awaitingFirstReport(slots map[string]slotResult) time.Duration {
	var wait time.Duration
	for _, slot := range slots {
		ad := slot.deployment
		if ad == nil || conditions.Has(ad, konfidencev1.ReadyCondition) || ad.Spec.Suspend || !ad.DeletionTimestamp.IsZero() {
			continue
		}
		if _, handled := r.Finalizers[ad.Spec.Manifest.Type]; handled {
			wait = max(wait, firstReportWait-time.Since(ad.CreationTimestamp.Time))
		}
	}
	return wait
}

// artifactDeploymentChanges requeues the owners of an ArtifactDeployment when something they report or act on
// changed: it went away, its owners changed, or its Ready condition or deployment results did. Every owner, not
// just the controller: a reusable ArtifactDeployment's readiness matters to each VectorDeployment that shares it.
// A creation requeues nothing: the VectorDeployment that created it knows it, and at start every VectorDeployment
// is reconciled anyway. The request is queued at once: the work queue keeps one request per VectorDeployment that
// waits, so the changes of its ArtifactDeployments that come while it waits or is reconciled cost one more
// reconcile, and their first reports one status write (awaitingFirstReport).
func artifactDeploymentChanges() handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !reportedChanged(e.ObjectOld, e.ObjectNew) {
				return
			}
			for _, req := range append(owningVectorDeployments(e.ObjectOld), owningVectorDeployments(e.ObjectNew)...) {
				q.Add(req)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			for _, req := range owningVectorDeployments(e.Object) {
				q.Add(req)
			}
		},
	}
}

// reportedChanged tells whether an update of an ArtifactDeployment changed what its VectorDeployments read of it.
func reportedChanged(oldObj, newObj client.Object) bool {
	o, okOld := oldObj.(*konfidencev1.ArtifactDeployment)
	n, okNew := newObj.(*konfidencev1.ArtifactDeployment)
	if !okOld || !okNew {
		return true
	}
	return !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		!slices.Equal(ownerUIDs(o), ownerUIDs(n)) ||
		!sameReady(conditions.Get(o, konfidencev1.ReadyCondition), conditions.Get(n, konfidencev1.ReadyCondition)) ||
		conditions.IsStalled(o) != conditions.IsStalled(n) ||
		!equality.Semantic.DeepEqual(o.Status.DeploymentResult, n.Status.DeploymentResult)
}

func ownerUIDs(ad *konfidencev1.ArtifactDeployment) []string {
	uids := make([]string, len(ad.OwnerReferences))
	for i, ref := range ad.OwnerReferences {
		uids[i] = string(ref.UID)
	}
	return uids
}

// sameReady compares what a VectorDeployment's status shows of a Ready condition.
func sameReady(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

func owningVectorDeployments(obj client.Object) []reconcile.Request {
	var requests []reconcile.Request
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "VectorDeployment" && ref.APIVersion == konfidencev1.GroupVersion.String() {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}})
		}
	}
	return requests
}
