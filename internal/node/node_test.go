package node

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestNodeRunsPodsAndLeavesNothing starts the node, runs a Deployment of the workload image whose readiness the
// kubelet probes, reaches it through its Service (kube-proxy, killed before the Service was created and started
// again by the node) from another pod, and stops the node: afterwards no process, mount, cgroup, network namespace
// or interface of it is left.
func TestNodeRunsPodsAndLeavesNothing(t *testing.T) {
	ctx := context.Background()
	c := startNode(t)

	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: WorkloadImage, ImagePullPolicy: corev1.PullNever,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
						PeriodSeconds: 1,
					},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	created := time.Now()
	if err := c.Client.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	// kube-proxy killed before the Service exists: only a kube-proxy started again programs the Service, as the
	// kubelet restarts kube-proxy's pod on a real node.
	proxy := c.daemon(kubeProxy)
	proxy.mu.Lock()
	killed := proxy.cmd.Process
	proxy.mu.Unlock()
	if err := killed.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
			return err
		}
		if deploy.Status.ReadyReplicas != 2 {
			return fmt.Errorf("Deployment web: %d of 2 replicas ready: %+v", deploy.Status.ReadyReplicas, deploy.Status.Conditions)
		}
		return nil
	})
	t.Logf("Deployment of 2 pods ready %s after creation", time.Since(created).Round(10*time.Millisecond))

	// A client pod fetches the Service's ClusterIP: its exit status is the answer's. kube-proxy programs a new
	// Service asynchronously, so a fetch that comes first fails and the kubelet runs it again.
	get := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "get"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{
			Name: "get", Image: WorkloadImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-get", "http://" + svc.Spec.ClusterIP + "/"},
		}}},
	}
	if err := c.Client.Create(ctx, get); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(get), get); err != nil {
			return err
		}
		if get.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("pod get (GET http://%s/): %s %+v", svc.Spec.ClusterIP, get.Status.Phase, get.Status.ContainerStatuses)
		}
		return nil
	})

	if log := tail(proxy.log, 1000); !strings.Contains(log, "node: kube-proxy ended (signal: killed)") {
		t.Errorf("kube-proxy's log does not say it was started again after it was killed:\n%s", tail(proxy.log, 20))
	}

	// The node's memory figure names its programs and the pods that ran.
	peak := peakMemory()
	for _, part := range []string{"kube-apiserver ", "etcd ", "kubelet ", "containerd ", "pods "} {
		if !strings.Contains(peak, part) {
			t.Errorf("the node's memory report lacks %q: %s", part, peak)
		}
	}
	t.Log(peak)

	dir := c.Dir
	begin := time.Now()
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	t.Logf("node stopped in %s", time.Since(begin).Round(10*time.Millisecond))
	if left := Leftovers(dir); len(left) > 0 {
		t.Errorf("left behind after Stop:\n%v", left)
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
