package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/gesture"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// liveBound is how soon after a status change an open page must show it.
const liveBound = 2 * time.Second

// TestUIInABrowser uses fluxdeployer ui, run as its own process, the way a person does, in headless Chromium. The
// landscape is the demo's: the shop vector with a frontend chart, a config bundle and a database chart, deployed
// by the operator and the real Flux controllers. The browser opens the overview, follows the link to the
// VectorDeployment, and watches its page while the test breaks the config artifact (the bundle's registry stops
// answering, and a reconcile is requested as `fluxdeployer reconcile` would). The page must show the artifact
// failing within liveBound of the ArtifactDeployment's status changing, without a reload, and the console must
// stay free of errors and Content-Security-Policy violations throughout. The screenshots are the test's
// artifacts (go test -artifacts; make test keeps them in bin/test-artifacts).
func TestUIInABrowser(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	bundles := newRegistry(t) // the config bundle's own registry, so that breaking it breaks that artifact alone
	frontend := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.2.3+build.5", true, ocmtest.WebChart("frontend", "1.2.3+build.5"))
	database := helmArtifact(t, reg, "acme.org/artifacts/database", "16.4.0", false, ocmtest.WebChart("database", "16.4.0"))
	bundle, err := ocmtest.PushKustomizeBundle(ctx, bundles.Host, "bundles/config", "0.4.0", ocmtest.ConfigBundle)
	if err != nil {
		t.Fatal(err)
	}
	config := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", true)
	config.Resources[1] = ocmtest.BundleResource("0.4.0", bundle)
	reg.Push(t, "", frontend, config, database, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, config, database))

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "shop")
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	waitReady(t, 3*time.Minute, vd)
	configAD := adName(t, config, nil)

	base := startUI(t)
	b := newBrowser(t)

	b.run(t, "the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`tr.row[data-name="shop"]`)))
	if got := b.eval(t, `document.querySelector('tr.row[data-name="shop"] td.state').className`); !strings.Contains(got, "ready") {
		t.Errorf("the overview's row of shop: state %q, want ready", got)
	}
	b.screenshot(t, "overview.png")

	vdLink := fmt.Sprintf(`tr.row[data-name="shop"] a[href="/vd/%s/shop"]`, ns)
	adCell := fmt.Sprintf(`td > a[href="/ad/%s/%s"]`, ns, configAD)
	b.run(t, "following the link to the VectorDeployment", chromedp.Click(chromedp.CSS(vdLink)), chromedp.WaitVisible(chromedp.CSS(adCell)))
	if got := b.eval(t, `location.pathname`); got != "/vd/"+ns+"/shop" {
		t.Errorf("the link led to %s", got)
	}
	stateOfConfig := `document.querySelector('` + adCell + `').parentElement.className`
	if got := b.eval(t, stateOfConfig); !strings.Contains(got, "ready") {
		t.Fatalf("config's ArtifactDeployment on the page: %q, want ready", got)
	}
	b.screenshot(t, "vectordeployment-ready.png")
	// A reload would drop this mark: the page must change in place.
	b.eval(t, `window.sameDocument = "yes"`)

	broken := watchFailing(t, ns, configAD)
	bundles.SetUnavailable(true)
	ad := &konfidencev1.ArtifactDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: configAD}, ad); err != nil {
		t.Fatal(err)
	}
	if _, err := gesture.Do(ctx, env.Client, ad, gesture.Reconcile); err != nil {
		t.Fatal(err)
	}
	var brokeAt time.Time
	select {
	case brokeAt = <-broken:
	case <-time.After(3 * time.Minute):
		t.Fatal("the ArtifactDeployment of the broken bundle stayed Ready")
	}
	shownAt := b.waitFor(t, 30*time.Second, stateOfConfig, "failed")
	t.Logf("the page showed the failing artifact %s after its status changed", shownAt.Sub(brokeAt).Round(time.Millisecond))
	if took := shownAt.Sub(brokeAt); took > liveBound {
		t.Errorf("the page showed the failing artifact %s after its status changed, want within %s", took, liveBound)
	}
	// The VectorDeployment waits on a failed artifact that Flux retries: failing too, not in progress.
	b.waitFor(t, 30*time.Second, `document.getElementById("state").className`, "failed")
	if got := b.eval(t, `window.sameDocument || "reloaded"`); got != "yes" {
		t.Error("the page was reloaded to show the change")
	}
	b.screenshot(t, "vectordeployment-failing.png")
	b.assertQuietConsole(t)
}

// startUI runs `fluxdeployer ui -A` with the admin kubeconfig on a free loopback port until the test ends and
// returns its base URL once it serves the overview.
func startUI(t *testing.T) string {
	t.Helper()
	bin, kubeconfig := adminCLI(t)
	addr := testenv.FreeAddr(t)
	startProcess(t, "fluxdeployer ui", kubeconfig, bin, "ui", "-A", "--addr", addr)
	base := "http://" + addr
	testenv.Eventually(t, time.Minute, func() error {
		resp, err := http.Get(base + "/") //nolint:noctx // a loopback endpoint of a process the test runs
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /: %s", resp.Status)
		}
		return nil
	})
	return base
}

// watchFailing returns a channel that receives the time the test saw the ArtifactDeployment's Ready condition
// turn False (the view shows it failing: the operator marks Ready=False only for a failed step), from a watch
// opened now. Every Ready it passes through is logged.
func watchFailing(t *testing.T, namespace, name string) <-chan time.Time {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &konfidencev1.ArtifactDeploymentList{}, client.InNamespace(namespace),
		client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	at := make(chan time.Time, 1)
	go func() {
		for ev := range w.ResultChan() {
			ad, ok := ev.Object.(*konfidencev1.ArtifactDeployment)
			if !ok {
				continue
			}
			if c := conditions.Get(ad, konfidencev1.ReadyCondition); c != nil {
				t.Logf("%s: Ready=%s %s: %s", name, c.Status, c.Reason, c.Message)
			}
			if conditions.IsFalse(ad, konfidencev1.ReadyCondition) {
				at <- time.Now()
				return
			}
		}
	}()
	return at
}

// browser is one headless Chromium tab, with what its console reported.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	// problems are the console's errors and warnings: calls of the console API, uncaught exceptions and the
	// browser's own log, where CSP violations and failed loads are reported.
	problems []string
}

// newBrowser starts Debian's Chromium (CHROMIUM names it; hack/browser-assets.sh installs it) headless, with a
// new profile and without any of its background connections: the page's loopback server is all it may reach.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			t.Fatal("no Chromium: run hack/browser-assets.sh (it installs Debian's chromium) or set CHROMIUM")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		// Nothing but loopback resolves: the browser must not reach any other host.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	// The first run starts the browser, which lives as long as the context of that run: b.ctx, not a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				b.note(fmt.Sprintf("%s (%s %s)", m, m.Source, m.URL))
			}
		}
	}()
	return b
}

func (b *browser) note(problem string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, problem)
}

func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page (through the DevTools protocol, not the page's own
// scripts) and returns its value as a string.
func (b *browser) eval(t *testing.T, expression string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expression))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expression, err)
	}
	return fmt.Sprint(v)
}

// waitFor evaluates expression until its value contains want and returns when it first did: the test samples the
// page every 20 ms, the page itself only listens to its event stream.
func (b *browser) waitFor(t *testing.T, timeout time.Duration, expression, want string) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if last = b.eval(t, expression); strings.Contains(last, want) {
			return time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.screenshot(t, "timeout.png")
	t.Fatalf("%s stayed %q for %s, want %q", expression, last, timeout, want)
	return time.Time{}
}

// screenshot saves what the window shows as name in the test's artifact directory.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("taking %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name), png, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (b *browser) assertQuietConsole(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Errorf("the browser reported:\n%s", strings.Join(b.problems, "\n"))
	}
}
