package main

import (
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
