package controlplane

import (
	"strings"
	"testing"
	"time"
)

// TestTailSaysHowTheProcessEnded: a process killed from outside prints nothing of its end; Tail says it.
func TestTailSaysHowTheProcessEnded(t *testing.T) {
	p, err := StartProcess("", nil, "/bin/sh", "-c", "echo starting manager; kill -KILL $$")
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if got, want := p.Tail(5), "starting manager\n(ended: signal: killed)"; got != want {
		t.Errorf("Tail %q, want %q", got, want)
	}
	running, err := StartProcess("", nil, "/bin/sh", "-c", "echo running; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	defer running.Kill()
	for !strings.Contains(running.Tail(5), "running") {
		select {
		case <-running.Exited():
			t.Fatalf("ended: %s", running.Tail(5))
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := running.Tail(5); got != "running" {
		t.Errorf("Tail of a running process %q, want %q", got, "running")
	}
}
