package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// chartRelease is the Helm release TestNodeOperatorFromTheChart installs; its objects are named after it.
const chartRelease = "fluxdeployer-helm"

// TestNodeOperatorFromTheChart installs the operator a second time, from charts/fluxdeployer with the pinned helm
// CLI, next to the one dist/install.yaml installed, into a namespace with config/default's Pod Security labels
// (restricted): both Deployments are Available through the kubelet's probes, the chart's pod holds the Lease of its
// namespace, and the metrics of both answer through their Services. On this machine's node, the kubelet runs both
// operators as 65532 on a read-only root filesystem, with GOMEMLIMIT from the container's memory limit. The
// chart's instance watches only its own namespace (--watch-all-namespaces=false, bound by a RoleBinding there), so
// the two never reconcile the same objects, and the CRDs are the installed ones (crds.install=false). helm uninstall removes the release. The chart's kubeVersion
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
	t.Logf("helm install took %s; the chart's Deployment Available %s later",
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

	for _, installed := range []struct{ namespace, deployment string }{
		{operatorNamespace(), "fluxdeployer"}, // dist/install.yaml's
		{ns, chartRelease},
	} {
		assertOperatorAsInstalled(t, installed.namespace, installed.deployment)
	}
}

// assertOperatorAsInstalled checks the operator a user installed as the Deployment: its metrics answer through its
// Service, and on this machine's node its one process runs as 65532:65532 on a read-only root filesystem with
// GOMEMLIMIT equal to the container's memory limit in bytes (both installers' limit is 512Mi).
func assertOperatorAsInstalled(t *testing.T, namespace, deployment string) {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment + "-metrics"}, svc); err != nil {
		t.Fatal(err)
	}
	metrics := realCluster.RunClient(t, namespace, fmt.Sprintf("http://%s:8080/metrics", svc.Spec.ClusterIP))
	if !strings.Contains(metrics, "controller_runtime_reconcile_total") {
		t.Errorf("metrics through Service %s/%s: no controller_runtime_reconcile_total in:\n%.2000s", namespace, svc.Name, metrics)
	}
	if _, onThisMachine := realCluster.(*node.Cluster); !onThisMachine {
		return
	}
	pod := deploymentPod(t, namespace, deployment)
	pid, err := node.ContainerPID(pod, "manager")
	if err != nil {
		t.Fatal(err)
	}
	proc := func(name string) string {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if status := proc("status"); !strings.Contains(status, "\nUid:\t65532\t65532\t65532\t65532\n") || !strings.Contains(status, "\nGid:\t65532\t65532\t65532\t65532\n") {
		t.Errorf("the process of %s/%s does not run as 65532:65532:\n%s", namespace, pod.Name, status)
	}
	if opts := rootMountOptions(proc("mountinfo")); !strings.HasPrefix(opts, "ro,") && opts != "ro" {
		t.Errorf("the root filesystem of %s/%s is mounted %q, want read-only", namespace, pod.Name, opts)
	}
	if env, err := node.ContainerEnv(pod, "manager"); err != nil || env["GOMEMLIMIT"] != "536870912" {
		t.Errorf("the GOMEMLIMIT of %s/%s is %q, want 536870912 (its memory limit, 512Mi): %v %v", namespace, pod.Name, env["GOMEMLIMIT"], env, err)
	}
}

// deploymentPod returns the one pod of the Deployment that is not being deleted.
func deploymentPod(t *testing.T, namespace, deployment string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, d); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	live := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(live) != 1 {
		t.Fatalf("Deployment %s/%s has %d pods, want one: %s", namespace, deployment, len(live), realCluster.PodStates(ctx, namespace, nil))
	}
	return &live[0]
}

// rootMountOptions returns the per-mount options of "/" in a mountinfo.
func rootMountOptions(mountinfo string) string {
	for line := range strings.Lines(mountinfo) {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			return f[5]
		}
	}
	return ""
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

// helm runs the helm CLI hack/flux-assets.sh builds (Helm of the Flux controllers' build) against the cluster
// whose pods start, from the repository's root.
func helm(t *testing.T, args ...string) {
	t.Helper()
	flux, err := controlplane.FluxAssets(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(flux, "helm"), append([]string{"--kubeconfig", realKubeconfig}, args...)...)
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
