package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestNodePartition cuts the leading replica of the operator (a Deployment of two, with leader election) off the
// API server for longer than the Lease's duration, with a Ready landscape of real workloads running:
//   - the other replica takes the Lease and reconciles (a reconcile request made during the partition is handled);
//   - there are never two writers: the old leader gave up the Lease (its log) before the other replica took it,
//     and its last write reached the API server before the new leader's first, the Lease's taking (see the audit
//     check below for how writes are attributed to pods);
//   - the partitioned replica gives up its leadership by ending its process (leader election lost): the kubelet
//     restarts its container once, and once the partition heals it is Ready again as the standby, the Lease
//     staying where it is; from outside, an event on the Lease and the replicas' leader election gauge say so;
//   - the landscape is the one before: the same ArtifactDeployments and Flux objects (names, UIDs, generations,
//     labels, annotations, owners), none more, its pods the same pods, the VectorDeployment Ready all along.
func TestNodePartition(t *testing.T) {
	requireNode(t)
	realNode, ok := realCluster.(*node.Cluster)
	if !ok {
		t.Skip("the partition is injected into the network namespace of this machine's node (make e2e-node); another cluster's is out of reach")
	}
	ctx := context.Background()
	reg := newRegistry(t)
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})
	// The writes counted are those from here on, by the operator's one replica, then by both.
	since := time.Now()
	workloadVector(t, reg, "acme.org/vectors/partition", "1.0.0", "1.0.0", "")
	ns := newNamespace(t, "partition")
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/partition", "1.0.0"))
	t.Logf("VectorDeployment Ready %s after creation", waitReady(t, 4*time.Minute, vd).Round(100*time.Millisecond))
	assertWorkloadsReady(t, ns, 3)
	operator := twoOperatorReplicas(t)

	leader := leaderPod(t, leaseName, "any pod", func(*corev1.Pod) bool { return true })
	standby := otherOperatorPod(t, operator.Spec.Selector.MatchLabels, leader.Name)
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: operator.Namespace, Name: leaseName}, lease); err != nil {
		t.Fatal(err)
	}
	leaseDuration := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	transitions := ptr.Deref(lease.Spec.LeaseTransitions, 0)
	deployed, pods, writes := deployedSpecs(t, ns), podFingerprints(t, ns, nil), written(t, ns)
	leaderRestarts := restarts(leader)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
		t.Fatal(err)
	}
	readySince := conditions.Get(vd, meta.ReadyCondition).LastTransitionTime

	heal, err := realNode.Partition(leader.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := heal(); err != nil {
			t.Error(err)
		}
	})
	partitioned := time.Now()
	t.Logf("leader %s (%s) partitioned from the API server; standby %s (%s); Lease duration %s",
		leader.Name, leader.Status.PodIP, standby.Name, standby.Status.PodIP, leaseDuration)
	leaderPod(t, leaseName, "the standby "+standby.Name, func(p *corev1.Pod) bool { return p.Name == standby.Name })
	t.Logf("%s holds the Lease %s after the partition began", standby.Name, time.Since(partitioned).Round(100*time.Millisecond))
	requested := requestVectorDeploymentReconcile(t, vd)
	waitRequestHandled(t, 2*time.Minute, vd, requested)
	t.Logf("the new leader handled a reconcile request %s after the partition began", time.Since(partitioned).Round(100*time.Millisecond))
	// The old leader cannot renew its Lease: after its renew deadline it must stop leading, which controller-runtime
	// does by ending the process; the kubelet starts the container again, still partitioned.
	testenv.Eventually(t, handoverBound, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(leader), leader); err != nil {
			return err
		}
		if restarts(leader) == leaderRestarts {
			return fmt.Errorf("the partitioned leader's container has not ended: %s", realNode.PodStates(ctx, leader.Namespace, leader.Labels))
		}
		return nil
	})
	t.Logf("the partitioned leader's container seen ended %s after the partition began: %s", time.Since(partitioned).Round(100*time.Millisecond),
		lastTermination(leader))
	logs := endedContainerLog(t, realNode, leader)
	if d := time.Since(partitioned); d <= leaseDuration {
		t.Fatalf("the partition lasted %s, not longer than the Lease's duration %s", d, leaseDuration)
	}

	if err := heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	t.Logf("partition healed after %s", healed.Sub(partitioned).Round(100*time.Millisecond))
	if err := realNode.WaitAvailable(ctx, 3*time.Minute, operator.Namespace, operator.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("both replicas Ready again %s after the partition healed", time.Since(healed).Round(100*time.Millisecond))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(leader), leader); err != nil {
		t.Fatal(err)
	}
	// Restarted once, cleanly: the container the kubelet started again came up as a standby, no crash loop.
	if n := restarts(leader) - leaderRestarts; n != 1 {
		t.Errorf("the partitioned pod %s restarted %d times, want once; last termination %s", leader.Name, n, lastTermination(leader))
	}
	// It ended because it lost its leadership, not for another reason (a failed probe, a crash).
	lost := slices.DeleteFunc(strings.Split(logs, "\n"), func(l string) bool { return !strings.Contains(l, "leader election lost") })
	if len(lost) == 0 {
		t.Errorf("the partitioned leader's container ended without losing its leadership; its last lines:\n%s", tailLines(logs, 20))
	} else {
		t.Logf("the partitioned leader's container said: %s", strings.Join(lost, "\n"))
	}
	// What kubectl describe shows of it after the container is gone: the kubelet kept the tail of its log in the
	// pod's status (the operator's terminationMessagePolicy FallbackToLogsOnError).
	if term := lastTerminated(leader); term == nil || !strings.Contains(term.Message, "leader election lost") {
		t.Errorf("the partitioned pod %s's last termination %+v, want a message with \"leader election lost\"", leader.Name, term)
	}
	stoppedLeading := renewFailed(t, logs, partitioned)

	// What it looks like from outside: an event on the Lease says the standby became leader, and the replicas'
	// leader election gauge says which one leads.
	testenv.Eventually(t, 30*time.Second, func() error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(operator.Namespace)); err != nil {
			return err
		}
		if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == leaseName && e.Reason == "LeaderElection" &&
				strings.HasPrefix(e.Message, standby.Name+"_") && e.LastTimestamp.After(partitioned.Add(-time.Second))
		}) {
			return fmt.Errorf("no event LeaderElection on Lease %s saying %s became leader", leaseName, standby.Name)
		}
		return nil
	})
	for _, replica := range []struct {
		pod  *corev1.Pod
		want float64
	}{{standby, 1}, {leader, 0}} {
		_, body, _ := strings.Cut(realNode.RunClient(t, operator.Namespace, fmt.Sprintf("http://%s:8080/metrics", replica.pod.Status.PodIP)), "\n")
		expectSample(t, parseMetrics(t, strings.NewReader(body)), "leader_election_master_status", map[string]string{"name": leaseName}, &replica.want)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if holder, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_"); holder != standby.Name || ptr.Deref(lease.Spec.LeaseTransitions, 0) != transitions+1 {
		t.Errorf("Lease held by %q after %d transitions, want %s after %d: one handover", holder, ptr.Deref(lease.Spec.LeaseTransitions, 0), standby.Name, transitions+1)
	}

	// No two writers. Every write to the Lease, to the operator's objects and to the Flux objects is recorded in the
	// API server's audit log with the address it came from; both replicas act as the same ServiceAccount, but each
	// pod has its own address and nothing on the way masquerades, so the address tells which pod wrote. The
	// requirement: the old leader's last write was received before the standby's first, and the standby's first is
	// its taking of the Lease (a standby writes nothing before). The API server's clock orders both.
	counts := auditWrites(t, realNode, since, "system:serviceaccount:"+leader.Namespace+":"+leader.Spec.ServiceAccountName,
		map[string]string{leader.Status.PodIP: "old", standby.Status.PodIP: "new"})
	old, next := counts["old"], counts["new"]
	switch {
	case old.ok == 0 || next.ok == 0:
		t.Errorf("writes: old leader %d, new leader %d; want some from each (else nothing is attributed)", old.ok, next.ok)
	case next.firstObject != "leases.coordination.k8s.io "+operator.Namespace+"/"+leaseName:
		t.Errorf("the new leader's first write was to %s, not the Lease", next.firstObject)
	case !old.last.Before(next.first):
		t.Errorf("two writers: the old leader wrote at %s, after the new leader's first write at %s", old.last.Format(time.RFC3339Nano), next.first.Format(time.RFC3339Nano))
	case !stoppedLeading.Before(next.first):
		// What the partition hides: the old leader must also have stopped leading (and so stopped trying to
		// write) before the Lease could be taken, by its own clock, which is the API server's.
		t.Errorf("the old leader stopped leading at %s, not before the new leader took the Lease at %s", stoppedLeading.Format(time.RFC3339Nano), next.first.Format(time.RFC3339Nano))
	default:
		t.Logf("writes: old leader %d (%d refused), the last %s before the partition; it stopped leading %s after the partition began, "+
			"%s before the new leader took the Lease (%s after the partition began); new leader %d (%d refused)",
			old.ok, old.refused, partitioned.Sub(old.last).Round(time.Millisecond), stoppedLeading.Sub(partitioned).Round(100*time.Millisecond),
			next.first.Sub(stoppedLeading).Round(100*time.Millisecond), next.first.Sub(partitioned).Round(100*time.Millisecond), next.ok, next.refused)
	}

	// The landscape is as it was: the new leader's reconciles changed nothing that runs it.
	assertDeployedUnchanged(t, "after the partition", deployed, deployedSpecs(t, ns))
	assertPodsUnchanged(t, "pods of "+ns, pods, podFingerprints(t, ns, nil))
	assertWorkloadsReady(t, ns, 3)
	// Nothing shows on the VectorDeployment: Ready all along.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
		t.Fatal(err)
	}
	if ready := conditions.Get(vd, meta.ReadyCondition); ready == nil || ready.Status != "True" || !ready.LastTransitionTime.Equal(&readySince) {
		t.Errorf("VectorDeployment %s: Ready %+v, want True since %s, before the partition", vd.Name, ready, readySince)
	}
	t.Logf("after the partition: %d objects, the same; %d of them written (the VectorDeployment's request and status)", len(writes), countChanged(writes, written(t, ns)))
}

// otherOperatorPod returns the running pod of the operator's Deployment that is not the one named.
func otherOperatorPod(t *testing.T, labels map[string]string, not string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(operatorNamespace()), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool {
		return p.Name != not && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
	})
	if i < 0 {
		t.Fatalf("no running operator pod but %s", not)
	}
	return &pods.Items[i]
}

// restarts sums the restarts of the pod's containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// endedContainerLog returns what the pod's container printed before it last ended, read as soon as it has ended:
// its log while the kubelet keeps the ended container, else the tail of it the kubelet recorded in the pod's status
// when it ended (the operator's terminationMessagePolicy is FallbackToLogsOnError), which outlives the container.
func endedContainerLog(t *testing.T, realNode *node.Cluster, pod *corev1.Pod) string {
	t.Helper()
	ctx := context.Background()
	logs, err := realNode.PodLogs(ctx, pod.Namespace, pod.Name, true)
	// The kubelet answers 200 with its error as the body when the runtime no longer has the container.
	if err == nil && !strings.HasPrefix(logs, "unable to retrieve container logs") {
		return logs
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	var message string
	if term := lastTerminated(pod); term != nil {
		message = term.Message
	}
	if message == "" {
		t.Fatalf("the ended container of %s: no log (%v %s) and no termination message in the pod's status", pod.Name, err, logs)
	}
	t.Logf("the ended container of %s is gone (%v %s); its termination message is the tail of its log", pod.Name, err, logs)
	return message
}

// lastTerminated is how the pod's first container last ended, nil if it never did.
func lastTerminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	if len(p.Status.ContainerStatuses) == 0 {
		return nil
	}
	return p.Status.ContainerStatuses[0].LastTerminationState.Terminated
}

// lastTermination describes how the pod's first container last ended.
func lastTermination(p *corev1.Pod) string {
	term := lastTerminated(p)
	if term == nil {
		return "none"
	}
	return fmt.Sprintf("exit code %d (%s) after running %s", term.ExitCode, term.Reason, term.FinishedAt.Sub(term.StartedAt.Time).Round(time.Second))
}

// writeCount is what the audit log says of one client's writes: those carried out, the first and last of them,
// and those refused (a conflict, say).
type writeCount struct {
	ok, refused int
	first, last time.Time
	firstObject string
}

// auditWrites counts user's writes since the time given by the client address they came from, each address
// named in clients; a write from any other address fails the test, as it could not be attributed.
func auditWrites(t *testing.T, n *node.Cluster, since time.Time, user string, clients map[string]string) map[string]*writeCount {
	t.Helper()
	events, err := n.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]*writeCount{}
	for _, name := range clients {
		counts[name] = &writeCount{}
	}
	for _, e := range events {
		at := e.RequestReceivedTimestamp.Time
		if e.User.Username != user || at.Before(since) || !e.Write() {
			continue
		}
		name, ok := "", false
		if len(e.SourceIPs) > 0 {
			name, ok = clients[e.SourceIPs[0]]
		}
		if !ok {
			t.Errorf("%s %s at %s from %v, neither replica's address", e.Verb, e.Object(), at.Format(time.RFC3339Nano), e.SourceIPs)
			continue
		}
		c := counts[name]
		if !e.Succeeded() {
			c.refused++
			continue
		}
		if c.ok == 0 {
			c.first, c.firstObject = at, e.Object()
		}
		c.ok++
		c.last = at
	}
	return counts
}

// tailLines returns the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// renewFailed finds in an operator's log when client-go's leader election gave up renewing the Lease, after which
// it no longer leads: the time of its "Failed to renew lease" line, in klog's header (month, day, time of day in
// UTC, the pod's time zone), after the time given.
func renewFailed(t *testing.T, logs string, after time.Time) time.Time {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"Failed to renew lease"`) || len(line) < len("I0102 15:04:05.000000") {
			continue
		}
		at, err := time.Parse("0102 15:04:05.000000", line[1:len("I0102 15:04:05.000000")])
		if err != nil {
			t.Fatalf("the time of %q: %v", line, err)
		}
		at = at.AddDate(after.UTC().Year(), 0, 0)
		if at.After(after) {
			return at
		}
	}
	t.Fatalf("the partitioned leader's log has no \"Failed to renew lease\" after %s; its last lines:\n%s", after.UTC().Format(time.RFC3339), tailLines(logs, 20))
	return time.Time{}
}
