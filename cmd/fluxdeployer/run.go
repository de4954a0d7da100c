package main

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

type runOptions struct {
	metricsAddr, healthAddr string
	controllers             []string
	leaderElection          leaderelection.Options
	logging                 logger.Options
}

func newRunCommand() *cobra.Command {
	o := runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the operator (the reconcilers chosen with --controllers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(logger.NewLogger(o.logging))
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			mgr, err := newManager(cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "address the Prometheus metrics endpoint binds to (0 disables it)")
	f.StringVar(&o.healthAddr, "health-addr", ":9440", "address the health and readiness probes bind to")
	f.StringSliceVar(&o.controllers, "controllers", knownControllers(),
		"reconcilers to run, comma-separated (known: "+strings.Join(knownControllers(), ", ")+")")
	o.leaderElection.BindFlags(f)
	o.logging.BindFlags(f)
	for _, name := range knownControllers() {
		controllerSetups[name].BindFlags(f)
	}
	return cmd
}

func knownControllers() []string {
	names := make([]string, 0, len(controllerSetups))
	for name := range controllerSetups {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// The manager itself needs events for every reconciler, and for leader election a Lease in its own namespace
// (a Role there, not cluster-wide rights; client-go's LeaseLock gets, creates and updates it).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=fluxdeployer-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

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
		if _, ok := controllerSetups[name]; !ok {
			return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", name, strings.Join(knownControllers(), ", "))
		}
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.healthAddr,
		LeaderElection:         o.leaderElection.Enable,
		LeaderElectionID:       "fluxdeployer.konfidence.cloud",
		// As Flux's controllers: the namespace the Deployment runs in, from RUNTIME_NAMESPACE; empty falls back
		// to the in-cluster ServiceAccount's namespace.
		LeaderElectionNamespace:       os.Getenv("RUNTIME_NAMESPACE"),
		LeaderElectionReleaseOnCancel: o.leaderElection.ReleaseOnCancel,
		LeaseDuration:                 &o.leaderElection.LeaseDuration,
		RenewDeadline:                 &o.leaderElection.RenewDeadline,
		RetryPeriod:                   &o.leaderElection.RetryPeriod,
		Logger:                        ctrl.Log,
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
	for _, name := range o.controllers {
		if err := controllerSetups[name].SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up controller %s: %w", name, err)
		}
	}
	return mgr, nil
}
