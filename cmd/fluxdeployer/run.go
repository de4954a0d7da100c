package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	fluxclient "github.com/fluxcd/pkg/runtime/client"
	fluxcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/features"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/fluxcd/pkg/runtime/metrics"
	"github.com/fluxcd/pkg/runtime/pprof"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
)

type runOptions struct {
	metricsAddr, healthAddr string
	// profiling serves Go's profiles under /debug/pprof/ on the metrics endpoint. Off by default: the endpoint is
	// reachable from the cluster's pods (Prometheus scrapes it), and a CPU profile or an execution trace, which
	// anyone who reaches it could ask for at will, costs the operator CPU for as long as the caller chooses.
	profiling               bool
	gracefulShutdownTimeout time.Duration
	controllers             []string
	// reuseControllerNames lets tests build several managers in one process: controller-runtime refuses a
	// controller name twice per process, since both would report the same metrics.
	reuseControllerNames bool
	leaderElection       leaderelection.Options
	logging              logger.Options
	kubeAPI              fluxclient.Options
	watch                fluxcontroller.WatchOptions
	featureGates         features.FeatureGates
	shared               operating.Options
	// setups are the reconcilers --controllers can name, which bind their own flags.
	setups map[string]controllerSetup
}

// newRunOptions returns the options of one run command, before its flags are parsed. The operator's namespace is
// read here, once, for every reconciler.
func newRunOptions() runOptions {
	return runOptions{setups: newControllerSetups(), shared: operating.Options{RuntimeNamespace: runtimeNamespace()}}
}

// serviceAccountNamespace is where the kubelet mounts the namespace of a pod's ServiceAccount.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// runtimeNamespace is the namespace the operator runs in: RUNTIME_NAMESPACE, which the Deployment sets as for
// Flux's controllers, else that of the pod's ServiceAccount; empty out of a cluster.
func runtimeNamespace() string {
	if ns := os.Getenv("RUNTIME_NAMESPACE"); ns != "" {
		return ns
	}
	if ns, err := os.ReadFile(serviceAccountNamespace); err == nil {
		return strings.TrimSpace(string(ns))
	}
	return ""
}

func newRunCommand() *cobra.Command {
	o := newRunOptions()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the operator (the reconcilers chosen with --controllers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(logger.NewLogger(o.logging))
			// No feature is gated yet; as in Flux's controllers, naming an unknown gate is an error.
			if err := o.featureGates.WithLogger(ctrl.Log).SupportedFeatures(map[string]bool{}); err != nil {
				return err
			}
			mgr, err := newManager(fluxclient.GetConfigOrDie(o.kubeAPI), o)
			if err != nil {
				return err
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	o.bindFlags(cmd.Flags())
	return cmd
}

// metricsOptions serves /metrics on --metrics-addr and, with --profiling, Go's profiles beside it, at the paths
// Flux's controllers serve them.
func (o *runOptions) metricsOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.profiling {
		opts.ExtraHandlers = pprof.GetHandlers()
	}
	return opts
}

// bindFlags registers the flags of run, with the names and defaults of Flux's controllers where they have one.
func (o *runOptions) bindFlags(f *pflag.FlagSet) {
	f.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "address the Prometheus metrics endpoint binds to (0 disables it)")
	f.BoolVar(&o.profiling, "profiling", false,
		"serve Go's profiles (heap, CPU, goroutines) under /debug/pprof/ on the metrics endpoint, as Flux's controllers do; "+
			"off by default, since every pod that reaches the metrics port could then ask for them")
	f.StringVar(&o.healthAddr, "health-addr", ":9440", "address the health and readiness probes bind to")
	f.DurationVar(&o.gracefulShutdownTimeout, "graceful-shutdown-timeout", defaultGracefulShutdownTimeout,
		"how long the reconciles in progress may take to finish once the process is asked to stop; below the pod's terminationGracePeriodSeconds (30s by default)")
	f.StringSliceVar(&o.controllers, "controllers", o.knownControllers(),
		"reconcilers to run, comma-separated (known: "+strings.Join(o.knownControllers(), ", ")+")")
	f.StringVar(&o.shared.EventsAddr, "events-addr", "",
		"address of notification-controller's event endpoint, e.g. http://notification-controller.flux-system.svc.cluster.local./ (empty: Kubernetes events only)")
	f.IntVar(&o.shared.Concurrent, "concurrent", 4, "number of objects each reconciler reconciles at once")
	// The former name of --concurrent: a Deployment that still passes it starts, with the value honoured and a
	// warning on stderr, rather than failing on an unknown flag.
	f.IntVar(&o.shared.Concurrent, "vectordeployment-concurrency", 4, "former name of --concurrent")
	_ = f.MarkDeprecated("vectordeployment-concurrency", "use --concurrent")
	f.DurationVar(&o.shared.RequeueDependency, "requeue-dependency", 30*time.Second,
		"interval at which a VectorDeployment waiting for its ArtifactDeployments to be ready is reconciled again")
	f.StringSliceVar((*[]string)(&o.shared.AllowedRegistries), "allowed-registries", nil,
		"registry hosts (host[:port]) VectorDeployments, their artifacts' resources and registry redirects may name; "+
			"another host is refused (RegistryNotAllowed) by both reconcilers. Empty allows every host")
	// Flux's WatchOptions.BindFlags would also add --watch-configs-label-selector, which nothing here watches.
	f.BoolVar(&o.watch.AllNamespaces, "watch-all-namespaces", true,
		"watch VectorDeployments and ArtifactDeployments in all namespaces; false watches only the runtime namespace (RUNTIME_NAMESPACE)")
	f.StringVar(&o.watch.LabelSelector, "watch-label-selector", "",
		"watch and reconcile only the objects with matching labels, of every kind that carries the shard key (VectorDeployments, "+
			"ArtifactDeployments, the Flux objects the operator applies, the HelmCharts of its HelmReleases), e.g. 'sharding.fluxcd.io/key in (shard1)'; "+
			"the leader election ID is suffixed with a hash of it")
	o.kubeAPI.BindFlags(f)
	o.featureGates.BindFlags(f)
	o.leaderElection.BindFlags(f)
	o.logging.BindFlags(f)
	for _, name := range o.knownControllers() {
		o.setups[name].BindFlags(f)
	}
}

// defaultGracefulShutdownTimeout leaves the process time to exit on its own within a pod's default grace period of
// 30s. Every call a reconcile makes honours the manager's context, so stopping takes milliseconds, not this.
const defaultGracefulShutdownTimeout = 20 * time.Second

func (o *runOptions) knownControllers() []string {
	return slices.Sorted(maps.Keys(o.setups))
}

// The manager itself needs events for every reconciler (core/v1 Events: client-go's recorder creates them and
// patches the count of a repeated one), and for leader election a Lease in its own namespace (a Role there, not
// cluster-wide rights; client-go's LeaseLock gets, creates and updates it).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=fluxdeployer-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// newScheme knows Kubernetes' kinds, the project's, and the Flux objects the Flux deployer writes and watches.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, konfidencev1.AddToScheme, sourcev1.AddToScheme, helmv2.AddToScheme, kustomizev1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// newManager builds the controller-runtime manager with the chosen reconcilers and the health and readiness
// probes; the caller starts it.
func newManager(cfg *rest.Config, o runOptions) (ctrl.Manager, error) {
	for _, name := range o.controllers {
		if _, ok := o.setups[name]; !ok {
			return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", name, strings.Join(o.knownControllers(), ", "))
		}
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	watchNamespace, err := o.watchNamespace()
	if err != nil {
		return nil, err
	}
	// The manager's REST mapper, built first: which kinds the API server serves decides what the cache can narrow.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	cacheOptions, err := o.cacheOptions(servedKinds(scheme, mapper))
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		MapperProvider:         func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil },
		Cache:                  cacheOptions,
		Metrics:                o.metricsOptions(),
		HealthProbeBindAddress: o.healthAddr,
		LeaderElection:         o.leaderElection.Enable,
		LeaderElectionID:       o.leaderElectionID(),
		// As Flux's controllers: the namespace the Deployment runs in; empty falls back to the in-cluster
		// ServiceAccount's namespace.
		LeaderElectionNamespace:       o.shared.RuntimeNamespace,
		LeaderElectionReleaseOnCancel: o.leaderElection.ReleaseOnCancel,
		LeaseDuration:                 &o.leaderElection.LeaseDuration,
		RenewDeadline:                 &o.leaderElection.RenewDeadline,
		RetryPeriod:                   &o.leaderElection.RetryPeriod,
		GracefulShutdownTimeout:       &o.gracefulShutdownTimeout,
		Logger:                        ctrl.Log,
		Controller:                    config.Controller{SkipNameValidation: &o.reuseControllerNames},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the informer caches have synced, so a rolling update waits for a replica that can reconcile.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	shared := o.shared
	shared.Metrics = reconcileMetrics()
	shared.WatchNamespace = watchNamespace
	handOverFinalizers(o.setups, o.controllers)
	if shared.Shard, err = o.shard(); err != nil {
		return nil, err
	}
	for _, name := range o.controllers {
		if err := o.setups[name].SetupWithManager(mgr, shared); err != nil {
			return nil, fmt.Errorf("setting up controller %s: %w", name, err)
		}
	}
	return mgr, nil
}

// reconcileMetrics registers Flux's reconcile metrics once per process, however many managers it builds.
var reconcileMetrics = sync.OnceValue(metrics.MustMakeRecorder)

// watchNamespace is the one namespace to watch with --watch-all-namespaces=false, the runtime namespace as for
// Flux's controllers; empty for all.
func (o runOptions) watchNamespace() (string, error) {
	if o.watch.AllNamespaces {
		return "", nil
	}
	if o.shared.RuntimeNamespace == "" {
		return "", fmt.Errorf("--watch-all-namespaces=false needs the operator's namespace to watch: set RUNTIME_NAMESPACE")
	}
	return o.shared.RuntimeNamespace, nil
}

// cacheOptions narrow what the manager watches as --watch-all-namespaces and --watch-label-selector ask. The
// label selector applies to every kind that carries the shard key: VectorDeployments, the ArtifactDeployments
// they create and the Flux objects the Flux deployer applies, which get it from them. HelmCharts carry the labels
// of their HelmRelease's chart template, which the deployer sets to those of its own Flux objects: only the
// deployer's HelmCharts are cached, of this shard when sharded. A kind the API server does not serve
// at start (a Flux CRD installed later) is not narrowed either, since the cache cannot be configured for it: it
// is cached whole, which costs memory, not correctness, as its objects lead only to ArtifactDeployments, and those
// are narrowed.
func (o runOptions) cacheOptions(served func(client.Object) bool) (cache.Options, error) {
	selector, err := o.shard()
	if err != nil {
		return cache.Options{}, err
	}
	watchNamespace, err := o.watchNamespace()
	if err != nil {
		return cache.Options{}, err
	}
	opts := operating.CacheOptions(selector, watchNamespace, fluxdeployer.TrimFluxStatus)
	sharded := []client.Object{&konfidencev1.ArtifactDeployment{}}
	for _, obj := range fluxdeployer.OwnedObjects() {
		if served(obj) {
			sharded = append(sharded, obj)
		}
	}
	operating.Narrow(&opts, selector, sharded...)
	if chart := (&sourcev1.HelmChart{}); served(chart) {
		operating.Narrow(&opts, fluxdeployer.HelmChartSelector(selector), chart)
	}
	return opts, nil
}

// servedKinds tells which kinds of the scheme the API server serves now, as mapper finds them.
func servedKinds(scheme *runtime.Scheme, mapper meta.RESTMapper) func(client.Object) bool {
	return func(obj client.Object) bool {
		_, err := apiutil.IsObjectNamespaced(obj, scheme, mapper)
		return err == nil
	}
}

// shard is the selector of --watch-label-selector; nil without one.
func (o runOptions) shard() (labels.Selector, error) {
	if o.watch.LabelSelector == "" {
		return nil, nil
	}
	selector, err := fluxcontroller.GetWatchSelector(o.watch)
	if err != nil {
		return nil, fmt.Errorf("parsing --watch-label-selector: %w", err)
	}
	return selector, nil
}

// leaderElectionLease is the name of the leader election Lease of an unsharded install, which `check` reads.
const leaderElectionLease = "fluxdeployer.konfidence.cloud"

// leaderElectionID is the name of the leader election Lease: one per shard, suffixed as Flux's controllers suffix
// theirs with a hash of --watch-label-selector, so that the instances of different shards do not wait for one
// another's Lease while the replicas of one shard still elect one leader. Without a selector it is the name it
// always had, so that a rolling update of an unsharded install hands the Lease on.
func (o runOptions) leaderElectionID() string {
	if o.watch.LabelSelector == "" {
		return leaderElectionLease
	}
	return leaderelection.GenerateID(leaderElectionLease, o.watch.LabelSelector)
}
