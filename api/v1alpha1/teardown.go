package v1alpha1

// Ordered teardown: deleting a VectorDeployment or an ArtifactDeployment waits for what it deployed to be gone.
const (
	// TeardownFinalizer is set on a VectorDeployment by its reconciler and on an ArtifactDeployment by the Flux
	// deployer. A VectorDeployment's deletes the ArtifactDeployments it alone owns and waits for them; an
	// ArtifactDeployment's deletes its Flux objects and waits for helm-controller's uninstall or
	// kustomize-controller's prune, at most the deployer's teardownTimeout.
	TeardownFinalizer = "konfidence.cloud/teardown"

	// SkipTeardownWaitAnnotation set to "true" on a VectorDeployment or ArtifactDeployment makes its finalizer
	// delete what it owns without waiting for it to go: the escape hatch when an uninstall cannot finish. With the
	// operator down, remove the finalizer itself instead.
	SkipTeardownWaitAnnotation = "konfidence.cloud/skip-teardown-wait"

	// TearingDownReason: the object is being deleted and waits for what it deployed to be gone.
	TearingDownReason = "TearingDown"
	// TeardownTimeoutReason: an ArtifactDeployment gave up waiting for its Flux objects after teardownTimeout;
	// they are deleted and finish under their own controllers' finalizers.
	TeardownTimeoutReason = "TeardownTimeout"
)
