// Command demo is `make demo`, the README's main job: on an embedded control plane (kube-apiserver, etcd,
// kube-controller-manager and Flux's three controllers, built from source on first use) it publishes a sample
// vector — a real Helm chart, a real Kustomize bundle, and a chart that disables reuse — into an in-process OCI
// registry, runs fluxdeployer under its own ServiceAccount and RBAC, applies config/samples, and waits until the
// VectorDeployment is Ready, printing progress and then the tree of what was deployed. It exits 0 once Ready and
// non-zero with the reason otherwise; -keep leaves everything running until Ctrl-C.
//
// With -node (make demo NODE=1) it runs on a real node of this machine instead (internal/node, root): Flux and
// fluxdeployer installed as pods from their images and manifests, the sample's charts and bundle made of
// Deployments whose pods really start, and the tree shows each Deployment's pods and their readiness.
//
// With -ctf DIR or -serve ADDR it only publishes the sample vector (into a CTF directory, or a registry it
// serves on ADDR until interrupted), for `make preview`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	ctf := flag.String("ctf", "", "only write the sample vector into this CTF directory")
	serve := flag.String("serve", "", "only serve an OCI registry holding the sample vector on this loopback address, e.g. 127.0.0.1:5000")
	bin := flag.String("fluxdeployer", "bin/fluxdeployer", "the fluxdeployer binary to run")
	onNode := flag.Bool("node", false, "run on a real node (root): Flux and fluxdeployer as pods from their images, the sample's workloads as pods")
	keep := flag.Bool("keep", false, "keep the cluster running after the VectorDeployment is Ready, until Ctrl-C")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long to wait for the VectorDeployment to become Ready")
	flag.Parse()
	// The demo prints its own progress. The libraries' logs (envtest's, the clients') would interleave with it, and
	// a first run, which builds the control plane for minutes before envtest logs anything, would otherwise print
	// controller-runtime's warning that no logger was set, with a stack trace.
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *ctf != "" || *serve != "":
		err = preview(ctx, *ctf, *serve)
	case *onNode:
		err = deployOnNode(ctx, *keep, *timeout)
	default:
		err = deploy(ctx, *bin, *keep, *timeout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}
