package ui

import (
	"bufio"
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden pages in testdata")

// TestPagesAreGolden renders every page of the landscape as the administrator sees it and compares it with its
// golden file: the pages' structure is part of what users and their links rely on.
func TestPagesAreGolden(t *testing.T) {
	fixture(t)
	_, ts := startView(t, nil, "", false)
	for _, p := range []struct{ golden, path string }{
		{"overview", "/"},
		{"overview-filtered", "/?q=shop+artifactfailed"},
		{"vectordeployment", "/vd/shop/shop"},
		{"artifactdeployment-helm", "/ad/shop/" + webAD},
		{"artifactdeployment-kustomize", "/ad/shop/" + configAD},
		{"stage", "/st/shop/prod"},
		{"not-found", "/vd/shop/nothing"},
	} {
		t.Run(p.golden, func(t *testing.T) {
			code, body := get(t, ts, p.path)
			if want := map[bool]int{true: http.StatusNotFound, false: http.StatusOK}[p.golden == "not-found"]; code != want {
				t.Fatalf("GET %s: %d, want %d\n%s", p.path, code, want, body)
			}
			file := filepath.Join("testdata", p.golden+".golden.html")
			if *update {
				if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/ui -update)", err)
			}
			if body != string(want) {
				t.Errorf("GET %s differs from %s (run go test ./internal/ui -update and review the diff):\n%s", p.path, file, body)
			}
		})
	}
}

// TestTenantTextIsEscaped: a message a tenant or a registry wrote, with markup in it, renders as text on every
// page that shows it.
func TestTenantTextIsEscaped(t *testing.T) {
	fixture(t)
	_, ts := startView(t, nil, "", false)
	for _, path := range []string{"/", "/vd/shop/shop", "/ad/shop/" + configAD, "/st/shop/prod"} {
		_, body := get(t, ts, path)
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img") {
			t.Errorf("%s renders tenant markup as markup", path)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;") {
			t.Errorf("%s does not show the hostile message as text", path)
		}
		if strings.Count(body, "<script") != 1 {
			t.Errorf("%s: want exactly one script element (the view's own)", path)
		}
	}
}

// TestSecurityHeaders: every answer forbids inline script and other origins, and a request for another host
// name (a DNS name rebound to the loopback address by a web page elsewhere) is refused.
func TestSecurityHeaders(t *testing.T) {
	fixture(t)
	_, ts := startView(t, nil, "", false)
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("Content-Security-Policy %q allows inline script or eval", csp)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/", nil)
	req.Host = "attacker.example:80"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET / for host attacker.example: %d, want %d", resp.StatusCode, http.StatusMisdirectedRequest)
	}
}

// TestActions: without --actions there is no way to change anything; with it, a gesture needs a POST from the
// view's own origin with its token, and then is sent as the viewer.
func TestActions(t *testing.T) {
	fixture(t)
	_, readOnly := startView(t, nil, "", false)
	if code, body := get(t, readOnly, "/vd/shop/storefront"); code != http.StatusOK || strings.Contains(body, `action="/action"`) {
		t.Errorf("read-only view: %d, offers actions: %v", code, strings.Contains(body, `action="/action"`))
	}
	if resp := post(t, readOnly, readOnly.URL, url.Values{"gesture": {"reconcile"}, "page": {"/vd/shop/storefront"}}); resp == http.StatusSeeOther {
		t.Error("read-only view accepted an action")
	}

	s, ts := startView(t, nil, "", true)
	form := url.Values{"gesture": {"reconcile"}, "page": {"/vd/shop/storefront"}, "csrf": {s.csrf}}
	if code := post(t, ts, "https://attacker.example", form); code != http.StatusForbidden {
		t.Errorf("action from another origin: %d, want 403", code)
	}
	if code := post(t, ts, ts.URL, url.Values{"gesture": {"reconcile"}, "page": {"/vd/shop/storefront"}, "csrf": {"stale"}}); code != http.StatusForbidden {
		t.Errorf("action with a wrong token: %d, want 403", code)
	}
	if code := post(t, ts, ts.URL, form); code != http.StatusSeeOther {
		t.Fatalf("action: %d, want 303", code)
	}
	vd := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: shop, Name: "storefront"}, vd); err != nil {
		t.Fatal(err)
	}
	if vd.Annotations[meta.ReconcileRequestAnnotation] == "" {
		t.Errorf("reconcile sent, but %s is not set: %v", meta.ReconcileRequestAnnotation, vd.Annotations)
	}
}

func post(t *testing.T, ts *httptest.Server, origin string, form url.Values) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/action", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// viewer returns the credentials of user, bound in namespace to a Role that reads this project's kinds, Flux's,
// Events and Deployments, and pods when withPods.
func viewer(t *testing.T, user, namespace string, withPods bool) *rest.Config {
	t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{konfidencev1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
	}
	if withPods {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}})
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// TestViewerSeesOnlyWhatRBACAllows runs the view as users of the real API server's RBAC: a user allowed one
// namespace sees it and nothing of another, and cannot start a view of every namespace; a user without pods sees
// the workloads without pod detail, told why, and no error page.
func TestViewerSeesOnlyWhatRBACAllows(t *testing.T) {
	fixture(t)
	alice := viewer(t, "alice", shop, true)
	_, ts := startView(t, alice, shop, false)
	_, overview := get(t, ts, "/")
	if !strings.Contains(overview, `href="/vd/shop/shop"`) || strings.Contains(overview, "billing") || strings.Contains(overview, teamB) {
		t.Errorf("alice's overview should list shop's VectorDeployments and nothing of %s:\n%s", teamB, overview)
	}
	if code, _ := get(t, ts, "/vd/team-b/billing"); code != http.StatusNotFound {
		t.Errorf("alice opening team-b's VectorDeployment: %d, want 404", code)
	}
	if code, body := get(t, ts, "/ad/shop/"+webAD); code != http.StatusOK || !strings.Contains(body, "CrashLoopBackOff") {
		t.Errorf("alice, who may list pods, should see the failing pod's reason: %d\n%s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Run(ctx, Options{Config: alice, Scheme: env.Scheme, Addr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "every namespace") {
		t.Errorf("alice starting a view of every namespace: %v, want a refusal that names every namespace", err)
	}

	bob := viewer(t, "bob", shop, false)
	_, ts = startView(t, bob, shop, false)
	code, body := get(t, ts, "/ad/shop/"+webAD)
	if code != http.StatusOK {
		t.Fatalf("bob, who may not list pods: %d, want the page\n%s", code, body)
	}
	for _, want := range []string{"1/2 ready", "Pods are not shown: your credentials may not list and watch them in namespace shop."} {
		if !strings.Contains(body, want) {
			t.Errorf("bob's page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "CrashLoopBackOff") || strings.Contains(body, "web-6d4cf56db6") {
		t.Errorf("bob's page shows pod detail he may not read")
	}
}

// TestLivePageFollowsTheCluster opens a page's event stream, changes an object on it through the API server and
// expects the new content within 2 s, from the informers, without the client asking again.
func TestLivePageFollowsTheCluster(t *testing.T) {
	fixture(t)
	_, ts := startView(t, nil, shop, false)
	events := stream(t, ts, "/vd/shop/storefront")
	first := next(t, events, "content", 5*time.Second)
	if !strings.Contains(first, `class="badge ready" id="state"`) {
		t.Fatalf("first content is not the Ready page:\n%s", first)
	}
	vd := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: shop, Name: "storefront"}, vd); err != nil {
		t.Fatal(err)
	}
	vd.Status.Conditions[0].Status, vd.Status.Conditions[0].Reason, vd.Status.Conditions[0].Message = metav1.ConditionFalse, "ArtifactFailed", "0/1 artifacts ready"
	changed := time.Now()
	if err := env.Client.Status().Update(context.Background(), vd); err != nil {
		t.Fatal(err)
	}
	for {
		content := next(t, events, "content", 2*time.Second-time.Since(changed))
		if strings.Contains(content, `class="badge failed" id="state"`) {
			t.Logf("the page showed the change %s after the API server took it", time.Since(changed).Round(time.Millisecond))
			return
		}
	}
}

type sse struct{ event, data string }

// stream opens the live stream of page and returns its events as they arrive.
func stream(t *testing.T, ts *httptest.Server, page string) <-chan sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/live?page="+url.QueryEscape(page), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("live stream: Content-Type %q", ct)
	}
	out := make(chan sse, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<22)
		var e sse
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				e.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && e.event != "":
				e.data = strings.Join(data, "\n")
				out <- e
				e, data = sse{}, nil
			}
		}
	}()
	return out
}

// next waits for the next event named name, skipping others.
func next(t *testing.T, events <-chan sse, name string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the live stream ended while waiting for %q", name)
			}
			if e.event == name {
				return e.data
			}
		case <-deadline:
			t.Fatalf("no %q event within %s", name, within)
		}
	}
}
