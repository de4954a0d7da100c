package main

import (
	"strings"
	"testing"
)

// TestUIServesOnlyLoopbackUnlessAllowed: the view reads with the user's credentials, so an address other hosts
// reach is a usage error unless --allow-remote says so (which then warns), before anything else happens.
func TestUIServesOnlyLoopbackUnlessAllowed(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9333", "[::]:9333", "192.0.2.1:9333"} {
		_, stderr, code := runBinary(t, "ui", "--addr", addr, "--kubeconfig", "/nonexistent")
		if code != exitUsage || !strings.Contains(stderr, "not a loopback address") {
			t.Errorf("ui --addr %s: exit %d, %q; want exit %d refusing a non-loopback address", addr, code, stderr, exitUsage)
		}
	}
	_, stderr, code := runBinary(t, "ui", "--addr", "0.0.0.0:0", "--allow-remote", "--kubeconfig", "/nonexistent")
	if code == exitUsage || !strings.Contains(stderr, "warning: serving on 0.0.0.0:0") {
		t.Errorf("ui --allow-remote: exit %d, %q; want the warning and the kubeconfig's error", code, stderr)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		if _, stderr, code := runBinary(t, "ui", "--addr", addr, "--kubeconfig", "/nonexistent"); code == exitUsage {
			t.Errorf("ui --addr %s refused: %s", addr, stderr)
		}
	}
}
