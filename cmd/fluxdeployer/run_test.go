package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestManagerServesProbes starts the operator's manager against a real API server and checks that it reports
// healthy and, once its caches have synced, ready.
func TestManagerServesProbes(t *testing.T) {
	// Both reconcilers run, so the Flux CRDs the Flux deployer watches must be installed.
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	o := parseRunOptions(t, "--metrics-addr=0", "--health-addr="+testenv.FreeAddr(t))
	o.reuseControllerNames = true
	mgr, err := newManager(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
	for _, probe := range []string{"healthz", "readyz"} {
		url := fmt.Sprintf("http://%s/%s", o.healthAddr, probe)
		testenv.Eventually(t, 30*time.Second, func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s answered %s", url, resp.Status)
			}
			return nil
		})
	}
}

// TestProfilesOnlyWithProfiling reads the metrics endpoint of the operator's manager: /metrics is served, Go's
// profiles only with --profiling, since every pod that reaches the metrics port could otherwise have the operator
// spend CPU on a profile or a trace for as long as it asks.
func TestProfilesOnlyWithProfiling(t *testing.T) {
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	for _, tc := range []struct {
		flags   []string
		profile int // the status /debug/pprof/heap answers
	}{
		{flags: nil, profile: http.StatusNotFound},
		{flags: []string{"--profiling"}, profile: http.StatusOK},
	} {
		t.Run(fmt.Sprintf("%v", tc.flags), func(t *testing.T) {
			metricsAddr := testenv.FreeAddr(t)
			o := parseRunOptions(t, append([]string{"--metrics-addr=" + metricsAddr, "--health-addr=0"}, tc.flags...)...)
			o.reuseControllerNames = true
			mgr, err := newManager(env.Config, o)
			if err != nil {
				t.Fatal(err)
			}
			stop := testenv.RunManager(t, mgr)
			defer stop()
			status := func(path string) (int, error) {
				resp, err := http.Get("http://" + metricsAddr + path)
				if err != nil {
					return 0, err
				}
				resp.Body.Close()
				return resp.StatusCode, nil
			}
			testenv.Eventually(t, 30*time.Second, func() error {
				if code, err := status("/metrics"); err != nil || code != http.StatusOK {
					return fmt.Errorf("/metrics: %d, %v", code, err)
				}
				return nil
			})
			if code, err := status("/debug/pprof/heap"); err != nil || code != tc.profile {
				t.Errorf("/debug/pprof/heap answered %d (%v), want %d", code, err, tc.profile)
			}
		})
	}
}

// TestManagerStopsWithCallsInFlight asks the operator's manager to stop while a registry read and a call to a
// remote target hang on servers that never answer: it stops within its --graceful-shutdown-timeout, without error.
func TestManagerStopsWithCallsInFlight(t *testing.T) {
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	ns := namespace(t, env.Client)
	o := parseRunOptions(t, "--metrics-addr=0", "--health-addr=0", "--graceful-shutdown-timeout=10s",
		// Nothing but the manager's context ends the calls in flight: no request timeout, a far deadline.
		"--remote-request-timeout=0", "--reconcile-timeout=1h", "--flux-deployer-config-namespace="+ns,
		"--allowed-target-hosts=127.0.0.1")
	o.reuseControllerNames = true
	mgr, err := newManager(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()

	registry, remote := testenv.NewSilentServer(t), testenv.NewSilentServer(t)
	hangOnRegistry(t, env.Client, ns, registry)
	hangOnRemoteTarget(t, env.Client, ns, remote)
	testenv.Eventually(t, time.Minute, func() error {
		if registry.Accepted() == 0 || remote.Accepted() == 0 {
			return fmt.Errorf("calls in flight: registry %d, remote target %d", registry.Accepted(), remote.Accepted())
		}
		return nil
	})
	began := time.Now()
	cancel()
	select {
	case err := <-stopped:
		t.Logf("the manager stopped %s after it was asked to, with a registry read and a remote call in flight",
			time.Since(began).Round(time.Millisecond))
		if err != nil {
			t.Errorf("the manager stopped with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the manager had not stopped a minute after it was asked to")
	}
}

// hangOnRegistry creates a VectorDeployment whose vector is in a registry that never answers.
func hangOnRegistry(t *testing.T, c client.Client, ns string, registry *testenv.SilentServer) {
	t.Helper()
	testenv.CreateVectorDeployment(t, c, ns, "shop", "http://"+registry.Addr+"//acme.org/vectors/shop:1.0.0")
}

// hangOnRemoteTarget makes ns deploy to a remote target that never answers, and reports an ArtifactDeployment
// there deployed as Flux would, so that the Flux deployer lists its Services on the target.
func hangOnRemoteTarget(t *testing.T, c client.Client, ns string, remote *testenv.SilentServer) {
	t.Helper()
	ctx := context.Background()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: remote, cluster: {server: "http://%s"}}]
users: [{name: tenant, user: {}}]
contexts: [{name: remote, context: {cluster: remote, user: tenant}}]
current-context: remote
`, remote.Addr)
	ad := &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend-1-2-3-e1mvwibzp5", Annotations: map[string]string{
			konfidencev1.ArtifactComponentAnnotation: "acme.org/artifacts/backend",
			konfidencev1.ArtifactVersionAnnotation:   "1.2.3",
			konfidencev1.ArtifactHashAnnotation:      "e1mvwibzp5",
		}},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest: konfidencev1.ArtifactManifest{Type: fluxdeployer.KustomizeManifestType},
			Component: konfidencev1.Component{Name: "acme.org/artifacts/backend", Version: "1.2.3", Resources: []konfidencev1.Resource{{
				Name: "bundle", Type: "kustomize",
				Content: &apiextensionsv1.JSON{Raw: []byte(`{"type":"ociArtifact","imageReference":"registry.example.com/bundles/backend:1.2.3"}`)},
			}}},
		},
	}
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"}, Data: map[string][]byte{"value": []byte(kubeconfig)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux-deployer-configuration"},
			Data: map[string]string{"deploymentTargets": ns + ":\n  secretRef:\n    name: landscape\n"}},
		ad,
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// What source-controller and kustomize-controller report once the bundle is applied.
	key := metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}
	succeeded := func(condType, reason, message string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: reason, Message: message}
	}
	testenv.SetFluxStatus(t, c, &sourcev1.OCIRepository{ObjectMeta: key}, succeeded(meta.ReadyCondition, meta.SucceededReason, "done"))
	testenv.SetFluxStatus(t, c, &kustomizev1.Kustomization{ObjectMeta: key},
		succeeded(meta.ReadyCondition, meta.ReconciliationSucceededReason, "done"), succeeded(meta.HealthyCondition, meta.SucceededReason, "healthy"))
}

func TestManagerRejectsUnknownControllers(t *testing.T) {
	if _, err := newManager(&rest.Config{Host: "127.0.0.1:1"}, runOptions{metricsAddr: "0", healthAddr: "0", controllers: []string{"nonexistent"}}); err == nil {
		t.Fatal("an unknown --controllers name was accepted")
	}
}

// parseRunOptions returns the options of run as the command line args sets them.
func parseRunOptions(t *testing.T, args ...string) runOptions {
	t.Helper()
	o := newRunOptions()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}
