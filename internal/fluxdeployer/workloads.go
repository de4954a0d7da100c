package fluxdeployer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/podstatus"
)

// workloadRecheck is how often an ArtifactDeployment whose Flux object installs or upgrades is reconciled again,
// to look at its workloads' pods: pods are not watched (a cache of every pod would cost memory and watch traffic
// at every ArtifactDeployment, in steady state too), so a crash is seen within this time rather than at Flux's
// timeout, which is minutes. Only rollouts in progress pay for it, with a few uncached lists each.
const workloadRecheck = 10 * time.Second

// maxWorkloadMessage bounds the message of a failing workload: the kubelet's message of an image pull carries
// the registry's answer, of any length.
const maxWorkloadMessage = 512

// attemptSince tells whether the deployment Flux object works on a rollout of its current generation that is
// not done yet, and since when: its Ready condition is Unknown for this generation (helm-controller's "Running
// 'install' action", kustomize-controller's "Reconciliation in progress" while it waits for the workloads), and
// the ArtifactDeployment's AppHealthy is not True. Its transition time is when the attempt began, or earlier.
// A healthy ArtifactDeployment whose Flux object merely reconciles again (every interval) is no rollout: its
// workloads are not looked at, so that the steady state costs no request. A Ready True or False is Flux's final
// word on the attempt, which stands as Flux says it.
func attemptSince(ad *konfidencev1.ArtifactDeployment, deployment fluxView) (metav1.Time, bool) {
	if deployment.obj == nil || conditions.IsTrue(ad, konfidencev1.AppHealthyCondition) {
		return metav1.Time{}, false
	}
	ready := conditions.Get(deployment.obj, meta.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionUnknown || !deployment.current(ready) {
		return metav1.Time{}, false
	}
	return ready.LastTransitionTime, true
}

// failingPod is the message of the first failing pod of the attempt begun at since, by name, and whether there
// is one. Pods created before the attempt are left out: a failing release's pods still run while its fix rolls
// out, and are not the new release's failure. Both times are in seconds, so a pod of the attempt's first second
// counts; the attempt's is the Flux controller's clock, the pod's the API server's, and a controller clock ahead
// of the API server's by more than a second would leave out pods of the attempt: the failure is then reported only
// as Flux reports it, at its timeout. A crash-looping container passes through running (even Ready, without a
// readiness probe) and terminated on its way back to CrashLoopBackOff, and the kubelet's reason changes with it;
// while the pod previous names has not recovered, previous's message stands, so that Ready and its events do not
// flap with every restart.
func failingPod(pods []corev1.Pod, since metav1.Time, previous metav1.Condition) (string, bool) {
	var attempt []corev1.Pod
	for _, p := range pods {
		if !p.CreationTimestamp.Before(&since) && p.DeletionTimestamp == nil {
			attempt = append(attempt, p)
		}
	}
	slices.SortFunc(attempt, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	if previous.Reason == konfidencev1.WorkloadFailingReason {
		for _, p := range attempt {
			if strings.HasPrefix(previous.Message, podPrefix(&p)) && !recovered(&p) {
				return previous.Message, true
			}
		}
	}
	for _, p := range attempt {
		if f, ok := podstatus.ContainerFailure(&p); ok {
			return failureMessage(&p, f), true
		}
	}
	return "", false
}

// failureMessage names the pod and how its container failed, on one bounded line: the exit code and the kubelet's
// reason ("pod NS/NAME: container app exited with code 1 (CrashLoopBackOff)"), or for a container that never ran
// the reason and the kubelet's message (an image pull's).
func failureMessage(p *corev1.Pod, f podstatus.Failure) string {
	msg := podPrefix(p) + fmt.Sprintf(" container %s: %s: %s", f.Container, f.Reason, f.Message)
	if f.Exited {
		msg = podPrefix(p) + fmt.Sprintf(" %s (%s)", f.Exit(), f.Reason)
	}
	msg = strings.Join(strings.Fields(strings.TrimSuffix(msg, ": ")), " ")
	if len(msg) > maxWorkloadMessage {
		msg = strings.ToValidUTF8(msg[:maxWorkloadMessage-len("…")], "") + "…"
	}
	return msg
}

func podPrefix(p *corev1.Pod) string { return fmt.Sprintf("pod %s/%s:", p.Namespace, p.Name) }

// recovered tells whether a pod that failed runs now: it is Ready, and none of its containers has failed before
// (a container that exited with a code other than 0 restarts in a crash loop, Ready or not while it runs).
func recovered(p *corev1.Pod) bool {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
			return false
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// observeWorkloads reports, while the deployment Flux object rolls out (see attemptSince), a failing pod of the
// workloads it rendered on AppHealthy, False with WorkloadFailing: a crash is seen within seconds, where Flux
// reports only "Running 'install' action" until its timeout, minutes later, and then names neither the exit code
// nor CrashLoopBackOff. Retried, not Stalled: the pod may still start (an image pull that succeeds on the next
// attempt), and Helm or kustomize-controller has the last word once it is done. previous is AppHealthy as the
// last reconcile left it. Only the local cluster is read; a remote target reports Flux's outcome alone. It
// returns whether the rollout is in progress, i.e. whether to look again after workloadRecheck.
//
// The workloads are the Deployments, StatefulSets and DaemonSets in the target namespace that carry the label Flux
// stamps on everything it renders for ad, their pods those their selectors match; both read from the API server,
// not a cache (see workloadRecheck). A failed read leaves AppHealthy as Flux says it: it is only an earlier view of
// what Flux reports at its timeout, and is logged.
func (r *Reconciler) observeWorkloads(ctx context.Context, ad *konfidencev1.ArtifactDeployment, t target, deployment fluxView, previous metav1.Condition) bool {
	since, ok := attemptSince(ad, deployment)
	if !ok || t.kubeConfig != nil {
		return false
	}
	pods, err := r.workloadPods(ctx, ad.Name, t.namespace)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "reading the workloads' pods", "namespace", t.namespace)
		return true
	}
	if msg, failing := failingPod(pods, since, previous); failing {
		conditions.MarkFalse(ad, konfidencev1.AppHealthyCondition, konfidencev1.WorkloadFailingReason, "%s", msg)
	}
	return true
}

// workloadPods lists the pods of the Deployments, StatefulSets and DaemonSets in namespace that Flux rendered for
// the ArtifactDeployment name.
func (r *Reconciler) workloadPods(ctx context.Context, name, namespace string) ([]corev1.Pod, error) {
	rendered := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{konfidencev1.ArtifactDeploymentLabel: name}}
	var selectors []*metav1.LabelSelector
	deployments, statefulSets, daemonSets := &appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}
	for _, list := range []client.ObjectList{deployments, statefulSets, daemonSets} {
		if err := r.apiReader.List(ctx, list, rendered...); err != nil {
			return nil, fmt.Errorf("listing %T in %s: %w", list, namespace, err)
		}
	}
	for _, d := range deployments.Items {
		selectors = append(selectors, d.Spec.Selector)
	}
	for _, s := range statefulSets.Items {
		selectors = append(selectors, s.Spec.Selector)
	}
	for _, d := range daemonSets.Items {
		selectors = append(selectors, d.Spec.Selector)
	}
	var pods []corev1.Pod
	for _, s := range selectors {
		selector, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return nil, err
		}
		if s == nil || selector.Empty() {
			continue // never the namespace's every pod (apps/v1 requires a selector that selects)
		}
		list := &corev1.PodList{}
		if err := r.apiReader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return nil, fmt.Errorf("listing the pods of %s in %s: %w", selector, namespace, err)
		}
		pods = append(pods, list.Items...)
	}
	return pods, nil
}
