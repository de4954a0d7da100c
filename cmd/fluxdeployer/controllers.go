package main

import (
	"slices"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
)

// controllerSetup is what each reconciler package offers the binary: its own flags, and registration with the
// manager once they are parsed, with the settings all reconcilers share.
type controllerSetup interface {
	BindFlags(fs *pflag.FlagSet)
	SetupWithManager(mgr ctrl.Manager, shared operating.Options) error
}

// newControllerSetups returns the reconcilers that --controllers can name, each with its flags unparsed. The
// VectorDeployment reconciler and the Flux deployer meet only through API objects, so any subset can run in one
// process.
func newControllerSetups() map[string]controllerSetup {
	return map[string]controllerSetup{
		"fluxdeployer":     &fluxdeployer.Options{},
		"vectordeployment": &vectordeployment.Options{},
	}
}

// handOverFinalizers tells the VectorDeployment reconciler, when the Flux deployer runs in the same process, which
// manifest types that deployer handles and under which finalizer, so that it creates their ArtifactDeployments
// with the finalizer in place (vectordeployment.Options.Finalizers). Without the deployer in the process it is told
// nothing: a deployer elsewhere adds the finalizer itself, and none is left that nobody removes.
func handOverFinalizers(setups map[string]controllerSetup, controllers []string) {
	vd, ok := setups["vectordeployment"].(*vectordeployment.Options)
	if ok && slices.Contains(controllers, "fluxdeployer") {
		vd.Finalizers = fluxdeployer.TeardownFinalizers()
	}
}
