// Package podstatus reads why a workload's pod does not run, as the kubelet reports it in the pod's status: for the
// CLI's tree, which prints it under a Deployment, and for the Flux deployer, which reports it on an
// ArtifactDeployment while Flux waits for the workloads. One reading, so both say the same of the same pod.
package podstatus

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Failure is why a container of a pod does not run.
type Failure struct {
	Container string
	// Reason is the kubelet's: the reason the container waits for (CrashLoopBackOff, ImagePullBackOff,
	// CreateContainerConfigError, …) or, for a container that has just exited, the reason of its termination
	// (Error, OOMKilled).
	Reason string
	// Exited tells whether the container has exited with ExitCode, now or before the back-off it waits in.
	Exited   bool
	ExitCode int32
	// Message is the kubelet's message of the state the container waits in (a back-off, an image pull's error);
	// it changes with every attempt, e.g. with the back-off's duration.
	Message string
}

// ContainerFailure is the first container of p, init containers first, that does not run, and whether there is
// one: a container waiting for anything but its creation, or one that exited with a code other than 0. That is
// what a person needs rather than the Ready condition's ContainersNotReady.
func ContainerFailure(p *corev1.Pod) (Failure, bool) {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "ContainerCreating" && cs.State.Waiting.Reason != "PodInitializing":
			f := Failure{Container: cs.Name, Reason: cs.State.Waiting.Reason, Message: cs.State.Waiting.Message}
			if t := cs.LastTerminationState.Terminated; t != nil {
				f.Exited, f.ExitCode = true, t.ExitCode
			}
			return f, true
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			return Failure{Container: cs.Name, Reason: cs.State.Terminated.Reason, Exited: true, ExitCode: cs.State.Terminated.ExitCode}, true
		}
	}
	return Failure{}, false
}

// Exit is "container NAME exited with code N"; empty for a container that has not exited.
func (f Failure) Exit() string {
	if !f.Exited {
		return ""
	}
	return fmt.Sprintf("container %s exited with code %d", f.Container, f.ExitCode)
}
