package node

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// The node's network, entirely on this machine: a network namespace joined to the host by one veth pair and
// nothing else — no default route, no NAT, the host's iptables and forwarding untouched. The control plane, the
// kubelet, containerd, kube-proxy and the pods all live in the namespace; the tests reach the API server at
// NodeIP through the veth, and pods reach HostIP (where a test's registry listens) the same way.
const (
	NetNS = "fluxdeployer-node"
	// HostIP is the host's end of the veth; NodeIP the node's, where the API server listens and the kubelet runs.
	HostIP   = "10.250.0.1"
	NodeIP   = "10.250.0.2"
	VethCIDR = "10.250.0.0/30"
	// PodCIDR is the pods' subnet on the bridge cni0 (gateway BridgeIP); ServiceCIDR the ClusterIPs' range.
	PodCIDR     = "10.244.0.0/24"
	BridgeIP    = "10.244.0.1"
	ServiceCIDR = "10.96.0.0/12"
	// APIServiceIP is the kubernetes Service's ClusterIP (the first of ServiceCIDR), through which pods reach the
	// API server.
	APIServiceIP = "10.96.0.1"
	// The veth's two ends (interface names are at most 15 bytes).
	hostVeth = "fdnode-host"
	nodeVeth = "fdnode-node"
	bridge   = "cni0"
)

// NetNSPath is the network namespace's file, for nsenter.
const NetNSPath = "/run/netns/" + NetNS

// setupNetwork creates the namespace and its veth, and the pods' bridge inside it. The bridge is made before the
// CNI plugin (which reuses it) so that the service range has a route: a connection from the namespace to a
// ClusterIP needs one before kube-proxy's DNAT rewrites it; the host gets a route to the pods through its end
// of the veth, so that pods reach HostIP and its answers come back. Only the namespace forwards packets.
func setupNetwork() error {
	host := []string{
		"netns add " + NetNS,
		"link add " + hostVeth + " type veth peer name " + nodeVeth,
		"link set " + nodeVeth + " netns " + NetNS,
		"addr add " + HostIP + "/30 dev " + hostVeth,
		"link set " + hostVeth + " up",
	}
	node := []string{
		"link set lo up",
		"addr add " + NodeIP + "/30 dev " + nodeVeth,
		"link set " + nodeVeth + " up",
		"link add " + bridge + " type bridge",
		"addr add " + BridgeIP + "/24 dev " + bridge,
		"link set " + bridge + " up",
		"route add " + ServiceCIDR + " dev " + bridge,
	}
	for _, args := range host {
		if err := run("ip", strings.Fields(args)...); err != nil {
			return err
		}
	}
	for _, args := range node {
		if err := run("ip", append([]string{"-n", NetNS}, strings.Fields(args)...)...); err != nil {
			return err
		}
	}
	if err := run("ip", "route", "add", PodCIDR, "via", NodeIP, "dev", hostVeth); err != nil {
		return err
	}
	return run("ip", "netns", "exec", NetNS, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
}

// teardownNetwork deletes the namespace (its bridge, the pods' veths and kube-proxy's rules go with it) and the
// host's end of the veth (and with it the route to the pods). It is idempotent: what is already gone is no error.
func teardownNetwork() error {
	var errs []string
	if exists("ip", "netns", "list") {
		if err := run("ip", "netns", "del", NetNS); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// Deleting the namespace destroys the veth's other end, and with it this one, a moment later: a deletion that
	// fails because the kernel was quicker is no error.
	if exists("ip", "link", "show", hostVeth) {
		if err := run("ip", "link", "del", hostVeth); err != nil && exists("ip", "link", "show", hostVeth) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the node's network: %s", strings.Join(errs, "; "))
	}
	return nil
}

// exists runs a query and reports whether it succeeded and mentioned the node's namespace or interface.
func exists(program string, args ...string) bool {
	out, err := exec.Command(program, args...).CombinedOutput()
	return err == nil && (bytes.Contains(out, []byte(NetNS)) || bytes.Contains(out, []byte(hostVeth)))
}

// run runs a program and returns its output in the error when it fails.
func run(program string, args ...string) error {
	if out, err := exec.Command(program, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", program, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// RegistryAddrs are where a test's registry listens and the host the pods name it by: both the host's end of the
// veth, the one address of this machine the pods reach.
func (c *Cluster) RegistryAddrs() (listen, host string) { return HostIP, HostIP }
