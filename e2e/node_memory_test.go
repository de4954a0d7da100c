package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// oomLimit is a memory limit below what the operator needs to start, so that it is killed every time, whatever its
// landscape: above that, GOMEMLIMIT makes the Go runtime collect harder near the limit, and whether the operator is
// killed depends on its live heap. Measured in a memory cgroup of this machine with that limit and GOMEMLIMIT:
// `fluxdeployer version` alone (the program's initialisation) peaks at 7.3 MiB and is killed at 6 MiB, while runc,
// which runs in the container's cgroup before the program, needs 3.6 MiB: the container is created, and the
// operator killed as it starts.
const oomLimit = "6Mi"

// TestNodeOperatorOutOfMemory lowers the installed operator's memory limit below what it needs while a landscape
// of real workloads (two VectorDeployments of one vector, sharing its Helm and Kustomize ArtifactDeployments) is
// Ready, as an administrator edits its Deployment:
//   - with the installer's rolling update, the new pod is OOM-killed again and again: its container's last state
//     is terminated with reason OOMKilled (what kubectl describe shows, what the monitoring kit's
//     FluxdeployerOOMKilled alert selects), its restarts grow, and its GOMEMLIMIT is the new limit; the rollout
//     waits for it to be ready, so the installed pod keeps running and leading, untouched;
//   - with the Deployment's strategy Recreate, the installed pod is stopped first: no operator runs, the workloads
//     keep running untouched, nothing is written;
//   - the limit raised back, the new pod's GOMEMLIMIT follows, it leads and handles a reconcile request of every
//     VectorDeployment, and the same objects run the landscape (names, UIDs, generations, labels, annotations,
//     owners), none lost and none added, with fewer than all of them rewritten.
func TestNodeOperatorOutOfMemory(t *testing.T) {
	requireNode(t)
	realNode, ok := realCluster.(*node.Cluster)
	if !ok {
		t.Skip("the operator's environment is read from containerd and its process, on this machine's node (make e2e-node)")
	}
	ctx := context.Background()
	ns, vds := sharedLandscape(t, "memory")
	operator := installedOperator(t)
	installed := operator.Spec.Template.Spec.Containers[0].Resources.DeepCopy()
	running := leaderPod(t, leaseName, "any pod", func(*corev1.Pod) bool { return true })
	deployed, writes, pods := deployedSpecs(t, ns), written(t, ns), podFingerprints(t, ns, nil)
	operatorPods := podFingerprints(t, operatorNamespace(), nil)

	lowered := resource.MustParse(oomLimit)
	setOperatorMemory(t, operator, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: lowered},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: lowered},
	})
	begin := time.Now()
	killed, restarts := waitOOMKilled(t, realNode, lowered, 2)
	t.Logf("rolling update to %s: pod %s OOM-killed, %d restarts, %s after the patch; GOMEMLIMIT %d", oomLimit, killed.Name,
		restarts, time.Since(begin).Round(100*time.Millisecond), lowered.Value())
	leaderPod(t, leaseName, "the installed pod "+running.Name, func(p *corev1.Pod) bool { return p.Name == running.Name })
	assertPodsUnchanged(t, "the installed operator's pod during the stalled rollout", operatorPods, podFingerprints(t, operatorNamespace(), nil))

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(operator), operator); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(operator.DeepCopy())
	operator.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if err := env.Client.Patch(ctx, operator, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(running), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the installed pod %s still there (%v): %s", running.Name, err, realCluster.PodStates(ctx, operatorNamespace(), nil))
		}
		return nil
	})
	down := time.Now()
	killed, restarts = waitOOMKilled(t, realNode, lowered, restarts+1)
	t.Logf("strategy Recreate: the installed pod gone; pod %s OOM-killed again, %d restarts", killed.Name, restarts)
	assertDeployedUnchanged(t, "while no operator runs", deployed, deployedSpecs(t, ns))
	assertPodsUnchanged(t, "workloads' pods while no operator runs", pods, podFingerprints(t, ns, nil))
	if now := written(t, ns); !maps.Equal(writes, now) {
		t.Errorf("written while no operator runs (object: before → after):%s", diff(writes, now))
	}

	setOperatorMemory(t, operator, *installed)
	raised := time.Now()
	recovered := operatorPodWithLimit(t, installed.Limits[corev1.ResourceMemory])
	leaderPod(t, leaseName, "pod "+recovered.Name, func(p *corev1.Pod) bool { return p.Name == recovered.Name })
	t.Logf("limit raised back: pod %s leads %s later, %s after the installed pod was gone", recovered.Name,
		time.Since(raised).Round(100*time.Millisecond), time.Since(down).Round(100*time.Millisecond))
	for _, vd := range vds {
		requested := requestVectorDeploymentReconcile(t, vd)
		waitRequestHandled(t, 3*time.Minute, vd, requested)
	}
	assertWorkloadsReady(t, ns, 3)
	t.Logf("every VectorDeployment handled a reconcile request and is Ready %s after the limit was raised back", time.Since(raised).Round(100*time.Millisecond))

	// The requests write the VectorDeployments; what else the operator writes once it has recovered is counted
	// over a window longer than its start-up reconciles. The operator runs in a pod, so the test has no hook into
	// its queue.
	const window = 20 * time.Second
	time.Sleep(window)
	after := written(t, ns)
	for _, vd := range vds {
		delete(writes, objectID(vd))
		delete(after, objectID(vd))
	}
	if rewritten := countChanged(writes, after); rewritten >= len(writes) {
		t.Errorf("the operator rewrote all its %d objects (object: before → after):%s", rewritten, diff(writes, after))
	} else {
		t.Logf("after recovery and %s of observation: %d ArtifactDeployments and Flux objects, %d of them written:%s", window, len(writes), rewritten, diff(writes, after))
	}
	assertDeployedUnchanged(t, "after the limit was raised back", deployed, deployedSpecs(t, ns))
	assertPodsUnchanged(t, "workloads' pods after the limit was raised back", pods, podFingerprints(t, ns, nil))
}

// setOperatorMemory sets the memory request and limit of the operator's container, as an administrator edits its
// Deployment, without waiting for the rollout.
func setOperatorMemory(t *testing.T, operator *appsv1.Deployment, resources corev1.ResourceRequirements) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(operator), operator); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(operator.DeepCopy())
	c := &operator.Spec.Template.Spec.Containers[0]
	c.Resources.Requests[corev1.ResourceMemory] = resources.Requests[corev1.ResourceMemory]
	c.Resources.Limits[corev1.ResourceMemory] = resources.Limits[corev1.ResourceMemory]
	if err := env.Client.Patch(ctx, operator, patch); err != nil {
		t.Fatal(err)
	}
}

// operatorPods lists the operator's pods whose container has the memory limit, but those being deleted.
func operatorPods(ctx context.Context, limit resource.Quantity) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(operatorNamespace())); err != nil {
		return nil, err
	}
	var found []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.Containers[0].Resources.Limits.Memory().Equal(limit) {
			found = append(found, p)
		}
	}
	return found, nil
}

// waitOOMKilled waits (3 minutes) until the operator's pod with the memory limit has restarted at least restarts
// times, its container's last state terminated with reason OOMKilled, as kubectl describe shows it; checks that
// containerd's record of that container has GOMEMLIMIT equal to the limit in bytes; and returns the pod and its
// restarts.
func waitOOMKilled(t *testing.T, realNode *node.Cluster, limit resource.Quantity, restarts int32) (*corev1.Pod, int32) {
	t.Helper()
	ctx := context.Background()
	var pod corev1.Pod
	var status corev1.ContainerStatus
	testenv.Eventually(t, 3*time.Minute, func() error {
		pods, err := operatorPods(ctx, limit)
		if err != nil {
			return err
		}
		if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
			return fmt.Errorf("want one operator pod with limit %s: %s", limit.String(), realCluster.PodStates(ctx, operatorNamespace(), nil))
		}
		pod, status = pods[0], pods[0].Status.ContainerStatuses[0]
		if last := status.LastTerminationState.Terminated; last == nil || last.Reason != "OOMKilled" || status.RestartCount < restarts {
			return fmt.Errorf("pod %s not OOM-killed %d times yet: %s", pod.Name, restarts, realCluster.PodStates(ctx, operatorNamespace(), nil))
		}
		return nil
	})
	last := status.LastTerminationState.Terminated
	t.Logf("pod %s, container %s: restarts %d, last state terminated %s, exit code %d", pod.Name, status.Name, status.RestartCount, last.Reason, last.ExitCode)
	env, err := realNode.ContainerSpecEnv(ctx, last.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(limit.Value(), 10); env["GOMEMLIMIT"] != want {
		t.Errorf("the OOM-killed container ran with GOMEMLIMIT %q, want %s (its limit %s)", env["GOMEMLIMIT"], want, limit.String())
	}
	return &pod, status.RestartCount
}

// operatorPodWithLimit waits until the operator's pod whose container has the memory limit runs, with GOMEMLIMIT
// in its process's environment equal to the limit in bytes, and returns it.
func operatorPodWithLimit(t *testing.T, limit resource.Quantity) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var found *corev1.Pod
	testenv.Eventually(t, 2*time.Minute, func() error {
		pods, err := operatorPods(ctx, limit)
		if err != nil {
			return err
		}
		if len(pods) != 1 {
			return fmt.Errorf("want one operator pod with limit %s: %s", limit.String(), realCluster.PodStates(ctx, operatorNamespace(), nil))
		}
		env, err := node.ContainerEnv(&pods[0], "manager")
		if err != nil {
			return err
		}
		if want := strconv.FormatInt(limit.Value(), 10); env["GOMEMLIMIT"] != want {
			return fmt.Errorf("pod %s runs with GOMEMLIMIT %q, want %s (its limit %s)", pods[0].Name, env["GOMEMLIMIT"], want, limit.String())
		}
		found = &pods[0]
		return nil
	})
	return found
}
