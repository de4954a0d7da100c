package main

import (
	"context"
	"errors"
	"fmt"
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
	reg, err := ocmtest.ListenRegistry(vector.Host())
	if err != nil {
		return fmt.Errorf("serving the registry config/samples names (%s): %w", vector.Host(), err)
	}
	defer reg.Close()
	step("publishing the sample vector into an OCI registry at %s, as config/samples names it", reg.Host)
	if err := pushDeployables(ctx, reg.Host); err != nil {
		return err
	}
	if err := publish(ctx, ocmtest.RegistryRepository(auth.DefaultClient, reg.Host, "", true), reg.Host); err != nil {
		return err
	}

	vd, err := applySamples(ctx, cluster.Client, samples)
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
	step("what the vector became")
	root, err := tree.Build(ctx, cluster.Client, vd.Namespace, vd.Name)
	if err != nil {
		return err
	}
	if err := tree.Print(os.Stdout, root); err != nil {
		return err
	}
	if keep {
		step("running until Ctrl-C; in another shell:")
		fmt.Printf("   export KUBECONFIG=%s\n   kubectl get vd,ad,helmreleases,kustomizations -A\n", cluster.AdminKubeconfig)
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

// applySamples applies config/samples as a user would, unchanged: the Flux deployer's ConfigMap into the
// operator's namespace and the VectorDeployment into its namespace.
func applySamples(ctx context.Context, c client.Client, samples []*unstructured.Unstructured) (*konfidencev1.VectorDeployment, error) {
	var vd *konfidencev1.VectorDeployment
	for _, u := range samples {
		switch u.GetKind() {
		case "ConfigMap":
			u.SetNamespace(controlplane.OperatorNamespace)
		case "VectorDeployment":
			if u.GetNamespace() == "" {
				u.SetNamespace(sampleNamespace)
			}
			vector, _, _ := unstructured.NestedString(u.Object, "spec", "vector")
			step("applying config/samples: VectorDeployment %s/%s (spec.vector %s)", u.GetNamespace(), u.GetName(), vector)
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
