package node

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStartRemovesKilledNodesDirectories: a directory a killed node left behind, with a mount in it as its mount
// namespace's file is, is unmounted and removed before a new node starts.
func TestStartRemovesKilledNodesDirectories(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root (CAP_SYS_ADMIN)")
	}
	// Held as Start holds it: no node of another test binary runs meanwhile, whose directory this would remove.
	lock, err := lockMachine()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Close() }()
	dir, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmountAll(dir); _ = os.RemoveAll(dir) })
	ns := filepath.Join(dir, "ns")
	if err := os.Mkdir(ns, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := run("mount", "-t", "tmpfs", "tmpfs", ns); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ns, "mnt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	if err := removeNodeDirs(); err != nil {
		t.Fatal(err)
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) > 0 {
		t.Errorf("mounts left under %s: %v %v", dir, mounts, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dir, err)
	}
}
