package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

// TestClusterCommands runs tree, reconcile, suspend, resume, wait, diff, history and rollback as a user would,
// against a real API server with the operator (its reconcilers, the Stage's among them) running and the Flux controllers' status writes played by the test.
// The kubeconfig's current context points at a server that does not answer, so every command reaches the API
// server only through --kubeconfig and --context; the chosen context's namespace is the default of -n.
func TestClusterCommands(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	ns := newTestNamespace(t, env.Client, "cli")
	other := newTestNamespace(t, env.Client, "cli-other")
	kubeconfig := kubeconfigWithContexts(t, env.Kubeconfig, ns)
	o := parseRunOptions(t, "--metrics-addr=0", "--health-addr=0", "--flux-deployer-config-namespace="+newTestNamespace(t, env.Client, "operator"))
	o.reuseControllerNames = true
	mgr, err := newManager(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	stopOperator := testenv.RunManager(t, mgr)

	reg := ocmtest.NewRegistry(t)
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	database := ocmtest.Artifact("acme.org/artifacts/database", "16.4.0", "cloud.konfidence.flux.helm", false)
	config := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	config.Resources[1] = ocmtest.BundleResource("0.4.0", "registry.example.com/bundles/config:0.4.0")
	cache := ocmtest.Artifact("acme.org/artifacts/cache", "7.0.0", "cloud.konfidence.flux.helm", true)
	reg.Push(t, "", frontend, database, config, cache,
		ocmtest.Vector("acme.org/vectors/empty", "1.0.0"),
		ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, database, config),
		ocmtest.Vector("acme.org/vectors/shop", "2.0.0", frontend, database, cache))
	emptyRef, shopRef, shop2Ref := reg.Ref("", "acme.org/vectors/empty", "1.0.0"), reg.Ref("", "acme.org/vectors/shop", "1.0.0"), reg.Ref("", "acme.org/vectors/shop", "2.0.0")

	cli, must := envtestCLI(t, kubeconfig)
	empty := testenv.CreateVectorDeployment(t, env.Client, ns, "empty", emptyRef)
	testenv.CreateVectorDeployment(t, env.Client, other, "elsewhere", emptyRef)
	testenv.CreateVectorDeployment(t, env.Client, ns, "broken", "not a reference")
	shop := testenv.CreateVectorDeployment(t, env.Client, ns, "shop", shopRef)

	t.Run("reconcile --wait reports Ready", func(t *testing.T) {
		out := must("reconcile", "vd", "empty", "--wait", "--timeout", "1m")
		if !strings.Contains(out, "VectorDeployment "+ns+"/empty: Ready: 0/0 artifacts ready") {
			t.Errorf("output:\n%s", out)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(empty), empty); err != nil {
			t.Fatal(err)
		}
		if requested := empty.Annotations[meta.ReconcileRequestAnnotation]; requested == "" || empty.Status.LastHandledReconcileAt != requested {
			t.Errorf("requestedAt %q, lastHandledReconcileAt %q", requested, empty.Status.LastHandledReconcileAt)
		}
	})

	t.Run("wait reports Stalled with the reason", func(t *testing.T) {
		_, stderr, code := cli("wait", "vd", "broken", "--timeout", "1m")
		if code != exitFailure || !strings.Contains(stderr, "VectorDeployment "+ns+"/broken: Stalled: ReferenceInvalid: ") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("wait times out with the Ready condition", func(t *testing.T) {
		_, stderr, code := cli("wait", "vd", "shop", "--timeout", "2s")
		if code != exitFailure || !strings.Contains(stderr, "VectorDeployment "+ns+"/shop: timed out waiting for Ready: ") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("wait --all gives each object its own timeout", func(t *testing.T) {
		// A vector that is not there yet keeps its VectorDeployment retrying; listed first, it used to take the
		// whole timeout, and the Ready one after it failed unasked.
		waiting := testenv.CreateVectorDeployment(t, env.Client, other, "a-waiting", reg.Ref("", "acme.org/vectors/missing", "9.9.9"))
		defer func() {
			if err := env.Client.Delete(ctx, waiting); err != nil {
				t.Error(err)
			}
			testenv.Eventually(t, time.Minute, func() error {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(waiting), waiting); !apierrors.IsNotFound(err) {
					return fmt.Errorf("a-waiting not gone yet (%v)", err)
				}
				return nil
			})
		}()
		out, stderr, code := cli("wait", "vd", "--all", "-n", other, "--timeout", "3s")
		if code != exitFailure || !strings.Contains(stderr, "VectorDeployment "+other+"/a-waiting: timed out waiting for Ready") ||
			!strings.Contains(out, "VectorDeployment "+other+"/elsewhere: Ready") || strings.Contains(stderr, "rate limiter") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
	})

	var ads []*konfidencev1.ArtifactDeployment
	testenv.Eventually(t, time.Minute, func() error {
		var err error
		if ads, err = ownedArtifactDeployments(ctx, env.Client, shop); err == nil && len(ads) != 3 {
			err = fmt.Errorf("%d ArtifactDeployments of shop, want 3", len(ads))
		}
		return err
	})
	flux := &operatorScenario{env: env}
	for _, ad := range ads {
		flux.playFlux(t, ad)
	}

	t.Run("reconcile --with-artifacts --wait", func(t *testing.T) {
		out := must("reconcile", "vd", "shop", "--with-artifacts", "--wait", "--timeout", "1m")
		for _, ad := range ads {
			if !strings.Contains(out, "ArtifactDeployment "+ns+"/"+ad.Name+": reconcile requested") || !strings.Contains(out, "ArtifactDeployment "+ns+"/"+ad.Name+": Ready") {
				t.Errorf("output does not report %s:\n%s", ad.Name, out)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ad), ad); err != nil {
				t.Fatal(err)
			}
			if requested := ad.Annotations[meta.ReconcileRequestAnnotation]; requested == "" || ad.Status.LastHandledReconcileAt != requested {
				t.Errorf("%s: requestedAt %q, lastHandledReconcileAt %q", ad.Name, requested, ad.Status.LastHandledReconcileAt)
			}
		}
		if !strings.Contains(out, "VectorDeployment "+ns+"/shop: Ready: 3/3 artifacts ready") {
			t.Errorf("output:\n%s", out)
		}
	})

	t.Run("suspend and resume --all", func(t *testing.T) {
		must("suspend", "ad", "--all")
		for _, ad := range ads {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ad), ad); err != nil || !ad.Spec.Suspend {
				t.Errorf("%s not suspended (%v)", ad.Name, err)
			}
		}
		_, stderr, code := cli("wait", "ad", ads[0].Name, "--timeout", "1m")
		if code != exitSuccess {
			t.Errorf("wait for a suspended Ready ArtifactDeployment: exit %d, %s", code, stderr)
		}
		out := must("resume", "ad", "--all")
		for _, ad := range ads {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ad), ad); err != nil || ad.Spec.Suspend || ad.Annotations[meta.ReconcileRequestAnnotation] == "" {
				t.Errorf("%s not resumed with a reconcile request (%v):\n%s", ad.Name, err, out)
			}
			// Once the deployer has handled the resume, it has resumed the Flux objects too: Flux reports on their
			// new generation.
			waitFor(t, env.Client, ad, func() error {
				if ad.Status.LastHandledReconcileAt != ad.Annotations[meta.ReconcileRequestAnnotation] {
					return fmt.Errorf("%s: resume not handled yet", ad.Name)
				}
				return nil
			})
			flux.replayFlux(t, ad)
		}
		must("wait", "ad", "--all", "--timeout", "1m")

		must("suspend", "vd", "empty")
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(empty), empty); err != nil || !empty.Spec.Suspend {
			t.Fatalf("empty not suspended: %v", err)
		}
		if out := must("resume", "vd", "empty", "--wait", "--timeout", "1m"); !strings.Contains(out, ns+"/empty: Ready") {
			t.Errorf("resume --wait:\n%s", out)
		}
	})

	t.Run("tree with the context's namespace and -A", func(t *testing.T) {
		var root tree.Node
		if err := yaml.Unmarshal([]byte(must("tree", "shop", "-o", "yaml")), &root); err != nil || root.Name != "shop" || len(root.Children) != 3 {
			t.Errorf("tree shop -o yaml: %+v, %v", root, err)
		}
		var roots []tree.Node
		if err := json.Unmarshal([]byte(must("tree", "-A", "-o", "json")), &roots); err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, r := range roots {
			found[r.Namespace+"/"+r.Name] = true
		}
		if !found[ns+"/shop"] || !found[other+"/elsewhere"] {
			t.Errorf("tree -A found %v", found)
		}
		if out := must("tree", "-A"); !strings.Contains(out, "VectorDeployment/shop (namespace "+ns+")  Ready=True") ||
			!strings.Contains(out, "VectorDeployment/elsewhere (namespace "+other+")  Ready=True") {
			t.Errorf("tree -A names no namespaces:\n%s", out)
		}
		if out := must("tree", "-n", other); !strings.HasPrefix(out, "VectorDeployment/elsewhere  Ready=True") {
			t.Errorf("tree -n %s:\n%s", other, out)
		}
		if _, stderr, code := runBinary(t, "tree", "shop", "--kubeconfig", kubeconfig); code != exitFailure || !strings.Contains(stderr, "cannot reach the API server") {
			t.Errorf("the current context's server was not the one asked: exit %d, %s", code, stderr)
		}
	})

	t.Run("refused credentials are the API server's answer", func(t *testing.T) {
		for _, args := range [][]string{{"tree", "shop"}, {"wait", "vd", "shop"}, {"suspend", "vd", "--all"}} {
			_, stderr, code := runBinary(t, append(args, "--kubeconfig", kubeconfig, "--context", "stranger")...)
			if code != exitFailure || !strings.Contains(stderr, "Unauthorized") && !strings.Contains(stderr, "credentials") ||
				strings.Contains(stderr, "*v1alpha1") || strings.Contains(stderr, "namespaced") {
				t.Errorf("%v as a stranger: exit %d, %s", args, code, stderr)
			}
		}
	})

	t.Run("diff plans the move the operator makes", func(t *testing.T) {
		current := map[string]string{} // component → ArtifactDeployment
		for _, ad := range ads {
			current[ad.Spec.Component.Name] = ad.Name
		}
		p := planOf(t, must("diff", "vd", "shop", "--vector", shop2Ref, "-o", "json"))
		want := map[string]string{
			actionKeep + " acme.org/artifacts/frontend 1.2.3":    current["acme.org/artifacts/frontend"],
			actionCreate + " acme.org/artifacts/database 16.4.0": "",
			actionCreate + " acme.org/artifacts/cache 7.0.0":     "",
			actionDelete + " acme.org/artifacts/database 16.4.0": current["acme.org/artifacts/database"],
			actionDelete + " acme.org/artifacts/config 0.4.0":    current["acme.org/artifacts/config"],
		}
		if len(p) != len(want) {
			t.Fatalf("plan %v, want %v", p, want)
		}
		for key, name := range want {
			if got, ok := p[key]; !ok || (name != "" && got != name) {
				t.Errorf("%s: planned %q (present %t), want %q", key, got, ok, name)
			}
		}
		if p[actionCreate+" acme.org/artifacts/database 16.4.0"] == current["acme.org/artifacts/database"] {
			t.Error("the non-reusable database keeps its name under a new VectorDeployment")
		}
		text := must("diff", "vd", "shop", "--vector", shop2Ref)
		if !strings.HasPrefix(text, "VectorDeployment "+ns+"/shop: "+shopRef+" -> "+shop2Ref+"\n") || !strings.Contains(text, "named for the new VectorDeployment's UID") {
			t.Errorf("diff:\n%s", text)
		}

		// The operator, given the new VectorDeployment, keeps and creates what the plan says.
		next := testenv.CreateVectorDeployment(t, env.Client, ns, "shop-2", shop2Ref)
		waitFor(t, env.Client, next, func() error {
			if !conditions.IsTrue(next, konfidencev1.ArtifactDeploymentsCreatedCondition) {
				return fmt.Errorf("ArtifactDeploymentsCreated: %+v", conditions.Get(next, konfidencev1.ArtifactDeploymentsCreatedCondition))
			}
			return nil
		})
		got := next.Status.ResultingArtifactDeployments
		if got["acme.org/artifacts/frontend"].Name != p[actionKeep+" acme.org/artifacts/frontend 1.2.3"] ||
			got["acme.org/artifacts/cache"].Name != p[actionCreate+" acme.org/artifacts/cache 7.0.0"] ||
			got["acme.org/artifacts/database"].Name == current["acme.org/artifacts/database"] {
			t.Errorf("the operator made %+v of the plan %v", got, p)
		}

		// Now shop-2 owns the frontend too: moving shop elsewhere releases it rather than deleting it.
		p = planOf(t, must("diff", "vd", "shop", "--vector", emptyRef, "-o", "yaml"))
		if p[actionRelease+" acme.org/artifacts/frontend 1.2.3"] != current["acme.org/artifacts/frontend"] ||
			p[actionDelete+" acme.org/artifacts/database 16.4.0"] != current["acme.org/artifacts/database"] {
			t.Errorf("plan to the empty vector: %v", p)
		}
	})

	t.Run("diff st plans the move the Stage makes, and rollback --wait moves it back", func(t *testing.T) {
		played := map[string]bool{}
		for _, ad := range ads {
			played[ad.Name] = true
		}
		// deployed waits for the Stage's VectorDeployment of vector to create its ArtifactDeployments, and plays Flux
		// for those it has not played yet.
		deployed := func(st *konfidencev1.Stage, vector string) *konfidencev1.VectorDeployment {
			t.Helper()
			name, err := stage.VectorDeploymentName(st.Name, st.UID, vector)
			if err != nil {
				t.Fatal(err)
			}
			vd := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			waitFor(t, env.Client, vd, func() error {
				if !conditions.IsTrue(vd, konfidencev1.ArtifactDeploymentsCreatedCondition) {
					return fmt.Errorf("VectorDeployment %s: ArtifactDeploymentsCreated: %+v", name, conditions.Get(vd, konfidencev1.ArtifactDeploymentsCreatedCondition))
				}
				return nil
			})
			owned, err := ownedArtifactDeployments(ctx, env.Client, vd)
			if err != nil {
				t.Fatal(err)
			}
			for _, ad := range owned {
				if played[ad.Name] {
					continue
				}
				if ad.Spec.Manifest.Type == "cloud.konfidence.flux.helm" {
					testenv.Eventually(t, time.Minute, func() error {
						return env.Client.Get(ctx, client.ObjectKeyFromObject(ad), &helmv2.HelmRelease{})
					})
				}
				flux.playFlux(t, ad)
				played[ad.Name] = true
			}
			return vd
		}
		landscape := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"}, Spec: konfidencev1.StageSpec{Vector: shopRef}}
		create(t, env.Client, landscape)
		first := deployed(landscape, shopRef)
		must("wait", "st", "landscape", "--timeout", "1m")
		shop2 := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-2"}}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(shop2), shop2); err != nil {
			t.Fatal(err)
		}
		ran := first.Status.ResultingArtifactDeployments
		assertPlan(t, planOf(t, must("diff", "st", "landscape", "--vector", shop2Ref, "-o", "json")), map[string]string{
			actionKeep + " acme.org/artifacts/frontend 1.2.3":  ran["acme.org/artifacts/frontend"].Name,
			actionKeep + " acme.org/artifacts/database 16.4.0": ran["acme.org/artifacts/database"].Name, // the Stage's instance
			actionKeep + " acme.org/artifacts/cache 7.0.0":     shop2.Status.ResultingArtifactDeployments["acme.org/artifacts/cache"].Name,
			actionRelease + " acme.org/artifacts/config 0.4.0": ran["acme.org/artifacts/config"].Name, // VectorDeployment shop's too
		})
		for _, ad := range ads {
			if ad.Name == ran["acme.org/artifacts/database"].Name && !ad.Spec.Manifest.AllowReuse {
				t.Errorf("the Stage's database is VectorDeployment shop's, %s", ad.Name)
			}
		}

		// The Stage reconciler, given the move, makes what the plan says.
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(landscape), landscape); err != nil {
			t.Fatal(err)
		}
		landscape.Spec.Vector = shop2Ref
		if err := env.Client.Update(ctx, landscape); err != nil {
			t.Fatal(err)
		}
		second := deployed(landscape, shop2Ref)
		if got := second.Status.ResultingArtifactDeployments; got["acme.org/artifacts/database"].Name != ran["acme.org/artifacts/database"].Name ||
			got["acme.org/artifacts/frontend"].Name != ran["acme.org/artifacts/frontend"].Name {
			t.Errorf("the Stage's move made %+v; before it ran %+v", got, ran)
		}
		must("wait", "st", "landscape", "--timeout", "1m")
		if out := must("history", "st", "landscape"); !strings.Contains(out, second.Name+" (active)") || !strings.Contains(out, first.Name+"  ") {
			t.Errorf("history after the move:\n%s", out)
		}

		// Back to the first vector: its VectorDeployment, deleted once the second was promoted, comes back.
		out := must("rollback", "st", "landscape", "--wait", "--timeout", "1m")
		if !strings.Contains(out, "Stage "+ns+"/landscape: spec.vector set to "+shopRef+" (was "+shop2Ref+")\n") ||
			!strings.Contains(out, "Stage "+ns+"/landscape: Ready: ") {
			t.Errorf("rollback --wait:\n%s", out)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(landscape), landscape); err != nil || landscape.Status.ActiveVectorDeployment != first.Name {
			t.Errorf("after the rollback the Stage runs %q, want %s (%v)", landscape.Status.ActiveVectorDeployment, first.Name, err)
		}
		if out := must("tree", "st/landscape"); !strings.HasPrefix(out, "Stage/landscape  Ready=True Promoted\n└── VectorDeployment/"+first.Name+" (active)  Ready=True") {
			t.Errorf("tree st/landscape:\n%s", out)
		}
	})

	t.Run("reconcile --wait waits for the request to be handled", func(t *testing.T) {
		stopOperator()
		_, stderr, code := cli("reconcile", "vd", "empty", "--wait", "--timeout", "2s")
		if code != exitFailure || !strings.Contains(stderr, "VectorDeployment "+ns+"/empty: timed out waiting for the operator to handle the reconcile request") {
			t.Errorf("with no operator running: exit %d, %s", code, stderr)
		}
	})
}

// planOf reads diff's JSON or YAML output as "action component version" → ArtifactDeployment name.
func planOf(t *testing.T, out string) map[string]string {
	t.Helper()
	var p plan
	if err := yaml.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]string{}
	for _, a := range p.Artifacts {
		got[a.Action+" "+a.Component+" "+a.Version] = a.Name
	}
	return got
}

// kubeconfigWithContexts writes the envtest kubeconfig as context "envtest" with namespace ns, and makes the
// current context one whose server does not answer.
func kubeconfigWithContexts(t *testing.T, admin []byte, ns string) string {
	t.Helper()
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		t.Fatal(err)
	}
	envtest := *cfg.Contexts[cfg.CurrentContext]
	envtest.Namespace = ns
	cfg.Contexts["envtest"] = &envtest
	cfg.Clusters["unreachable"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["unreachable"] = &clientcmdapi.Context{Cluster: "unreachable", AuthInfo: envtest.AuthInfo, Namespace: ns}
	cfg.AuthInfos["stranger"] = &clientcmdapi.AuthInfo{Token: "not-a-token"}
	cfg.Contexts["stranger"] = &clientcmdapi.Context{Cluster: envtest.Cluster, AuthInfo: "stranger", Namespace: ns}
	cfg.CurrentContext = "unreachable"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// envtestCLI runs the binary against the envtest API server of kubeconfig's "envtest" context: cli returns what it
// printed and its exit code, must fails the test unless it exits 0 and returns its standard output.
func envtestCLI(t *testing.T, kubeconfig string) (cli func(args ...string) (stdout, stderr string, code int), must func(args ...string) string) {
	cli = func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		return runBinary(t, append(args, "--kubeconfig", kubeconfig, "--context", "envtest")...)
	}
	must = func(args ...string) string {
		t.Helper()
		stdout, stderr, code := cli(args...)
		if code != exitSuccess {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		return stdout
	}
	return cli, must
}
