package v1alpha1

// Condition and event reasons of the Flux deployer for remote deployment targets: what it refuses in a tenant's
// kubeconfig Secret, and a remote target that does not answer in time.
const (
	// UnsafeKubeConfigReason: a remote target's kubeconfig asks for something the operator does not do on a
	// tenant's behalf: run a command (exec, unless --insecure-kubeconfig-exec), use an auth-provider plugin, read a
	// file of the operator's (tokenFile, client-certificate, client-key, certificate-authority), or skip TLS
	// verification (unless --insecure-kubeconfig-tls).
	UnsafeKubeConfigReason = "UnsafeKubeConfig"
	// RemoteTargetTimeoutReason: a remote target did not answer within --remote-request-timeout or the
	// reconcile's --reconcile-timeout.
	RemoteTargetTimeoutReason = "RemoteTargetTimeout"
	// RemoteTargetNotAllowedReason: an ArtifactDeployment would deploy to a remote cluster (a kubeconfig Secret or a
	// deploymentTargets entry), and the operator was not started with --allowed-target-hosts, or the kubeconfig's
	// API server (or proxy) is not among those hosts.
	RemoteTargetNotAllowedReason = "RemoteTargetNotAllowed"
)
