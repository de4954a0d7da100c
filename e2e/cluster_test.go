// Package e2e runs fluxdeployer as a process under its own ServiceAccount and RBAC (config/default), next to the
// real Flux source-controller, kustomize-controller and helm-controller and kube-controller-manager's garbage
// collector and namespace controller, all against a real kube-apiserver with the
// OwnerReferencesPermissionEnforcement admission plugin, with vectors, charts and bundles in an in-process OCI
// registry.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

var (
	cluster *controlplane.Cluster
	env     *testenv.Env
	// realCluster is the cluster whose pods start, where the TestNode tests run; nil on the embedded control plane
	// and on an existing cluster that is not kind.
	realCluster podCluster
	// realKubeconfig is the path of an admin kubeconfig of realCluster, for CLIs such as helm.
	realKubeconfig string
)

// podCluster is a cluster where pods start, with Flux and the operator installed as a user installs them: the
// real node of internal/node on this machine (E2E_NODE=1, make e2e-node), which starts and installs them itself,
// or an existing kind cluster (E2E_KUBECONFIG with E2E_KIND_CLUSTER naming it, make e2e-kind). The TestNode tests
// reach what is specific to either only through it.
type podCluster interface {
	// PodStates describes the pods of the namespace matching labels (all when nil), for failure messages.
	PodStates(ctx context.Context, namespace string, labels map[string]string) string
	// RunClient fetches url once from a pod of the workload image and returns what it printed: a Service is
	// reached through the cluster's kube-proxy, from inside the cluster's network.
	RunClient(t testing.TB, namespace, url string) string
	// WaitAvailable waits until the Deployment's pods of its current template are all updated and ready.
	WaitAvailable(ctx context.Context, timeout time.Duration, namespace, name string) error
	// BuildOperatorImage builds the operator's image ref (reporting version) with hack/image and makes it
	// available to the cluster's kubelets without a pull.
	BuildOperatorImage(ctx context.Context, ref, version string) error
	// RegistryAddrs are where a test's registry listens and the host the cluster's pods name it by.
	RegistryAddrs() (listen, host string)
	// NetnsDialer dials from the cluster's network, where ClusterIPs answer through kube-proxy, for a test that
	// probes Services more often than a client pod could; errors.ErrUnsupported where the cluster offers none.
	NetnsDialer() (*node.NetnsDialer, error)
	// Stop removes what was made for the tests: the whole node, or the images built for kind.
	Stop() error
}

// The suite runs on the embedded cluster of internal/controlplane, or, with E2E_KUBECONFIG, on an existing
// cluster where Flux and the operator are installed (dist/install.yaml); then the in-process registry must be
// reachable from the cluster's pods: it listens on all interfaces and is named by E2E_REGISTRY_HOST (e.g. the
// kind network's gateway address). When E2E_KIND_CLUSTER names the existing cluster as a kind cluster, the
// TestNode tests run there too, as they do on the real node of E2E_NODE.
func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	if path := os.Getenv("E2E_KUBECONFIG"); path != "" {
		env, err = controlplane.Connect(path)
		if name := os.Getenv("E2E_KIND_CLUSTER"); err == nil && name != "" {
			var kind *node.Kind
			if kind, err = node.ConnectKind(ctx, name, os.Getenv("E2E_REGISTRY_HOST"), node.API{Config: env.Config, Client: env.Client}); err == nil {
				realCluster, realKubeconfig = kind, path
			}
		}
	} else if os.Getenv("E2E_NODE") != "" {
		var realNode *node.Cluster
		if realNode, err = startRealNode(ctx); err == nil {
			realCluster, realKubeconfig = realNode, realNode.AdminKubeconfig
			env, err = controlplane.Connect(realNode.AdminKubeconfig)
		}
	} else if cluster, err = controlplane.StartCluster(ctx, os.Stderr); err == nil {
		env = cluster.APIServer
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the cluster:", err)
		os.Exit(1)
	}
	code := m.Run()
	if realCluster != nil {
		if err := realCluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster of pods:", err)
			code = 1
		}
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startRealNode starts the node with Flux and the operator installed as a user installs them.
func startRealNode(ctx context.Context) (*node.Cluster, error) {
	c, err := node.StartInstalled(ctx, os.Stderr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "node:", strings.Join(c.Started, ", "))
	return c, nil
}

// newRegistry starts the in-process registry the test publishes to, reachable by the cluster.
func newRegistry(t *testing.T) *ocmtest.Registry {
	t.Helper()
	listen, host := registryAddrs()
	if listen == "" {
		return ocmtest.NewRegistry(t)
	}
	reg, err := ocmtest.ListenRegistry(net.JoinHostPort(listen, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	_, port, err := net.SplitHostPort(reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	reg.Host = net.JoinHostPort(host, port)
	return reg
}

// registryAddrs are where a test's registry listens and the host the cluster's pods name it by: the cluster of
// pods says; on another existing cluster all interfaces and E2E_REGISTRY_HOST; none on the embedded control
// plane, whose controllers run on this machine and reach the registry's loopback address.
func registryAddrs() (listen, host string) {
	if realCluster != nil {
		return realCluster.RegistryAddrs()
	}
	if host := os.Getenv("E2E_REGISTRY_HOST"); host != "" {
		return "0.0.0.0", host
	}
	return "", ""
}

// operatorNamespace is where the operator and its ConfigMap live.
func operatorNamespace() string {
	if ns := os.Getenv("E2E_OPERATOR_NAMESPACE"); ns != "" {
		return ns
	}
	return controlplane.OperatorNamespace
}

var fluxdeployerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "fluxdeployer-e2e-")
	if err != nil {
		return "", err
	}
	return controlplane.BuildFluxdeployer(dir)
})

// startFluxdeployer writes the Flux deployer's ConfigMap (none when config is nil) and runs the operator as its
// ServiceAccount, with args added to its command line, until the test ends; if the test failed, the last lines of
// every process are logged. On an existing cluster the installed operator is used. It returns a function that
// stops the operator earlier, nil on an existing cluster.
func startFluxdeployer(t *testing.T, config map[string]string, args ...string) (stop func()) {
	t.Helper()
	writeDeployerConfig(t, config)
	if cluster == nil {
		return nil // the installed operator follows its ConfigMap (a change requeues every ArtifactDeployment)
	}
	bin, err := fluxdeployerBinary()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cluster.StartFluxdeployer(bin, append([]string{"--log-level=debug"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The namespaces go first, while the operator runs: their VectorDeployments and ArtifactDeployments wait
		// for its teardown finalizers.
		deleteNamespaces(t)
		p.Stop()
		// The operator runs with config/rbac's rights only: anything it was refused is a missing permission,
		// whether or not the test's outcome depended on it.
		if refused := p.Lines(`is forbidden: User "system:serviceaccount:`); len(refused) > 0 {
			t.Errorf("fluxdeployer was refused by the API server (config/rbac lacks a permission):\n%s", strings.Join(refused, "\n"))
		}
		if t.Failed() {
			for _, proc := range append([]*controlplane.Process{p}, cluster.Processes...) {
				t.Logf("last lines of %s:\n%s", proc.Name, proc.Tail(30))
			}
		}
	})
	return p.Stop
}

// writeDeployerConfig writes the Flux deployer's ConfigMap, or deletes it when config is nil.
func writeDeployerConfig(t *testing.T, config map[string]string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace(), Name: "flux-deployer-configuration"}}
	if err := env.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if config != nil {
		cm.Data = config
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
}

// testNamespaces holds the namespaces each running test created (*testing.T → *[]string).
var testNamespaces sync.Map

// newNamespace creates a namespace for the test and deletes it when the test ends, waiting (bounded) until
// the namespace controller, the operator's and Flux's finalizers have removed what is in it, so one test's releases
// and Kustomizations do not linger into the next. A test's operator deletes its namespaces before it stops.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	names, _ := testNamespaces.LoadOrStore(t, &[]string{})
	*names.(*[]string) = append(*names.(*[]string), ns.Name)
	t.Cleanup(func() { deleteNamespaces(t) })
	return ns.Name
}

// deleteNamespaces deletes the namespaces the test created and waits for each to be gone (at most 2 minutes).
func deleteNamespaces(t *testing.T) {
	names, ok := testNamespaces.LoadAndDelete(t)
	if !ok {
		return
	}
	ctx := context.Background()
	for _, name := range *names.(*[]string) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
			continue
		}
		gone := false
		for deadline := time.Now().Add(2 * time.Minute); !gone && time.Now().Before(deadline); {
			gone = apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns))
			if !gone {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if !gone {
			t.Logf("namespace %s still terminating after 2m: %+v", name, ns.Status.Conditions)
		}
	}
}

func createVectorDeployment(t testing.TB, namespace, name, vector string) *konfidencev1.VectorDeployment {
	t.Helper()
	return testenv.CreateVectorDeployment(t, env.Client, namespace, name, vector)
}

// waitReady waits until the object reports Ready=True and returns how long that took from its creation.
func waitReady(t *testing.T, timeout time.Duration, obj readyObject) time.Duration {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if !conditions.IsReady(obj) {
			return fmt.Errorf("%T %s not ready: %+v", obj, obj.GetName(), obj.GetConditions())
		}
		return nil
	})
	return time.Since(obj.GetCreationTimestamp().Time)
}

type readyObject interface {
	client.Object
	conditions.Getter
}

// startProcess runs the program with the kubeconfig until the test ends; if the test failed, its last lines are
// logged as name's.
func startProcess(t *testing.T, name, kubeconfig, path string, args ...string) {
	t.Helper()
	p, err := controlplane.StartProcess(kubeconfig, nil, path, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", name, p.Tail(30))
		}
	})
}
