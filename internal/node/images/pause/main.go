// Command pause is the pod sandbox's process in the node tests' images: it holds the pod's namespaces, reaps the
// zombies of the processes that share its PID namespace, and exits on SIGTERM or SIGINT.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

func reap() {
	for {
		var status syscall.WaitStatus
		if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			return
		}
	}
}
