package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/leaderelection"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// shardLabel is the label config/sharding gives a shard's pods, naming the shard; the main instance's have none.
const shardLabel = "fluxdeployer.konfidence.cloud/shard"

// shardInstance is one Deployment of config/sharding: the main instance (key "") or a shard.
type shardInstance struct {
	deployment *appsv1.Deployment
	// key is the sharding.fluxcd.io/key of the objects it reconciles, "" for the main instance.
	key string
	// lease is the name of its leader election Lease; leader the pod holding it.
	lease  string
	leader *corev1.Pod
	vd     *konfidencev1.VectorDeployment
}

// TestNodeShardedInstall shards the operator dist/install.yaml installed as a user does, applying config/sharding
// (rendered for the installed image as dist/install.yaml is): the main Deployment then reconciles only the objects
// without a sharding.fluxcd.io/key, and shard1's and shard2's Deployments run beside it, all three Available
// through the kubelet's probes, each led by its own pod with a Lease of its own. A VectorDeployment of no key, one of
// shard1 and one of shard2, each in a namespace of its own, become Ready with their workloads' pods running, and
// their ArtifactDeployments, Flux objects and helm-controller's HelmCharts carry their key. Each was reconciled by
// its own instance alone: the metrics of each instance's pod have the reconcile series of its VectorDeployment and
// of its ArtifactDeployments' namespace, and none of the other instances'. The cleanup applies config/default again
// and deletes the shards' Deployments, so that the main instance reconciles every object for the next tests.
func TestNodeShardedInstall(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	reg := newRegistry(t)
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})
	image := installedImage(t)
	objs := render(t, image, "config/sharding")
	instances := shardInstances(t, objs)
	// Registered before any namespace, so it runs after their deletion: a sharded VectorDeployment's teardown
	// finalizer is its own shard's to remove.
	t.Cleanup(func() { unshard(t, image, instances) })

	begin := time.Now()
	if err := controlplane.Apply(ctx, env.Client, objs); err != nil {
		t.Fatal(err)
	}
	for _, in := range instances {
		if err := realCluster.WaitAvailable(ctx, 2*time.Minute, in.deployment.Namespace, in.deployment.Name); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("config/sharding applied: %s Available %s later", deploymentNames(instances), time.Since(begin).Round(100*time.Millisecond))
	for _, in := range instances {
		in.leader = leaderPod(t, in.lease, "a pod of Deployment "+in.deployment.Name, func(p *corev1.Pod) bool {
			return deploymentOf(t, p) == in.deployment.Name
		})
		t.Logf("%s: Lease %s held by its pod %s", in.deployment.Name, in.lease, in.leader.Name)
	}

	workloadVector(t, reg, "acme.org/vectors/sharded", "1.0.0", "1.0.0", "")
	vector := reg.Ref("", "acme.org/vectors/sharded", "1.0.0")
	for _, in := range instances {
		in.vd = &konfidencev1.VectorDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(t, "vd-"+cmp.Or(in.key, "main")), Name: "shop"},
			Spec:       konfidencev1.VectorDeploymentSpec{Vector: vector},
		}
		if in.key != "" {
			// config/sharding's admission policy admits only the key of the object's Namespace, which the
			// platform labels.
			labelNamespace(t, in.vd.Namespace, konfidencev1.ShardKeyLabel, in.key)
			in.vd.Labels = map[string]string{konfidencev1.ShardKeyLabel: in.key}
			awaitAdmitted(t, in.vd)
		}
		if err := env.Client.Create(ctx, in.vd); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range instances {
		t.Logf("%s's VectorDeployment %s/%s (key %q): Ready %s after creation", in.deployment.Name, in.vd.Namespace, in.vd.Name,
			in.key, waitReady(t, 4*time.Minute, in.vd).Round(100*time.Millisecond))
		assertWorkloadsReady(t, in.vd.Namespace, 3)
		assertShardKeys(t, in.vd.Namespace, in.key)
	}

	for _, in := range instances {
		assertReconciledOnlyOwn(t, in, instances)
	}
}

// installedImage is the image of the operator's installed Deployment, the one the cluster's kubelet was given.
func installedImage(t *testing.T) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace(), Name: "fluxdeployer"}, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// render builds the kustomization of config/ for the image, as dist/install.yaml is built.
func render(t *testing.T, image, dir string) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := node.Render(context.Background(), image, dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// shardInstances are the Deployments the objects hold, with the shard key of their pods' label and the Lease their
// --watch-label-selector gives them (as the run command names it).
func shardInstances(t *testing.T, objs []*unstructured.Unstructured) []*shardInstance {
	t.Helper()
	var instances []*shardInstance
	deployments, err := controlplane.Deployments(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments {
		selector := ""
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if s, ok := strings.CutPrefix(arg, "--watch-label-selector="); ok {
				selector = s
			}
		}
		lease := leaseName
		if selector != "" {
			lease = leaderelection.GenerateID(leaseName, selector)
		}
		instances = append(instances, &shardInstance{deployment: d, key: d.Spec.Template.Labels[shardLabel], lease: lease})
	}
	if len(instances) != 3 {
		t.Fatalf("config/sharding has %d Deployments, want the main instance and two shards", len(instances))
	}
	return instances
}

func deploymentNames(instances []*shardInstance) []string {
	var names []string
	for _, in := range instances {
		names = append(names, in.deployment.Name)
	}
	return names
}

// deploymentOf names the Deployment whose ReplicaSet owns the pod, "" when none does. config/default's selector
// selects the shards' pods too: only the owner references tell whose a pod is.
func deploymentOf(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "ReplicaSet" {
		return ""
	}
	rs := &appsv1.ReplicaSet{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, rs); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == "Deployment" {
		return owner.Name
	}
	return ""
}

// assertShardKeys checks that every object the operator wrote in the namespace, and every HelmChart helm-controller
// created there for its HelmReleases, carries the shard key (none for "").
func assertShardKeys(t *testing.T, namespace, key string) {
	t.Helper()
	own, applied := operatorObjects(t, namespace)
	charts := listObjects(t, namespace, &sourcev1.HelmChartList{})
	if len(charts) == 0 {
		t.Errorf("no HelmChart in %s", namespace)
	}
	for _, obj := range slices.Concat(own, applied, charts) {
		if got := obj.GetLabels()[konfidencev1.ShardKeyLabel]; got != key {
			t.Errorf("%s in %s has shard key %q, want %q", objectID(obj), namespace, got, key)
		}
	}
}

// assertReconciledOnlyOwn scrapes the metrics of the instance's leader from a pod: it has the reconcile duration
// series of its own VectorDeployment and of its ArtifactDeployments' namespace, and none of the other instances'.
func assertReconciledOnlyOwn(t *testing.T, in *shardInstance, instances []*shardInstance) {
	t.Helper()
	url := fmt.Sprintf("http://%s:8080/metrics", in.leader.Status.PodIP)
	var families map[string]*dto.MetricFamily
	// The series is recorded just after the status write that made the VectorDeployment Ready.
	testenv.Eventually(t, 30*time.Second, func() error {
		// The client prints its request's status line, then the body.
		_, body, _ := strings.Cut(realCluster.RunClient(t, in.deployment.Namespace, url), "\n")
		families = parseMetrics(t, strings.NewReader(body))
		if !hasSeries(families, in.vd) {
			return fmt.Errorf("%s's metrics: no gotk_reconcile_duration_seconds of its VectorDeployment %s/%s", in.deployment.Name, in.vd.Namespace, in.vd.Name)
		}
		return nil
	})
	others := 0
	for _, other := range instances {
		if other != in && hasSeries(families, other.vd) {
			others++
			t.Errorf("%s (key %q) reconciled %s's VectorDeployment %s/%s or its ArtifactDeployments (key %q)",
				in.deployment.Name, in.key, other.deployment.Name, other.vd.Namespace, other.vd.Name, other.key)
		}
	}
	if others == 0 {
		t.Logf("%s's metrics: reconcile series of %s/%s only", in.deployment.Name, in.vd.Namespace, in.vd.Name)
	}
}

// hasSeries says whether the families hold a gotk_reconcile_duration_seconds series of the VectorDeployment or of
// the ArtifactDeployments of its namespace (one histogram per namespace).
func hasSeries(families map[string]*dto.MetricFamily, vd *konfidencev1.VectorDeployment) bool {
	return slices.ContainsFunc(families["gotk_reconcile_duration_seconds"].GetMetric(), func(m *dto.Metric) bool {
		return matches(m, map[string]string{"kind": "VectorDeployment", "namespace": vd.Namespace, "name": vd.Name}) ||
			matches(m, map[string]string{"kind": "ArtifactDeployment", "namespace": vd.Namespace})
	})
}

// unshard puts the installation back as dist/install.yaml made it, for the tests after this one: the namespaces go
// first, while every instance runs to remove its teardown finalizers; then config/default is applied again, which
// takes --watch-label-selector off the main Deployment, and the shards' Deployments and Leases are deleted. It waits
// until the shards' pods are gone and a pod of the main Deployment holds the unsharded Lease.
func unshard(t *testing.T, image string, instances []*shardInstance) {
	ctx := context.Background()
	deleteNamespaces(t)
	begin := time.Now()
	sharding := render(t, image, "config/sharding")
	if err := controlplane.Apply(ctx, env.Client, render(t, image, "config/default")); err != nil {
		t.Fatal(err)
	}
	for _, u := range sharding {
		if u.GetAPIVersion() == "admissionregistration.k8s.io/v1" {
			if err := env.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		}
	}
	for _, in := range instances {
		if in.key != "" {
			if err := env.Client.Delete(ctx, in.deployment.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		}
	}
	ns := operatorNamespace()
	testenv.Eventually(t, 2*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.HasLabels{shardLabel}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("shards' pods left: %s", realCluster.PodStates(ctx, ns, nil))
		}
		return nil
	})
	if err := realCluster.WaitAvailable(ctx, 2*time.Minute, ns, "fluxdeployer"); err != nil {
		t.Fatal(err)
	}
	leader := leaderPod(t, leaseName, "a pod of Deployment fluxdeployer", func(p *corev1.Pod) bool { return deploymentOf(t, p) == "fluxdeployer" })
	for _, in := range instances {
		if in.lease != leaseName {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: in.lease}}
			if err := env.Client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		}
	}
	t.Logf("unsharded: shards deleted, %s leads the main Deployment again %s after the namespaces were gone",
		leader.Name, time.Since(begin).Round(100*time.Millisecond))
}

// labelNamespace sets a label on a Namespace, as a platform team does.
// awaitAdmitted waits until the API server admits obj (a dry run): the shard key policy judges an object by the
// API server's cached copy of its Namespace, which may not show a label set a moment ago.
func awaitAdmitted(t *testing.T, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		return env.Client.Create(context.Background(), obj.DeepCopyObject().(client.Object), client.DryRunAll)
	})
}

func labelNamespace(t *testing.T, name, key, value string) {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, ns); err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataLabel(&ns.ObjectMeta, key, value)
	if err := env.Client.Update(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}
