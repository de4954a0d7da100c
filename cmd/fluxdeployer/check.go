package main

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// minKubernetes is the oldest Kubernetes the operator runs on: its CRDs' validation rules need 1.29.
const minKubernetes = "1.29.0"

// fluxControllers are the Flux controllers the deployer hands its objects to, each with the CRDs and the API
// versions it serves that the deployer writes or reads.
var fluxControllers = []struct {
	name string
	crds []crdVersion
}{
	{"source-controller", []crdVersion{
		{"helmrepositories.source.toolkit.fluxcd.io", "v1"}, {"ocirepositories.source.toolkit.fluxcd.io", "v1"},
		{"helmcharts.source.toolkit.fluxcd.io", "v1"},
	}},
	{"kustomize-controller", []crdVersion{{"kustomizations.kustomize.toolkit.fluxcd.io", "v1"}}},
	{"helm-controller", []crdVersion{{"helmreleases.helm.toolkit.fluxcd.io", "v2"}}},
}

type crdVersion struct{ name, version string }

// operatorCRDs are the operator's own kinds, with the Go types of their spec and status, to compare the installed
// schema with what this binary reads and writes.
var operatorCRDs = []struct {
	crdVersion
	object any
}{
	{crdVersion{"vectordeployments.konfidence.cloud", konfidencev1.GroupVersion.Version}, konfidencev1.VectorDeployment{}},
	{crdVersion{"artifactdeployments.konfidence.cloud", konfidencev1.GroupVersion.Version}, konfidencev1.ArtifactDeployment{}},
	{crdVersion{"stages.konfidence.cloud", konfidencev1.GroupVersion.Version}, konfidencev1.Stage{}},
}

type checkOptions struct {
	cluster           clusterFlags
	pre               bool
	fluxNamespace     string
	operatorNamespace string
	operatorName      string
	configName        string
}

func newCheckCommand() *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check [--pre]",
		Short: "Check that the cluster can run the operator, and that the installed operator works",
		Long: "As `flux check`. With --pre, checks the cluster before an install: the Kubernetes version (" + minKubernetes + " or later), Flux's\n" +
			"source-, kustomize- and helm-controller (their Deployments available in --flux-namespace) and the Flux CRDs at\n" +
			"the API versions the operator writes. Without it, checks the installed operator as well: its Deployment\n" +
			"available, its CRDs served with every field this binary knows, the leader election Lease held, no admission\n" +
			"webhook intercepting its kinds, the Flux deployer's ConfigMap (each bad key, with the key it most likely\n" +
			"meant), and that each ServiceAccount the ConfigMap names exists in each namespace with VectorDeployments.\n" +
			"Exits 0 when every check passes, 1 when one fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.cluster.connect()
			if err != nil {
				return err
			}
			ck := &checker{cluster: c, out: cmd.OutOrStdout(), o: o}
			return ck.run(cmd.Context())
		},
	}
	o.cluster.bind(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&o.pre, "pre", false, "check only what an install needs of the cluster")
	f.StringVar(&o.fluxNamespace, "flux-namespace", "flux-system", "namespace of Flux's controllers")
	f.StringVar(&o.operatorNamespace, "operator-namespace", "fluxdeployer-system", "namespace of the operator, its Lease and the Flux deployer's ConfigMap")
	f.StringVar(&o.operatorName, "operator-name", "fluxdeployer", "name of the operator's Deployment")
	f.StringVar(&o.configName, "flux-deployer-config-name", "flux-deployer-configuration", "name of the Flux deployer's ConfigMap")
	return cmd
}

// checker runs the checks in order, printing each, and counts the failures.
type checker struct {
	*cluster
	out    io.Writer
	o      checkOptions
	failed int
}

func (ck *checker) section(title string) { _, _ = fmt.Fprintf(ck.out, "► %s\n", title) }

func (ck *checker) pass(format string, args ...any) {
	_, _ = fmt.Fprintf(ck.out, "✔ %s\n", sanitize.Printable(fmt.Sprintf(format, args...)))
}

func (ck *checker) fail(format string, args ...any) {
	ck.failed++
	_, _ = fmt.Fprintf(ck.out, "✗ %s\n", sanitize.Printable(fmt.Sprintf(format, args...)))
}

// result prints err as a failure, or the passing line.
func (ck *checker) result(err error, format string, args ...any) {
	if err != nil {
		ck.fail("%s", err)
		return
	}
	ck.pass(format, args...)
}

func (ck *checker) run(ctx context.Context) error {
	ck.section("checking prerequisites")
	if err := ck.kubernetesVersion(); err != nil {
		// Nothing else can be asked of a server that does not answer.
		return err
	}
	ck.section("checking Flux")
	for _, fc := range fluxControllers {
		ck.deployment(ctx, ck.o.fluxNamespace, fc.name)
		for _, crd := range fc.crds {
			_, err := ck.crd(ctx, crd)
			ck.result(err, "%s serves %s", crd.name, crd.version)
		}
	}
	if !ck.o.pre {
		ck.section("checking the operator")
		ck.deployment(ctx, ck.o.operatorNamespace, ck.o.operatorName)
		for _, k := range operatorCRDs {
			ck.result(ck.operatorCRD(ctx, k.crdVersion, k.object), "%s serves %s with every field this binary knows", k.name, k.version)
		}
		ck.result(ck.leader(ctx), "the leader election Lease is held")
		ck.result(ck.noWebhooks(ctx), "no admission webhook intercepts %s", konfidencev1.GroupVersion.Group)
		ck.section("checking the Flux deployer's configuration")
		ck.configuration(ctx)
	}
	if ck.failed > 0 {
		return fmt.Errorf("%d checks failed", ck.failed)
	}
	_, _ = fmt.Fprintln(ck.out, "✔ all checks passed")
	return nil
}

// kubernetesVersion checks the version the API server reports against minKubernetes.
func (ck *checker) kubernetesVersion() error {
	dc, err := discovery.NewDiscoveryClientForConfig(ck.config)
	if err != nil {
		return err
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return ck.explain(err)
	}
	v, err := version.ParseSemantic(info.GitVersion)
	switch {
	case err != nil:
		ck.fail("Kubernetes %s: not a version (an unstamped build of kube-apiserver?): charts with a kubeVersion constraint will not install", info.GitVersion)
	case !v.AtLeast(version.MustParseSemantic(minKubernetes)):
		ck.fail("Kubernetes %s is older than %s", info.GitVersion, minKubernetes)
	default:
		ck.pass("Kubernetes %s (%s or later)", info.GitVersion, minKubernetes)
	}
	return nil
}

// deployment checks that a Deployment is Available, and names its images.
func (ck *checker) deployment(ctx context.Context, namespace, name string) {
	d := &appsv1.Deployment{}
	if err := ck.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
		if apierrors.IsNotFound(err) {
			ck.fail("%s: no Deployment %s/%s", name, namespace, name)
			return
		}
		ck.fail("%s: %v", name, ck.explain(err))
		return
	}
	var images []string
	for _, c := range d.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			ck.pass("%s: Deployment available (%s)", name, strings.Join(images, ", "))
			return
		}
	}
	ck.fail("%s: Deployment %s/%s not available (%d of %d replicas ready)", name, namespace, name, d.Status.ReadyReplicas, d.Status.Replicas)
}

// crd reads a CRD and checks that it serves version.
func (ck *checker) crd(ctx context.Context, v crdVersion) (*unstructured.Unstructured, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := ck.client.Get(ctx, client.ObjectKey{Name: v.name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("CRD %s is not installed", v.name)
		}
		return nil, fmt.Errorf("CRD %s: %w", v.name, ck.explain(err))
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var served []string
	for _, raw := range versions {
		entry, _ := raw.(map[string]any)
		if name, _ := entry["name"].(string); entry["served"] == true {
			served = append(served, name)
		}
	}
	if !slices.Contains(served, v.version) {
		return nil, fmt.Errorf("CRD %s serves %v, not %s", v.name, served, v.version)
	}
	return crd, nil
}

// operatorCRD checks that an operator CRD serves the binary's version with every top-level field of the binary's
// spec and status: an older CRD would have the API server drop what this binary writes.
func (ck *checker) operatorCRD(ctx context.Context, v crdVersion, object any) error {
	crd, err := ck.crd(ctx, v)
	if err != nil {
		return err
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, raw := range versions {
		entry, _ := raw.(map[string]any)
		if entry["name"] != v.version {
			continue
		}
		var missing []string
		for _, part := range []string{"spec", "status"} {
			props, _, _ := unstructured.NestedMap(entry, "schema", "openAPIV3Schema", "properties", part, "properties")
			for _, field := range jsonFields(reflect.TypeOf(object), part) {
				if _, ok := props[field]; !ok {
					missing = append(missing, part+"."+field)
				}
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("CRD %s is older than this binary: no %s (install the CRDs of this release)", v.name, strings.Join(missing, ", "))
		}
	}
	return nil
}

// jsonFields are the JSON names of the fields of the struct field named part (spec, status) of type t.
func jsonFields(t reflect.Type, part string) []string {
	f, ok := t.FieldByNameFunc(func(name string) bool { return strings.EqualFold(name, part) })
	if !ok {
		return nil
	}
	var names []string
	for i := range f.Type.NumField() {
		name, _, _ := strings.Cut(f.Type.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// leader checks that the leader election Lease is held and renewed within its duration.
func (ck *checker) leader(ctx context.Context) error {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ck.o.operatorNamespace, Name: leaderElectionLease}
	if err := ck.client.Get(ctx, key, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no leader election Lease %s: the operator never led", key)
		}
		return fmt.Errorf("reading the leader election Lease %s: %w", key, ck.explain(err))
	}
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return fmt.Errorf("the leader election Lease %s is held by no one", key)
	}
	if age := time.Since(s.RenewTime.Time); age > time.Duration(*s.LeaseDurationSeconds)*time.Second {
		return fmt.Errorf("the leader election Lease %s: %s last renewed it %s ago, longer than its %ds: no operator leads",
			key, *s.HolderIdentity, age.Round(time.Second), *s.LeaseDurationSeconds)
	}
	return nil
}

// noWebhooks checks that no admission webhook matches the operator's API group: the operator needs none, and one
// left behind (an earlier install of another controller of the same group) would refuse or change its objects.
func (ck *checker) noWebhooks(ctx context.Context) error {
	var found []string
	for _, kind := range []string{"ValidatingWebhookConfigurationList", "MutatingWebhookConfigurationList"} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("admissionregistration.k8s.io/v1")
		list.SetKind(kind)
		if err := ck.client.List(ctx, list); err != nil {
			return fmt.Errorf("listing %s: %w", strings.TrimSuffix(kind, "List"), ck.explain(err))
		}
		for _, cfg := range list.Items {
			hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
			for _, raw := range hooks {
				hook, _ := raw.(map[string]any)
				if interceptsGroup(hook, konfidencev1.GroupVersion.Group) {
					found = append(found, fmt.Sprintf("%s %s (webhook %v)", strings.TrimSuffix(kind, "List"), cfg.GetName(), hook["name"]))
				}
			}
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("admission webhooks intercept %s, which the operator does not serve: %s", konfidencev1.GroupVersion.Group, strings.Join(found, "; "))
	}
	return nil
}

// interceptsGroup tells whether a webhook's rules match group ("*" included).
func interceptsGroup(hook map[string]any, group string) bool {
	rules, _ := hook["rules"].([]any)
	for _, raw := range rules {
		rule, _ := raw.(map[string]any)
		groups, _ := rule["apiGroups"].([]any)
		for _, g := range groups {
			if g == group || g == "*" {
				return true
			}
		}
	}
	return false
}

// configuration checks the Flux deployer's ConfigMap as the deployer reads it, and the ServiceAccounts it names in
// every namespace that has VectorDeployments.
func (ck *checker) configuration(ctx context.Context) {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ck.o.operatorNamespace, Name: ck.o.configName}
	switch err := ck.client.Get(ctx, key, cm); {
	case apierrors.IsNotFound(err):
		ck.pass("no ConfigMap %s: the defaults apply", key)
	case err != nil:
		ck.fail("ConfigMap %s: %v", key, ck.explain(err))
		return
	default:
		problems := fluxdeployer.CheckConfig(cm.Data)
		for _, p := range problems {
			ck.fail("ConfigMap %s: %s: %s", key, p.Reason, p)
		}
		if slices.ContainsFunc(problems, func(p fluxdeployer.ConfigProblem) bool { return p.Reason == konfidencev1.UnknownConfigurationKeyReason }) {
			_, _ = fmt.Fprintf(ck.out, "  the keys the deployer reads: %s\n", strings.Join(fluxdeployer.ConfigKeys(), ", "))
		}
		if len(problems) > 0 {
			_, _ = fmt.Fprintln(ck.out, "  the operator keeps deploying with the last good configuration it read")
			return
		}
		ck.pass("ConfigMap %s: %d keys, every one read and valid", key, len(cm.Data))
	}
	ck.serviceAccounts(ctx, cm.Data)
}

// serviceAccounts checks that the account the configuration has each namespace's Flux objects run as exists there,
// for every namespace with VectorDeployments.
func (ck *checker) serviceAccounts(ctx context.Context, data map[string]string) {
	vds := &konfidencev1.VectorDeploymentList{}
	if err := ck.client.List(ctx, vds); err != nil {
		ck.fail("listing VectorDeployments: %v", ck.explain(err))
		return
	}
	var namespaces []string
	for _, vd := range vds.Items {
		namespaces = append(namespaces, vd.Namespace)
	}
	slices.Sort(namespaces)
	var errs []error
	checked := 0
	for _, ns := range slices.Compact(namespaces) {
		name, err := fluxdeployer.ServiceAccountFor(data, ns)
		if err != nil || name == "" {
			continue
		}
		checked++
		sa := &corev1.ServiceAccount{}
		if err := ck.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sa); err != nil {
			if apierrors.IsNotFound(err) {
				err = fmt.Errorf("ServiceAccount %s/%s does not exist: the namespace's ArtifactDeployments are %s", ns, name, konfidencev1.ServiceAccountNotFoundReason)
			}
			errs = append(errs, err)
		}
	}
	for _, err := range errs {
		ck.fail("%v", ck.explain(err))
	}
	if len(errs) == 0 && checked > 0 {
		ck.pass("the ServiceAccounts the Flux objects run as exist in the %d namespaces with VectorDeployments", checked)
	}
}
