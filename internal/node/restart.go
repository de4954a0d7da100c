package node

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"
)

// Restart restarts the named programs of the node, as an administrator's restart or a crash its supervisor
// recovers from would: StopPrograms in the order given, StartPrograms in the reverse order, then WaitReady.
func (c *Cluster) Restart(ctx context.Context, names ...string) error {
	if err := c.StopPrograms(names...); err != nil {
		return err
	}
	// A restarted kubelet must report the Node Ready anew; otherwise its last report stands (it reports only
	// changes, and every five minutes).
	var since time.Time
	if slices.Contains(names, kubelet) {
		since = time.Now()
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	if err := c.StartPrograms(ctx, reversed...); err != nil {
		return err
	}
	return c.WaitReady(ctx, since)
}

// StopPrograms stops the named programs of the node in the order given (SIGTERM, SIGKILL after a grace period).
// What they keep on disk survives, as on a real node: etcd's data, containerd's images and its record of the
// containers, whose processes and shims keep running without it, the kubelet's state.
func (c *Cluster) StopPrograms(names ...string) error {
	for _, name := range names {
		d := c.daemon(name)
		if d == nil {
			return fmt.Errorf("the node runs no %s", name)
		}
		d.stop(20 * time.Second)
		c.daemons = slices.DeleteFunc(c.daemons, func(x *daemon) bool { return x == d })
		c.stoppedDaemons = append(c.stoppedDaemons, d)
	}
	return nil
}

// StartPrograms starts, in the order given, programs StopPrograms stopped, with the arguments they had; containerd
// is waited for, as the kubelet started after it needs its socket.
func (c *Cluster) StartPrograms(ctx context.Context, names ...string) error {
	for _, name := range names {
		i := slices.IndexFunc(c.stoppedDaemons, func(d *daemon) bool { return d.name == name })
		if i < 0 {
			return fmt.Errorf("%s was not stopped", name)
		}
		d := c.stoppedDaemons[i]
		c.stoppedDaemons = slices.Delete(c.stoppedDaemons, i, i+1)
		if err := c.startDaemon(d.name, d.bin, d.args...); err != nil {
			return err
		}
		if d.name == containerd {
			if err := c.waitContainerd(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// WaitReady waits until the API server is ready and the kubelet has reported the Node Ready, since the time given
// unless it is zero.
func (c *Cluster) WaitReady(ctx context.Context, since time.Time) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.waitAPIServerReady(ctx, cs); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, cs, since)
}

// CompactEtcd compacts etcd's history up to its current revision, as kube-apiserver does every five minutes, and
// returns that revision: a watch resumed from an older resource version is then answered "too old resource
// version" (410 Gone) by the API server, and its client must list again. etcd listens on the loopback of the
// node's network namespace only, so the client dials from there.
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	dialer, err := c.NetnsDialer()
	if err != nil {
		return 0, err
	}
	defer dialer.Close()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		})},
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	// Any read answers with the store's current revision in its header.
	resp, err := cli.Get(ctx, "/registry/namespaces/default", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("reading etcd's revision: %w", err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compacting etcd to revision %d: %w", resp.Header.Revision, err)
	}
	return resp.Header.Revision, nil
}

// Reboot models a reboot of the node's machine: every program of the node stops (the kubelet first, so that it
// restarts no container, the control plane last), every container, sandbox and containerd shim is killed, as a
// reboot leaves no process behind, and the programs start again in the order Start starts them; it returns once the
// API server is ready and a new kubelet has reported the Node Ready. What the node keeps on disk survives, as a
// reboot's disk does: etcd's data, containerd's images and its record of the containers, the kubelet's state. The
// kubelet then finds every pod's sandbox and containers exited and must create them again. Not modelled: what a
// reboot's empty /run and fresh mount and network namespaces would clear (containerd's state directory and the
// mounts in the node's mount namespace stay for containerd to clean up, as after a crash).
func (c *Cluster) Reboot(ctx context.Context) error {
	// Stop's order; a program the harness runs beyond these stops last.
	order := []string{kubelet, kubeProxy, kubeScheduler, kubeControllerManager, containerd, kubeAPIServer, etcd}
	for _, d := range c.daemons {
		if !slices.Contains(order, d.name) {
			order = append(order, d.name)
		}
	}
	if err := c.StopPrograms(order...); err != nil {
		return err
	}
	// The node's programs are gone: what is left in its network namespace and the pods' cgroups are the
	// containers, their sandboxes and the shims that hold them.
	if err := killAndWait(append(podProcesses(), netnsProcesses()...)); err != nil {
		return err
	}
	since := time.Now()
	// Start's order: containerd before the kubelet, which exits without its socket; the controllers once the API
	// server is ready, as they exit when RBAC is not bootstrapped, with any other program of the harness.
	if err := c.StartPrograms(ctx, containerd, etcd, kubeAPIServer, kubeProxy, kubelet); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.waitAPIServerReady(ctx, cs); err != nil {
		return err
	}
	var rest []string
	for _, d := range c.stoppedDaemons {
		rest = append(rest, d.name)
	}
	if err := c.StartPrograms(ctx, rest...); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, cs, since)
}
