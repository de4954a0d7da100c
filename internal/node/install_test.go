package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// TestInstalledAsUsersInstall installs Flux's controllers from their install manifests and the operator from
// the installer `make build-installer` writes, with images built here: every Deployment becomes Available
// through its own probes; the kubelet runs the operator as 65532 on a read-only root filesystem with GOMEMLIMIT
// from its container's memory limit; its metrics answer through its Service.
func TestInstalledAsUsersInstall(t *testing.T) {
	c := startNode(t)
	ctx := context.Background()
	if err := c.InstallFlux(ctx, os.Stderr); err != nil {
		t.Fatal(err)
	}
	ref, err := OperatorImage()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallOperator(ctx, ref); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed: %v", c.Started)

	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(controlplane.OperatorNamespace)); err != nil || len(pods.Items) != 1 {
		t.Fatalf("the operator's pods: %v %v", pods.Items, err)
	}
	pid, err := ContainerPID(&pods.Items[0], "manager")
	if err != nil {
		t.Fatal(err)
	}
	status := procFile(t, pid, "status")
	if !strings.Contains(status, "\nUid:\t65532\t65532\t65532\t65532\n") || !strings.Contains(status, "\nGid:\t65532\t65532\t65532\t65532\n") {
		t.Errorf("the operator's process does not run as 65532:65532:\n%s", status)
	}
	if opts := rootMountOptions(procFile(t, pid, "mountinfo")); !strings.HasPrefix(opts, "ro,") && opts != "ro" {
		t.Errorf("the operator's root filesystem is mounted %q, want read-only", opts)
	}
	// config/manager's limit is 512Mi.
	if env, err := ContainerEnv(&pods.Items[0], "manager"); err != nil || env["GOMEMLIMIT"] != "536870912" {
		t.Errorf("the operator's GOMEMLIMIT is %q, want 536870912 (its memory limit): %v %v", env["GOMEMLIMIT"], env, err)
	}

	svc := &corev1.Service{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: controlplane.OperatorNamespace, Name: "fluxdeployer-metrics"}, svc); err != nil {
		t.Fatal(err)
	}
	metrics := c.RunClient(t, controlplane.OperatorNamespace, fmt.Sprintf("http://%s:8080/metrics", svc.Spec.ClusterIP))
	if !strings.Contains(metrics, "controller_runtime_reconcile_total") {
		t.Errorf("metrics through Service %s: no controller_runtime_reconcile_total in:\n%.2000s", svc.Name, metrics)
	}
}

// startNode starts a node for the test (skipping it without root), logs its start times, and stops it when the
// test ends, logging the node's programs' last lines if the test failed.
func startNode(t *testing.T) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a node needs root (network and mount namespaces, cgroups)")
	}
	begin := time.Now()
	c, err := Start(context.Background(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node started in %s: %v", time.Since(begin).Round(10*time.Millisecond), c.Started)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs("kubelet", "containerd"))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
	})
	return c
}

func procFile(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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

// TestAppendManagerArgs adds flags to the operator's container of the installer this tree renders, as a user's
// overlay does, and to nothing else; an installer without that container is refused rather than applied without
// them.
func TestAppendManagerArgs(t *testing.T) {
	manifest, err := Render(context.Background(), "ghcr.io/fluxdeployer/fluxdeployer:test", "config/default")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	before, err := controlplane.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := appendManagerArgs(objs, nil); err != nil {
		t.Fatal(err)
	}
	if err := appendManagerArgs(objs, []string{"--allowed-target-hosts=10.96.0.1:443"}); err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i, u := range objs {
		if reflect.DeepEqual(u.Object, before[i].Object) {
			continue
		}
		changed++
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		want, _, _ := unstructured.NestedSlice(before[i].Object, "spec", "template", "spec", "containers")
		wantArgs, _, _ := unstructured.NestedStringSlice(want[0].(map[string]any), "args")
		wantArgs = append(wantArgs, "--allowed-target-hosts=10.96.0.1:443")
		if u.GetKind() != "Deployment" || u.GetName() != operatorDeployment || !reflect.DeepEqual(args, wantArgs) {
			t.Errorf("%s %s changed, args %v; want only the operator's Deployment, args %v", u.GetKind(), u.GetName(), args, wantArgs)
		}
	}
	if changed != 1 {
		t.Errorf("%d objects changed, want 1", changed)
	}
	var others []*unstructured.Unstructured
	for _, u := range before {
		if u.GetKind() != "Deployment" {
			others = append(others, u)
		}
	}
	if err := appendManagerArgs(others, []string{"--x"}); err == nil {
		t.Error("args for an installer without the operator's Deployment: no error")
	}
}
