package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// requireNode skips a test that needs pods to start: it runs on the real node (make e2e-node) and on kind (make
// e2e-kind).
func requireNode(t *testing.T) {
	t.Helper()
	if realCluster == nil {
		t.Skip("needs a cluster where pods start: E2E_NODE=1 (make e2e-node) or E2E_KIND_CLUSTER (make e2e-kind)")
	}
}

// workloadVector publishes, in reg, a vector of three artifacts whose Deployments run the workload image: a
// chart web, a Kustomize bundle api and a chart worker of the given version run with workerArgs (or of image
// workerImage when it is not empty).
func workloadVector(t *testing.T, reg *ocmtest.Registry, vector, version, workerVersion, workerImage string, workerArgs ...string) ocmtest.ComponentVersion {
	t.Helper()
	return publishWorkloads(t, reg, vector, version,
		workloadArtifact{name: "web", version: "1.0.0"},
		workloadArtifact{name: "api", version: "1.0.0", bundle: true},
		workloadArtifact{name: "worker", version: workerVersion, image: workerImage, args: workerArgs})[2]
}

// workloadArtifact is a reusable artifact acme.org/artifacts/NAME of a workload vector: a chart, or a Kustomize
// bundle, whose Deployment and Service run image (the workload image when empty) with args.
type workloadArtifact struct {
	name, version string
	bundle        bool
	image         string
	args          []string
}

// publishWorkloads publishes, in reg, the artifacts and the vector of them, and returns the artifacts' component
// versions in their order. A bundle's objects are named after the artifact and its version (see
// ocmtest.WorkloadBundle), a chart's after its release.
func publishWorkloads(t *testing.T, reg *ocmtest.Registry, vector, version string, artifacts ...workloadArtifact) []ocmtest.ComponentVersion {
	t.Helper()
	var cvs []ocmtest.ComponentVersion
	for _, a := range artifacts {
		component, image := "acme.org/artifacts/"+a.name, cmp.Or(a.image, node.WorkloadImage)
		if !a.bundle {
			cvs = append(cvs, helmArtifact(t, reg, component, a.version, true, ocmtest.WorkloadChart(a.name, a.version, image, a.args...)))
			continue
		}
		objects, err := sanitize.DNSLabelName(a.name+"-"+a.version, sanitize.MaxDNSLabelLength)
		if err != nil {
			t.Fatal(err)
		}
		bundle, err := ocmtest.PushKustomizeBundle(context.Background(), reg.Host, "bundles/"+a.name, a.version, ocmtest.WorkloadBundle(objects, image, a.args...))
		if err != nil {
			t.Fatal(err)
		}
		cv := ocmtest.Artifact(component, a.version, "cloud.konfidence.flux.kustomize", true)
		cv.Resources[1] = ocmtest.BundleResource(a.version, bundle)
		cvs = append(cvs, cv)
	}
	reg.Push(t, "", append(cvs, ocmtest.Vector(vector, version, cvs...))...)
	return cvs
}

// TestNodeWorkloads deploys vectors whose artifacts start real pods. A healthy vector is Ready only once every
// pod is Ready, and its Service answers through kube-proxy; a worker that crashes, whose image cannot be pulled
// or that never becomes ready fails its HelmRelease with helm-controller's reason, which reaches the
// ArtifactDeployment and the VectorDeployment's message while the other two artifacts stay Ready; a new vector
// with a fixed worker recovers; deleting a VectorDeployment uninstalls its releases and its pods go.
func TestNodeWorkloads(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	reg := newRegistry(t)
	// Helm and Kustomize wait for the workloads' readiness; a broken rollout fails after 30 s, not Flux's 5 min.
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})
	workloadVector(t, reg, "acme.org/vectors/shop", "1.0.0", "1.0.0", "")

	failures := []struct {
		name, version, image string
		args                 []string
		// pods are what the kubelet may show for the worker's pod (PodStates), any of them.
		pods []string
	}{
		{"crash", "1.0.1", "", []string{"-crash"}, []string{"CrashLoopBackOff", "terminated Error (exit 1)"}},
		{"pull", "1.0.2", "127.0.0.1:1/missing:1", nil, []string{"waiting ErrImagePull", "waiting ImagePullBackOff"}},
		{"never-ready", "1.0.3", "", []string{"-never-ready"}, []string{"Running app ready=false restarts=0]"}},
	}
	type broken struct {
		vd     *konfidencev1.VectorDeployment
		worker ocmtest.ComponentVersion
		pods   []string
	}
	var brokenVDs []broken
	for _, f := range failures {
		worker := workloadVector(t, reg, "acme.org/vectors/"+f.name, "1.0.0", f.version, f.image, f.args...)
		ns := newNamespace(t, f.name)
		brokenVDs = append(brokenVDs, broken{createVectorDeployment(t, ns, f.name, reg.Ref("", "acme.org/vectors/"+f.name, "1.0.0")), worker, f.pods})
	}
	// What the kubelet shows for each broken worker's pod while Helm waits, watched from the start: Helm may
	// remove the pod once it has given up.
	seen := make([]atomic.Value, len(brokenVDs))
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	workerLabels := make([]map[string]string, len(brokenVDs))
	for i, b := range brokenVDs {
		workerLabels[i] = map[string]string{"app.kubernetes.io/instance": adName(t, b.worker, nil)}
	}
	go func() {
		for watchCtx.Err() == nil {
			for i, b := range brokenVDs {
				labels := workerLabels[i]
				if p := realCluster.PodStates(watchCtx, b.vd.Namespace, labels); slices.ContainsFunc(b.pods, func(s string) bool { return strings.Contains(p, s) }) {
					seen[i].CompareAndSwap(nil, p)
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	shopNS := newNamespace(t, "shop")
	shop := createVectorDeployment(t, shopNS, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))

	t.Logf("healthy vector of 3 workloads: VectorDeployment Ready %s after creation", waitReady(t, 4*time.Minute, shop).Round(100*time.Millisecond))
	assertWorkloadsReady(t, shopNS, 3)
	// The web chart's Service is the deployment result; it answers through kube-proxy from a pod.
	results := shop.Status.DeploymentResults["acme.org/artifacts/web"]
	if len(results) != 1 {
		t.Fatalf("deployment results of web: %+v", shop.Status.DeploymentResults)
	}
	var result struct {
		K8sName string `json:"k8sName"`
	}
	if err := json.Unmarshal(results[0].Spec.Raw, &result); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: shopNS, Name: result.K8sName}, svc); err != nil {
		t.Fatal(err)
	}
	if got := realCluster.RunClient(t, shopNS, "http://"+svc.Spec.ClusterIP+"/"); !strings.Contains(got, "hello from") {
		t.Errorf("GET the web Service %s: %q", svc.Spec.ClusterIP, got)
	}

	for i, b := range brokenVDs {
		workerAD := adName(t, b.worker, nil)
		var hr helmv2.HelmRelease
		testenv.Eventually(t, 3*time.Minute, func() error {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: b.vd.Namespace, Name: workerAD}, &hr); err != nil {
				return err
			}
			if conditions.IsReady(&hr) || conditions.GetReason(&hr, "Ready") == "" || conditions.IsUnknown(&hr, "Ready") {
				return fmt.Errorf("HelmRelease %s not failed yet: %+v", hr.Name, conditions.Get(&hr, "Ready"))
			}
			return nil
		})
		var reason, message string
		ad := &konfidencev1.ArtifactDeployment{}
		vd := b.vd
		// helm-controller may retry and say it anew: each check compares with what it says now.
		testenv.Eventually(t, time.Minute, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&hr), &hr); err != nil {
				return err
			}
			reason, message = conditions.GetReason(&hr, "Ready"), conditions.GetMessage(&hr, "Ready")
			want := fmt.Sprintf("2/3 artifacts ready; waiting for %s: %s", workerAD, reason)
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: vd.Namespace, Name: workerAD}, ad); err != nil {
				return err
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
				return err
			}
			if got := conditions.Get(ad, "Ready"); got == nil || got.Reason != reason || !strings.Contains(got.Message, firstLine(message)) {
				return fmt.Errorf("ArtifactDeployment %s Ready: %+v, want helm-controller's %s: %s", workerAD, got, reason, message)
			}
			if got := conditions.GetMessage(vd, "Ready"); !strings.HasPrefix(got, want) {
				return fmt.Errorf("VectorDeployment %s Ready message %q, want it to start %q", vd.Name, got, want)
			}
			return nil
		})
		pods, _ := seen[i].Load().(string)
		failedAfter := conditions.Get(&hr, "Ready").LastTransitionTime.Sub(vd.CreationTimestamp.Time)
		t.Logf("%s: HelmRelease failed %s after the VectorDeployment's creation: %s: %s; pods: %s", vd.Name, failedAfter.Round(time.Second), reason, firstLine(message), pods)
		if pods == "" {
			t.Errorf("%s: the worker's pod never showed %q while Helm waited", vd.Name, b.pods)
		}
		assertWorkloadsReady(t, vd.Namespace, 2) // web and api are unharmed
	}

	// A new vector with a fixed worker recovers: its VectorDeployment (a spec is immutable) in the crash-looping
	// one's namespace shares web and api with it and gets a worker that starts.
	crash := brokenVDs[0].vd
	workloadVector(t, reg, "acme.org/vectors/crash", "1.1.0", "1.0.4", "")
	fixed := createVectorDeployment(t, crash.Namespace, "crash-fixed", reg.Ref("", "acme.org/vectors/crash", "1.1.0"))
	t.Logf("crash-fixed: Ready %s after creation", waitReady(t, 3*time.Minute, fixed).Round(100*time.Millisecond))
	assertWorkloadsReady(t, crash.Namespace, 3)

	// Teardown for real: the releases are uninstalled and the pods are gone.
	if err := env.Client.Delete(ctx, shop); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(shop), shop); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VectorDeployment shop still there (%v): %+v", err, shop.Status.Conditions)
		}
		if rel := releases(t, shopNS); len(rel) > 0 {
			return fmt.Errorf("Helm releases left in %s: %v", shopNS, rel)
		}
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(shopNS)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("pods left in %s: %s", shopNS, realCluster.PodStates(ctx, shopNS, nil))
		}
		return nil
	})
	t.Logf("shop: releases uninstalled and pods gone %s after deletion", time.Since(deleted).Round(100*time.Millisecond))
}

// TestNodeWorkloadFailing: a chart whose pods crash-loop at once, installed with a Helm timeout of 3 minutes, makes
// its ArtifactDeployment not Ready with WorkloadFailing, naming the pod, the exit code and the kubelet's reason,
// while helm-controller still runs the install (its HelmRelease's Ready Unknown), long before Helm's timeout; a
// Warning event says the same, and the VectorDeployment's message carries the reason.
func TestNodeWorkloadFailing(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	reg := newRegistry(t)
	// A timeout long enough that helm-controller's own failure cannot be what the ArtifactDeployment reports.
	const helmTimeout = 3 * time.Minute
	startFluxdeployer(t, map[string]string{"timeout": helmTimeout.String(), "wait": "true"})
	worker := publishWorkloads(t, reg, "acme.org/vectors/crash-early", "1.0.0",
		workloadArtifact{name: "worker", version: "1.0.5", args: []string{"-crash"}})[0]
	ns := newNamespace(t, "crash-early")
	vd := createVectorDeployment(t, ns, "crash-early", reg.Ref("", "acme.org/vectors/crash-early", "1.0.0"))
	workerAD := adName(t, worker, nil)

	pattern := regexp.MustCompile(`^pod ` + regexp.QuoteMeta(ns) + `/` + regexp.QuoteMeta(workerAD) + `-[a-z0-9-]+: container app exited with code 1 \((CrashLoopBackOff|Error)\)$`)
	ad := &konfidencev1.ArtifactDeployment{}
	hr := &helmv2.HelmRelease{}
	var ready *metav1.Condition
	testenv.Eventually(t, helmTimeout, func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: workerAD}, ad); err != nil {
			return err
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: workerAD}, hr); err != nil {
			return err
		}
		if ready = conditions.Get(ad, "Ready"); ready == nil || ready.Reason != konfidencev1.WorkloadFailingReason {
			return fmt.Errorf("ArtifactDeployment %s Ready: %+v; HelmRelease Ready: %+v; pods: %s", workerAD, ready,
				conditions.Get(hr, "Ready"), realCluster.PodStates(ctx, ns, nil))
		}
		return nil
	})
	seen := time.Since(vd.CreationTimestamp.Time)
	if !conditions.IsUnknown(hr, "Ready") {
		t.Errorf("HelmRelease %s Ready %+v when the ArtifactDeployment reported the failure, want the install still running", hr.Name, conditions.Get(hr, "Ready"))
	}
	if ready.Status != metav1.ConditionFalse || !pattern.MatchString(ready.Message) {
		t.Errorf("ArtifactDeployment %s Ready %s %q, want False and a message matching %s", workerAD, ready.Status, ready.Message, pattern)
	}
	if c := conditions.Get(ad, konfidencev1.AppHealthyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != konfidencev1.WorkloadFailingReason {
		t.Errorf("AppHealthy %+v, want False with %s", c, konfidencev1.WorkloadFailingReason)
	}
	if conditions.IsStalled(ad) {
		t.Errorf("ArtifactDeployment %s Stalled on a failure Helm may still get over", workerAD)
	}
	testenv.Eventually(t, time.Minute, func() error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Name == workerAD && e.Type == corev1.EventTypeWarning && e.Reason == konfidencev1.WorkloadFailingReason
		}) {
			return fmt.Errorf("no Warning event %s on ArtifactDeployment %s", konfidencev1.WorkloadFailingReason, workerAD)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		if want := fmt.Sprintf("0/1 artifacts ready; waiting for %s: %s", workerAD, konfidencev1.WorkloadFailingReason); !strings.HasPrefix(conditions.GetMessage(vd, "Ready"), want) {
			return fmt.Errorf("VectorDeployment Ready message %q, want it to start %q", conditions.GetMessage(vd, "Ready"), want)
		}
		return nil
	})
	t.Logf("worker: %s %s after the VectorDeployment's creation (Helm's timeout %s), HelmRelease Ready %s: %s",
		ready.Reason, seen.Round(time.Second), helmTimeout, conditions.Get(hr, "Ready").Status, ready.Message)
}

// assertWorkloadsReady checks that the namespace holds n Deployments, each with all its replicas ready.
func assertWorkloadsReady(t *testing.T, namespace string, n int) {
	t.Helper()
	if err := workloadsReady(context.Background(), namespace, n); err != nil {
		t.Error(err)
	}
}

// workloadsReady says how the namespace falls short of n Deployments whose pods of the current generation are
// all ready, or nil.
func workloadsReady(ctx context.Context, namespace string, n int) error {
	deployments := &appsv1.DeploymentList{}
	if err := env.Client.List(ctx, deployments, client.InNamespace(namespace)); err != nil {
		return err
	}
	ready := 0
	for _, d := range deployments.Items {
		if d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.ObservedGeneration == d.Generation {
			ready++
		}
	}
	if ready != n {
		return fmt.Errorf("%d Deployments ready in %s, want %d; pods: %s", ready, namespace, n, realCluster.PodStates(ctx, namespace, nil))
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
