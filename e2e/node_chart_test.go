package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// chartRelease is the Helm release TestNodeOperatorFromTheChart installs; its objects are named after it.
const chartRelease = "fluxdeployer-helm"

// TestNodeOperatorFromTheChart installs the operator a second time, from charts/fluxdeployer with the pinned helm
// CLI, next to the one dist/install.yaml installed, into a namespace with config/default's Pod Security labels
// (restricted): both Deployments are Available through the kubelet's probes, the chart's pod holds the Lease of its
// namespace, and its metrics answer through its Service. The chart's instance watches only its own namespace
// (--watch-all-namespaces=false, bound by a RoleBinding there), so the two never reconcile the same objects, and
// the CRDs are the installed ones (crds.install=false). helm uninstall removes the release. The chart's kubeVersion
// constraint is checked by helm against the version the node's API server reports.
func TestNodeOperatorFromTheChart(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	if err := realCluster.WaitAvailable(ctx, time.Minute, operatorNamespace(), "fluxdeployer"); err != nil {
		t.Fatalf("the operator dist/install.yaml installed: %v", err)
	}
	ns := newNamespace(t, "chart")
	restricted := podSecurityLabels(t)
	namespace := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(namespace.DeepCopy())
	maps.Copy(namespace.Labels, restricted)
	if err := env.Client.Patch(ctx, namespace, patch); err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	helm(t, "install", chartRelease, "charts/fluxdeployer", "--namespace", ns,
		"--set", "crds.install=false", "--set", "flags.watch-all-namespaces=false")
	t.Cleanup(func() { helm(t, "uninstall", chartRelease, "--namespace", ns) })
	installed := time.Since(begin)
	if err := realCluster.WaitAvailable(ctx, 2*time.Minute, ns, chartRelease); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install took %s (the pinned helm built on first use); the chart's Deployment Available %s later",
		installed.Round(100*time.Millisecond), (time.Since(begin) - installed).Round(100*time.Millisecond))

	// The chart's pod leads in its namespace: the Lease is held by one of its pods.
	testenv.Eventually(t, handoverBound, func() error {
		lease := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: leaseName}, lease); err != nil {
			return err
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
		}
		if !strings.HasPrefix(holder, chartRelease+"-") {
			return fmt.Errorf("Lease %s/%s held by %q, want a pod of Deployment %s", ns, leaseName, holder, chartRelease)
		}
		return nil
	})

	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: chartRelease + "-metrics"}, svc); err != nil {
		t.Fatal(err)
	}
	metrics := realCluster.RunClient(t, ns, fmt.Sprintf("http://%s:8080/metrics", svc.Spec.ClusterIP))
	if !strings.Contains(metrics, "controller_runtime_reconcile_total") {
		t.Errorf("metrics through Service %s: no controller_runtime_reconcile_total in:\n%.2000s", svc.Name, metrics)
	}
}

// podSecurityLabels are the pod-security.kubernetes.io labels config/default puts on the operator's namespace.
func podSecurityLabels(t *testing.T) map[string]string {
	t.Helper()
	objs, err := controlplane.Kustomize("config/default")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, u := range objs {
		if u.GetKind() != "Namespace" {
			continue
		}
		for k, v := range u.GetLabels() {
			if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
				labels[k] = v
			}
		}
	}
	if labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("config/default's Namespace has Pod Security labels %v, want enforce=restricted", labels)
	}
	return labels
}

// helm runs the helm CLI pinned in hack/tools/shared against the cluster whose pods start, from the repository's root.
func helm(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "-modfile=hack/tools/shared/go.mod", "helm", "--kubeconfig", realKubeconfig}, args...)...)
	cmd.Dir = controlplane.RepoRoot()
	// Helm's configuration, cache and data of this run only, not the user's.
	helmHome, err := os.MkdirTemp("", "helm-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(helmHome) }()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+helmHome+"/config", "HELM_CACHE_HOME="+helmHome+"/cache", "HELM_DATA_HOME="+helmHome+"/data")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
