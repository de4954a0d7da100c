package v1alpha1

// Reasons and annotations by which the VectorDeployment reconciler keeps one name denoting one content, and the
// Flux deployer one workload name one deployment.
const (
	// ArtifactSourceConflictReason: an ArtifactDeployment of the artifact's identity (component, version, reuse)
	// exists but was built from another source (another repository, or other bytes under the same version); it is
	// neither shared nor changed.
	ArtifactSourceConflictReason = "ArtifactSourceConflict"
	// ArtifactLimitsExceededReason: the artifact breaks a limit of the ArtifactDeployment CRD (see the Max*
	// constants), so no ArtifactDeployment can hold it.
	ArtifactLimitsExceededReason = "ArtifactLimitsExceeded"
	// MultipleComponentVersionsReason: the vector references one component more than once; its status keeps one
	// slot per component.
	MultipleComponentVersionsReason = "MultipleComponentVersions"
	// TargetNameConflictReason: another ArtifactDeployment, created earlier, deploys under the same Helm release
	// name or Kustomization name suffix into the same target namespace; nothing is applied for this one.
	TargetNameConflictReason = "TargetNameConflict"

	// ArtifactSourceAnnotation records what an ArtifactDeployment was built from: the component version's OCM
	// reference pinned by digest, its repository spelled one way. Adoption requires the same source.
	ArtifactSourceAnnotation = "konfidence.cloud/artifact-source"
)
