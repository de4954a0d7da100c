package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// API is a cluster's API as its admin reaches it, with what tests ask of the cluster's pods. The node (Cluster)
// and a kind cluster (Kind) both have one, so a test of pods runs the same on either.
type API struct {
	// Config and Client are the cluster admin's.
	Config *rest.Config
	Client client.Client
}

// RunClient runs a pod of the workload image that fetches url once, waits for it to succeed and returns what it
// printed; the pod is deleted. A Service is reached this way, from a pod through the cluster's kube-proxy, so the
// request never leaves the cluster's network. The pod meets Pod Security's restricted profile, which the
// operator's namespace enforces.
func (a API) RunClient(t testing.TB, namespace, url string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "get-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: new(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "get", Image: WorkloadImage, ImagePullPolicy: corev1.PullNever, Args: []string{"-get", url},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := a.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Errorf("deleting pod %s: %v", pod.Name, err)
		}
	}()
	testenv.Eventually(t, time.Minute, func() error {
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("pod %s (GET %s): %s", pod.Name, url, a.PodStates(ctx, namespace, nil))
		}
		return nil
	})
	out, err := a.PodLogs(ctx, namespace, pod.Name, false)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PodLogs returns what the pod's container printed, or with previous what its container printed before it last
// ended and the kubelet started it again.
func (a API) PodLogs(ctx context.Context, namespace, pod string, previous bool) (string, error) {
	cs, err := kubernetes.NewForConfig(a.Config)
	if err != nil {
		return "", err
	}
	out, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Previous: previous}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of pod %s/%s (previous: %t): %w", namespace, pod, previous, err)
	}
	return string(out), nil
}

// WaitAvailable waits until the Deployment's pods of its current template are all updated and ready; the error
// tells the state of its pods.
func (a API) WaitAvailable(ctx context.Context, timeout time.Duration, namespace, name string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = a.deploymentAvailable(ctx, namespace, name)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting %s for Deployment %s/%s Available: %w; last: %w", timeout, namespace, name, err, last)
	}
	return nil
}

// deploymentAvailable says why the Deployment's pods of its current template are not all updated and ready yet,
// with the state of its pods; nil once they are.
func (a API) deploymentAvailable(ctx context.Context, namespace, name string) error {
	d := &appsv1.Deployment{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if s.ObservedGeneration == d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.Replicas == want {
		return nil
	}
	return fmt.Errorf("%d/%d updated, %d ready, %d in all; pods: %s", s.UpdatedReplicas, want, s.ReadyReplicas, s.Replicas,
		a.PodStates(ctx, namespace, d.Spec.Selector.MatchLabels))
}

// PodStates describes the pods matching labels: phase, readiness and each container's state, restarts included.
func (a API) PodStates(ctx context.Context, namespace string, labels map[string]string) string {
	pods := &corev1.PodList{}
	if err := a.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "[%s %s", p.Name, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s ready=%t restarts=%d", s.Name, s.Ready, s.RestartCount)
			switch {
			case s.State.Waiting != nil:
				fmt.Fprintf(&b, " waiting %s: %s", s.State.Waiting.Reason, s.State.Waiting.Message)
			case s.State.Terminated != nil:
				fmt.Fprintf(&b, " terminated %s (exit %d)", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
			}
		}
		b.WriteString("] ")
	}
	return b.String()
}
