package fluxdeployer

import (
	"context"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
)

// ControllerName names the controller, its events and its field manager.
const ControllerName = "fluxdeployer"

// Labels helm-controller and kustomize-controller put on what they render and, for helm-controller, on the
// HelmChart it creates; they lead from such an object back to the ArtifactDeployment's namespace.
const (
	helmNameLabel           = "helm.toolkit.fluxcd.io/name"
	helmNamespaceLabel      = "helm.toolkit.fluxcd.io/namespace"
	kustomizeNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
)

// Options configures the Flux deployer from the command line and registers it with the manager.
type Options struct {
	ConfigName      string
	ConfigNamespace string
	Remote          RemoteOptions
}

// BindFlags registers the deployer's flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigName, "flux-deployer-config-name", "flux-deployer-configuration",
		"name of the Flux deployer's ConfigMap")
	fs.StringVar(&o.ConfigNamespace, "flux-deployer-config-namespace", "",
		"namespace of the Flux deployer's ConfigMap (default: the operator's namespace)")
	o.Remote.BindFlags(fs)
}

// defaultConfigNamespace is where the ConfigMap is read when no flag names a namespace: the operator's own, or default
// out of a cluster (make run), where the operator has none.
func defaultConfigNamespace(runtimeNamespace string) string {
	if runtimeNamespace != "" {
		return runtimeNamespace
	}
	return "default"
}

// SetupWithManager builds the reconciler and its watches.
func (o *Options) SetupWithManager(mgr ctrl.Manager, shared operating.Options) error {
	_, err := o.setup(mgr, shared)
	return err
}

// What the Flux deployer reads and writes; docs/security.md gives the reason for each rule. Watched kinds are
// read from the cache only (no get), but for the Flux objects it applies, which the cache holds without their
// spec: one is got when its generation says another writer changed it, or after a start (see apply). Secrets and ServiceAccounts only got by name (a list or watch would be every one of the
// cluster), ConfigMaps only in the operator's namespace. Flux objects are written by server-side apply and merge
// patches only; apply creates them, and setting their owner reference needs delete on them
// (OwnerReferencesPermissionEnforcement). Workloads and pods are only listed, in a target namespace while a
// rollout is in progress (see observeWorkloads), never watched.
// +kubebuilder:rbac:groups=konfidence.cloud,resources=artifactdeployments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=konfidence.cloud,resources=artifactdeployments/status,verbs=patch
// +kubebuilder:rbac:groups=konfidence.cloud,resources=artifactdeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=helmrepositories;ocirepositories,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=helmcharts,verbs=list;watch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch,namespace=fluxdeployer-system

func (o *Options) setup(mgr ctrl.Manager, shared operating.Options) (*Reconciler, error) {
	if o.ConfigNamespace == "" {
		o.ConfigNamespace = defaultConfigNamespace(shared.RuntimeNamespace)
	}
	narrow, err := o.narrowCache(mgr, shared.WatchNamespace)
	if err != nil {
		return nil, err
	}
	claims, err := shared.AcrossShards(mgr, &konfidencev1.ArtifactDeployment{}, trimToClaim)
	if err != nil {
		return nil, err
	}
	if err := indexWorkloadNames(context.Background(), claims); err != nil {
		return nil, err
	}
	recorder, err := shared.NewEventRecorder(mgr, ControllerName)
	if err != nil {
		return nil, err
	}
	schemas, err := newSpecSchemas(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		client:            mgr.GetClient(),
		apiReader:         mgr.GetAPIReader(),
		secrets:           newPresence(mgr.GetAPIReader(), "Secret"),
		serviceAccounts:   newPresence(mgr.GetAPIReader(), "ServiceAccount"),
		config:            &configSource{reader: narrow, key: types.NamespacedName{Namespace: o.ConfigNamespace, Name: o.ConfigName}, recorder: recorder},
		serviceReader:     narrow,
		claims:            claims,
		scheme:            mgr.GetScheme(),
		recorder:          recorder,
		metrics:           shared.DurationMetrics(mgr, "ArtifactDeployment"),
		kinds:             &fluxKinds{},
		remote:            o.Remote,
		schemas:           schemas,
		allowedRegistries: shared.AllowedRegistries,
	}
	appeared := make(chan event.GenericEvent, 1)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(shared.ControllerOptions()).
		For(&konfidencev1.ArtifactDeployment{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(obj client.Object) bool { return handled(obj.(*konfidencev1.ArtifactDeployment)) }),
			// A changed shard key is applied to the Flux objects.
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		WatchesRawSource(source.Kind(claims, client.Object(&konfidencev1.ArtifactDeployment{}),
			handler.EnqueueRequestsFromMapFunc(r.releasedClaims), onDelete)).
		WatchesRawSource(source.Kind(narrow, &corev1.Service{}, handler.TypedEnqueueRequestsFromMapFunc(r.serviceOwner))).
		WatchesRawSource(source.Kind(narrow, &corev1.ConfigMap{}, handler.TypedEnqueueRequestsFromMapFunc(r.everyArtifactDeployment))).
		WatchesRawSource(source.Channel(appeared, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, _ client.Object) []reconcile.Request { return r.artifactDeployments(ctx) }))).
		Build(r)
	if err != nil {
		return nil, err
	}
	return r, o.watchFluxKinds(mgr, r, c, appeared)
}

// watchFluxKinds watches the Flux kinds that are installed and, when some are not, has the manager watch them as
// their CRDs appear.
func (o *Options) watchFluxKinds(mgr ctrl.Manager, r *Reconciler, c controller.Controller, appeared chan event.GenericEvent) error {
	log := mgr.GetLogger().WithName(ControllerName)
	w := &crdWatcher{kinds: r.kinds, watches: watchedFluxKinds(mgr), ctrl: c, cache: mgr.GetCache(),
		mapper: mgr.GetRESTMapper(), appeared: appeared, log: log}
	missing, err := w.watchInstalled()
	if err != nil || len(missing) == 0 {
		return err
	}
	log.Info("Flux CRDs missing: ArtifactDeployments that need them are refused (FluxCRDsMissing) and deployed once the CRDs are installed; checking every "+crdPollInterval.String(),
		"missing", missing)
	return mgr.Add(w)
}

// narrowCache is a cache of the deployer's own for the one ConfigMap and the labelled Services, so the process
// does not cache every ConfigMap and Service of the cluster; with a watch namespace (--watch-all-namespaces=false)
// only that namespace's Services.
func (o *Options) narrowCache(mgr ctrl.Manager, watchNamespace string) (cache.Cache, error) {
	exists, err := labels.NewRequirement(konfidencev1.ArtifactDeploymentLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	services := cache.ByObject{Label: labels.NewSelector().Add(*exists)}
	if watchNamespace != "" {
		services.Namespaces = map[string]cache.Config{watchNamespace: {}}
	}
	narrow, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {
				Namespaces: map[string]cache.Config{o.ConfigNamespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", o.ConfigName),
			},
			&corev1.Service{}: services,
		},
	})
	if err != nil {
		return nil, err
	}
	return narrow, mgr.Add(narrow)
}

// serviceOwner maps a Service of a deployment to its ArtifactDeployment: the name is in the label the deployer
// has Flux stamp, the namespace in the label Flux adds itself (the Service may live in a target namespace).
func (r *Reconciler) serviceOwner(_ context.Context, svc *corev1.Service) []reconcile.Request {
	l := svc.GetLabels()
	namespace := l[helmNamespaceLabel]
	if namespace == "" {
		namespace = l[kustomizeNamespaceLabel]
	}
	if namespace == "" {
		namespace = svc.Namespace
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: l[konfidencev1.ArtifactDeploymentLabel]}}}
}

// everyArtifactDeployment requeues all ArtifactDeployments: the configuration applies to each.
func (r *Reconciler) everyArtifactDeployment(ctx context.Context, _ *corev1.ConfigMap) []reconcile.Request {
	return r.artifactDeployments(ctx)
}

// artifactDeployments requeues every ArtifactDeployment a deployer of the binary handles. Only names and types are
// read, so the cache's objects are listed as they are, not copied: a copy of each, at once, would raise the
// process's peak by the size of its whole cache every time the configuration changes.
func (r *Reconciler) artifactDeployments(ctx context.Context) []reconcile.Request {
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := r.client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ArtifactDeployments to requeue")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if handled(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// ignoreCreate passes on every event of a Flux object the deployer owns but its creation: only the deployer
// creates them, in a reconcile that reports them from the apply's answer, and on start every ArtifactDeployment is
// reconciled anyway. Requeueing would reconcile each new ArtifactDeployment once more per object for nothing.
type ignoreCreate struct{ handler.EventHandler }

func (ignoreCreate) Create(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
