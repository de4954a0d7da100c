package node

import (
	"errors"
	"fmt"
	"net"
)

// partitionChain holds Partition's rules, in the node's network namespace only: removing the chain removes them
// all, and deleting the namespace (Stop, or removeLeftovers after a killed test) removes them too.
const partitionChain = "FLUXDEPLOYER-PARTITION"

// Partition cuts the pod at podIP off the API server, as a network partition between a node and the control plane
// does to the pods on that node: their connections stall (packets are dropped, not refused, so a client learns of
// it only from its timeouts), while everything else goes on — the kubelet still probes the pod, the pod's other
// traffic flows, the rest of the cluster reaches the API server. Pods reach the API server through the kubernetes
// Service, which kube-proxy rewrites to NodeIP:6443 in the node's namespace, where the API server runs: the rules
// drop, in that namespace's INPUT and OUTPUT, the pod's packets to the API server's port and the API server's
// packets to the pod. heal removes them (a second call does nothing); the caller must heal, on cleanup at least.
// The host's own packet filter is never touched.
func (c *Cluster) Partition(podIP string) (heal func() error, err error) {
	if ip := net.ParseIP(podIP); ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("partitioning a pod: %q is not an IPv4 address", podIP)
	}
	healed := false
	heal = func() error {
		if healed {
			return nil
		}
		var errs []error
		for _, hook := range []string{"INPUT", "OUTPUT"} {
			// -C tells whether the jump is there; the rules may be half made if Partition failed.
			if iptables("-C", hook, "-j", partitionChain) == nil {
				errs = append(errs, iptables("-D", hook, "-j", partitionChain))
			}
		}
		if iptables("-L", partitionChain, "-n") == nil {
			errs = append(errs, iptables("-F", partitionChain), iptables("-X", partitionChain))
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("healing the partition of pod %s: %w", podIP, err)
		}
		healed = true
		return nil
	}
	for _, rule := range [][]string{
		{"-N", partitionChain},
		{"-A", partitionChain, "-s", podIP, "-d", NodeIP, "-p", "tcp", "--dport", apiPort, "-j", "DROP"},
		{"-A", partitionChain, "-s", NodeIP, "-d", podIP, "-p", "tcp", "--sport", apiPort, "-j", "DROP"},
		// First in their hooks, before kube-proxy's chains, which might accept the packets.
		{"-I", "INPUT", "1", "-j", partitionChain},
		{"-I", "OUTPUT", "1", "-j", partitionChain},
	} {
		if err := iptables(rule...); err != nil {
			return nil, errors.Join(fmt.Errorf("partitioning pod %s from the API server: %w", podIP, err), heal())
		}
	}
	return heal, nil
}

// iptables runs iptables in the node's network namespace, waiting for the lock kube-proxy also takes there.
func iptables(args ...string) error {
	return run("ip", append([]string{"netns", "exec", NetNS, "/usr/sbin/iptables", "-w", "5"}, args...)...)
}
