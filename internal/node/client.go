package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// RunClient runs a pod of the workload image that fetches url once, waits for it to succeed and returns what it
// printed; the pod is deleted. The pod meets Pod Security's restricted profile, which the operator's namespace
// enforces.
func (c *Cluster) RunClient(t testing.TB, namespace, url string) string {
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
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Errorf("deleting pod %s: %v", pod.Name, err)
		}
	}()
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("pod %s (GET %s): %s", pod.Name, url, c.PodStates(ctx, namespace, nil))
		}
		return nil
	})
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cs.CoreV1().Pods(namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of pod %s: %v", pod.Name, err)
	}
	return string(out)
}
