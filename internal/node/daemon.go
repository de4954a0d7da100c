package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// daemon is one of the node's programs, run in the node's network and mount namespaces in a session of its own,
// its output in DIR/logs/NAME.log.
type daemon struct {
	name, log, bin string
	args           []string
	// restart: the program is started again a second after it exits on its own, as the kubelet restarts the pod
	// of kube-proxy's DaemonSet on a real node. kube-proxy 1.36 can crash as it starts: its node handler may run
	// before it is registered (a nil handler called, k8s.io/kubernetes/pkg/proxy/config), and a node whose
	// kube-proxy stays down routes no Service.
	restart bool
	// exited is closed once the program has ended for good: stopped, or ended on its own when it does not restart.
	exited chan struct{}

	mu      sync.Mutex
	cmd     *exec.Cmd // the program's current run
	stopped bool
	// relaunch is why the program could not be started again, if it could not.
	relaunch error
}

// startDaemon runs bin with args inside the node's namespaces. nsenter execs the program itself, so the process
// it starts is the daemon. A program started again (Restart) writes on at the end of its log.
func (c *Cluster) startDaemon(name, bin string, args ...string) error {
	d := &daemon{name: name, log: filepath.Join(c.Dir, "logs", name+".log"), bin: bin, args: args,
		restart: name == kubeProxy, exited: make(chan struct{})}
	cmd, logFile, err := c.launch(d)
	if err != nil {
		return err
	}
	d.cmd = cmd
	go c.supervise(d, logFile)
	c.daemons = append(c.daemons, d)
	return nil
}

// launch starts one run of d's program, its output appended to its log.
func (c *Cluster) launch(d *daemon) (*exec.Cmd, *os.File, error) {
	logFile, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	nsenter := append([]string{"--net=" + NetNSPath, "--mount=" + c.mntFile, "--wd=" + c.Dir, "--", d.bin}, d.args...)
	cmd := exec.Command("nsenter", nsenter...)
	// The runc shim containerd starts is the one built beside it, not one the machine may have.
	cmd.Env = append(os.Environ(), "PATH="+c.nodeAssets+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", d.name, err)
	}
	return cmd, logFile, nil
}

// supervise waits for d's program to end and, for a program that restarts and was not stopped, starts it again
// a second later, saying so in its log; it closes d.exited once the program has ended for good.
func (c *Cluster) supervise(d *daemon, logFile *os.File) {
	defer close(d.exited)
	for cmd := d.cmd; ; {
		_ = cmd.Wait()
		if !d.restart {
			_ = logFile.Close()
			return
		}
		_, _ = fmt.Fprintf(logFile, "node: %s ended (%s)\n", d.name, cmd.ProcessState)
		_ = logFile.Close()
		time.Sleep(time.Second)
		d.mu.Lock()
		if d.stopped {
			d.mu.Unlock()
			return
		}
		next, nextLog, err := c.launch(d)
		if err != nil {
			d.relaunch = err
			d.mu.Unlock()
			return
		}
		d.cmd, cmd, logFile = next, next, nextLog
		d.mu.Unlock()
	}
}

// stop sends SIGTERM and waits up to grace before SIGKILL; a program that restarts is not started again.
func (d *daemon) stop(grace time.Duration) {
	d.mu.Lock()
	d.stopped = true
	cmd := d.cmd
	d.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-d.exited
	}
}

// running reports an error naming the daemon and its last lines if it has exited.
func (d *daemon) running() error {
	select {
	case <-d.exited:
		d.mu.Lock()
		state, relaunch := d.cmd.ProcessState, d.relaunch
		d.mu.Unlock()
		if relaunch != nil {
			return fmt.Errorf("%s exited (%s) and could not be started again: %w; last lines:\n%s", d.name, state, relaunch, tail(d.log, 20))
		}
		return fmt.Errorf("%s exited (%s); last lines:\n%s", d.name, state, tail(d.log, 20))
	default:
		return nil
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(bytes.TrimSpace(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
