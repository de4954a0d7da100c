package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestNetnsDialerDialsFromTheNamespace listens on the host's loopback and dials it from the host's own namespace,
// which answers, and from a new namespace whose loopback nothing listens on, which refuses: the socket is created
// where the dialer's thread joined, not where the caller runs. A name is refused before any dial.
func TestNetnsDialerDialsFromTheNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("joining a network namespace needs root (CAP_SYS_ADMIN)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()

	// A namespace of the test's own, named after its process so that runs do not collide; lo up, nothing else.
	ns := fmt.Sprintf("fluxdeployer-dialtest-%d", os.Getpid())
	if err := run("ip", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := run("ip", "netns", "del", ns); err != nil {
			t.Error(err)
		}
	})
	if err := run("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		path    string
		refused bool
	}{{"/proc/self/ns/net", false}, {"/run/netns/" + ns, true}} {
		d, err := NewNetnsDialer(c.path, 2)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := d.DialContext(ctx, "tcp", l.Addr().String())
		switch {
		case c.refused && !errors.Is(err, syscall.ECONNREFUSED):
			t.Errorf("dialing %s from %s: %v, want connection refused (nothing listens on that namespace's loopback)", l.Addr(), c.path, err)
		case !c.refused && err != nil:
			t.Errorf("dialing %s from %s: %v", l.Addr(), c.path, err)
		}
		if conn != nil {
			_ = conn.Close()
		}
		if _, err := d.DialContext(ctx, "tcp", "localhost:80"); err == nil {
			t.Errorf("dialing a name from %s succeeded, want it refused", c.path)
		}
		d.Close()
	}
	if _, err := NewNetnsDialer("/run/netns/fluxdeployer-no-such-namespace", 1); err == nil {
		t.Error("a dialer of a namespace that does not exist was made")
	}
}
