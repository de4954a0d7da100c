package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// daemon is one of the node's programs, run in the node's network and mount namespaces in a session of its own,
// its output in DIR/logs/NAME.log.
type daemon struct {
	name, log, bin string
	args           []string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// startDaemon runs bin with args inside the node's namespaces. nsenter execs the program itself, so the process
// it starts is the daemon. A program started again (Restart) writes on at the end of its log.
func (c *Cluster) startDaemon(name, bin string, args ...string) error {
	logPath := filepath.Join(c.Dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	nsenter := append([]string{"--net=" + NetNSPath, "--mount=" + c.mntFile, "--wd=" + c.Dir, "--", bin}, args...)
	d := &daemon{name: name, log: logPath, bin: bin, args: args, cmd: exec.Command("nsenter", nsenter...), exited: make(chan struct{})}
	// The runc shim containerd starts is the one built beside it, not one the machine may have.
	d.cmd.Env = append(os.Environ(), "PATH="+c.nodeAssets+":"+os.Getenv("PATH"))
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := d.cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = d.cmd.Wait()
		_ = logFile.Close()
		close(d.exited)
	}()
	c.daemons = append(c.daemons, d)
	return nil
}

// stop sends SIGTERM and waits up to grace before SIGKILL.
func (d *daemon) stop(grace time.Duration) {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// running reports an error naming the daemon and its last lines if it has exited.
func (d *daemon) running() error {
	select {
	case <-d.exited:
		return fmt.Errorf("%s exited (%s); last lines:\n%s", d.name, d.cmd.ProcessState, tail(d.log, 20))
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
