package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fluxclient "github.com/fluxcd/pkg/runtime/client"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestFlagsHaveFluxDefaults: the flags Flux's controllers share mean the same here when left alone.
func TestFlagsHaveFluxDefaults(t *testing.T) {
	o := parseRunOptions(t)
	type defaults struct {
		Concurrent         int
		EventsAddr         string
		RequeueDependency  time.Duration
		WatchAllNamespaces bool
		WatchLabelSelector string
		QPS                float32
		Burst              int
	}
	want := defaults{Concurrent: 4, RequeueDependency: 30 * time.Second, WatchAllNamespaces: true, QPS: 50, Burst: 300}
	got := defaults{o.shared.Concurrent, o.shared.EventsAddr, o.shared.RequeueDependency, o.watch.AllNamespaces,
		o.watch.LabelSelector, o.kubeAPI.QPS, o.kubeAPI.Burst}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// TestConcurrentSetsWorkers: --concurrent is the worker count of every reconciler.
func TestConcurrentSetsWorkers(t *testing.T) {
	o := parseRunOptions(t, "--concurrent=7")
	if got := o.shared.ControllerOptions().MaxConcurrentReconciles; got != 7 {
		t.Errorf("MaxConcurrentReconciles = %d, want 7", got)
	}
}

// TestDeprecatedConcurrencyFlag: --vectordeployment-concurrency, the former name of --concurrent, still sets the
// worker count, is hidden from the help, and warns on the binary's stderr.
func TestDeprecatedConcurrencyFlag(t *testing.T) {
	o := newRunOptions()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var warnings bytes.Buffer
	fs.SetOutput(&warnings)
	o.bindFlags(fs)
	if err := fs.Parse([]string{"--vectordeployment-concurrency=7"}); err != nil {
		t.Fatal(err)
	}
	const warning = "Flag --vectordeployment-concurrency has been deprecated, use --concurrent"
	if got := o.shared.ControllerOptions().MaxConcurrentReconciles; got != 7 || !strings.Contains(warnings.String(), warning) {
		t.Errorf("MaxConcurrentReconciles = %d, want 7; warnings %q", got, warnings.String())
	}
	if !fs.Lookup("vectordeployment-concurrency").Hidden {
		t.Error("the deprecated flag shows in the help")
	}
	// cobra collects flag output in a buffer of its own; the binary's run command writes it to stderr.
	var stderr bytes.Buffer
	root := newRootCommand()
	root.SetErr(&stderr)
	runCmd, _, err := root.Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	if err := runCmd.ParseFlags([]string{"--vectordeployment-concurrency=7"}); err != nil || !strings.Contains(stderr.String(), warning) {
		t.Errorf("parsing: %v; stderr %q", err, stderr.String())
	}
}

// TestKubeAPIFlagsReachTheRestConfig: --kube-api-qps and --kube-api-burst set the client's rate limit (Flux's
// GetConfigOrDie lifts the limit only when the API server has priority and fairness, which it cannot tell here).
func TestKubeAPIFlagsReachTheRestConfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	o := parseRunOptions(t, "--kube-api-qps=12.5", "--kube-api-burst=34")
	type limits struct {
		QPS   float32
		Burst int
	}
	cfg := fluxclient.GetConfigOrDie(o.kubeAPI)
	if diff := cmp.Diff(limits{12.5, 34}, limits{cfg.QPS, cfg.Burst}); diff != "" {
		t.Errorf("rest config (-want +got):\n%s", diff)
	}
}

// TestUnknownFeatureGateIsRejected: as in Flux's controllers, a gate the binary does not know is an error.
func TestUnknownFeatureGateIsRejected(t *testing.T) {
	cmd := newRunCommand()
	cmd.SetArgs([]string{"--feature-gates=NoSuchFeature=true"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil {
		t.Fatal("an unknown feature gate was accepted")
	}
}

// TestWatchFlagsNarrowTheVectorDeployments runs the VectorDeployment reconciler with
// --watch-all-namespaces=false and --watch-label-selector: only the labelled VectorDeployment of the runtime
// namespace is reconciled, one elsewhere or without the label is left alone.
func TestWatchFlagsNarrowTheVectorDeployments(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	runtimeNS, otherNS := namespace(t, env.Client), namespace(t, env.Client)
	t.Setenv("RUNTIME_NAMESPACE", runtimeNS)
	o := parseRunOptions(t, "--watch-all-namespaces=false", "--watch-label-selector=shard=a")
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	cacheOptions, err := o.cacheOptions(servedKinds(env.Scheme, mapper))
	if err != nil {
		t.Fatal(err)
	}
	// A manager of its own, as newManager's would collide with the other tests' on the controller name.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Cache:      cacheOptions,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.setups["vectordeployment"].SetupWithManager(mgr, o.shared); err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)

	shard := map[string]string{"shard": "a"}
	// The ignored ones first: once the watched one is in the manager's cache, the cache's watch has gone past them.
	ignored := []*konfidencev1.VectorDeployment{
		vectorDeployment(t, env.Client, runtimeNS, "unlabelled", nil),
		vectorDeployment(t, env.Client, otherNS, "elsewhere", shard),
	}
	watched := vectorDeployment(t, env.Client, runtimeNS, "watched", shard)
	// The vector is no reference at all, so a reconcile shows at once as a Stalled status.
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(watched), watched); err != nil {
			return err
		}
		if len(watched.Status.Conditions) == 0 {
			return fmt.Errorf("%s/%s not reconciled", watched.Namespace, watched.Name)
		}
		return nil
	})
	// The reconciler is triggered by the cache's events alone: what the cache did not keep, it never reconciles.
	cached := &konfidencev1.VectorDeploymentList{}
	if err := mgr.GetCache().List(ctx, cached); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, vd := range cached.Items {
		got = append(got, vd.Namespace+"/"+vd.Name)
	}
	if diff := cmp.Diff([]string{runtimeNS + "/watched"}, got); diff != "" {
		t.Errorf("VectorDeployments the reconciler sees (-want +got):\n%s", diff)
	}
	for _, vd := range ignored {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			t.Fatal(err)
		}
		if len(vd.Status.Conditions) > 0 {
			t.Errorf("%s/%s was reconciled: %+v", vd.Namespace, vd.Name, vd.Status.Conditions)
		}
	}
}

// TestWatchAllNamespacesFalseNeedsTheRuntimeNamespace: without RUNTIME_NAMESPACE there is nothing to narrow to.
func TestWatchAllNamespacesFalseNeedsTheRuntimeNamespace(t *testing.T) {
	t.Setenv("RUNTIME_NAMESPACE", "")
	if _, err := parseRunOptions(t, "--watch-all-namespaces=false").cacheOptions(everyKind); err == nil {
		t.Fatal("--watch-all-namespaces=false was accepted without RUNTIME_NAMESPACE")
	}
}

// everyKind has every kind served, for cache options built without an API server.
func everyKind(client.Object) bool { return true }

// TestWatchLabelSelectorMustParse: a selector that does not parse is an error at start; one that does narrows
// every kind that carries the shard key.
func TestWatchLabelSelectorMustParse(t *testing.T) {
	if _, err := parseRunOptions(t, "--watch-label-selector=a in (").cacheOptions(everyKind); err == nil {
		t.Fatal("an unparsable --watch-label-selector was accepted")
	}
	opts, err := parseRunOptions(t, "--watch-label-selector=shard=a").cacheOptions(everyKind)
	if err != nil {
		t.Fatal(err)
	}
	// Every kind that carries the shard key is narrowed, HelmCharts to the deployer's own of the shard too.
	// ByObject is keyed by pointer, so the entries are found by type.
	own := labels.Set{konfidencev1.ArtifactDeploymentLabel: "x"}
	narrowed := map[string]bool{}
	for obj, by := range opts.ByObject {
		kind := fmt.Sprintf("%T", obj)
		if by.Label == nil {
			continue
		}
		narrowed[kind] = true
		if by.Label.Matches(labels.Merge(own, labels.Set{"shard": "b"})) || !by.Label.Matches(labels.Merge(own, labels.Set{"shard": "a"})) {
			t.Errorf("the %s selector %v is not shard=a", kind, by.Label)
		}
		if _, chart := obj.(*sourcev1.HelmChart); chart && by.Label.Matches(labels.Set{"shard": "a"}) {
			t.Errorf("the HelmChart selector %v selects HelmCharts of other HelmReleases than the deployer's", by.Label)
		}
	}
	want := map[string]bool{"*v1.HelmChart": true}
	for _, obj := range append([]client.Object{&konfidencev1.Stage{}, &konfidencev1.VectorDeployment{}, &konfidencev1.ArtifactDeployment{}}, fluxdeployer.OwnedObjects()...) {
		want[fmt.Sprintf("%T", obj)] = true
	}
	if len(want) != 8 || !maps.Equal(narrowed, want) {
		t.Errorf("narrowed kinds %v, want %v", slices.Sorted(maps.Keys(narrowed)), slices.Sorted(maps.Keys(want)))
	}
}

// TestHelmChartsOfOthersAreNotCached: unsharded too, the cache holds only the HelmCharts of the deployer's
// HelmReleases, which carry the labels of its chart template.
func TestHelmChartsOfOthersAreNotCached(t *testing.T) {
	opts, err := parseRunOptions(t).cacheOptions(everyKind)
	if err != nil {
		t.Fatal(err)
	}
	for obj, by := range opts.ByObject {
		if _, chart := obj.(*sourcev1.HelmChart); !chart {
			continue
		}
		if by.Label == nil || by.Label.Matches(labels.Set{"helm.toolkit.fluxcd.io/name": "other"}) ||
			!by.Label.Matches(labels.Set{konfidencev1.ArtifactDeploymentLabel: "a"}) {
			t.Errorf("HelmChart selector %v, want the ArtifactDeployment label", by.Label)
		}
		return
	}
	t.Error("HelmCharts are cached whole")
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "watch-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func vectorDeployment(t *testing.T, c client.Client, namespace, name string, selected map[string]string) *konfidencev1.VectorDeployment {
	t.Helper()
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: selected},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: "not a reference"},
	}
	if err := c.Create(context.Background(), vd); err != nil {
		t.Fatal(err)
	}
	return vd
}

// TestRemoteTargetFlags: the Flux deployer's kubeconfig flags have Flux's names and defaults (no exec, no insecure
// TLS, 30s per request), the reconcile deadline defaults to fluxdeployer.DefaultReconcileTimeout, and remote targets
// are off unless --allowed-target-hosts names their API servers.
func TestRemoteTargetFlags(t *testing.T) {
	remote := func(o runOptions) fluxdeployer.RemoteOptions {
		return o.setups["fluxdeployer"].(*fluxdeployer.Options).Remote
	}
	if o := remote(parseRunOptions(t)); o.KubeConfig.InsecureExecProvider || o.KubeConfig.InsecureTLS || *o.KubeConfig.Timeout != 30*time.Second ||
		o.ReconcileTimeout != fluxdeployer.DefaultReconcileTimeout || len(o.AllowedTargetHosts) != 0 {
		t.Errorf("defaults: %+v, request timeout %s", o, *o.KubeConfig.Timeout)
	}
	if o := remote(parseRunOptions(t, "--insecure-kubeconfig-exec", "--insecure-kubeconfig-tls", "--remote-request-timeout=5s", "--reconcile-timeout=20s",
		"--allowed-target-hosts=prod.example.com:6443,staging.example.com")); !o.KubeConfig.InsecureExecProvider || !o.KubeConfig.InsecureTLS || *o.KubeConfig.Timeout != 5*time.Second ||
		o.ReconcileTimeout != 20*time.Second || fmt.Sprint(o.AllowedTargetHosts) != "[prod.example.com:6443 staging.example.com]" {
		t.Errorf("set: %+v, request timeout %s", o, *o.KubeConfig.Timeout)
	}
}

// TestAllowedRegistriesFlag: --allowed-registries is the operator's, which both reconcilers read (the
// VectorDeployment reconciler's registry reads, the Flux deployer's artifact hosts), whichever --controllers runs.
func TestAllowedRegistriesFlag(t *testing.T) {
	if got := parseRunOptions(t).shared.AllowedRegistries; len(got) != 0 {
		t.Errorf("default %v, want empty (every host)", got)
	}
	o := parseRunOptions(t, "--controllers=fluxdeployer", "--allowed-registries=registry.example,registry.example:5000")
	if got := fmt.Sprint(o.shared.AllowedRegistries); got != "[registry.example registry.example:5000]" {
		t.Errorf("set: %s", got)
	}
	if !o.shared.AllowedRegistries.Allows("registry.example:5000") || o.shared.AllowedRegistries.Allows("169.254.169.254") {
		t.Errorf("%v allows the wrong hosts", o.shared.AllowedRegistries)
	}
}
