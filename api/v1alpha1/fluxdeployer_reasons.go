package v1alpha1

// Condition and event reasons of the Flux deployer. Reasons that Flux itself defines (Progressing, Succeeded, …)
// come from github.com/fluxcd/pkg/apis/meta or are carried over from the Flux objects.
const (
	// MultipleHelmChartResourcesReason: a helm artifact's component has more than one helmChart resource.
	MultipleHelmChartResourcesReason = "MultipleHelmChartResources"
	// MultipleKustomizeResourcesReason: a kustomize artifact's component has more than one kustomize resource.
	MultipleKustomizeResourcesReason = "MultipleKustomizeResources"
	// NoDeployableResourceReason: the component has no resource of the type the manifest deploys.
	NoDeployableResourceReason = "NoDeployableResource"
	// InvalidNameReason: the ArtifactDeployment's name cannot name its Flux objects (a DNS-1123 label) or, for
	// Helm, its release (at most 53 characters, unless a taken-over HelmRelease names it), or, for Kustomize, ends
	// in a part too long for a name suffix; the deployer never renames.
	InvalidNameReason = "InvalidName"
	// UnsupportedAccessTypeReason: the resource's access type is neither an OCI nor a Helm access.
	UnsupportedAccessTypeReason = "UnsupportedAccessType"
	// InvalidAccessSpecReason: the access has a supported type but cannot be read, e.g. a malformed image reference.
	InvalidAccessSpecReason = "InvalidAccessSpec"
	// RegistryNotAllowedReason: the artifact would be pulled from a host (an OCI registry, a Helm repository) that
	// is not among the operator's --allowed-registries; no Flux object names it, and those applied before are
	// suspended.
	RegistryNotAllowedReason = "RegistryNotAllowed"
	// CredentialsRequireTLSReason: the artifact is pulled over plain HTTP (an http:// access) from a host that a pull
	// Secret is configured for, and the configuration does not allow credentials in clear for that host; nothing is
	// applied, so Flux never sends them.
	CredentialsRequireTLSReason = "CredentialsRequireTLS"
	// InvalidConfigurationReason: the Flux deployer's ConfigMap cannot be read, or a value in it does not parse. The
	// last good configuration stays in use (reported on the ConfigMap's events, not on the ArtifactDeployments);
	// only without one, after a start, do the ArtifactDeployments carry the reason and wait for the fix.
	InvalidConfigurationReason = "InvalidConfiguration"
	// UnknownConfigurationKeyReason: the Flux deployer's ConfigMap has a key the deployer does not read, e.g. a
	// misspelt one: a Warning event on the ConfigMap names it (with the key it most likely meant) and the key is
	// ignored.
	UnknownConfigurationKeyReason = "UnknownConfigurationKey"
	// ServiceAccountNotFoundReason: the ServiceAccount the configuration has the ArtifactDeployment's Flux objects
	// run as does not exist in its namespace; nothing is applied until it does (looked for again every
	// dependency requeue interval).
	ServiceAccountNotFoundReason = "ServiceAccountNotFound"
	// ApplyFailedReason: the API server refused a Flux object.
	ApplyFailedReason = "ApplyFailed"
	// FluxObjectNotOwnedReason: a Flux object of a name the ArtifactDeployment's objects take exists and the
	// ArtifactDeployment does not control it (no controller reference with its UID): someone else created it. Nothing
	// is applied, so that object is neither taken over nor, at the ArtifactDeployment's teardown, deleted.
	FluxObjectNotOwnedReason = "FluxObjectNotOwned"
	// DuplicateDeploymentResultReason: two Services claim the same deployment result name.
	DuplicateDeploymentResultReason = "DuplicateDeploymentResult"
	// DeploymentResultFailedReason: the Services of a deployment could not be read (e.g. an unreachable target).
	DeploymentResultFailedReason = "DeploymentResultFailed"
	// WorkloadFailingReason: while Flux installs or upgrades the artifact and waits for its workloads, a pod of a
	// Deployment, StatefulSet or DaemonSet it rendered does not run (CrashLoopBackOff, ImagePullBackOff, an exit
	// code other than 0): reported on AppHealthy as soon as it is seen rather than at Flux's timeout. Retried:
	// Flux's own outcome replaces it once Flux is done.
	WorkloadFailingReason = "WorkloadFailing"

	// FluxObjectUpdatedReason is the event reason for a Flux object the deployer changed, or deleted because no
	// Flux object of the ArtifactDeployment uses it any more (a source replaced by one of another kind).
	FluxObjectUpdatedReason = "FluxObjectUpdated"
)

// Reasons of the Flux deployer for a cluster that lacks part of Flux.
const (
	// FluxCRDsMissingReason: the API server does not serve a Flux kind the ArtifactDeployment needs (its CRD is not
	// installed); the deployer watches for it and deploys the ArtifactDeployment once it is.
	FluxCRDsMissingReason = "FluxCRDsMissing"
)
