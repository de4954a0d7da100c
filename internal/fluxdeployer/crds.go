package fluxdeployer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// crdPollInterval is how often the deployer looks for the Flux CRDs that were missing at start.
const crdPollInterval = 5 * time.Second

// fluxKinds are the Flux kinds the deployer writes or watches, and which of them the API server serves. A watch
// of a kind whose CRD is missing never syncs, and controller-runtime then ends the whole process after its cache
// sync timeout, the VectorDeployment reconciler with it; so the deployer watches only the kinds that are
// installed, refuses ArtifactDeployments that need another (FluxCRDsMissing), and watches each missing kind as
// soon as its CRD appears, requeueing every ArtifactDeployment then.
type fluxKinds struct {
	mu        sync.RWMutex
	installed map[schema.GroupVersionKind]bool
}

// watchedFluxKinds are the Flux objects the deployer watches, each with the handler that leads from one to its
// ArtifactDeployment: the owned objects by their controller reference, the others as their kind says.
func watchedFluxKinds(mgr ctrl.Manager) map[schema.GroupVersionKind]fluxWatch {
	owner := ignoreCreate{handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &konfidencev1.ArtifactDeployment{}, handler.OnlyControllerOwner())}
	watches := map[schema.GroupVersionKind]fluxWatch{}
	for _, k := range fluxKindTable {
		w := fluxWatch{obj: k.new(), handler: owner}
		if k.enqueue != nil {
			w.handler = handler.EnqueueRequestsFromMapFunc(k.enqueue)
		}
		watches[k.gvk] = w
	}
	return watches
}

type fluxWatch struct {
	obj     client.Object
	handler handler.EventHandler
}

// discover records which of the kinds the API server serves now and returns the ones that newly are.
func (k *fluxKinds) discover(mapper apimeta.RESTMapper, kinds []schema.GroupVersionKind) []schema.GroupVersionKind {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.installed == nil {
		k.installed = map[schema.GroupVersionKind]bool{}
	}
	var found []schema.GroupVersionKind
	for _, gvk := range kinds {
		if k.installed[gvk] {
			continue
		}
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			k.installed[gvk] = true
			found = append(found, gvk)
		}
	}
	return found
}

// require fails with FluxCRDsMissing unless every object's kind is installed, and the kind that reports the fetch
// of a source without a status (the HelmChart helm-controller creates for a HelmRepository). A nil fluxKinds has every kind (tests that build the
// reconciler directly).
func (k *fluxKinds) require(objects []client.Object) error {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	var missing []string
	need := func(gvk schema.GroupVersionKind) {
		if name := fmt.Sprintf("%s (%s)", gvk.Kind, gvk.GroupVersion()); !k.installed[gvk] && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	for _, obj := range objects {
		fk, err := kindOf(obj)
		if err != nil {
			return err
		}
		need(fk.gvk)
		if fk.statusFrom != nil {
			name, _ := fk.statusFrom(client.ObjectKeyFromObject(obj))
			if reporter := kindNamed(name); reporter != nil {
				need(reporter.gvk)
			}
		}
	}
	if len(missing) > 0 {
		return outcome.Stallingf(konfidencev1.FluxCRDsMissingReason,
			"the API server does not serve %s: the Flux CRDs are not installed; deployed once they are", strings.Join(missing, ", "))
	}
	return nil
}

// crdWatcher watches each Flux kind once the API server serves it. At setup it adds the watches of the kinds
// installed then; started by the manager, it looks for the others every crdPollInterval until all are there.
type crdWatcher struct {
	kinds    *fluxKinds
	watches  map[schema.GroupVersionKind]fluxWatch
	ctrl     controller.Controller
	cache    cache.Cache
	mapper   apimeta.RESTMapper
	appeared chan event.GenericEvent // requeues every ArtifactDeployment, some of which wait for the new kinds
	log      logr.Logger
}

// watchInstalled adds a watch for every kind that is newly installed and returns those still missing.
func (w *crdWatcher) watchInstalled() (missing []string, err error) {
	all := slices.Collect(maps.Keys(w.watches))
	found := w.kinds.discover(w.mapper, all)
	for _, gvk := range found {
		fw := w.watches[gvk]
		if err := w.ctrl.Watch(source.Kind(w.cache, fw.obj, fw.handler)); err != nil {
			return nil, fmt.Errorf("watching %s: %w", gvk.Kind, err)
		}
	}
	for _, gvk := range all {
		if !w.kinds.has(gvk) {
			missing = append(missing, gvk.GroupKind().String())
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// Start looks for the missing kinds until they are all installed or the manager stops.
func (w *crdWatcher) Start(ctx context.Context) error {
	ticker := time.NewTicker(crdPollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		before := w.kinds.count()
		missing, err := w.watchInstalled()
		if err != nil {
			return err
		}
		if w.kinds.count() == before {
			continue
		}
		w.log.Info("Flux CRDs installed: watching them and reconciling every ArtifactDeployment again", "stillMissing", missing)
		select {
		case w.appeared <- event.GenericEvent{Object: &konfidencev1.ArtifactDeployment{}}:
		default: // a requeue of every ArtifactDeployment is pending already
		}
		if len(missing) == 0 {
			return nil
		}
	}
}

func (k *fluxKinds) has(gvk schema.GroupVersionKind) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.installed[gvk]
}

func (k *fluxKinds) count() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.installed)
}
