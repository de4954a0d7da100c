package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// cgroupTop is the cgroup the kubelet puts pods under (cgroupfs driver), in every hierarchy.
const cgroupTop = "kubepods"

// killContainers kills every process in the pods' cgroups (containers and their sandboxes) and waits for them to
// be gone; containerd's shims then have nothing left to wait for.
func killContainers() error {
	return killAndWait(podProcesses())
}

// removeLeftovers ends whatever process is left in the node's network namespace or the pods' cgroups (shims that
// outlived containerd, a previous run's programs), removes the pods' cgroups and the node's network, and unmounts
// and removes the nodes' directories (removeNodeDirs). Only with the machine's lock held (lockMachine).
func removeLeftovers() error {
	return errors.Join(killAndWait(append(podProcesses(), netnsProcesses()...)), removeCgroups(), teardownNetwork(), removeNodeDirs())
}

// dirPattern names a node's directory in the temporary directory (os.MkdirTemp's pattern).
const dirPattern = "fluxdeployer-node-"

// removeNodeDirs unmounts and removes every node's directory: the stopping node's own, and those a killed test
// binary left behind, whose mounts (the mount namespace's file, the kubelet's volumes) would otherwise stay on the
// host and make a later mount namespace made under them fail. Only with the machine's lock (lockMachine) held:
// then no other node runs, so every such directory is this node's or a leftover.
func removeNodeDirs() error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		if err := unmountAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

// Leftovers lists what of a node with directory dir is still on the machine: processes, mounts, cgroups, the
// network namespace, the host's veth, dir itself. Empty after Stop.
func Leftovers(dir string) []string {
	var left []string
	for _, pid := range append(podProcesses(), netnsProcesses()...) {
		left = append(left, "process "+describe(pid))
	}
	for _, pid := range processesMentioning(dir) {
		left = append(left, "process "+describe(pid))
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		left = append(left, err.Error())
	}
	for _, m := range mounts {
		left = append(left, "mount "+m)
	}
	for _, cg := range cgroups() {
		left = append(left, "cgroup "+cg)
	}
	for _, path := range []string{NetNSPath, "/sys/class/net/" + hostVeth, dir} {
		if _, err := os.Lstat(path); err == nil {
			left = append(left, path)
		}
	}
	return left
}

// podProcesses are the processes in the pods' cgroups.
func podProcesses() []int {
	var pids []int
	for _, cg := range cgroups() {
		b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// netnsProcesses are the processes in the node's network namespace: its programs and containerd's shims.
func netnsProcesses() []int {
	ns, err := os.Stat(NetNSPath)
	if err != nil {
		return nil
	}
	return processes(func(pid string) bool {
		fi, err := os.Stat("/proc/" + pid + "/ns/net")
		return err == nil && os.SameFile(fi, ns)
	})
}

// processesMentioning are the processes whose command line contains s.
func processesMentioning(s string) []int {
	return processes(func(pid string) bool {
		b, err := os.ReadFile("/proc/" + pid + "/cmdline")
		return err == nil && strings.Contains(string(b), s)
	})
}

// processes lists the live (not zombie) processes, other than this one, for which match holds.
func processes(match func(pid string) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) || !match(e.Name()) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// alive reports whether the process exists and is not a zombie waiting to be reaped.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func describe(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return fmt.Sprintf("%d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")))
}

// killAndWait sends SIGKILL to each process and waits (at most 30 s) until none is alive.
func killAndWait(pids []int) error {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pids = slices.DeleteFunc(pids, func(pid int) bool { return !alive(pid) })
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still alive 30 s after SIGKILL: %v", pids)
		}
	}
}

// cgroups lists the pods' cgroup directories in every hierarchy, children before parents.
func cgroups() []string {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupTop)
	if _, err := os.Stat("/sys/fs/cgroup/" + cgroupTop); err == nil { // cgroup v2
		hierarchies = append(hierarchies, "/sys/fs/cgroup/"+cgroupTop)
	}
	var dirs []string
	for _, top := range hierarchies {
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	slices.Reverse(dirs)
	return dirs
}

// removeCgroups removes the pods' cgroups, retrying (at most 10 s) while the kernel still counts an exiting
// process in one.
func removeCgroups() error {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var failed []error
		for _, dir := range cgroups() {
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				failed = append(failed, fmt.Errorf("rmdir %s: %w", dir, err))
			}
		}
		if len(failed) == 0 || time.Now().After(deadline) {
			return errors.Join(failed...)
		}
	}
}

// ContainerPID returns the host PID of a running container of the pod, found through its cgroup.
func ContainerPID(pod *corev1.Pod, container string) (int, error) {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name != container {
			continue
		}
		id := strings.TrimPrefix(s.ContainerID, "containerd://")
		for _, cg := range cgroups() {
			if filepath.Base(cg) != id || !strings.Contains(cg, "pod"+string(pod.UID)) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			if err != nil {
				return 0, err
			}
			if f := strings.Fields(string(b)); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
		return 0, fmt.Errorf("no process in the cgroup of container %s (%s) of pod %s", container, id, pod.Name)
	}
	return 0, fmt.Errorf("pod %s has no container %s in its status", pod.Name, container)
}

// ContainerEnv returns the environment of a running container of the pod, as its process sees it: what the
// kubelet resolved from the pod's spec (a resourceFieldRef's value, for one) when it started the container.
func ContainerEnv(pod *corev1.Pod, container string) (map[string]string, error) {
	pid, err := ContainerPID(pod, container)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for kv := range strings.SplitSeq(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}
