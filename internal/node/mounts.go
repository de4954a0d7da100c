package node

import (
	"bufio"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hostPaths are the host directories containerd, the kubelet and the CNI plugins write to whatever they are told
// (/var/log/containers, /var/lib/kubelet/device-plugins, /var/lib/cni, /run/containerd/...): in the node's
// private mount namespace each is a bind mount of a folder under the cluster's directory.
var hostPaths = map[string]string{"/var/log": "var-log", "/var/lib": "var-lib", "/run/containerd": "run-containerd"}

// setupMountNamespace creates a persistent private mount namespace for the node's processes, held by the file
// mntFile on a private bind mount of its folder, with hostPaths bound to folders under dir/host. The mounts the
// node makes there — containers' root filesystems, shm, volumes — never appear on the host, and vanish with the
// namespace once its last process has gone and the file is unmounted.
func setupMountNamespace(dir string) (mntFile string, err error) {
	nsDir := filepath.Join(dir, "ns")
	mntFile = filepath.Join(nsDir, "mnt")
	if err := os.MkdirAll(nsDir, 0o700); err != nil {
		return "", err
	}
	var binds []string
	for _, target := range slices.Sorted(maps.Keys(hostPaths)) {
		source := filepath.Join(dir, "host", hostPaths[target])
		if err := os.MkdirAll(source, 0o750); err != nil {
			return "", err
		}
		if err := os.MkdirAll(target, 0o750); err != nil {
			return "", err
		}
		binds = append(binds, "mount --bind "+source+" "+target)
	}
	if err := run("mount", "--bind", nsDir, nsDir); err != nil {
		return "", err
	}
	if err := run("mount", "--make-private", nsDir); err != nil {
		return "", err
	}
	if err := os.WriteFile(mntFile, nil, 0o600); err != nil {
		return "", err
	}
	return mntFile, run("unshare", "--mount="+mntFile, "--propagation", "slave", "sh", "-ec", strings.Join(binds, "\n"))
}

// unmountAll unmounts every mount point at or under dir on the host, deepest first: the mount namespace's file and
// its folder, and anything the node's processes left behind.
func unmountAll(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range slices.Backward(mounts) {
		if err := run("umount", m); err != nil {
			if lazy := run("umount", "-l", m); lazy != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the host's mount points at or under dir, sorted (parents before children).
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	slices.Sort(mounts)
	return mounts, s.Err()
}
