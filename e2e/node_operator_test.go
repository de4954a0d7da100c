package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// leaseName is the operator's leader-election Lease (its LeaderElectionID), in its namespace.
const leaseName = "fluxdeployer.konfidence.cloud"

// handoverBound bounds a takeover by client-go's leader election with Flux's defaults (lease 35 s, retry 5 s
// with jitter): a leader that did not release its lease is replaced after the lease expires and the next retry.
const handoverBound = time.Minute

// TestNodeOperatorAsADeployment runs the installed operator's Deployment with two replicas. Deleting the leader's
// pod hands the Lease to the other pod, which converges a VectorDeployment created meanwhile, one
// ArtifactDeployment per artifact; the kubelet's SIGTERM ends the deleted pod within its grace period. A rollout
// to a new image version keeps every name and, once the new leader has reconciled, writes nothing.
func TestNodeOperatorAsADeployment(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	reg := newRegistry(t)
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})
	operator := twoOperatorReplicas(t)
	ns := operator.Namespace

	leader := leaderPod(t, leaseName, "any pod", func(*corev1.Pod) bool { return true })
	grace := time.Duration(*leader.Spec.TerminationGracePeriodSeconds) * time.Second
	if err := env.Client.Delete(ctx, leader); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	workloadVector(t, reg, "acme.org/vectors/handover", "1.0.0", "1.0.0", "")
	vdNS := newNamespace(t, "handover")
	vd := createVectorDeployment(t, vdNS, "handover", reg.Ref("", "acme.org/vectors/handover", "1.0.0"))

	next := leaderPod(t, leaseName, "a pod other than "+leader.Name, func(p *corev1.Pod) bool { return p.Name != leader.Name })
	t.Logf("leader %s deleted; %s holds the Lease %s later", leader.Name, next.Name, time.Since(deleted).Round(100*time.Millisecond))
	// The kubelet removes the pod once its containers have ended; it kills them only when the grace period is over.
	testenv.Eventually(t, grace, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(leader), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s still there (%v): %s", leader.Name, err, realCluster.PodStates(ctx, ns, leader.Labels))
		}
		return nil
	})
	if ended := time.Since(deleted); ended >= grace {
		t.Errorf("the deleted leader's pod ended %s after its deletion, not within its grace period %s", ended, grace)
	} else {
		t.Logf("the deleted leader's pod ended %s after the kubelet's SIGTERM (grace period %s)", ended.Round(100*time.Millisecond), grace)
	}
	t.Logf("handover: VectorDeployment created after the leader's deletion Ready %s after creation", waitReady(t, 4*time.Minute, vd).Round(100*time.Millisecond))
	ads := artifactDeploymentNames(t, vdNS)
	if len(ads) != 3 {
		t.Errorf("ArtifactDeployments in %s: %v, want one for each of the 3 artifacts", vdNS, ads)
	}
	assertWorkloadsReady(t, vdNS, 3)
	settleLandscape(t, vdNS)

	// A rollout to a new version: the names stay, and nothing the operator owns is written once it has settled.
	before := written(t, vdNS)
	ref, err := node.OperatorImage()
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := realCluster.BuildOperatorImage(ctx, ref+"-next", "0.0.0-next"); err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s-next built and imported in %s", ref, time.Since(begin).Round(100*time.Millisecond))
	begin = time.Now()
	updateOperator(t, operator, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = ref + "-next" })
	rolled := leaderPod(t, leaseName, "a pod of "+ref+"-next", func(p *corev1.Pod) bool { return p.Spec.Containers[0].Image == ref+"-next" })
	t.Logf("rolled out to %s-next: both pods Available and %s leads %s after the patch", ref, rolled.Name, time.Since(begin).Round(100*time.Millisecond))
	// The new leader reconciles every object when it starts. The requirement is a window: nothing written for a
	// while after the rollout. The operator runs in a pod, so the test has no hook into its queue; 15s covers the
	// start-up reconcile of every object and the delay before a changed ArtifactDeployment is reported.
	const window = 15 * time.Second
	time.Sleep(window)
	after := written(t, vdNS)
	if !maps.Equal(before, after) {
		t.Fatalf("the rollout wrote (object: before → after):%s\nWarning events of the namespace: %v", diff(before, after), konfidenceWarnings(t, vdNS))
	}
	if got := artifactDeploymentNames(t, vdNS); !slices.Equal(got, ads) {
		t.Errorf("ArtifactDeployments after the rollout %v, before %v", got, ads)
	}
	t.Logf("after the rollout and %s of observation: %d objects unchanged", window, len(after))
}

// landscapeQuiet is how long a landscape that became Ready must go without a write before a test takes it as
// settled: the status writes that follow Ready (the last ArtifactDeployment's results, its VectorDeployments'
// summary) come within a second.
const landscapeQuiet = 5 * time.Second

// settleLandscape waits until the operator's writes in the namespace have settled (settle), so that a test's
// "before" is the landscape at rest, not between a VectorDeployment's Ready and the status writes that follow it.
func settleLandscape(t *testing.T, namespace string) {
	t.Helper()
	quiet, writes := settle(t, time.Minute, landscapeQuiet, namespace)
	t.Logf("the landscape's writes settled %s after it was Ready, after %d object writes", quiet.Round(100*time.Millisecond), writes)
}

// installedOperator returns the installed operator's Deployment and, when the test ends, restores its replicas,
// strategy and containers as they are now and waits until it is Available: the other tests share it.
func installedOperator(t *testing.T) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	operator := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: operatorNamespace(), Name: "fluxdeployer"}
	if err := env.Client.Get(ctx, key, operator); err != nil {
		t.Fatal(err)
	}
	installed := operator.DeepCopy()
	t.Cleanup(func() {
		restore := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, restore); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(restore.DeepCopy())
		restore.Spec.Replicas, restore.Spec.Template.Spec.Containers = installed.Spec.Replicas, installed.Spec.Template.Spec.Containers
		restore.Spec.Strategy = installed.Spec.Strategy
		if err := env.Client.Patch(ctx, restore, patch); err != nil {
			t.Fatal(err)
		}
		if err := realCluster.WaitAvailable(ctx, 2*time.Minute, key.Namespace, key.Name); err != nil {
			t.Error(err)
		}
	})
	return operator
}

// twoOperatorReplicas scales the installed operator's Deployment to two replicas and waits until both are
// Available; when the test ends it is back as installed (see installedOperator).
func twoOperatorReplicas(t *testing.T) *appsv1.Deployment {
	t.Helper()
	operator := installedOperator(t)
	begin := time.Now()
	updateOperator(t, operator, func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(2)) })
	t.Logf("scaled to 2 replicas, both Available in %s", time.Since(begin).Round(100*time.Millisecond))
	return operator
}

// updateOperator changes the operator's Deployment and waits until all its replicas of the new template are
// Available.
func updateOperator(t *testing.T, d *appsv1.Deployment, change func(*appsv1.Deployment)) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	change(d)
	if err := env.Client.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
	if err := realCluster.WaitAvailable(ctx, 2*time.Minute, d.Namespace, d.Name); err != nil {
		t.Fatal(err)
	}
}

// leaderPod waits (handoverBound) until a running pod that is wanted holds the operator's Lease of that name, and
// returns it. client-go names a holder by its host name, the pod's name, and a unique suffix.
func leaderPod(t *testing.T, lease, what string, wanted func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	testenv.Eventually(t, handoverBound, func() error {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace(), Name: lease}, l); err != nil {
			return err
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_")
		}
		if holder == "" {
			return fmt.Errorf("Lease %s held by nobody, want %s", lease, what)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace(), Name: holder}, pod); err != nil {
			return err
		}
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || !wanted(pod) {
			return fmt.Errorf("Lease %s held by pod %s, %s (deleted: %v), want %s", lease, holder, pod.Status.Phase, pod.DeletionTimestamp, what)
		}
		return nil
	})
	return pod
}

// artifactDeploymentNames lists the names of the namespace's ArtifactDeployments, sorted.
func artifactDeploymentNames(t *testing.T, namespace string) []string {
	t.Helper()
	return objectNames(t, namespace, &konfidencev1.ArtifactDeploymentList{})
}

// objectNames lists the names of the namespace's objects of list's kind, sorted.
func objectNames(t *testing.T, namespace string, list client.ObjectList) []string {
	t.Helper()
	var names []string
	for _, obj := range listObjects(t, namespace, list) {
		names = append(names, obj.GetName())
	}
	slices.Sort(names)
	return names
}

// written fingerprints what the operator writes in the namespace: every field of its own objects, with their
// resourceVersion (so that a write shows, and what it changed), and of the Flux objects it applies their
// generation, labels, annotations and owners (Flux writes their status).
func written(t *testing.T, namespace string) map[string]string {
	t.Helper()
	own, applied := operatorObjects(t, namespace)
	fingerprints := map[string]string{}
	for _, obj := range own {
		fields := flatten(t, obj)
		// A write undone by another leaves the fields as they were, but not the resourceVersion.
		fields[".metadata.resourceVersion"] = obj.GetResourceVersion()
		fingerprints[objectID(obj)] = fieldsFingerprint(fields)
	}
	for _, obj := range applied {
		fingerprints[objectID(obj)] = specFingerprint(obj)
	}
	return fingerprints
}

// specFingerprint is what a change of an object's spec or metadata changes, and a status write does not: its
// generation, labels, annotations and owners.
func specFingerprint(obj client.Object) string {
	var owners []string
	for _, o := range obj.GetOwnerReferences() {
		owners = append(owners, fmt.Sprintf("%s/%s %s controller=%t", o.Kind, o.Name, o.UID, o.Controller != nil && *o.Controller))
	}
	return fmt.Sprintf("uid %s generation %d labels %v annotations %v owners %v",
		obj.GetUID(), obj.GetGeneration(), obj.GetLabels(), obj.GetAnnotations(), owners)
}

// operatorObjects lists what the operator writes in the namespace: its own VectorDeployments and
// ArtifactDeployments, and the Flux objects it applies.
func operatorObjects(t *testing.T, namespace string) (own, applied []client.Object) {
	t.Helper()
	own = listObjects(t, namespace, &konfidencev1.VectorDeploymentList{}, &konfidencev1.ArtifactDeploymentList{})
	applied = listObjects(t, namespace,
		&sourcev1.HelmRepositoryList{}, &sourcev1.OCIRepositoryList{}, &helmv2.HelmReleaseList{}, &kustomizev1.KustomizationList{})
	return own, applied
}

// listObjects lists the objects of the namespace of every kind given by its list.
func listObjects(t *testing.T, namespace string, lists ...client.ObjectList) []client.Object {
	t.Helper()
	var objs []client.Object
	for _, list := range lists {
		if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			objs = append(objs, o.(client.Object))
		}
	}
	return objs
}

// objectID names an object of a namespace by its Go type and name.
func objectID(obj client.Object) string { return fmt.Sprintf("%T/%s", obj, obj.GetName()) }

// fieldSeparator separates a field's path from its value in a fieldsFingerprint; neither contains it.
const fieldSeparator = "\x00"

// fieldsFingerprint writes an object's fields, path and value, a line each in the order of the paths.
func fieldsFingerprint(fields map[string]string) string {
	lines := make([]string, 0, len(fields))
	for path, v := range fields {
		lines = append(lines, path+fieldSeparator+v)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// fingerprintFields reads a fieldsFingerprint back; ok is false for another kind of fingerprint.
func fingerprintFields(fingerprint string) (fields map[string]string, ok bool) {
	if !strings.Contains(fingerprint, fieldSeparator) {
		return nil, false
	}
	fields = map[string]string{}
	for line := range strings.SplitSeq(fingerprint, "\n") {
		path, v, _ := strings.Cut(line, fieldSeparator)
		fields[path] = v
	}
	return fields, true
}

// diff lists the fingerprints that differ, by object; of fields fingerprints, the fields that changed.
func diff(before, after map[string]string) string {
	ids := slices.Collect(maps.Keys(before))
	for id := range after {
		if _, ok := before[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		if before[id] == after[id] {
			continue
		}
		old, oldFields := fingerprintFields(before[id])
		now, nowFields := fingerprintFields(after[id])
		if oldFields && nowFields {
			fmt.Fprintf(&b, "\n  %s: %s", id, fieldChanges(old, now))
			continue
		}
		fmt.Fprintf(&b, "\n  %s: %q → %q", id, before[id], after[id])
	}
	return b.String()
}
