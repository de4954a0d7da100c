package vectordeployment

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// RegistryCredentials says which registry credentials a VectorDeployment's reads present. They are read at every
// reconcile, around the cache: a rotated Secret takes effect at the next reconcile, without a restart, and the
// operator needs no watch on Secrets.
type RegistryCredentials struct {
	// Secrets are the operator's own kubernetes.io/dockerconfigjson Secrets (--registry-secrets).
	Secrets []client.ObjectKey
	// Hosts are the registry hosts the operator's Secrets are used for (--registry-secrets-hosts): any tenant may
	// name any host, so credentials for other hosts must not be presented on a tenant's behalf.
	Hosts []string
}

// forVectorDeployment returns the credentials of vd's reads: the operator's for the hosts it allows them for, then
// those of vd's own Secret (spec.secretRef), which win for the hosts they name. A Secret that cannot be read is
// retried: it may yet be created or fixed.
func (rc RegistryCredentials) forVectorDeployment(ctx context.Context, reader client.Reader, vd *konfidencev1.VectorDeployment) (ocm.Credentials, error) {
	global, err := registryCredentials(ctx, reader, rc.Secrets)
	if err != nil {
		return nil, err
	}
	creds := ocm.Credentials{}
	for _, host := range rc.Hosts {
		if cred, ok := global[host]; ok {
			creds[host] = cred
		}
	}
	if vd.Spec.SecretRef == nil {
		return creds, nil
	}
	own, err := registryCredentials(ctx, reader, []client.ObjectKey{{Namespace: vd.Namespace, Name: vd.Spec.SecretRef.Name}})
	if err != nil {
		return nil, err
	}
	maps.Copy(creds, own)
	return creds, nil
}

// registryCredentials reads kubernetes.io/dockerconfigjson Secrets; later ones win for a host they share.
func registryCredentials(ctx context.Context, reader client.Reader, keys []client.ObjectKey) (ocm.Credentials, error) {
	secrets := make([]corev1.Secret, len(keys))
	for i, key := range keys {
		if err := reader.Get(ctx, key, &secrets[i]); err != nil {
			reason := konfidencev1.RegistrySecretInvalidReason
			if apierrors.IsNotFound(err) {
				reason = konfidencev1.RegistrySecretNotFoundReason
			}
			return nil, outcome.Retrying(reason, fmt.Errorf("registry secret %s: %w", key, err))
		}
	}
	creds, err := ocm.CredentialsFromSecrets(secrets...)
	if err != nil {
		return nil, outcome.Retrying(konfidencev1.RegistrySecretInvalidReason, err)
	}
	return creds, nil
}

// parseSecretKeys reads namespace/name references to Secrets, as --registry-secrets takes them.
func parseSecretKeys(refs []string) ([]client.ObjectKey, error) {
	keys := make([]client.ObjectKey, len(refs))
	for i, ref := range refs {
		namespace, name, ok := strings.Cut(ref, "/")
		if !ok || namespace == "" || name == "" {
			return nil, fmt.Errorf("registry secret %q: want namespace/name", ref)
		}
		keys[i] = client.ObjectKey{Namespace: namespace, Name: name}
	}
	return keys, nil
}
