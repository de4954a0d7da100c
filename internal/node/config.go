package node

import (
	"os"
	"path/filepath"
	"strings"
)

// The images every node has: the pod sandbox's (containerd's pinned sandbox image, never pulled) and the tests'
// workload.
const (
	PauseImage    = "fluxdeployer.local/pause:1"
	WorkloadImage = "fluxdeployer.local/workload:1"
)

const apiPort = "6443"

// configs are the files the node's programs read, with DIR standing for the cluster's directory.
var configs = map[string]string{
	// containerd with the CRI plugin, runc from the distribution and the CNI plugins, everything it keeps in DIR.
	"etc/containerd.toml": `version = 3
root = 'DIR/containerd/root'
state = 'DIR/containerd/state'

[grpc]
  address = 'DIR/run/containerd.sock'

[ttrpc]
  address = 'DIR/run/containerd.sock.ttrpc'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '` + PauseImage + `'

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    netns_mounts_under_state_dir = true
    # Root on these machines may lack CAP_SYS_RESOURCE: runc could not lower a sandbox's oom_score_adj below
    # containerd's own, so clamp it there.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '/usr/sbin/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni']
      conf_dir = 'DIR/cni/net.d'

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.nri.v1.nri']
    disable = true
`,
	// The pods' network: the bridge cni0 made beforehand, addresses from PodCIDR, routes only to the services and
	// the veth's two ends; no masquerading.
	"cni/net.d/10-node.conflist": `{
  "cniVersion": "1.0.0",
  "name": "node",
  "plugins": [{
    "type": "bridge",
    "bridge": "` + bridge + `",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "DIR/cni/ipam",
      "ranges": [[{"subnet": "` + PodCIDR + `", "gateway": "` + BridgeIP + `"}]],
      "routes": [{"dst": "` + ServiceCIDR + `"}, {"dst": "` + VethCIDR + `"}]
    }
  }]
}
`,
	"etc/kubelet.yaml": `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machines may be cgroup v1 (hybrid), which 1.35+ refuses unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://DIR/run/containerd.sock
staticPodPath: DIR/manifests
address: ` + NodeIP + `
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
# Pods must not learn the host's resolver: nothing answers on their loopback, so a lookup fails at once.
resolvConf: DIR/etc/resolv.conf
clusterDomain: cluster.local
serializeImagePulls: false
# The imported images are all the node has: never collect them. The disk is the machine's, shared with builds
# whose use comes and goes: no disk signal may make the kubelet reclaim, which removes every ended container
# (and with it the log a test reads) and evicts pods ("0%" turns a signal off).
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: 100Mi
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
# The kubelet's files stay under DIR (defaults: /var/log/pods, /usr/libexec/kubernetes/kubelet-plugins/volume/exec).
podLogsDir: DIR/pod-logs
volumePluginDir: DIR/kubelet-plugins/volume/exec
`,
	"etc/kube-proxy.yaml": `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: DIR/etc/kube-proxy.kubeconfig
hostnameOverride: ` + nodeName + `
clusterCIDR: ` + PodCIDR + `
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables:
  localhostNodePorts: false
# nf_conntrack_max and the conntrack timeouts are the host's (initial network namespace only): leave them alone.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`,
	"etc/resolv.conf": "nameserver 127.0.0.1\n",
	// What the API server records in its audit log (AuditEvents).
	"etc/audit-policy.yaml": auditPolicy,
}

// SetPodNameserver makes the pods created from now on look names up at ip, an address of an interface the test
// made (HostIP) where the test answers for the names it serves, instead of their loopback, where nothing answers.
// The kubelet reads its resolvConf for every new pod.
func (c *Cluster) SetPodNameserver(ip string) error {
	return os.WriteFile(c.path("etc/resolv.conf"), []byte("nameserver "+ip+"\n"), 0o600)
}

// writeConfigs writes configs into dir and makes the folders the programs expect to exist.
func writeConfigs(dir string) error {
	for _, d := range []string{"run", "logs", "manifests", "cni/ipam", "pod-logs", "kubelet-plugins/volume/exec"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			return err
		}
	}
	for name, body := range configs {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(body, "DIR", dir)), 0o600); err != nil {
			return err
		}
	}
	return nil
}
