package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// NetnsDialer opens TCP connections from inside a network namespace, so that a test on the host reaches what only
// the namespace routes to, such as the node's ClusterIPs through kube-proxy's rules, without a route on the host:
// the packets never leave the namespace, and once it is gone a dial fails instead of going anywhere else. A few
// goroutines, each locked to an OS thread that joined the namespace, create the sockets; a socket stays in the
// namespace it was created in, so the connections serve any goroutine.
type NetnsDialer struct {
	requests chan dialRequest
	wg       sync.WaitGroup
	close    sync.Once
}

type dialRequest struct {
	ctx           context.Context
	network, addr string
	result        chan<- dialResult
}

type dialResult struct {
	conn net.Conn
	err  error
}

// NewNetnsDialer starts threads dialing from the network namespace of the file path (e.g. /run/netns/NAME or
// /proc/PID/ns/net), as many as dials may run at once. It needs CAP_SYS_ADMIN.
func NewNetnsDialer(path string, threads int) (*NetnsDialer, error) {
	d := &NetnsDialer{requests: make(chan dialRequest)}
	errs := make(chan error, threads)
	for range threads {
		d.wg.Add(1)
		go d.serve(path, errs)
	}
	var err error
	for range threads {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// serve joins the namespace on a thread of its own and dials there until Close. The thread is never unlocked: it
// ends with the goroutine, so no other goroutine ever runs in the namespace.
func (d *NetnsDialer) serve(path string, joined chan<- error) {
	defer d.wg.Done()
	runtime.LockOSThread()
	if err := setns(path); err != nil {
		joined <- err
		return
	}
	joined <- nil
	for req := range d.requests {
		// The dial runs on this goroutine, hence this thread: net creates the socket before it waits for the
		// connection, and a literal address is dialed without a resolver or a second goroutine.
		var dialer net.Dialer
		conn, err := dialer.DialContext(req.ctx, req.network, req.addr)
		req.result <- dialResult{conn, err}
	}
}

func setns(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("joining network namespace %s: %w", path, err)
	}
	return nil
}

// DialContext connects to addr, an IP address and port (no name: the namespace may have no resolver), from the
// namespace; it has the signature of http.Transport's DialContext.
func (d *NetnsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("dialing %s from a network namespace: not an IP address", addr)
	}
	result := make(chan dialResult, 1)
	select {
	case d.requests <- dialRequest{ctx, network, addr, result}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r := <-result
	return r.conn, r.err
}

// Close ends the dialing threads; a DialContext after Close panics.
func (d *NetnsDialer) Close() {
	d.close.Do(func() { close(d.requests) })
	d.wg.Wait()
}

// NetnsDialer dials from the node's network namespace, where the pods' addresses and the ClusterIPs are routed:
// a test on the host reaches a Service as a pod does, through kube-proxy.
func (c *Cluster) NetnsDialer() (*NetnsDialer, error) { return NewNetnsDialer(NetNSPath, 8) }
