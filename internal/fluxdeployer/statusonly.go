package fluxdeployer

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// lastApply is what the last full reconcile of an ArtifactDeployment applied, and from which inputs. While they
// are unchanged, a reconcile has nothing to decide, apply or pass on again, and only reports the Flux objects'
// status (statusOnly), as Kubernetes' deployment controller syncs only the status when nothing but a ReplicaSet's
// status moved. Every status change of a Flux object requeues its ArtifactDeployment, so this is most reconciles.
type lastApply struct {
	generation    int64  // of the ArtifactDeployment
	shard         string // the ArtifactDeployment's shard key, which its Flux objects carry
	request       string // the reconcile request handled
	configVersion string // the ConfigMap's resourceVersion
	at            time.Time
	interval      time.Duration
	target        target
	// secrets are the Secrets whose presence decided the Flux objects (see resolveReferences), and whether they
	// existed.
	secrets map[string]bool
	objects []appliedObject
}

// appliedObject is one Flux object as the deployer left it.
type appliedObject struct {
	kind       *fluxKind
	key        types.NamespacedName
	generation int64             // see apply
	digest     [sha256.Size]byte // see decidedDigest
}

// lastApplies are the lastApply of each ArtifactDeployment reconciled in full since the process started.
type lastApplies struct {
	mu sync.Mutex
	m  map[types.NamespacedName]lastApply
}

func (l *lastApplies) get(key types.NamespacedName) (lastApply, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.m[key]
	return a, ok
}

func (l *lastApplies) remember(key types.NamespacedName, a lastApply) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[types.NamespacedName]lastApply{}
	}
	l.m[key] = a
}

func (l *lastApplies) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, key)
}

// rememberApply records a full reconcile that applied its Flux objects and passed ad's suspend and reconcile request
// on to them.
func (r *Reconciler) rememberApply(ad *konfidencev1.ArtifactDeployment, cfg config, t target, secrets map[string]bool, applied []fluxObject) error {
	a := lastApply{generation: ad.Generation, shard: ad.Labels[konfidencev1.ShardKeyLabel], request: ad.Status.GetLastHandledReconcileRequest(), configVersion: cfg.version,
		at: time.Now(), interval: cfg.interval, target: t, secrets: secrets}
	for _, obj := range applied {
		o, err := appliedObjectOf(obj)
		if err != nil {
			return err
		}
		a.objects = append(a.objects, o)
	}
	r.applied.remember(client.ObjectKeyFromObject(ad), a)
	return nil
}

// appliedObjectOf records obj as the deployer left it.
func appliedObjectOf(obj fluxObject) (appliedObject, error) {
	k, err := kindOf(obj)
	if err != nil {
		return appliedObject{}, err
	}
	return appliedObject{kind: k, key: client.ObjectKeyFromObject(obj), generation: obj.GetGeneration(), digest: decidedDigest(obj)}, nil
}

// statusOnly returns the last full reconcile of ad and its Flux objects as the cache holds them, when nothing the
// deployer decides can have changed since: ad's generation, shard key and reconcile request, the ConfigMap, which of the
// Secrets it looked for exist (answers shared as for a full reconcile, see objectPresence) and, of each Flux object,
// what decidedDigest covers are as they were, and the last full reconcile is less than an interval ago, as Flux's
// controllers reconcile in full every interval. A remote target is checked in every reconcile (checkTarget reads its
// kubeconfig Secret, which the tenant may point elsewhere), so its ArtifactDeployments always run in full. Claims
// need no check: an ArtifactDeployment refused one applied nothing, so it has no lastApply. Whatever cannot be read
// makes it a full reconcile, which reports the failure.
func (r *Reconciler) statusOnly(ctx context.Context, ad *konfidencev1.ArtifactDeployment) (lastApply, []fluxObject, bool) {
	last, ok := r.applied.get(client.ObjectKeyFromObject(ad))
	if !ok || last.generation != ad.Generation || last.shard != ad.Labels[konfidencev1.ShardKeyLabel] || last.request != ad.Status.GetLastHandledReconcileRequest() ||
		time.Since(last.at) >= last.interval || last.target.kubeConfig != nil {
		return lastApply{}, nil, false
	}
	exists := r.secrets.lookup(ctx, ad.Namespace, false)
	for name, existed := range last.secrets {
		if found, err := exists(name); err != nil || found != existed {
			return lastApply{}, nil, false
		}
	}
	if version, err := r.config.version(ctx); err != nil || version != last.configVersion {
		return lastApply{}, nil, false
	}
	applied := make([]fluxObject, len(last.objects))
	for i, o := range last.objects {
		obj := o.kind.new()
		if err := r.client.Get(ctx, o.key, obj); err != nil || decidedDigest(obj) != o.digest {
			return lastApply{}, nil, false
		}
		applied[i] = obj
	}
	return last, applied, true
}

// decidedDigest covers what the deployer decides of a Flux object: its spec, by the generation, which the API
// server raises on every change of it (another writer's included), and the metadata it writes (labels, annotations,
// owner references), plus whether the object is being deleted. A status write changes none of them.
func decidedDigest(obj client.Object) [sha256.Size]byte {
	raw, _ := json.Marshal(struct { // strings, maps of strings, owner references and a time always marshal
		Generation      int64                   `json:"g"`
		Labels          map[string]string       `json:"l"`
		Annotations     map[string]string       `json:"a"`
		OwnerReferences []metav1.OwnerReference `json:"o"`
		Deleted         bool                    `json:"d"`
	}{obj.GetGeneration(), obj.GetLabels(), obj.GetAnnotations(), obj.GetOwnerReferences(), obj.GetDeletionTimestamp() != nil})
	return sha256.Sum256(raw)
}

// recordingLookups has cluster's secretExists record every answer in seen, for rememberApply.
func recordingLookups(cluster observed, seen map[string]bool) observed {
	lookup := cluster.secretExists
	cluster.secretExists = func(name string) (bool, error) {
		exists, err := lookup(name)
		if err == nil {
			seen[name] = exists
		}
		return exists, err
	}
	return cluster
}
