package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

// sampleNamespace is where the sample VectorDeployment goes when config/samples names none.
const sampleNamespace = "shop"

func step(format string, args ...any) {
	fmt.Printf("== "+format+"\n", args...)
}

// deploy runs the whole demo and stops everything it started before returning.
func deploy(ctx context.Context, bin string, keep bool, timeout time.Duration) (err error) {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the fluxdeployer binary (make build): %w", err)
	}
	step("starting kube-apiserver, etcd, kube-controller-manager and Flux's source-, kustomize- and helm-controller")
	fmt.Println("   (built from source into ~/.cache/fluxdeployer on the first run: 11 to 45 minutes on 2 cores, then reused)")
	cluster, err := controlplane.StartCluster(ctx, os.Stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cluster.Stop()) }()

	samples, err := controlplane.Kustomize("config/samples")
	if err != nil {
		return err
	}
	vector, err := sampleVectorRef(samples)
	if err != nil {
		return err
	}
	// The registry listens where the sample says, so the sample is applied as shipped, by the demo now and by
	// hand with KEEP=1: the operator and Flux's controllers run on this machine and reach its loopback.
	reg, err := publishSample(ctx, vector.Host(), ", as config/samples names it",
		ocmtest.WebChart("frontend", frontendVersion), ocmtest.WebChart("database", databaseVersion), ocmtest.ConfigBundle)
	if err != nil {
		return fmt.Errorf("serving the registry config/samples names (%s): %w", vector.Host(), err)
	}
	defer reg.Close()
	vd, err := applySamples(ctx, cluster.Client, samples, "")
	if err != nil {
		return err
	}
	step("starting fluxdeployer as ServiceAccount %s/%s (config/rbac)", controlplane.OperatorNamespace, controlplane.OperatorServiceAccount)
	operator, err := cluster.StartFluxdeployer(bin)
	if err != nil {
		return err
	}
	defer operator.Stop()
	defer func() {
		if err != nil {
			for _, p := range append([]*controlplane.Process{operator}, cluster.Processes...) {
				fmt.Fprintf(os.Stderr, "--- last lines of %s\n%s\n", p.Name, p.Tail(15))
			}
		}
	}()

	step("waiting for VectorDeployment %s/%s to be Ready", vd.Namespace, vd.Name)
	if err := waitReady(ctx, cluster.Client, vd, timeout, operator.Exited()); err != nil {
		return err
	}
	return show(ctx, cluster.Client, vd, cluster.AdminKubeconfig, keep)
}

// deployOnNode runs the demo on a real node, Flux and the operator installed as pods as a user installs them, and
// the sample vector's charts and bundle made of Deployments of the workload image whose pods really start.
func deployOnNode(ctx context.Context, keep bool, timeout time.Duration) (err error) {
	step("starting a real node (containerd, kubelet, kube-scheduler, kube-proxy) and installing Flux and fluxdeployer as pods")
	fmt.Println("   (needs root; built into ~/.cache/fluxdeployer on the first run, then reused)")
	c, err := node.StartInstalled(ctx, os.Stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Stop()) }()
	fmt.Printf("   %s\n", strings.Join(c.Started, ", "))
	defer func() {
		if err != nil {
			fmt.Fprintln(os.Stderr, c.Logs("kubelet"))
		}
	}()
	// The registry listens on the host's end of the node's veth, which the pods reach.
	reg, err := publishSample(ctx, net.JoinHostPort(node.HostIP, "0"), "", ocmtest.WorkloadChart("frontend", frontendVersion, node.WorkloadImage),
		ocmtest.WorkloadChart("database", databaseVersion, node.WorkloadImage), ocmtest.WorkloadBundle("app", node.WorkloadImage))
	if err != nil {
		return err
	}
	defer reg.Close()
	samples, err := controlplane.Kustomize("config/samples")
	if err != nil {
		return err
	}
	// Pods cannot reach the host's loopback that config/samples names: the sample's vector is pointed at the
	// registry on the host's end of the node's veth.
	vd, err := applySamples(ctx, c.Client, samples, reg.Ref("", vectorName, vectorVersion))
	if err != nil {
		return err
	}
	step("waiting for VectorDeployment %s/%s to be Ready (its workloads' pods Ready: the sample waits for them)", vd.Namespace, vd.Name)
	if err := waitReady(ctx, c.Client, vd, timeout, nil); err != nil {
		return fmt.Errorf("%w\npods: %s", err, c.PodStates(ctx, vd.Namespace, nil))
	}
	return show(ctx, c.Client, vd, c.AdminKubeconfig, keep)
}

// publishSample serves an OCI registry on addr holding the sample vector, whose frontend and database charts and
// config bundle are those given; note ends the progress line.
func publishSample(ctx context.Context, addr, note string, frontend, database ocmtest.Chart, bundle map[string]string) (*ocmtest.Registry, error) {
	reg, err := ocmtest.ListenRegistry(addr)
	if err != nil {
		return nil, err
	}
	step("publishing the sample vector into an OCI registry at %s%s", reg.Host, note)
	err = pushDeployables(ctx, reg.Host, frontend, database, bundle)
	if err == nil {
		err = publish(ctx, ocmtest.RegistryRepository(auth.DefaultClient, reg.Host, "", true), reg.Host)
	}
	if err != nil {
		reg.Close()
		return nil, err
	}
	return reg, nil
}

// show prints the tree of what the VectorDeployment became and, with keep, waits for Ctrl-C.
func show(ctx context.Context, c client.Client, vd *konfidencev1.VectorDeployment, kubeconfig string, keep bool) error {
	step("what the vector became")
	root, err := tree.Build(ctx, c, vd.Namespace, vd.Name)
	if err != nil {
		return err
	}
	if err := tree.Print(os.Stdout, root); err != nil {
		return err
	}
	if keep {
		step("running until Ctrl-C; in another shell:")
		fmt.Printf("   export KUBECONFIG=%s\n   kubectl get vd,ad,helmreleases,kustomizations -A\n", kubeconfig)
		fmt.Printf("   bin/fluxdeployer ui -A    # the live web view of the landscape, on http://127.0.0.1:9333/\n")
		fmt.Printf("   kubectl apply -k config/samples    # the sample again, in namespace default\n")
		<-ctx.Done()
	}
	return nil
}

// sampleVectorRef is the vector config/samples' VectorDeployment names: the demo publishes the sample vector
// there, so it must be a loopback registry and the sample's component version.
func sampleVectorRef(samples []*unstructured.Unstructured) (ocm.Ref, error) {
	for _, u := range samples {
		if u.GetKind() != "VectorDeployment" {
			continue
		}
		vector, _, _ := unstructured.NestedString(u.Object, "spec", "vector")
		ref, err := ocm.ParseRef(vector)
		if err != nil {
			return ocm.Ref{}, fmt.Errorf("config/samples: %w", err)
		}
		if host, _, _ := strings.Cut(ref.Host(), ":"); host != "127.0.0.1" || !ref.PlainHTTP() || ref.SubPath != "" ||
			ref.Component != vectorName || ref.Version != vectorVersion {
			return ocm.Ref{}, fmt.Errorf("config/samples names vector %s; the demo serves http://127.0.0.1:<port>//%s:%s", vector, vectorName, vectorVersion)
		}
		return ref, nil
	}
	return ocm.Ref{}, errors.New("config/samples holds no VectorDeployment")
}

// applySamples applies config/samples as a user would: the Flux deployer's ConfigMap into the operator's
// namespace and the VectorDeployment into its namespace, as shipped or, when vector is set, pointed at it.
func applySamples(ctx context.Context, c client.Client, samples []*unstructured.Unstructured, vector string) (*konfidencev1.VectorDeployment, error) {
	var vd *konfidencev1.VectorDeployment
	for _, u := range samples {
		switch u.GetKind() {
		case "ConfigMap":
			u.SetNamespace(controlplane.OperatorNamespace)
		case "VectorDeployment":
			if u.GetNamespace() == "" {
				u.SetNamespace(sampleNamespace)
			}
			sample, _, _ := unstructured.NestedString(u.Object, "spec", "vector")
			shown := sample
			if vector != "" {
				if err := unstructured.SetNestedField(u.Object, vector, "spec", "vector"); err != nil {
					return nil, err
				}
				shown = sample + " → " + vector
			}
			step("applying config/samples: VectorDeployment %s/%s (spec.vector %s)", u.GetNamespace(), u.GetName(), shown)
			vd = &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName()}}
		}
		if ns := u.GetNamespace(); ns != "" {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, err
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("demo"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	if vd == nil {
		return nil, errors.New("config/samples holds no VectorDeployment")
	}
	return vd, nil
}

// waitReady prints the VectorDeployment's Ready message whenever it changes, until it is True. It gives up
// with the last reason and message after timeout, or when the operator exits.
func waitReady(ctx context.Context, c client.Client, vd *konfidencev1.VectorDeployment, timeout time.Duration, exited <-chan struct{}) error {
	start := time.Now()
	deadline := time.After(timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("fluxdeployer exited")
		case <-deadline:
			return fmt.Errorf("VectorDeployment not Ready after %s: %s", timeout, last)
		case <-tick.C:
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		ready := conditions.Get(vd, konfidencev1.ReadyCondition)
		line := "no status yet"
		if ready != nil {
			line = fmt.Sprintf("Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
		}
		if line != last {
			fmt.Printf("   [%5.1fs] %s\n", time.Since(start).Seconds(), strings.TrimSpace(line))
			last = line
		}
		if ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == vd.Generation {
			return nil
		}
	}
}
