package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// The node's programs that more than one step names.
const (
	kubelet               = "kubelet"
	kubeProxy             = "kube-proxy"
	kubeAPIServer         = "kube-apiserver"
	kubeControllerManager = "kube-controller-manager"
	kubeScheduler         = "kube-scheduler"
	containerd            = "containerd"
	etcd                  = "etcd"
)

// Cluster is a single-node Kubernetes cluster on this machine: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd with runc, the kubelet and kube-proxy, all in the node's network namespace, with
// images imported rather than pulled.
type Cluster struct {
	// Dir holds the node's configuration, PKI, state and logs (DIR/logs/NAME.log per program).
	Dir string
	// API is the cluster admin's (system:masters), through the veth at NodeIP.
	API
	Scheme *kruntime.Scheme
	// AdminKubeconfig is the path of the admin's kubeconfig, for kubectl and programs run on the host.
	AdminKubeconfig string
	// Started lists how long each step of the start took from its beginning.
	Started []string

	kubeAssets, nodeAssets string
	mntFile                string
	daemons                []*daemon
	// stoppedDaemons are the programs StopPrograms stopped, for StartPrograms.
	stoppedDaemons []*daemon
	// createdRunContainerd: /run/containerd did not exist on the host and was made as a bind target.
	createdRunContainerd bool
	lock                 *os.File
	stopped              bool
	// progress receives the start's steps and, on Stop, the node's peak memory.
	progress io.Writer
}

// Start builds what is missing (first run only, printing progress), creates the node's network and mount
// namespaces and starts the cluster with the pause and workload images and any extra images imported. It returns
// once the Node is Ready and the default ServiceAccount exists. One node runs on a machine at a time: Start
// waits for another to stop. Stop removes everything it made.
func Start(ctx context.Context, progress io.Writer, images ...Image) (_ *Cluster, err error) {
	begin := time.Now()
	c := &Cluster{progress: progress}
	if c.kubeAssets, err = controlplane.KubeAssets(progress); err != nil {
		return nil, fmt.Errorf("building kube-apiserver, etcd and kube-controller-manager: %w", err)
	}
	if c.nodeAssets, err = controlplane.NodeAssets(progress); err != nil {
		return nil, fmt.Errorf("building the kubelet, kube-scheduler, kube-proxy and containerd: %w", err)
	}
	if c.lock, err = lockMachine(); err != nil {
		return nil, err
	}
	// A test binary that was killed leaves its node behind: what it left is removed before anything starts.
	if err := removeLeftovers(); err != nil {
		_ = c.lock.Close()
		return nil, fmt.Errorf("removing a previous node's leftovers: %w", err)
	}
	if c.Dir, err = os.MkdirTemp("", dirPattern); err != nil {
		_ = c.lock.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	images = append([]Image{
		binaryImage(c.path("bin"), PauseImage, "pause", ""),
		workloadImage(c.path("bin")),
	}, images...)
	if err := c.start(ctx, begin, images); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, begin time.Time, images []Image) error {
	step := func(what string) {
		c.Started = append(c.Started, fmt.Sprintf("%s after %s", what, time.Since(begin).Round(10*time.Millisecond)))
	}
	caPEM, err := pki(c.Dir)
	if err != nil {
		return err
	}
	if err := writeConfigs(c.Dir); err != nil {
		return err
	}
	if err := buildImageBinaries(c.path("bin"), "pause", "workload"); err != nil {
		return err
	}
	step("pause and workload programs built")
	if err := setupNetwork(); err != nil {
		return err
	}
	if _, err := os.Stat("/run/containerd"); errors.Is(err, os.ErrNotExist) {
		c.createdRunContainerd = true
	}
	if c.mntFile, err = setupMountNamespace(c.Dir); err != nil {
		return err
	}
	step("network and mount namespaces")

	if err := c.startDaemon(containerd, filepath.Join(c.nodeAssets, containerd), "--config", c.path("etc/containerd.toml")); err != nil {
		return err
	}
	if err := c.waitContainerd(ctx); err != nil {
		return err
	}
	for _, im := range images {
		if err := c.ImportImage(ctx, im); err != nil {
			return err
		}
	}
	step(fmt.Sprintf("containerd up, %d images imported", len(images)))

	if err := c.startControlPlane(); err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig); err != nil {
		return err
	}
	if c.Scheme, err = controlplane.NewScheme(); err != nil {
		return err
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.waitAPIServerReady(ctx, cs); err != nil {
		return err
	}
	step("kube-apiserver ready")
	// kube-controller-manager and kube-scheduler exit when RBAC is not bootstrapped yet, so they start only now.
	if err := c.startControllers(caPEM); err != nil {
		return err
	}
	if err := c.waitNodeReady(ctx, cs, time.Time{}); err != nil {
		return err
	}
	step("Node Ready")
	if err := c.waitFor(ctx, time.Minute, "the default ServiceAccount", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}, kubeControllerManager); err != nil {
		return err
	}
	step("default ServiceAccount")
	return nil
}

// waitContainerd waits until containerd serves its socket, which the kubelet needs when it starts: it exits at
// once without it.
func (c *Cluster) waitContainerd(ctx context.Context) error {
	return c.waitFor(ctx, time.Minute, "containerd's socket", func() error {
		// A connection, not the file: one left by a containerd that was killed accepts none.
		conn, err := net.Dial("unix", c.path("run/containerd.sock"))
		if err != nil {
			return err
		}
		return conn.Close()
	}, containerd)
}

// waitAPIServerReady waits until kube-apiserver's /readyz answers OK.
func (c *Cluster) waitAPIServerReady(ctx context.Context, cs kubernetes.Interface) error {
	return c.waitFor(ctx, time.Minute, "kube-apiserver's /readyz", func() error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	}, etcd, kubeAPIServer)
}

// waitNodeReady waits until the Node is Ready, by a status the kubelet posted after since (any, when zero).
func (c *Cluster) waitNodeReady(ctx context.Context, cs kubernetes.Interface, since time.Time) error {
	return c.waitFor(ctx, 2*time.Minute, "the Node Ready", func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			switch {
			case cond.Type != corev1.NodeReady:
			case cond.Status != corev1.ConditionTrue:
				return fmt.Errorf("node %s Ready=%s %s: %s", nodeName, cond.Status, cond.Reason, cond.Message)
			case cond.LastHeartbeatTime.Time.Before(since.Truncate(time.Second)):
				return fmt.Errorf("node %s Ready as last posted at %s, before %s", nodeName, cond.LastHeartbeatTime, since.Format(time.RFC3339))
			default:
				return nil
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", nodeName)
	}, kubelet, containerd)
}

// startControlPlane starts etcd and kube-apiserver, and kube-proxy and the kubelet, which retry until the API
// server answers. The API server listens in the node's namespace and advertises NodeIP: in-cluster clients reach
// it through the kubernetes Service.
func (c *Cluster) startControlPlane() error {
	c.AdminKubeconfig = c.path("etc/admin.kubeconfig")
	pki := func(name string) string { return c.path("pki/" + name) }
	starts := []struct {
		name, bin string
		args      []string
	}{
		{etcd, filepath.Join(c.kubeAssets, etcd), []string{"--name=node", "--data-dir=" + c.path(etcd),
			"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=node=http://127.0.0.1:2380", "--listen-metrics-urls=", "--unsafe-no-fsync"}},
		{kubeAPIServer, filepath.Join(c.kubeAssets, kubeAPIServer), []string{
			"--etcd-servers=http://127.0.0.1:2379", "--bind-address=0.0.0.0", "--secure-port=" + apiPort,
			"--advertise-address=" + NodeIP, "--tls-cert-file=" + pki("apiserver.crt"),
			"--tls-private-key-file=" + pki("apiserver.key"), "--client-ca-file=" + pki("ca.crt"),
			"--token-auth-file=" + pki("tokens.csv"), "--authorization-mode=Node,RBAC",
			// As internal/controlplane's API server: an owner reference with blockOwnerDeletion needs update
			// rights on the owner's finalizers, as on production clusters.
			"--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pki("sa.pub"), "--service-account-signing-key-file=" + pki("sa.key"),
			"--service-cluster-ip-range=" + ServiceCIDR, "--allow-privileged=true",
			"--kubelet-preferred-address-types=InternalIP", "--cert-dir=" + c.path("apiserver-certs"),
			"--audit-policy-file=" + c.path("etc/audit-policy.yaml"), "--audit-log-path=" + c.auditLog()}},
		{kubeProxy, filepath.Join(c.nodeAssets, kubeProxy), []string{"--config=" + c.path("etc/kube-proxy.yaml")}},
		{kubelet, filepath.Join(c.nodeAssets, kubelet), []string{"--config=" + c.path("etc/kubelet.yaml"),
			"--kubeconfig=" + c.path("etc/kubelet.kubeconfig"), "--root-dir=" + c.path("kubelet"),
			"--cert-dir=" + c.path("kubelet/pki"), "--node-ip=" + NodeIP, "--hostname-override=" + nodeName}},
	}
	for _, s := range starts {
		if err := c.startDaemon(s.name, s.bin, s.args...); err != nil {
			return err
		}
	}
	return nil
}

// startControllers starts kube-controller-manager (all its default controllers, each with its own
// ServiceAccount's rights) and kube-scheduler.
func (c *Cluster) startControllers(caPEM []byte) error {
	if err := os.WriteFile(c.path("pki/root-ca.crt"), caPEM, 0o600); err != nil {
		return err
	}
	kcm := c.path("etc/kube-controller-manager.kubeconfig")
	if err := c.startDaemon(kubeControllerManager, filepath.Join(c.kubeAssets, kubeControllerManager),
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.path("pki/sa.key"), "--root-ca-file="+c.path("pki/root-ca.crt"),
		"--cluster-cidr="+PodCIDR, "--service-cluster-ip-range="+ServiceCIDR,
		"--flex-volume-plugin-dir="+c.path("kubelet-plugins/volume/exec")); err != nil {
		return err
	}
	sched := c.path("etc/kube-scheduler.kubeconfig")
	return c.startDaemon(kubeScheduler, filepath.Join(c.nodeAssets, kubeScheduler),
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", "--leader-elect=false")
}

// waitFor polls check every 200 ms until it succeeds, the timeout passes or one of the named daemons exits; the
// error names what was awaited, the last check's error and the daemons' last log lines.
func (c *Cluster) waitFor(ctx context.Context, timeout time.Duration, what string, check func() error, daemons ...string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, d := range c.daemons {
			if err := d.running(); err != nil {
				return false, err
			}
		}
		last = check()
		return last == nil, nil
	})
	if err == nil {
		return nil
	}
	if last != nil && !strings.Contains(err.Error(), "exited") {
		err = fmt.Errorf("%w; last: %w", err, last)
	}
	return fmt.Errorf("waiting %s for %s: %w%s", timeout, what, err, c.Logs(daemons...))
}

// Logs returns the last 30 lines of each named program's log, for failure messages.
func (c *Cluster) Logs(names ...string) string {
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "\n--- last lines of %s (%s):\n%s", name, c.path("logs/"+name+".log"), tail(c.path("logs/"+name+".log"), 30))
	}
	return b.String()
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

// Stop ends every process of the node and removes what it made: the kubelet first (it would restart
// containers), then the other clients of the API server, the containers and their shims, containerd and the
// control plane; then the mounts, the kubelet's cgroups, the network namespace and its veth, and Dir. What is
// already gone is no error, so Stop also cleans up after a Start that failed half way.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	if c.progress != nil && c.daemon(kubelet) != nil {
		_, _ = fmt.Fprintln(c.progress, "node: "+peakMemory())
	}
	for _, name := range []string{kubelet, kubeProxy, kubeScheduler, kubeControllerManager} {
		if d := c.daemon(name); d != nil {
			d.stop(10 * time.Second)
		}
	}
	errs := []error{killContainers()}
	for _, name := range []string{containerd, kubeAPIServer, etcd} {
		if d := c.daemon(name); d != nil {
			d.stop(20 * time.Second)
		}
	}
	// The node's directory too (removeNodeDirs).
	errs = append(errs, removeLeftovers())
	if c.createdRunContainerd {
		errs = append(errs, os.Remove("/run/containerd"))
	}
	if c.lock != nil {
		errs = append(errs, c.lock.Close())
	}
	return errors.Join(errs...)
}

func (c *Cluster) daemon(name string) *daemon {
	for _, d := range c.daemons {
		if d.name == name {
			return d
		}
	}
	return nil
}

// lockMachine takes the machine-wide lock of the node's network (one namespace, one pair of addresses).
func lockMachine() (*os.File, error) {
	f, err := os.OpenFile("/run/fluxdeployer-node.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// buildImageBinaries compiles the named programs of internal/node/images (pause, workload), static, into dir.
func buildImageBinaries(dir string, names ...string) error {
	for _, name := range names {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, name), "./internal/node/images/"+name)
		cmd.Dir = controlplane.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// binaryImage is the image ref of the program name that buildImageBinaries compiled into dir.
func binaryImage(dir, ref, name, user string) Image {
	return Image{Ref: ref, Files: map[string]string{"/" + name: filepath.Join(dir, name)}, Entrypoint: []string{"/" + name}, User: user}
}

// workloadImage is the workload image (WorkloadImage) of the workload program compiled into dir; it runs as
// 65532, as the operator does.
func workloadImage(dir string) Image {
	return binaryImage(dir, WorkloadImage, "workload", "65532:65532")
}

// ImportImage writes the image to an archive and imports it into containerd's k8s.io namespace, where the
// kubelet finds it: pods name it with imagePullPolicy IfNotPresent (or Never) and nothing is pulled.
func (c *Cluster) ImportImage(ctx context.Context, im Image) error {
	return loadImage(ctx, c.path("images"), im, c.ImportArchive)
}

// loadImage writes the image as an archive into dir, hands it to load and removes it.
func loadImage(ctx context.Context, dir string, im Image, load func(context.Context, string) error) error {
	archive := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(im.Ref)+".tar")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	if err := errors.Join(im.WriteArchive(f), f.Close()); err != nil {
		return fmt.Errorf("writing image %s: %w", im.Ref, err)
	}
	defer func() { _ = os.Remove(archive) }()
	return load(ctx, archive)
}

// ImportArchive imports an image archive (OCI or docker save format) into containerd.
func (c *Cluster) ImportArchive(ctx context.Context, archive string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.nodeAssets, "ctr"), "--address", c.path("run/containerd.sock"),
		"-n", "k8s.io", "images", "import", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("importing %s into containerd: %w\n%s", archive, err, out)
	}
	return nil
}

// APIServerAddr is where the API server listens, as seen from the host.
func APIServerAddr() string { return net.JoinHostPort(NodeIP, apiPort) }

// ContainerSpecEnv returns the environment containerd holds in its record of the container (containerd://ID, as a
// pod's container status names it), which the kubelet resolved from the pod's spec when it created the container:
// readable after the container has exited too, when its process is gone.
func (c *Cluster) ContainerSpecEnv(ctx context.Context, containerID string) (map[string]string, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := exec.CommandContext(ctx, filepath.Join(c.nodeAssets, "ctr"), "--address", c.path("run/containerd.sock"),
		"-n", "k8s.io", "containers", "info", "--spec", id).Output()
	if err != nil {
		return nil, fmt.Errorf("containerd's record of container %s: %w", id, err)
	}
	var spec struct {
		Process struct {
			Env []string `json:"env"`
		} `json:"process"`
	}
	if err := json.Unmarshal(out, &spec); err != nil {
		return nil, fmt.Errorf("the OCI spec of container %s: %w\n%s", id, err, out)
	}
	env := map[string]string{}
	for _, kv := range spec.Process.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}
