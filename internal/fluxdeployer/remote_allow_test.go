package fluxdeployer

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestRemoteTargetAllowList: remote targets are off unless the operator lists their API servers
// (--allowed-target-hosts). A tenant's kubeconfig Secret naming a server (or a proxy) that is not listed gets
// RemoteTargetNotAllowed (Stalled, a Warning event) before any Flux object refers to it and before any request
// reaches the server; Flux objects applied while it was allowed are suspended. What a target answers to a failed
// request does not reach the status: only the HTTP status, no body, no control characters.
func TestRemoteTargetAllowList(t *testing.T) {
	h := testHarness(t)
	tenantToken := clientcmdapi.AuthInfo{Token: "tenant-token"}
	// conventional gives ns the kubeconfig Secret by its conventional name, which the default configuration takes
	// as a remote target: any tenant can create one.
	conventional := func(t *testing.T, ns string, kubeconfig []byte) {
		t.Helper()
		h.namespace(t, ns)
		h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: defaultConfig().deploymentTargetSecretName},
			Data: map[string][]byte{"value": kubeconfig}})
	}
	newAD := func(ns string) *konfidencev1.ArtifactDeployment {
		return artifactDeployment(ns, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
			resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
	}
	notAllowed := func(t *testing.T, r *Reconciler, recorder *record.FakeRecorder, ad *konfidencev1.ArtifactDeployment, wantInMessage string) {
		t.Helper()
		result, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)})
		if err != nil {
			t.Fatalf("a refused target is terminal, not retried: %v", err)
		}
		if result.RequeueAfter != defaultConfig().interval {
			t.Errorf("requeued after %s, want the interval (Secrets are not watched)", result.RequeueAfter)
		}
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, ad.Namespace, ad.Name, got)
		assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.RemoteTargetNotAllowedReason)
		assertCondition(t, got, meta.StalledCondition, True, konfidencev1.RemoteTargetNotAllowedReason)
		if msg := conditions.GetMessage(got, meta.ReadyCondition); !strings.Contains(msg, wantInMessage) {
			t.Errorf("Ready message %q does not say %q", msg, wantInMessage)
		}
		assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.RemoteTargetNotAllowedReason)
	}

	for _, tc := range []struct {
		name, want string
		allowed    []string
		proxy      bool // the kubeconfig reaches the allowed server through a proxy that is not allowed
		// path follows the allowed server's URL: every request would go below it, e.g. to a tenant's Service
		// through the server's service proxy, which answers (and redirects) as the tenant likes.
		path string
	}{
		{name: "off by default", want: "--allowed-target-hosts"},
		{name: "server not listed", allowed: []string{"prod.example.com", "127.0.0.2"}, want: "not among the allowed target hosts"},
		{name: "proxy not listed", proxy: true, want: "proxy"},
		{name: "server with a path", allowed: []string{loopback}, path: "/api/v1/namespaces/tenant/services/http:evil:80/proxy", want: "has a path"},
		{name: "server with a query", allowed: []string{loopback}, path: "/?x=1", want: "has a path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := newRemoteAPI(t)
			kc := remote.config(tenantToken, false)
			kc.Clusters["remote"].Server += tc.path
			var proxied *remoteAPI
			if tc.proxy {
				proxied = newRemoteAPI(t)
				kc.Clusters["remote"].ProxyURL = proxied.server.URL
				// Listed by host and port: only the proxy's port differs.
				tc.allowed = []string{strings.TrimPrefix(remote.server.URL, "https://")}
			}
			ns := "remote-allow-" + strings.ReplaceAll(tc.name, " ", "-")
			conventional(t, ns, write(t, kc))
			r, recorder := h.direct(ns)
			r.remote.AllowedTargetHosts = tc.allowed
			ad := newAD(ns)
			h.create(t, ad)
			notAllowed(t, r, recorder, ad, tc.want)
			h.assertNoFluxObjects(t, ns)
			if reqs := remote.requests(); len(reqs) != 0 {
				t.Errorf("the target that is not allowed was called: %q", reqs)
			}
			if proxied != nil && len(proxied.requests()) != 0 {
				t.Errorf("the proxy that is not allowed was called: %q", proxied.requests())
			}
		})
	}

	t.Run("a kubeconfig changed to another server", func(t *testing.T) {
		allowed, other := newRemoteAPI(t), newRemoteAPI(t)
		ns := "remote-allow-changed"
		conventional(t, ns, allowed.kubeconfig(t, tenantToken, false))
		r, recorder := h.direct(ns)
		r.remote.AllowedTargetHosts = []string{strings.TrimPrefix(allowed.server.URL, "https://")}
		ad := deployed(t, h, r, ns)
		if _, err := h.reconcile(t, r, ad); err != nil {
			t.Fatal(err)
		}
		allowed.assertAuthorization(t, "Bearer tenant-token")
		drainEvents(recorder)

		secret := &corev1.Secret{}
		h.get(t, ns, defaultConfig().deploymentTargetSecretName, secret)
		secret.Data["value"] = other.kubeconfig(t, tenantToken, false)
		if err := h.env.Client.Update(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		notAllowed(t, r, recorder, ad, "not among the allowed target hosts")
		if reqs := other.requests(); len(reqs) != 0 {
			t.Errorf("the server that is not allowed was called: %q", reqs)
		}
		k := &kustomizev1.Kustomization{}
		h.get(t, ns, ad.Name, k)
		if !k.Spec.Suspend {
			t.Error("the Kustomization applied for the allowed target still acts on the target: not suspended")
		}
	})

	t.Run("what the target answers is not repeated", func(t *testing.T) {
		for _, answer := range []struct {
			name string
			body func(w http.ResponseWriter)
		}{
			{"text body", func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte("\x1b[31mEVIL\x1b[0m\nforged line\r\n" + strings.Repeat("A", 4096)))
			}},
			{"Status message", func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":403,"reason":"Forbidden",` +
					`"message":"EVIL\u001b[2J\n` + strings.Repeat("B", 10000) + `"}`))
			}},
		} {
			t.Run(answer.name, func(t *testing.T) {
				remote := newRemoteAPI(t)
				remote.services = func(w http.ResponseWriter, _ *http.Request) { answer.body(w) }
				ns := "remote-answer-" + strings.ReplaceAll(strings.ToLower(answer.name), " ", "-")
				conventional(t, ns, remote.kubeconfig(t, tenantToken, false))
				r, recorder := h.direct(ns)
				r.remote.AllowedTargetHosts = []string{loopback}
				ad := deployed(t, h, r, ns)
				drainEvents(recorder)
				got, _ := h.reconcile(t, r, ad) // retried: the error is returned
				assertCondition(t, got, konfidencev1.DeploymentResultCreatedCondition, False, konfidencev1.DeploymentResultFailedReason)
				msg := conditions.GetMessage(got, meta.ReadyCondition)
				if strings.Contains(msg, "EVIL") || strings.Contains(msg, "AAAA") || strings.Contains(msg, "BBBB") || len(msg) > 512 {
					t.Errorf("Ready message repeats the target's answer (%d bytes): %q", len(msg), msg)
				}
				if strings.IndexFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
					t.Errorf("Ready message has non-printing characters: %q", msg)
				}
				for _, e := range drainEvents(recorder) {
					if strings.Contains(e, "EVIL") || len(e) > 1024 {
						t.Errorf("event repeats the target's answer: %q", e)
					}
				}
			})
		}
	})
}

// TestAllowHost: an allow-list entry without a port allows every port of its host, one with a port that port
// only; hosts compare case-insensitively, and an address without a scheme is read as https, as client-go does.
func TestAllowHost(t *testing.T) {
	o := RemoteOptions{AllowedTargetHosts: []string{"prod.example.com", "staging.example.com:6443", "[::1]:6443"}}
	for _, tc := range []struct {
		address string
		allowed bool
	}{
		{"https://prod.example.com", true},
		{"https://PROD.example.com:443", true},
		{"prod.example.com:8443", true},
		{"https://staging.example.com:6443/prefix", true},
		{"https://staging.example.com", false},
		{"https://staging.example.com:6444", false},
		{"https://[::1]:6443", true},
		{"https://[::1]:6444", false},
		{"https://prod.example.com.evil.example", false},
		{"https://169.254.169.254", false},
		{"://", false},
	} {
		if err := o.allowHost("API server", tc.address); (err == nil) != tc.allowed {
			t.Errorf("allowHost(%q) = %v, want allowed %t", tc.address, err, tc.allowed)
		}
	}
	if err := (RemoteOptions{}).allowServer(&clientcmdapi.Config{}); err == nil || !strings.Contains(err.Error(), "--allowed-target-hosts") {
		t.Errorf("without an allow-list: %v, want remote targets off", err)
	}
}

// TestRemoteTargetRedirectsAreNotFollowed: a remote target that answers the deployer's request with a redirect to
// another server (both allowed, both trusted by the kubeconfig's CA) does not get the redirect followed: the other
// server receives no request, so never the tenant's token, and the status says the redirect was refused. Before,
// client-go followed it and sent the token along.
func TestRemoteTargetRedirectsAreNotFollowed(t *testing.T) {
	h := testHarness(t)
	remote, other := newRemoteAPI(t), newRemoteAPI(t)
	remote.services = func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, other.server.URL+req.URL.RequestURI(), http.StatusTemporaryRedirect)
	}
	ns := "remote-redirect"
	h.namespace(t, ns)
	h.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: defaultConfig().deploymentTargetSecretName},
		Data: map[string][]byte{"value": remote.kubeconfig(t, clientcmdapi.AuthInfo{Token: "tenant-token"}, false)}})
	r, _ := h.direct(ns)
	r.remote.AllowedTargetHosts = []string{loopback}
	ad := deployed(t, h, r, ns)
	got, _ := h.reconcile(t, r, ad) // retried: the error is returned
	assertCondition(t, got, konfidencev1.DeploymentResultCreatedCondition, False, konfidencev1.DeploymentResultFailedReason)
	if msg := conditions.GetMessage(got, konfidencev1.DeploymentResultCreatedCondition); !strings.Contains(msg, "not followed") {
		t.Errorf("DeploymentResultCreated message %q does not say the redirect was not followed", msg)
	}
	if !slices.ContainsFunc(remote.requests(), func(s string) bool { return strings.HasSuffix(s, "/services") }) {
		t.Fatalf("the Services were not listed on the remote target, so the test proves nothing: %q", remote.requests())
	}
	if reqs := other.requests(); len(reqs) != 0 {
		t.Errorf("the redirect was followed: %q", reqs)
	}
	if other.sawAuthorization("tenant-token") {
		t.Error("the tenant's token reached the server redirected to")
	}
}
