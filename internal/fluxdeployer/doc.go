// Package fluxdeployer turns ArtifactDeployments into Flux objects (HelmRepository or OCIRepository with a
// HelmRelease, or OCIRepository with a Kustomization) named exactly like the ArtifactDeployment, and reports
// Flux's view of the rollout back on it.
//
// The files hold the steps of a reconcile, in the order Reconcile runs them:
//
//   - reconciler.go: Reconcile and reconcile, the steps in order, and report, the status steps;
//   - statusonly.go: statusOnly, when only the Flux objects' status can have changed since the last full reconcile;
//   - configsource.go and config.go: load, the configuration from the ConfigMap, the last good one kept;
//   - desired.go: desiredObjects, the Flux objects from the ArtifactDeployment and the configuration, built by
//     select.go (the resource), access.go (where it is pulled from), target.go and secrets.go (where it goes, with
//     which Secrets), helm.go, kustomize.go and objects.go (the objects);
//   - remote.go: checkTarget, whether a remote target is allowed;
//   - claims.go: checkClaim, whether the workload names are this ArtifactDeployment's to use;
//   - serviceaccount.go: checkServiceAccount, whether the account the Flux objects run as exists;
//   - crds.go: require, whether the Flux kinds are installed;
//   - apply.go: apply, the server-side apply of each object;
//   - passon.go: passOn, suspend and reconcile requests handed on to the objects;
//   - fluxstatus.go: observeFlux, Flux's conditions copied onto the ArtifactDeployment;
//   - results.go: results, the deployment results from the Services;
//   - summary.go: summarize, Ready from the steps;
//   - finalize.go: finalize, the outcome normalised and the status written once, with its event
//     (internal/outcome, shared with the VectorDeployment reconciler, as is the error type steps fail with).
//
// Beside them: teardown.go (a deleted ArtifactDeployment), kinds.go (every Flux kind and what differs per kind),
// setup.go (the manager and its watches) and render.go (`fluxdeployer render`).
package fluxdeployer
