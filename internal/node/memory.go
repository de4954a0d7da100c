package node

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// peakMemory describes the node's peak memory, read just before it stops: each of its own programs and
// containerd's shims (the processes in its network namespace outside the pods' cgroups) by its peak resident set
// (VmHWM), summed per program name, and the pods by their cgroup's peak usage. The programs' peaks need not
// coincide, so the total bounds the cluster's peak from above; on cgroup v1 the pods' figure includes page cache.
func peakMemory() string {
	inPods := podProcesses()
	perProgram := map[string]int64{}
	for _, pid := range netnsProcesses() {
		if slices.Contains(inPods, pid) {
			continue
		}
		if name, kib, ok := peakRSS(pid); ok {
			perProgram[name] += kib << 10
		}
	}
	names := make([]string, 0, len(perProgram))
	total := int64(0)
	for name, b := range perProgram {
		names = append(names, name)
		total += b
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(perProgram[b], perProgram[a]) })
	parts := make([]string, 0, len(names)+1)
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %s", name, mib(perProgram[name])))
	}
	if pods, ok := podsPeak(); ok {
		total += pods
		parts = append(parts, "pods "+mib(pods))
	}
	return fmt.Sprintf("peak memory at most %s (%s)", mib(total), strings.Join(parts, ", "))
}

// peakRSS reads a process's program name (its command's base name: /proc's Name is cut at 15 characters) and
// its peak resident set in KiB from /proc/PID/status.
func peakRSS(pid int) (name string, kib int64, ok bool) {
	proc := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return "", 0, false
	}
	argv0, _, _ := strings.Cut(string(cmdline), "\x00")
	status, err := os.ReadFile(proc + "/status")
	if err != nil || argv0 == "" {
		return "", 0, false
	}
	for line := range strings.Lines(string(status)) {
		if value, found := strings.CutPrefix(line, "VmHWM:"); found {
			kib, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			return filepath.Base(argv0), kib, err == nil
		}
	}
	return "", 0, false
}

// podsPeak reads the peak memory usage of the pods' top cgroup: memory.peak on cgroup v2,
// memory.max_usage_in_bytes in v1's memory hierarchy.
func podsPeak() (int64, bool) {
	for _, file := range []string{
		filepath.Join("/sys/fs/cgroup", cgroupTop, "memory.peak"),
		filepath.Join("/sys/fs/cgroup/memory", cgroupTop, "memory.max_usage_in_bytes"),
	} {
		if b, err := os.ReadFile(file); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }
