package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestContainerFailure: what the kubelet reports of a container that does not run, init containers first; a
// container being created, or one that exited with 0, is no failure.
func TestContainerFailure(t *testing.T) {
	waiting := func(name, reason, message string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
	}
	terminated := func(name, reason string, code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}
	}
	crashLoop := waiting("app", "CrashLoopBackOff", "back-off 10s restarting failed container")
	crashLoop.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}
	for _, tc := range []struct {
		name      string
		init, app []corev1.ContainerStatus
		want      Failure // zero: none
		exit      string
	}{
		{"crash loop", nil, []corev1.ContainerStatus{crashLoop},
			Failure{Container: "app", Reason: "CrashLoopBackOff", Exited: true, ExitCode: 2, Message: "back-off 10s restarting failed container"},
			"container app exited with code 2"},
		{"image pull", nil, []corev1.ContainerStatus{waiting("app", "ImagePullBackOff", `Back-off pulling image "x"`)},
			Failure{Container: "app", Reason: "ImagePullBackOff", Message: `Back-off pulling image "x"`}, ""},
		{"just exited", nil, []corev1.ContainerStatus{terminated("app", "OOMKilled", 137)},
			Failure{Container: "app", Reason: "OOMKilled", Exited: true, ExitCode: 137}, "container app exited with code 137"},
		{"an init container first", []corev1.ContainerStatus{terminated("migrate", "Error", 1)}, []corev1.ContainerStatus{waiting("app", "PodInitializing", "")},
			Failure{Container: "migrate", Reason: "Error", Exited: true, ExitCode: 1}, "container migrate exited with code 1"},
		{"starting", nil, []corev1.ContainerStatus{waiting("app", "ContainerCreating", "")}, Failure{}, ""},
		{"done", []corev1.ContainerStatus{terminated("migrate", "Completed", 0)},
			[]corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}, Failure{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: tc.init, ContainerStatuses: tc.app}}
			got, ok := ContainerFailure(p)
			if ok != (tc.want != Failure{}) || got != tc.want {
				t.Errorf("ContainerFailure: %+v, %t; want %+v", got, ok, tc.want)
			}
			if got.Exit() != tc.exit {
				t.Errorf("Exit: %q, want %q", got.Exit(), tc.exit)
			}
		})
	}
}
