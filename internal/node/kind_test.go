package node

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// TestKindLoadCommand checks the command line that loads an archive into a kind cluster: the kind pinned in
// hack/tools/kind, run from the repository's root, loading into every node of the named cluster.
func TestKindLoadCommand(t *testing.T) {
	for _, tc := range []struct {
		cluster, archive string
		want             []string
	}{
		{"fluxdeployer-e2e", "/tmp/x/images/workload.tar", []string{"go", "tool", "-modfile=hack/tools/kind/go.mod", "kind",
			"load", "image-archive", "/tmp/x/images/workload.tar", "--name", "fluxdeployer-e2e"}},
		{"other", "/tmp/op.tar", []string{"go", "tool", "-modfile=hack/tools/kind/go.mod", "kind",
			"load", "image-archive", "/tmp/op.tar", "--name", "other"}},
	} {
		k := &Kind{Name: tc.cluster, command: kindCommand}
		cmd := k.loadCommand(context.Background(), tc.archive)
		if !slices.Equal(cmd.Args, tc.want) || filepath.Base(cmd.Path) != "go" || cmd.Dir != controlplane.RepoRoot() {
			t.Errorf("load command %q in %s, want %q in %s", cmd.Args, cmd.Dir, tc.want, controlplane.RepoRoot())
		}
	}
	// Without its name or the address its pods reach this machine at, a kind cluster is refused before anything
	// is built.
	for _, c := range [][2]string{{"", "172.18.0.1"}, {"fluxdeployer-e2e", ""}} {
		if k, err := ConnectKind(context.Background(), c[0], c[1], API{}); err == nil {
			t.Errorf("ConnectKind(%q, %q): %+v, want an error", c[0], c[1], k)
		}
	}
	if !slices.Equal(kindCommand, []string{"go", "tool", "-modfile=hack/tools/kind/go.mod", "kind"}) {
		t.Errorf("the kind command changed: %q", kindCommand)
	}
}

// TestKindLoadsTheWorkloadImage prepares a kind cluster with kind replaced by a script that records what it was
// given: the workload image is built as for the node and handed to `kind load image-archive` as an OCI archive
// naming WorkloadImage; Stop removes it. No cluster or container engine is needed.
func TestKindLoadsTheWorkloadImage(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	fake := filepath.Join(dir, "kind")
	// $1 $2 are "load image-archive", $3 the archive: what it holds is recorded while it exists.
	script := "#!/bin/sh\necho \"$@\" >>" + record + "\ntar -xOf \"$3\" index.json >>" + record + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	k := &Kind{Name: "e2e", RegistryHost: "172.18.0.1", dir: t.TempDir(), command: []string{fake}}
	if err := k.loadWorkloadImage(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	archive := filepath.Join(k.dir, "images", "fluxdeployer.local_workload_1.tar")
	if !strings.HasPrefix(got, "load image-archive "+archive+" --name e2e\n") || !strings.Contains(got, `"io.containerd.image.name":"`+WorkloadImage+`"`) {
		t.Errorf("kind was run with:\n%s\nwant load image-archive %s --name e2e, of an archive naming %s", got, archive, WorkloadImage)
	}
	if _, err := os.Stat(archive); !os.IsNotExist(err) {
		t.Errorf("the archive %s is still there after loading (%v)", archive, err)
	}
	if listen, host := k.RegistryAddrs(); listen != "0.0.0.0" || host != "172.18.0.1" {
		t.Errorf("RegistryAddrs: %s, %s", listen, host)
	}
	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(k.dir); !os.IsNotExist(err) {
		t.Errorf("Stop left %s (%v)", k.dir, err)
	}
}
