package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Process is a program run against the API server, with its output kept for failure reports.
type Process struct {
	Name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Tail returns the last n lines the process printed and, once it has ended, how it ended ("exit status 1",
// "signal: killed"): a process killed from outside prints nothing of its end, and its last line would read as if it
// still ran.
func (p *Process) Tail(n int) string {
	p.mu.Lock()
	lines := strings.Split(strings.TrimSpace(p.out.String()), "\n")
	p.mu.Unlock()
	tail := strings.Join(lines[max(0, len(lines)-n):], "\n")
	select {
	case <-p.exited:
		return tail + "\n(ended: " + p.cmd.ProcessState.String() + ")"
	default:
		return tail
	}
}

// Lines returns the lines the process printed that contain substr.
func (p *Process) Lines(substr string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for line := range strings.Lines(p.out.String()) {
		if strings.Contains(line, substr) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// StartProcess runs a program with KUBECONFIG pointing at kubeconfig and extra environment variables.
func StartProcess(kubeconfig string, env []string, path string, args ...string) (*Process, error) {
	p := &Process{Name: filepath.Base(path), exited: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Kill ends the process with SIGKILL, as the OOM killer or a node failure would: no cleanup, no lease released.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop interrupts the process as a kubelet would terminate it, and kills it after 10 seconds.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// PID is the process's id, e.g. to read its /proc/PID/status.
func (p *Process) PID() int { return p.cmd.Process.Pid }
