package fluxdeployer

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestRemoteTargets: a tenant's kubeconfig Secret is read as Flux reads one. What would run a command or read a
// file inside the operator, or skip TLS verification, is refused with UnsafeKubeConfig before any request, unless
// the flag of Flux's name allows exec or insecure TLS; the operator's own credentials are never sent.
func TestRemoteTargets(t *testing.T) {
	h := testHarness(t)
	// remoteTarget deploys an ArtifactDeployment to the cluster the kubeconfig names; the next reconcile
	// collects its results there.
	remoteTarget := func(t *testing.T, ns string, kubeconfig []byte) (*Reconciler, *record.FakeRecorder, *konfidencev1.ArtifactDeployment) {
		t.Helper()
		h.namespace(t, ns)
		h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"},
			Data: map[string][]byte{"value": kubeconfig}})
		h.configMap(t, ns, map[string]string{deploymentTargetsKey: ns + ":\n  secretRef:\n    name: landscape\n"})
		r, recorder := h.direct(ns)
		r.remote.AllowedTargetHosts = []string{loopback}
		ad := deployed(t, h, r, ns)
		drainEvents(recorder)
		return r, recorder, ad
	}
	refused := func(t *testing.T, h *harness, r *Reconciler, recorder *record.FakeRecorder, ad *konfidencev1.ArtifactDeployment, remote *remoteAPI, wantInMessage string) {
		t.Helper()
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatalf("a refused kubeconfig is terminal, not retried: %v", err)
		}
		assertResultsRefused(t, got, konfidencev1.UnsafeKubeConfigReason)
		if msg := conditions.GetMessage(got, meta.ReadyCondition); !strings.Contains(msg, wantInMessage) {
			t.Errorf("Ready message %q does not say %q", msg, wantInMessage)
		}
		assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.UnsafeKubeConfigReason)
		if reqs := remote.requests(); len(reqs) != 0 {
			t.Errorf("the remote target was called with a refused kubeconfig: %q", reqs)
		}
		if remote.sawAuthorization(operatorToken) {
			t.Errorf("the token of the operator's file reached the tenant's server")
		}
	}
	accepted := func(t *testing.T, h *harness, r *Reconciler, ad *konfidencev1.ArtifactDeployment) {
		t.Helper()
		got, err := h.reconcile(t, r, ad)
		if err != nil {
			t.Fatal(err)
		}
		assertCondition(t, got, meta.ReadyCondition, True, meta.SucceededReason)
	}

	t.Run("exec is refused and never runs", func(t *testing.T) {
		remote := newRemoteAPI(t)
		marker := filepath.Join(t.TempDir(), "exec-ran")
		r, recorder, ad := remoteTarget(t, "remote-exec", remote.kubeconfig(t, execUser(marker), false))
		refused(t, h, r, recorder, ad, remote, "exec")
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the kubeconfig's exec command ran inside the operator (marker %s: %v)", marker, err)
		}

		// The refusal is terminal, but Secrets are not watched: the ArtifactDeployment is looked at again every
		// interval, and once the tenant has fixed the Secret it deploys.
		result, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)})
		if err != nil || result.RequeueAfter != defaultConfig().interval {
			t.Errorf("a refused kubeconfig is requeued after %s (error %v), want the interval %s", result.RequeueAfter, err, defaultConfig().interval)
		}
		secret := &corev1.Secret{}
		h.get(t, ad.Namespace, "landscape", secret)
		secret.Data["value"] = remote.kubeconfig(t, clientcmdapi.AuthInfo{Token: "tenant-token"}, false)
		if err := h.env.Client.Update(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		accepted(t, h, r, ad)
		remote.assertAuthorization(t, "Bearer tenant-token")
	})

	t.Run("exec runs with --insecure-kubeconfig-exec", func(t *testing.T) {
		remote := newRemoteAPI(t)
		marker := filepath.Join(t.TempDir(), "exec-ran")
		r, _, ad := remoteTarget(t, "remote-exec-allowed", remote.kubeconfig(t, execUser(marker), false))
		r.remote.KubeConfig.InsecureExecProvider = true
		accepted(t, h, r, ad)
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the allowed exec command did not run: %v", err)
		}
		remote.assertAuthorization(t, "Bearer from-exec")
	})

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(operatorToken), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		user       clientcmdapi.AuthInfo
		ca         bool // the cluster's CA from a file
	}{
		{name: "tokenFile", want: "tokenFile", user: clientcmdapi.AuthInfo{TokenFile: tokenFile}},
		{name: "client-certificate", want: "client-certificate", user: clientcmdapi.AuthInfo{ClientCertificate: tokenFile, ClientKey: tokenFile}},
		{name: "certificate-authority", want: "certificate-authority", ca: true},
		{name: "auth-provider", want: "auth-provider", user: clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{
			Name: "oidc", Config: map[string]string{"idp-issuer-url": "https://issuer.example", "client-id": "x", "id-token": "y"}}}},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			remote := newRemoteAPI(t)
			kc := remote.config(tc.user, false)
			if tc.ca {
				// The server's own certificate, so that only the file reference is wrong with it.
				ca := kubeconfigFile(kc.Clusters["remote"].CertificateAuthorityData).onDisk(t)
				kc.Clusters["remote"].CertificateAuthority, kc.Clusters["remote"].CertificateAuthorityData = ca, nil
			}
			r, recorder, ad := remoteTarget(t, "remote-"+strings.ToLower(tc.name), write(t, kc))
			refused(t, h, r, recorder, ad, remote, tc.want)
		})
	}

	t.Run("insecure TLS is refused", func(t *testing.T) {
		remote := newRemoteAPI(t)
		r, recorder, ad := remoteTarget(t, "remote-insecure", remote.kubeconfig(t, clientcmdapi.AuthInfo{Token: "tenant-token"}, true))
		refused(t, h, r, recorder, ad, remote, "insecure-skip-tls-verify")
	})

	t.Run("insecure TLS with --insecure-kubeconfig-tls", func(t *testing.T) {
		remote := newRemoteAPI(t)
		r, _, ad := remoteTarget(t, "remote-insecure-allowed", remote.kubeconfig(t, clientcmdapi.AuthInfo{Token: "tenant-token"}, true))
		r.remote.KubeConfig.InsecureTLS = true
		accepted(t, h, r, ad)
		remote.assertAuthorization(t, "Bearer tenant-token")
	})

	t.Run("no credentials: none of the operator's are sent", func(t *testing.T) {
		// Where a process's own credentials could come from: in-cluster configuration and KUBECONFIG.
		t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
		t.Setenv("KUBERNETES_SERVICE_PORT", "1")
		t.Setenv("KUBECONFIG", write(t, kubeconfigConfig(h)).onDisk(t))
		remote := newRemoteAPI(t)
		r, _, ad := remoteTarget(t, "remote-anonymous", remote.kubeconfig(t, clientcmdapi.AuthInfo{}, false))
		accepted(t, h, r, ad)
		remote.assertAuthorization(t, "")
	})
}

// loopback is the host of the test servers that play remote targets, which the tests allow.
const loopback = "127.0.0.1"

// operatorToken stands for a credential of the operator's process, in a file a tenant's kubeconfig may name.
const operatorToken = "the-operators-service-account-token"

// execUser is a kubeconfig user whose exec plugin leaves a marker file and hands out the token from-exec.
func execUser(marker string) clientcmdapi.AuthInfo {
	return clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1",
		Command:         "/bin/sh",
		Args:            []string{"-c", `touch "$0" && echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}'`, marker},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
}

// remoteAPI plays a remote target's API server: it records every request with its Authorization header and
// answers a Service list with no Services.
type remoteAPI struct {
	server *httptest.Server
	mu     sync.Mutex
	seen   []string // "METHOD path" each
	auth   []string // the Authorization header of each request
	// services, when set, answers the Service list instead.
	services http.HandlerFunc
}

// remoteAPIResponses are the remote API's answers by the last element of the path: discovery (for clients that
// ask it) and an empty Service list.
var remoteAPIResponses = map[string]string{
	"api":      `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"remote"}]}`,
	"apis":     `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`,
	"v1":       `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"services","namespaced":true,"kind":"Service","verbs":["list"]}]}`,
	"services": `{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[]}`,
}

// newRemoteAPI serves TLS: client-go sends a kubeconfig's credentials only over TLS.
func newRemoteAPI(t *testing.T) *remoteAPI {
	a := &remoteAPI{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, req.Method+" "+req.URL.Path)
		a.auth = append(a.auth, req.Header.Get("Authorization"))
		services := a.services
		a.mu.Unlock()
		if services != nil && path.Base(req.URL.Path) == "services" {
			services(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.Method == http.MethodGet {
			_, _ = w.Write([]byte(remoteAPIResponses[path.Base(req.URL.Path)]))
		}
	})
	a.server = httptest.NewTLSServer(handler)
	t.Cleanup(a.server.Close)
	return a
}

func (a *remoteAPI) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// sawAuthorization says whether a request carried an Authorization header containing s.
func (a *remoteAPI) sawAuthorization(s string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.ContainsFunc(a.auth, func(auth string) bool { return strings.Contains(auth, s) })
}

// assertAuthorization fails unless the Services were listed and every request carried exactly want.
func (a *remoteAPI) assertAuthorization(t *testing.T, want string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.ContainsFunc(a.seen, func(s string) bool { return strings.HasSuffix(s, "/services") }) {
		t.Errorf("the Services were not listed on the remote target: %q", a.seen)
	}
	for i, got := range a.auth {
		if got != want {
			t.Errorf("%s sent Authorization %q, want %q", a.seen[i], got, want)
		}
	}
}

// config is a kubeconfig for the server with the user; insecure skips TLS verification instead of trusting the
// server's certificate.
func (a *remoteAPI) config(user clientcmdapi.AuthInfo, insecure bool) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["remote"] = &clientcmdapi.Cluster{Server: a.server.URL, InsecureSkipTLSVerify: insecure}
	if !insecure {
		kc.Clusters["remote"].CertificateAuthorityData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.server.Certificate().Raw})
	}
	kc.AuthInfos["tenant"] = &user
	kc.Contexts["remote"] = &clientcmdapi.Context{Cluster: "remote", AuthInfo: "tenant"}
	kc.CurrentContext = "remote"
	return kc
}

func (a *remoteAPI) kubeconfig(t *testing.T, user clientcmdapi.AuthInfo, insecure bool) []byte {
	return write(t, a.config(user, insecure))
}

// kubeconfigFile is a serialized kubeconfig.
type kubeconfigFile []byte

func write(t *testing.T, kc *clientcmdapi.Config) kubeconfigFile {
	t.Helper()
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// onDisk writes the kubeconfig to a file of the test.
func (k kubeconfigFile) onDisk(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// kubeconfigConfig is the test API server's admin kubeconfig: the credentials of the operator's own process.
func kubeconfigConfig(h *harness) *clientcmdapi.Config {
	cfg := h.env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	return kc
}
