package v1alpha1

// Limits of the ArtifactDeployment spec. Kubebuilder markers take literals, not constants, so each marker repeats
// its value here; TestLimitsMatchCRD compares both with the generated CRD, so they cannot drift. The
// VectorDeployment reconciler checks an artifact against them before creating its ArtifactDeployment: input the
// API server would refuse fails alone and for good instead of being retried.
const (
	MaxManifestTypeLength     = 63
	MaxTaskManifests          = 64
	MaxTaskNameLength         = 253
	MaxTaskTypeLength         = 63
	MaxTaskDependencies       = 64
	MaxTaskDependencyLength   = 253
	MaxComponentNameLength    = 255
	MaxComponentVersionLength = 128
	MaxResources              = 64
	MaxResourceNameLength     = 253
	MaxResourceTypeLength     = 253
)
