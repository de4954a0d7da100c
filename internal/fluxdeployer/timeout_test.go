package fluxdeployer

import (
	"context"
	"fmt"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	fluxclient "github.com/fluxcd/pkg/runtime/client"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestRemoteTimeouts: a remote target that accepts connections and never answers holds a worker only for the
// request timeout, or for the reconcile's deadline where no request timeout is set; its ArtifactDeployment reports
// RemoteTargetTimeout and the other namespaces' ArtifactDeployments are still reconciled.
func TestRemoteTimeouts(t *testing.T) {
	h := testHarness(t)
	// silentTarget makes ns deploy to a target that never answers, configured by the ConfigMap named ns.
	silentTarget := func(t *testing.T, ns string) *testenv.SilentServer {
		t.Helper()
		silent := testenv.NewSilentServer(t)
		kc := clientcmdapi.NewConfig()
		kc.Clusters["silent"] = &clientcmdapi.Cluster{Server: "http://" + silent.Addr}
		kc.AuthInfos["tenant"] = &clientcmdapi.AuthInfo{}
		kc.Contexts["silent"] = &clientcmdapi.Context{Cluster: "silent", AuthInfo: "tenant"}
		kc.CurrentContext = "silent"
		h.namespace(t, ns)
		h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"},
			Data: map[string][]byte{"value": write(t, kc)}})
		h.configMap(t, ns, map[string]string{deploymentTargetsKey: ns + ":\n  secretRef:\n    name: landscape\n"})
		return silent
	}

	t.Run("the reconcile deadline ends a call without request timeout", func(t *testing.T) {
		ns := "silent-deadline"
		silent := silentTarget(t, ns)
		r, recorder := h.direct(ns)
		r.remote = RemoteOptions{KubeConfig: kubeConfigOptions(0), ReconcileTimeout: 2 * time.Second, AllowedTargetHosts: []string{loopback}}
		ad := deployed(t, h, r, ns)
		drainEvents(recorder)

		done := make(chan error, 1)
		go func() {
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Error("a timeout is retried, so Reconcile returns it")
			}
		case <-time.After(time.Minute):
			t.Fatal("the reconcile did not return within a minute of a 2s deadline")
		}
		if silent.Accepted() == 0 {
			t.Error("the silent target was never called")
		}
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, ns, ad.Name, got)
		assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.RemoteTargetTimeoutReason)
		assertCondition(t, got, konfidencev1.DeploymentResultCreatedCondition, False, konfidencev1.RemoteTargetTimeoutReason)
		assertCondition(t, got, meta.ReconcilingCondition, True, meta.ProgressingWithRetryReason)
		assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.RemoteTargetTimeoutReason)
	})

	t.Run("a silent target holds the only worker for the request timeout only", func(t *testing.T) {
		silentNS, localNS := "silent-requests", "silent-neighbour"
		silent := silentTarget(t, silentNS)
		h.namespace(t, localNS)
		// One worker: the neighbour is reconciled only if the silent target's reconciles end. The deadline is far
		// off, so only the request timeout can end them.
		mgr, err := ctrl.NewManager(h.env.Config, ctrl.Options{
			Scheme:                 h.env.Scheme,
			Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{silentNS: {}, localNS: {}}},
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			t.Fatal(err)
		}
		o := &Options{ConfigName: silentNS, ConfigNamespace: configNamespace,
			Remote: RemoteOptions{KubeConfig: kubeConfigOptions(time.Second), ReconcileTimeout: time.Hour, AllowedTargetHosts: []string{loopback}}}
		if _, err := o.setup(mgr, operating.Options{Concurrent: 1}); err != nil {
			t.Fatal(err)
		}
		testenv.RunManager(t, mgr)

		silentAD := artifactDeployment(silentNS, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
			resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
		deployedByManager(t, h, silentAD)
		testenv.Eventually(t, time.Minute, func() error {
			if silent.Accepted() == 0 {
				return fmt.Errorf("the silent target was not called yet")
			}
			return nil
		})
		start := time.Now()
		waitForReady(t, h, silentAD, False, konfidencev1.RemoteTargetTimeoutReason)
		t.Logf("RemoteTargetTimeout %s after the silent target was first called (request timeout 1s)", time.Since(start).Round(10*time.Millisecond))

		localAD := artifactDeployment(localNS, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
			resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
		deployedByManager(t, h, localAD)
		waitForReady(t, h, localAD, True, meta.SucceededReason)
		if n := silent.Accepted(); n < 2 {
			t.Errorf("the silent target was called %d times; its ArtifactDeployment is retried", n)
		}
		// The manager's recorder writes the events asynchronously.
		testenv.Eventually(t, 30*time.Second, func() error {
			events := &corev1.EventList{}
			if err := h.env.Client.List(context.Background(), events, client.InNamespace(silentNS)); err != nil {
				return err
			}
			var seen []string
			for _, e := range events.Items {
				if e.Type == corev1.EventTypeWarning && e.Reason == konfidencev1.RemoteTargetTimeoutReason {
					return nil
				}
				seen = append(seen, e.Type+" "+e.Reason)
			}
			return fmt.Errorf("no Warning event %s among %q", konfidencev1.RemoteTargetTimeoutReason, seen)
		})
	})
}

// kubeConfigOptions are Flux's kubeconfig options with a request timeout (0: none).
func kubeConfigOptions(timeout time.Duration) fluxclient.KubeConfigOptions {
	return fluxclient.KubeConfigOptions{Timeout: &timeout}
}

// deployedByManager creates ad and, once the running manager has created its Flux objects, reports them deployed
// as source-controller and kustomize-controller would.
func deployedByManager(t *testing.T, h *harness, ad *konfidencev1.ArtifactDeployment) {
	t.Helper()
	h.create(t, ad)
	testenv.Eventually(t, time.Minute, func() error {
		if err := h.env.Client.Get(context.Background(), client.ObjectKeyFromObject(ad), &sourcev1.OCIRepository{}); err != nil {
			return err
		}
		return h.env.Client.Get(context.Background(), client.ObjectKeyFromObject(ad), &kustomizev1.Kustomization{})
	})
	h.deployedStatus(t, ad)
}
