package v1alpha1

// Condition types. Ready, Reconciling and Stalled are the kstatus summary conditions; the others record one step
// of a reconcile each.
const (
	ReadyCondition       = "Ready"
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"

	// VectorDownloadedCondition: the vector and every artifact it references were read from the OCM repository.
	VectorDownloadedCondition = "VectorDownloaded"
	// ArtifactDeploymentsCreatedCondition: every artifact of the vector has its ArtifactDeployment.
	ArtifactDeploymentsCreatedCondition = "ArtifactDeploymentsCreated"

	// ArtifactFetchedCondition: Flux fetched the artifact (OCIRepository or HelmChart Ready).
	ArtifactFetchedCondition = "ArtifactFetched"
	// ArtifactDeployedCondition: Flux applied the artifact (Kustomization or HelmRelease Ready).
	ArtifactDeployedCondition = "ArtifactDeployed"
	// AppHealthyCondition: the applied workloads are healthy (Kustomization Healthy, HelmRelease Released).
	AppHealthyCondition = "AppHealthy"
	// DeploymentResultCreatedCondition: the deployment results (e.g. Service endpoints) were collected.
	DeploymentResultCreatedCondition = "DeploymentResultCreated"
)

// Condition reasons specific to this API; generic ones come from github.com/fluxcd/pkg/apis/meta.
const (
	// HashCollisionLimitExceededReason: an artifact's name still collided after MaxCollisionCount salts.
	HashCollisionLimitExceededReason = "HashCollisionLimitExceeded"
	// ArtifactDeploymentHashCollisionReason: the event reason for one detected name collision.
	ArtifactDeploymentHashCollisionReason = "ArtifactDeploymentHashCollision"
	// InvalidNameInputReason: a component name or version from which no ArtifactDeployment name can be built.
	InvalidNameInputReason = "InvalidNameInput"
)

// Condition reasons of the registry credentials a VectorDeployment is read with: its spec.secretRef, or the
// operator's --registry-secrets. Both are retried: the Secret may yet be created or fixed.
const (
	// RegistrySecretNotFoundReason: a registry Secret does not exist.
	RegistrySecretNotFoundReason = "RegistrySecretNotFound"
	// RegistrySecretInvalidReason: a registry Secret is not a kubernetes.io/dockerconfigjson Secret, or its
	// content cannot be read.
	RegistrySecretInvalidReason = "RegistrySecretInvalid"
)

// MaxCollisionCount is the number of salts tried for one artifact before the controller stops: that many
// collisions in a 36^10 space is a bug, not bad luck.
const MaxCollisionCount = 5

// Annotation and label keys written on ArtifactDeployments and the objects derived from them.
const (
	// ArtifactComponentAnnotation holds the OCM component name of the artifact.
	ArtifactComponentAnnotation = "konfidence.cloud/artifact-component"
	// ArtifactVersionAnnotation holds the OCM component version of the artifact.
	ArtifactVersionAnnotation = "konfidence.cloud/artifact-version"
	// ArtifactHashAnnotation holds the hash that ends the ArtifactDeployment's name.
	ArtifactHashAnnotation = "konfidence.cloud/artifact-hash"
	// AllowReuseAnnotation is "true" when VectorDeployments may share the ArtifactDeployment.
	AllowReuseAnnotation = "konfidence.cloud/allow-reuse"
	// VectorDeploymentUIDAnnotation holds the owning VectorDeployment's UID when reuse is disabled.
	VectorDeploymentUIDAnnotation = "konfidence.cloud/vector-deployment-uid"
	// CollisionCountAnnotation holds the collision count folded into the name's hash, when above zero, so a
	// VectorDeployment that adopts the object records the salt its name carries.
	CollisionCountAnnotation = "konfidence.cloud/collision-count"

	// ArtifactIdentityLabel holds the hash of the artifact's unsalted identity (component, version, and the
	// VectorDeployment UID when reuse is off): every ArtifactDeployment of one identity carries the same value,
	// whatever salt its name has, so they can be listed from the cache.
	ArtifactIdentityLabel = "konfidence.cloud/artifact-identity"

	// ArtifactDeploymentLabel names the ArtifactDeployment an object (Flux object, Service) belongs to.
	ArtifactDeploymentLabel = "konfidence.cloud/artifact-deployment"
	// DeploymentResultLabel marks an object whose details are reported as a deployment result.
	DeploymentResultLabel = "konfidence.cloud/deployment-result"
)

// The size limit of a vector, so that a VectorDeployment's status stays within what the API server stores.
const (
	// MaxArtifactsPerVector is the largest number of artifacts one VectorDeployment deploys. Its status holds an
	// entry per artifact (about 150 bytes, plus about 200 per deployment result) and the API server stores an
	// object of at most 1.5 MiB (etcd's request limit): 1,000 artifacts leave room for several results each.
	// docs/performance.md ("Large vectors") has the measurement.
	MaxArtifactsPerVector = 1000
	// VectorTooLargeReason: the vector references more than MaxArtifactsPerVector artifacts; nothing is deployed
	// for it.
	VectorTooLargeReason = "VectorTooLarge"
)

// QuotaExceededReason is the reason when a ResourceQuota of the namespace refused an ArtifactDeployment the vector
// needs (an object count quota such as count/artifactdeployments.konfidence.cloud). The artifact is retried with
// backoff until the quota admits it; the message names the quota.
const QuotaExceededReason = "QuotaExceeded"
