package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestNodeRegistryOutage: a landscape of real workloads is Ready when its vector's registry stops answering (it
// accepts every request and never replies) for longer than the operator's registry timeout, while the
// VectorDeployment is asked to reconcile. Its Ready says RegistryUnavailable, with a Warning event; nothing
// running is touched: every ArtifactDeployment and Flux object keeps its UID, generation, labels, annotations and
// owners, and every pod its UID and restarts. Once the registry answers again, the next request makes it Ready,
// still with the same objects and pods.
func TestNodeRegistryOutage(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	reg := newRegistry(t)
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})
	workloadVector(t, reg, "acme.org/vectors/outage", "1.0.0", "1.0.0", "")
	ns := newNamespace(t, "outage")
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/outage", "1.0.0"))
	t.Logf("VectorDeployment Ready %s after creation", waitReady(t, 4*time.Minute, vd).Round(100*time.Millisecond))
	assertWorkloadsReady(t, ns, 3)
	deployed, pods := deployedSpecs(t, ns), podFingerprints(t, ns, nil)

	reg.SetHanging(true)
	hung := time.Now()
	requested := requestVectorDeploymentReconcile(t, vd)
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		ready := conditions.Get(vd, meta.ReadyCondition)
		if vd.Status.LastHandledReconcileAt != requested || ready == nil || ready.Reason != string(ocm.ReasonUnavailable) {
			return fmt.Errorf("request %s handled %q; Ready %+v", requested, vd.Status.LastHandledReconcileAt, ready)
		}
		return nil
	})
	t.Logf("registry hanging: Ready %s after %s: %s", conditions.GetReason(vd, meta.ReadyCondition),
		time.Since(hung).Round(100*time.Millisecond), conditions.GetMessage(vd, meta.ReadyCondition))
	testenv.Eventually(t, 30*time.Second, func() error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Name == vd.Name && e.Type == corev1.EventTypeWarning && e.Reason == string(ocm.ReasonUnavailable)
		}) {
			return fmt.Errorf("no Warning event %s on VectorDeployment %s", ocm.ReasonUnavailable, vd.Name)
		}
		return nil
	})
	assertDeployedUnchanged(t, "during the outage", deployed, deployedSpecs(t, ns))
	assertPodsUnchanged(t, "pods during the outage", pods, podFingerprints(t, ns, nil))
	assertWorkloadsReady(t, ns, 3)

	reg.SetHanging(false)
	back := time.Now()
	requested = requestVectorDeploymentReconcile(t, vd)
	waitRequestHandled(t, 3*time.Minute, vd, requested)
	t.Logf("registry answering again: Ready %s after the request", time.Since(back).Round(100*time.Millisecond))
	assertDeployedUnchanged(t, "after the outage", deployed, deployedSpecs(t, ns))
	assertPodsUnchanged(t, "pods after the outage", pods, podFingerprints(t, ns, nil))
}

// requestVectorDeploymentReconcile sets the reconcile request annotation, as `fluxdeployer reconcile` does, and
// returns its token.
func requestVectorDeploymentReconcile(t *testing.T, vd *konfidencev1.VectorDeployment) string {
	t.Helper()
	requested := metav1.Now().Format(time.RFC3339Nano)
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, requested))
	if err := env.Client.Patch(context.Background(), vd, patch); err != nil {
		t.Fatal(err)
	}
	return requested
}

// waitRequestHandled waits until vd has handled the reconcile request requested and is Ready.
func waitRequestHandled(t *testing.T, timeout time.Duration, vd *konfidencev1.VectorDeployment, requested string) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		if vd.Status.LastHandledReconcileAt != requested || !conditions.IsReady(vd) {
			return fmt.Errorf("request %s handled %q; Ready %+v", requested, vd.Status.LastHandledReconcileAt, conditions.Get(vd, meta.ReadyCondition))
		}
		return nil
	})
}

// sharedLandscape deploys the landscape of the fault tests: the three workloads of one vector (two charts and a
// Kustomize bundle), deployed by two VectorDeployments that share their ArtifactDeployments, both Ready. name
// names the vector and the namespace, which it returns with the VectorDeployments.
func sharedLandscape(t *testing.T, name string) (string, []*konfidencev1.VectorDeployment) {
	t.Helper()
	reg := newRegistry(t)
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})
	component := "acme.org/vectors/" + name
	workloadVector(t, reg, component, "1.0.0", "1.0.0", "")
	vector := reg.Ref("", component, "1.0.0")
	ns := newNamespace(t, name)
	vds := []*konfidencev1.VectorDeployment{createVectorDeployment(t, ns, "shop", vector), createVectorDeployment(t, ns, "shop-copy", vector)}
	for _, vd := range vds {
		t.Logf("VectorDeployment %s Ready %s after creation", vd.Name, waitReady(t, 4*time.Minute, vd).Round(100*time.Millisecond))
	}
	if ads := artifactDeploymentNames(t, ns); len(ads) != 3 {
		t.Fatalf("ArtifactDeployments %v, want the 3 artifacts' shared by both VectorDeployments", ads)
	}
	settleLandscape(t, ns)
	return ns, vds
}

// deployedSpecs fingerprints what runs a namespace's landscape, leaving out status: each ArtifactDeployment and
// Flux object by specFingerprint.
func deployedSpecs(t *testing.T, namespace string) map[string]string {
	t.Helper()
	own, applied := operatorObjects(t, namespace)
	fingerprints := map[string]string{}
	for _, obj := range append(own, applied...) {
		if _, ok := obj.(*konfidencev1.VectorDeployment); !ok {
			fingerprints[objectID(obj)] = specFingerprint(obj)
		}
	}
	return fingerprints
}

// assertDeployedUnchanged checks that the same objects are there with the same fingerprints.
func assertDeployedUnchanged(t *testing.T, when string, before, after map[string]string) {
	t.Helper()
	if len(before) == 0 {
		t.Fatalf("%s: nothing deployed to compare", when)
	}
	if !maps.Equal(before, after) {
		t.Errorf("%s, what runs the landscape changed (object: before → after):%s", when, diff(before, after))
	}
	for id := range before {
		if strings.HasPrefix(id, "*v1alpha1.ArtifactDeployment/") {
			return
		}
	}
	t.Errorf("%s: no ArtifactDeployment among %v", when, slices.Sorted(maps.Keys(before)))
}

// TestNodeRestarts injects, phase by phase, what a node and its control plane go through into a Ready landscape of
// real workloads (two VectorDeployments of one vector, sharing its Helm and Kustomize ArtifactDeployments):
//   - the kubelet and containerd restarted, with the workloads', Flux's and the operator's pods running;
//   - etcd and kube-apiserver restarted, etcd's history compacted while the API server is down, so that every
//     watch of the operator resumes from a resource version that is gone and must list again;
//   - the node rebooted: every program of the node stopped, every container and shim killed, everything started
//     again (node.Cluster.Reboot).
//
// After each, once the landscape is Ready again, the same objects run it with the same specs (names, UIDs,
// generations, labels, annotations, owners) and every pod of the landscape is the same pod with the same
// containers. Through a runtime restart Flux's and the operator's pods keep running too, and over an observation
// window the operator writes nothing. Through a control-plane restart a controller whose Lease could not be renewed
// for its renew deadline (30 s) restarts, as it must, and then reconciles afresh: the operator resumes from a relist
// and rewrites none but what changed, fewer than all of its objects. Through a reboot no container survives: the
// kubelet keeps every pod, with its UID, and starts each of its containers again exactly once (restartCount one
// more); the test waits for that before it looks at Ready, which the API still shows from before the reboot. The
// operator, restarted with the rest, rewrites fewer than all of its objects.
func TestNodeRestarts(t *testing.T) {
	requireNode(t)
	realNode, ok := realCluster.(*node.Cluster)
	if !ok {
		t.Skip("the faults are injected into the programs of this machine's node (make e2e-node); another cluster's are out of reach")
	}
	ctx := context.Background()
	ns, vds := sharedLandscape(t, "restarts")
	podNamespaces := []string{ns, node.FluxNamespace, operatorNamespace()}

	for _, phase := range []struct {
		name   string
		inject func() error
		// controlPlane: the API server is away for about as long as the controllers' renew deadline.
		controlPlane bool
		// reboot: no container survives; the kubelet starts every pod's containers again.
		reboot bool
	}{
		{name: "kubelet and containerd restarted", inject: func() error { return realNode.Restart(ctx, "kubelet", "containerd") }},
		{name: "API server and etcd restarted, history compacted", controlPlane: true, inject: func() error {
			if err := realNode.StopPrograms("kube-apiserver", "etcd"); err != nil {
				return err
			}
			if err := realNode.StartPrograms(ctx, "etcd"); err != nil {
				return err
			}
			revision, err := realNode.CompactEtcd(ctx)
			if err != nil {
				return err
			}
			t.Logf("etcd compacted to revision %d", revision)
			if err := realNode.StartPrograms(ctx, "kube-apiserver"); err != nil {
				return err
			}
			return realNode.WaitReady(ctx, time.Time{})
		}},
		{name: "node rebooted", controlPlane: true, reboot: true, inject: func() error { return realNode.Reboot(ctx) }},
	} {
		t.Run(phase.name, func(t *testing.T) {
			deployed, writes := deployedSpecs(t, ns), written(t, ns)
			pods, restarts := map[string]map[string]string{}, map[string]map[string]podRestarts{}
			for _, pns := range podNamespaces {
				pods[pns], restarts[pns] = podFingerprints(t, pns, nil), restartsOf(t, pns)
			}
			begin := time.Now()
			if err := phase.inject(); err != nil {
				t.Fatal(err)
			}
			t.Logf("injected and the node Ready again after %s", time.Since(begin).Round(100*time.Millisecond))
			if phase.reboot {
				// Until the kubelet has started them again, the API still shows the pods ready, the Deployments
				// available and the VectorDeployments Ready as they were before the reboot: what follows must wait
				// for every pod's containers to have started anew.
				testenv.Eventually(t, 4*time.Minute, func() error {
					for _, pns := range podNamespaces {
						if err := restartedAndReady(ctx, pns, restarts[pns]); err != nil {
							return err
						}
					}
					return nil
				})
				t.Logf("every pod's containers started again and ready %s after the fault began", time.Since(begin).Round(100*time.Millisecond))
			}
			testenv.Eventually(t, 3*time.Minute, func() error {
				for _, vd := range vds {
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
						return err
					}
					if !conditions.IsReady(vd) {
						return fmt.Errorf("VectorDeployment %s: %+v", vd.Name, conditions.Get(vd, meta.ReadyCondition))
					}
				}
				return workloadsReady(ctx, ns, 3)
			})
			t.Logf("landscape Ready, its workloads' pods ready, %s after the fault began", time.Since(begin).Round(100*time.Millisecond))

			// The operator runs in a pod, so the test has no hook into its queue: the requirement is a window in
			// which nothing is written, longer than its relist and the reconciles a relist triggers.
			const window = 20 * time.Second
			time.Sleep(window)
			after := written(t, ns)
			rewritten := countChanged(writes, after)
			switch {
			case !phase.controlPlane && rewritten > 0:
				t.Errorf("the operator wrote (object: before → after):%s", diff(writes, after))
			case phase.controlPlane && rewritten >= len(vds)+3:
				t.Errorf("the operator rewrote all its %d objects (object: before → after):%s", rewritten, diff(writes, after))
			}
			assertDeployedUnchanged(t, phase.name, deployed, deployedSpecs(t, ns))
			if phase.reboot {
				// The pods are the same pods, their containers created again once each: nothing was rescheduled
				// and nothing restarted twice. The workloads' ran on throughout the observation window.
				for _, pns := range podNamespaces {
					if err := restartedOnce(restarts[pns], restartsOf(t, pns)); err != nil {
						t.Errorf("pods of %s: %v", pns, err)
					}
					t.Logf("pods of %s, as kubectl describe shows them: %v", pns, lastStates(t, pns))
				}
				t.Logf("%s: after %s of observation, %d objects unchanged, %d of them written:%s", phase.name, window, len(writes), rewritten, diff(writes, after))
				return
			}
			assertPodsUnchanged(t, "pods of "+ns, pods[ns], podFingerprints(t, ns, nil))
			for _, pns := range podNamespaces[1:] {
				if phase.controlPlane {
					if d := diff(pods[pns], podFingerprints(t, pns, nil)); d != "" {
						t.Logf("pods of %s restarted (their Leases expired):%s", pns, d)
					}
					continue
				}
				assertPodsUnchanged(t, "pods of "+pns, pods[pns], podFingerprints(t, pns, nil))
			}
			t.Logf("%s: after %s of observation, %d objects unchanged, %d of them written", phase.name, window, len(writes), rewritten)
		})
	}
}

// countChanged counts the objects of before whose fingerprint after differs or is gone.
func countChanged(before, after map[string]string) int {
	n := 0
	for id, fp := range before {
		if after[id] != fp {
			n++
		}
	}
	return n
}

// podRestarts is a pod's UID and its containers' restart counts, by container name.
type podRestarts struct {
	uid      string
	restarts map[string]int32
}

// restartsOf lists the namespace's pods by name.
func restartsOf(t *testing.T, namespace string) map[string]podRestarts {
	t.Helper()
	pods, err := listPods(context.Background(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func listPods(ctx context.Context, namespace string) (map[string]podRestarts, error) {
	list := &corev1.PodList{}
	if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	pods := map[string]podRestarts{}
	for _, p := range list.Items {
		r := podRestarts{uid: string(p.UID), restarts: map[string]int32{}}
		for _, c := range p.Status.ContainerStatuses {
			r.restarts[c.Name] = c.RestartCount
		}
		pods[p.Name] = r
	}
	return pods, nil
}

// restartedAndReady says how the namespace's pods fall short of: every pod of before there with its UID, each of its
// containers restarted since, and all of them ready; nil once they are.
func restartedAndReady(ctx context.Context, namespace string, before map[string]podRestarts) error {
	now, err := listPods(ctx, namespace)
	if err != nil {
		return err
	}
	for name, b := range before {
		n, ok := now[name]
		if !ok || n.uid != b.uid {
			return fmt.Errorf("pod %s/%s (UID %s) gone: %s", namespace, name, b.uid, realCluster.PodStates(ctx, namespace, nil))
		}
		for c, r := range b.restarts {
			if n.restarts[c] <= r {
				return fmt.Errorf("container %s of pod %s/%s not restarted yet (%d restarts): %s", c, namespace, name, r, realCluster.PodStates(ctx, namespace, nil))
			}
		}
	}
	pod := &corev1.Pod{}
	for name := range before {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
			return err
		}
		for _, s := range pod.Status.ContainerStatuses {
			if !s.Ready {
				return fmt.Errorf("container %s of pod %s/%s not ready: %s", s.Name, namespace, name, realCluster.PodStates(ctx, namespace, nil))
			}
		}
	}
	return nil
}

// restartedOnce checks that after holds exactly the pods of before, by name and UID, each container restarted
// exactly once.
func restartedOnce(before, after map[string]podRestarts) error {
	if !slices.Equal(slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after))) {
		return fmt.Errorf("pods %v, before %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}
	for name, b := range before {
		a := after[name]
		if a.uid != b.uid {
			return fmt.Errorf("pod %s replaced: UID %s, before %s", name, a.uid, b.uid)
		}
		for c, r := range b.restarts {
			if a.restarts[c] != r+1 {
				return fmt.Errorf("container %s of pod %s: %d restarts, before %d, want one more", c, name, a.restarts[c], r)
			}
		}
	}
	return nil
}

// lastStates counts the namespace's containers by the last state the kubelet reports: how their previous run
// ended.
func lastStates(t *testing.T, namespace string) map[string]int {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if last := c.LastTerminationState.Terminated; last != nil {
				states[fmt.Sprintf("terminated %s (exit code %d)", last.Reason, last.ExitCode)]++
			} else {
				states["no last state"]++
			}
		}
	}
	return states
}
