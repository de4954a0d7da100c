// Package node runs a real single-node Kubernetes cluster on this machine, with no container engine: the control
// plane of internal/controlplane's assets (etcd, kube-apiserver, kube-controller-manager) plus kube-scheduler,
// containerd with runc and the CNI bridge plugin, the kubelet and kube-proxy, so that pods really start: images
// run as containers, probes are called, security contexts are enforced, Services answer through kube-proxy.
//
// Everything runs in a network namespace the package creates, joined to the host by one veth pair (HostIP on the
// host, NodeIP on the node) with no default route and no NAT: every address in use is loopback or one of those
// the package made, and nothing routes off the machine. A private mount namespace keeps the paths containerd and
// the kubelet hard-code off the host. Images are built here (Image) and imported, never pulled. There is no
// cluster DNS: pods' resolv.conf names only their loopback, so in-cluster clients address Services by ClusterIP.
//
// The tests of pods run the same on an existing kind cluster (Kind): API holds what they ask of either cluster,
// and only how images reach the kubelets (kind load image-archive) and the registry's address differ.
//
// Start needs root. Stop leaves nothing behind: no process, mount, cgroup, network namespace or interface
// (Leftovers lists what would be left).
package node
