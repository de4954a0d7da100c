package fluxdeployer

import (
	"context"
	"os"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
}

// BindFlags registers the deployer's flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigName, "flux-deployer-config-name", "flux-deployer-configuration",
		"name of the Flux deployer's ConfigMap")
	fs.StringVar(&o.ConfigNamespace, "flux-deployer-config-namespace", operatorNamespace(),
		"namespace of the Flux deployer's ConfigMap (default: the operator's namespace)")
}

// operatorNamespace is the namespace the operator runs in: RUNTIME_NAMESPACE as for Flux's controllers, else the
// service account's, else default (out of cluster).
func operatorNamespace() string {
	if ns := os.Getenv("RUNTIME_NAMESPACE"); ns != "" {
		return ns
	}
	if ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(ns))
	}
	return "default"
}

// SetupWithManager builds the reconciler and its watches.
func (o *Options) SetupWithManager(mgr ctrl.Manager, shared operating.Options) error {
	_, err := o.setup(mgr, shared)
	return err
}

func (o *Options) setup(mgr ctrl.Manager, shared operating.Options) (*Reconciler, error) {
	// A cache of its own holds the one ConfigMap and the labelled Services, so the process does not cache every
	// ConfigMap and Service of the cluster.
	exists, err := labels.NewRequirement(konfidencev1.ArtifactDeploymentLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
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
			&corev1.Service{}: {Label: labels.NewSelector().Add(*exists)},
		},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(narrow); err != nil {
		return nil, err
	}
	recorder, err := shared.NewEventRecorder(mgr, ControllerName)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		client:        mgr.GetClient(),
		apiReader:     mgr.GetAPIReader(),
		configReader:  narrow,
		serviceReader: narrow,
		scheme:        mgr.GetScheme(),
		recorder:      recorder,
		metrics:       shared.ReconcileMetrics(mgr, "ArtifactDeployment"),
		configKey:     types.NamespacedName{Namespace: o.ConfigNamespace, Name: o.ConfigName},
	}
	// The creation of a Flux object requeues nothing: only the deployer creates them, in a reconcile that reports
	// them from the apply's answer, and on start every ArtifactDeployment is reconciled anyway. Requeueing would
	// reconcile each new ArtifactDeployment once more per object for nothing (issue 12).
	changes := builder.WithPredicates(predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }})
	err = ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(shared.ControllerOptions()).
		For(&konfidencev1.ArtifactDeployment{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(obj client.Object) bool { return handled(obj.(*konfidencev1.ArtifactDeployment)) }),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&sourcev1.HelmRepository{}, changes).
		Owns(&sourcev1.OCIRepository{}, changes).
		Owns(&helmv2.HelmRelease{}, changes).
		Owns(&kustomizev1.Kustomization{}, changes).
		Watches(&sourcev1.HelmChart{}, handler.EnqueueRequestsFromMapFunc(r.helmChartOwner)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretUsers)).
		WatchesRawSource(source.Kind(narrow, &corev1.Service{}, handler.TypedEnqueueRequestsFromMapFunc(r.serviceOwner))).
		WatchesRawSource(source.Kind(narrow, &corev1.ConfigMap{}, handler.TypedEnqueueRequestsFromMapFunc(r.everyArtifactDeployment))).
		Complete(r)
	return r, err
}

// helmChartOwner maps the HelmChart helm-controller creates (without an owner reference) to the
// ArtifactDeployment named like its HelmRelease.
func (r *Reconciler) helmChartOwner(_ context.Context, obj client.Object) []reconcile.Request {
	name, namespace := obj.GetLabels()[helmNameLabel], obj.GetLabels()[helmNamespaceLabel]
	if name == "" || namespace == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
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

// secretUsers requeues the ArtifactDeployments of a namespace when a Secret the configuration names appears or
// goes away there: a pull Secret or the conventional kubeconfig Secret is referenced only while it exists.
func (r *Reconciler) secretUsers(ctx context.Context, obj client.Object) []reconcile.Request {
	cfg, err := loadConfig(ctx, r.configReader, r.configKey)
	if err != nil {
		return nil
	}
	named := obj.GetName() == cfg.deploymentTargetSecretName
	for _, name := range cfg.authenticationSecretRefs {
		named = named || obj.GetName() == name
	}
	if !named {
		return nil
	}
	return r.artifactDeployments(ctx, client.InNamespace(obj.GetNamespace()))
}

// everyArtifactDeployment requeues all ArtifactDeployments: the configuration applies to each.
func (r *Reconciler) everyArtifactDeployment(ctx context.Context, _ *corev1.ConfigMap) []reconcile.Request {
	return r.artifactDeployments(ctx)
}

func (r *Reconciler) artifactDeployments(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := r.client.List(ctx, list, opts...); err != nil {
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
