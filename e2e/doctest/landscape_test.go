package doctest_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// landscape is what the documents assume a user has: a cluster with Flux and the operator installed (the
// operator running under its own ServiceAccount and RBAC, as its Deployment runs it), and the user's registry at
// registry.example holding the vectors the documents name, published as they tell a platform team to.
type landscape struct {
	client client.Client
	// adminKubeconfig is the cluster admin's kubeconfig file.
	adminKubeconfig string
	// tools holds the programs the documents call: kubectl, cosign, fluxdeployer and hack/demo (as demo).
	tools string
	// onNode tells that the cluster is a real node, where the blocks that need pods to start run too.
	onNode bool
	// keep are namespaces a page may create that stay for the pages after it.
	keep map[string]bool
}

// buildTools builds, before the test enters its namespaces, the programs the documents call, and returns their
// folder: kubectl (the control plane's, built with it by hack/test-assets.sh), helm (built with the Flux
// controllers by hack/flux-assets.sh), fluxdeployer, hack/demo and cosign (pinned in hack/tools/flux).
func buildTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := controlplane.BuildFluxdeployer(dir); err != nil {
		t.Fatal(err)
	}
	kube, err := controlplane.KubeAssets(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	flux, err := controlplane.FluxAssets(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"kubectl": filepath.Join(kube, "kubectl"), "helm": filepath.Join(flux, "helm")} {
		if err := os.Symlink(path, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	demo := exec.Command("go", "build", "-o", filepath.Join(dir, "demo"), "./hack/demo")
	demo.Dir = controlplane.RepoRoot()
	if out, err := demo.CombinedOutput(); err != nil {
		t.Fatalf("building hack/demo: %v\n%s", err, out)
	}
	// Into bin/ and as hack/flux-assets.sh builds the controllers, whose build compiles most of cosign's packages,
	// as hack/release builds it.
	bin := filepath.Join(controlplane.RepoRoot(), "bin", "cosign")
	cosign := exec.Command("go", "build", "-C", "hack/tools/flux", "-trimpath", "-o", bin, "github.com/sigstore/cosign/v3/cmd/cosign")
	cosign.Dir = controlplane.RepoRoot()
	cosign.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cosign.CombinedOutput(); err != nil {
		t.Fatalf("building cosign: %v\n%s", err, out)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "cosign")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildRelease writes a release as the project makes one (make release, signed with an ephemeral key), for the
// page that installs a release from its files.
func buildRelease(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	cmd := exec.Command("make", "release", "DIST="+dist)
	cmd.Dir = controlplane.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, tail(string(out), 40))
	}
	return dist
}

// startLandscape starts the registry, publishes the vectors and starts the cluster and the operator, all until
// the test ends.
func startLandscape(ctx context.Context, t *testing.T) *landscape {
	t.Helper()
	reg := ocmtest.NewRegistry(t)
	serveAsRegistryExample(t, reg, loopback)
	publishVectors(ctx, t, reg)
	tools := os.Getenv(toolsEnv)
	serveSample(t, tools)

	cluster, err := controlplane.StartCluster(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	l := &landscape{client: cluster.Client, adminKubeconfig: cluster.AdminKubeconfig, tools: tools}
	operator, err := cluster.StartFluxdeployer(filepath.Join(l.tools, "fluxdeployer"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		operator.Stop()
		if t.Failed() {
			for _, p := range append(cluster.Processes, operator) {
				t.Logf("last lines of %s:\n%s", p.Name, p.Tail(15))
			}
		}
	})
	return l
}

// serveSample serves the sample vector where `make demo KEEP=1` serves it and config/samples names it,
// 127.0.0.1:5000, as the documents tell a user to: go run ./hack/demo -serve 127.0.0.1:5000.
func serveSample(t *testing.T, tools string) {
	t.Helper()
	p, err := controlplane.StartProcess("", nil, filepath.Join(tools, "demo"), "-serve", "127.0.0.1:5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	// It prints the vector's reference once the vector is published.
	for deadline := time.Now().Add(time.Minute); len(p.Lines("//acme.org/vectors/shop:")) == 0; time.Sleep(100 * time.Millisecond) {
		select {
		case <-p.Exited():
			t.Fatalf("hack/demo -serve 127.0.0.1:5000 ended:\n%s", p.Tail(20))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("hack/demo -serve 127.0.0.1:5000 published nothing in a minute:\n%s", p.Tail(20))
		}
	}
}

// serveAsRegistryExample serves reg over HTTPS at registry.example:443, the address ip, with the run's certificate
// (see netns_test.go); reg itself stays on its loopback port in plain HTTP, where the test publishes.
func serveAsRegistryExample(t *testing.T, reg *ocmtest.Registry, ip string) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(os.Getenv(certEnv), os.Getenv(keyEnv))
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(ip, "443"))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: reg.Host}))
	_ = front.Listener.Close()
	front.Listener = listener
	front.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	front.StartTLS()
	t.Cleanup(front.Close)
}

// publishVectors publishes what the documents deploy: the shop vector 1.0.0 as the OCM CLI built it from the
// component constructor of docs/vectors.md (its CTF copied into the registry, as `ocm transfer ctf` does), the
// charts and the bundle its resources name, and shop 1.1.0, the next vector the documents move to (a new
// frontend, config and database).
func publishVectors(ctx context.Context, t *testing.T, reg *ocmtest.Registry) {
	t.Helper()
	reg.PushCTF(t, "", filepath.Join(controlplane.RepoRoot(), "internal", "ocm", "testdata", "ocmcli", "ctf"))
	var next []ocmtest.ComponentVersion
	for _, a := range []struct {
		name, version, next string
		chart, reuse        bool
	}{
		{name: "frontend", version: "1.2.3+build.5", next: "1.2.4", chart: true, reuse: true},
		{name: "config", version: "0.4.0", next: "0.4.1", reuse: true},
		{name: "database", version: "16.4.0", next: "16.4.1", chart: true},
	} {
		deployerType := "cloud.konfidence.flux.kustomize"
		if a.chart {
			deployerType = "cloud.konfidence.flux.helm"
		}
		cv := ocmtest.Artifact("acme.org/artifacts/"+a.name, a.next, deployerType, a.reuse)
		for _, version := range []string{a.version, a.next} {
			tag := strings.ReplaceAll(version, "+", "_")
			if !a.chart {
				if _, err := ocmtest.PushKustomizeBundle(ctx, reg.Host, "bundles/"+a.name, tag, ocmtest.ConfigBundle); err != nil {
					t.Fatal(err)
				}
				cv.Resources[1] = ocmtest.BundleResource(a.next, registryHost+"/bundles/"+a.name+":"+a.next)
				continue
			}
			if _, err := ocmtest.PushHelmChart(ctx, reg.Host, "charts", ocmtest.WebChart(a.name, version)); err != nil {
				t.Fatal(err)
			}
			cv.Resources[1] = ocmtest.ChartResource(a.next, registryHost+"/charts/"+a.name+":"+a.next)
		}
		next = append(next, cv)
	}
	reg.Push(t, "", append(next, ocmtest.Vector("acme.org/vectors/shop", "1.1.0", next...))...)
}

// kubeconfig is a new copy of the cluster's admin kubeconfig: a page may change its context's namespace.
func (l *landscape) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := copyFile(l.adminKubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// namespaces are the cluster's namespaces now.
func (l *landscape) namespaces(ctx context.Context, t *testing.T) map[string]bool {
	t.Helper()
	list := &corev1.NamespaceList{}
	if err := l.client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, ns := range list.Items {
		names[ns.Name] = true
	}
	return names
}

// deleteNamespacesBut deletes the namespaces a page created, and waits until they are gone (the operator tears
// their VectorDeployments down first, so its own namespace goes last), so that the next page starts from the
// same cluster.
func (l *landscape) deleteNamespacesBut(ctx context.Context, t *testing.T, keep map[string]bool) {
	t.Helper()
	var created []string
	for name := range l.namespaces(ctx, t) {
		if !keep[name] {
			created = append(created, name)
		}
	}
	operatorLast := func(name string) int {
		if name == controlplane.OperatorNamespace {
			return 1
		}
		return 0
	}
	slices.SortFunc(created, func(a, b string) int { return cmp.Compare(operatorLast(a), operatorLast(b)) })
	for _, name := range created {
		ns := &corev1.Namespace{}
		ns.Name = name
		if err := l.client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
			continue
		}
		deadline := time.Now().Add(2 * time.Minute)
		for !apierrors.IsNotFound(l.client.Get(ctx, client.ObjectKeyFromObject(ns), ns)) {
			if time.Now().After(deadline) {
				t.Errorf("namespace %s still there 2m after its deletion: %+v", name, ns.Status)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
