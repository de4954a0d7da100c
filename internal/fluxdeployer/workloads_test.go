package fluxdeployer

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestWorkloadFailing: while kustomize-controller waits for the workloads, a crash-looping pod of a StatefulSet the
// Kustomization rendered makes the ArtifactDeployment not Ready with WorkloadFailing and a Warning event, retried
// (not Stalled) and looked at again soon; pods of workloads rendered for another ArtifactDeployment do not count;
// once kustomize-controller says how the rollout ended, its reason stands and the interval is Flux's again.
func TestWorkloadFailing(t *testing.T) {
	h := testHarness(t)
	ctx := context.Background()
	ns := "workload-failing"
	h.namespace(t, ns)
	h.configMap(t, ns, nil)
	r, recorder := h.direct(ns)
	ad := artifactDeployment(ns, "backend-1-2-3-e1mvwibzp5", KustomizeManifestType,
		resource("bundle", "kustomize", ociAccess("ociArtifact", "registry.example.com/bundles/backend:1.2.3")))
	h.create(t, ad)
	reconcile := func() (*konfidencev1.ArtifactDeployment, ctrl.Result) {
		t.Helper()
		result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ad)})
		if err != nil {
			t.Fatal(err)
		}
		got := &konfidencev1.ArtifactDeployment{}
		h.get(t, ns, ad.Name, got)
		return got, result
	}
	reconcile()
	testenv.SetFluxStatus(t, h.env.Client, &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}},
		cond(meta.ReadyCondition, True, meta.SucceededReason, "stored artifact for digest '1.2.3@sha256:abc'"))
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ad.Name}}
	testenv.SetFluxStatus(t, h.env.Client, ks,
		cond(meta.ReadyCondition, Unknown, meta.ProgressingReason, "Reconciliation in progress"),
		cond(meta.HealthyCondition, Unknown, meta.ProgressingReason, "Running health checks for revision 1.2.3@sha256:abc with a timeout of 3m0s"))

	// What kustomize-controller rendered for ad, and a workload of another ArtifactDeployment, each with a pod
	// that the kubelet reports crash-looping.
	crashLoop := corev1.ContainerStatus{Name: "app", RestartCount: 1,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3}}}
	for _, owner := range []string{ad.Name, "other-1-0-0-abcdefghij"} {
		selector := map[string]string{"app": owner}
		h.create(t, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner, Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: owner}},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			}},
		})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner + "-0", Labels: selector},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}
		h.create(t, pod)
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoop}
		if owner != ad.Name {
			pod.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode = 99
		}
		if err := h.env.Client.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	drainEvents(recorder)
	got, result := reconcile()
	want := "pod " + ns + "/" + ad.Name + "-0: container app exited with code 3 (CrashLoopBackOff)"
	assertCondition(t, got, konfidencev1.AppHealthyCondition, False, konfidencev1.WorkloadFailingReason)
	assertCondition(t, got, meta.ReadyCondition, False, konfidencev1.WorkloadFailingReason)
	assertCondition(t, got, meta.ReconcilingCondition, True, meta.ProgressingWithRetryReason)
	if c := conditionOf(got, meta.ReadyCondition); c.Message != want {
		t.Errorf("Ready message %q, want %q", c.Message, want)
	}
	if c := conditionOf(got, meta.StalledCondition); c != nil {
		t.Errorf("Stalled on a failure Flux may still get over: %+v", c)
	}
	assertCondition(t, got, konfidencev1.ArtifactDeployedCondition, Unknown, meta.ProgressingReason)
	assertEvent(t, drainEvents(recorder), corev1.EventTypeWarning, konfidencev1.WorkloadFailingReason)
	if result.RequeueAfter <= 0 || result.RequeueAfter > workloadRecheck {
		t.Errorf("requeued after %s while the rollout is in progress, want at most %s", result.RequeueAfter, workloadRecheck)
	}

	// kustomize-controller gives up: its reason stands.
	testenv.SetFluxStatus(t, h.env.Client, ks,
		cond(meta.ReadyCondition, False, meta.HealthCheckFailedReason, "timeout waiting for: [StatefulSet/workload-failing/backend status: 'InProgress']"),
		cond(meta.HealthyCondition, False, meta.HealthCheckFailedReason, "health check failed"))
	got, result = reconcile()
	assertCondition(t, got, konfidencev1.AppHealthyCondition, False, meta.HealthCheckFailedReason)
	assertCondition(t, got, meta.ReadyCondition, False, meta.HealthCheckFailedReason)
	if result.RequeueAfter <= workloadRecheck {
		t.Errorf("requeued after %s once Flux is done, want the interval", result.RequeueAfter)
	}
}

// TestAttemptSince: the workloads are looked at only while the deployment Flux object works on its current
// generation and has not said how it ended, and the ArtifactDeployment is not healthy already.
func TestAttemptSince(t *testing.T) {
	began := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	release := func(generation, observed int64, ready *metav1.Condition) fluxObject {
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "worker", Generation: generation}}
		hr.Status.ObservedGeneration = observed
		if ready != nil {
			hr.Status.Conditions = []metav1.Condition{*ready}
		}
		return hr
	}
	ready := func(status metav1.ConditionStatus, generation int64) *metav1.Condition {
		return &metav1.Condition{Type: meta.ReadyCondition, Status: status, Reason: meta.ProgressingReason,
			Message: "Running 'install' action with timeout of 3m0s", ObservedGeneration: generation, LastTransitionTime: began}
	}
	for _, tc := range []struct {
		name       string
		obj        fluxObject // nil: not created yet
		appHealthy metav1.ConditionStatus
		want       bool
	}{
		{"installing", release(1, 0, ready(Unknown, 1)), Unknown, true},
		{"upgrading after a failure of the same generation", release(2, 1, ready(Unknown, 2)), False, true},
		{"not created yet", nil, Unknown, false},
		{"not reported yet", release(1, 0, nil), Unknown, false},
		{"Ready Unknown of the previous generation", release(2, 1, ready(Unknown, 1)), Unknown, false},
		{"installed", release(1, 1, ready(True, 1)), True, false},
		{"failed: Flux's word", release(1, 1, ready(False, 1)), False, false},
		{"healthy, reconciled again at the interval", release(1, 1, ready(Unknown, 1)), True, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := fluxView{kind: kindNamed(helmv2.HelmReleaseKind), obj: tc.obj}
			ad := &konfidencev1.ArtifactDeployment{}
			conditions.Set(ad, &metav1.Condition{Type: konfidencev1.AppHealthyCondition, Status: tc.appHealthy, Reason: "Any"})
			since, ok := attemptSince(ad, v)
			if ok != tc.want {
				t.Fatalf("in progress: %t, want %t", ok, tc.want)
			}
			if ok && !since.Equal(&began) {
				t.Errorf("since %s, want the Ready condition's transition %s", since, began)
			}
		})
	}
}

// TestFailingPod: the first failing pod of the attempt, by name, with the exit code and the kubelet's reason on one
// bounded line; pods of an earlier attempt and pods going away do not count; a crash loop's message stands
// through the loop's running and terminated phases.
func TestFailingPod(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	pod := func(name string, created time.Duration, ready bool, statuses ...corev1.ContainerStatus) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: metav1.NewTime(since.Add(created))}}
		p.Status.ContainerStatuses = statuses
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	crashLooping := corev1.ContainerStatus{Name: "app", RestartCount: 2,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: "back-off 20s restarting failed container=app pod=worker-1_shop(uid)"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}
	runningAgain := corev1.ContainerStatus{Name: "app", RestartCount: 3, Ready: true,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: crashLooping.LastTerminationState}
	exited := corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}
	pullFailing := corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
		Message: "Back-off pulling image \"127.0.0.1:1/missing:1\"\n" + strings.Repeat("dial tcp 127.0.0.1:1: connect: connection refused; ", 20)}}}
	running := corev1.ContainerStatus{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	creating := corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	const crashMessage = "pod shop/worker-1: container app exited with code 1 (CrashLoopBackOff)"
	failing := func(message string) metav1.Condition {
		return metav1.Condition{Type: konfidencev1.AppHealthyCondition, Status: False, Reason: konfidencev1.WorkloadFailingReason, Message: message}
	}
	gone := pod("worker-0", time.Second, false, crashLooping)
	gone.DeletionTimestamp = &since

	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		previous metav1.Condition
		want     string // "": none fails
	}{
		{"crash loop", []corev1.Pod{pod("worker-1", 0, false, crashLooping)}, metav1.Condition{}, crashMessage},
		{"just exited", []corev1.Pod{pod("worker-1", time.Second, false, exited)}, metav1.Condition{},
			"pod shop/worker-1: container app exited with code 137 (OOMKilled)"},
		{"the first by name", []corev1.Pod{pod("worker-2", time.Second, false, exited), pod("worker-1", time.Second, false, crashLooping)}, metav1.Condition{}, crashMessage},
		{"running and starting pods", []corev1.Pod{pod("worker-1", time.Second, true, running), pod("worker-2", time.Second, false, creating)}, metav1.Condition{}, ""},
		{"a pod of the attempt before", []corev1.Pod{pod("worker-1", -time.Second, false, crashLooping)}, metav1.Condition{}, ""},
		{"a pod going away", []corev1.Pod{gone}, metav1.Condition{}, ""},
		{"a crash loop running again keeps its message", []corev1.Pod{pod("worker-1", 0, true, runningAgain)}, failing(crashMessage), crashMessage},
		{"a crash loop terminated again keeps its message", []corev1.Pod{pod("worker-1", 0, false, exited)}, failing(crashMessage), crashMessage},
		{"a recovered pod's message goes", []corev1.Pod{pod("worker-1", 0, true, running), pod("worker-2", 0, false, exited)}, failing(crashMessage),
			"pod shop/worker-2: container app exited with code 137 (OOMKilled)"},
		{"another reason's message is no failure of its own", []corev1.Pod{pod("worker-1", 0, true, running)},
			metav1.Condition{Type: konfidencev1.AppHealthyCondition, Status: False, Reason: "InstallFailed", Message: "pod shop/worker-1: x"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := failingPod(tc.pods, since, tc.previous)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("failingPod: %q, %t; want %q", got, ok, tc.want)
			}
		})
	}

	t.Run("an image pull's long message", func(t *testing.T) {
		got, _ := failingPod([]corev1.Pod{pod("worker-1", 0, false, pullFailing)}, since, metav1.Condition{})
		if want := `pod shop/worker-1: container app: ImagePullBackOff: Back-off pulling image "127.0.0.1:1/missing:1" dial tcp`; !strings.HasPrefix(got, want) {
			t.Errorf("message %q, want it to start %q", got, want)
		}
		if len(got) > maxWorkloadMessage || strings.ContainsAny(got, "\n\r\t") || !strings.HasSuffix(got, "…") {
			t.Errorf("message of %d bytes, not one line bounded to %d and marked cut: %q", len(got), maxWorkloadMessage, got)
		}
	})
}
