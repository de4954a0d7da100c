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
	// ShardKeyConflictReason: the VectorDeployment's sharding.fluxcd.io/key differs from that of the oldest
	// VectorDeployment of its namespace. Every VectorDeployment of a namespace is in one shard, so that the
	// ArtifactDeployments they share and the workload names they claim are seen by one instance; nothing is
	// created, adopted or relabelled for this one until the keys agree.
	ShardKeyConflictReason = "ShardKeyConflict"

	// ShardKeyLabel is Flux's sharding label: an operator started with --watch-label-selector reconciles only the
	// objects whose value it selects. A VectorDeployment's value is copied onto its ArtifactDeployments and by the
	// Flux deployer onto their Flux objects, so that the shards of the operator and of Flux's controllers line up.
	ShardKeyLabel = "sharding.fluxcd.io/key"

	// ArtifactSourceAnnotation records what an ArtifactDeployment was built from: the component version's OCM
	// reference pinned by digest, its repository spelled one way. Adoption requires the same source.
	ArtifactSourceAnnotation = "konfidence.cloud/artifact-source"
)
