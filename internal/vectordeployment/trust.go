package vectordeployment

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TrustDefault is the platform's verification requirement (--require-signatures). It applies to every
// VectorDeployment, with spec.verify or without.
type TrustDefault struct {
	// Require makes every vector verify against the keys in Secret.
	Require bool
	// Secret holds the keys, PEM by signature name.
	Secret client.ObjectKey
	// Signatures are the names required; empty: any signature with a key.
	Signatures []string
}

// trustRequirement is one policy a vector must satisfy: signatures that verify with the keys in Secret.
type trustRequirement struct {
	// Origin says whose requirement it is, for messages.
	Origin     string
	Secret     client.ObjectKey
	Signatures []string
}

// Origins of trust requirements, as messages name them.
const (
	platformOrigin = "the operator's required signatures"
	tenantOrigin   = "spec.verify"
)

// trustRequirements returns the policies vd's vector must satisfy, every one of them: the platform's when it
// requires signatures, then vd's own spec.verify. spec.verify only adds a requirement. It never replaces the
// platform's: the tenant owns the Secret it names, so a tenant's key in place of the platform's would let the
// tenant sign and deploy any vector under a platform that requires its own signatures.
func trustRequirements(platform TrustDefault, vd *konfidencev1.VectorDeployment) []trustRequirement {
	var reqs []trustRequirement
	if platform.Require {
		reqs = append(reqs, trustRequirement{Origin: platformOrigin, Secret: platform.Secret, Signatures: platform.Signatures})
	}
	if v := vd.Spec.Verify; v != nil {
		reqs = append(reqs, trustRequirement{Origin: tenantOrigin,
			Secret: client.ObjectKey{Namespace: vd.Namespace, Name: v.SecretRef.Name}, Signatures: v.Signatures})
	}
	return reqs
}

// trust returns the policies vd's vector must satisfy, all of them, with their keys; none when nothing requires
// signatures. Keys are read from the API server on every reconcile, so a rotated Secret applies at the next one.
func (r *Reconciler) trust(ctx context.Context, vd *konfidencev1.VectorDeployment) ([]Trust, error) {
	reqs := trustRequirements(r.TrustDefault, vd)
	trusts := make([]Trust, len(reqs))
	for i, req := range reqs {
		keys, err := r.readKeys(ctx, req.Secret)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.Origin, err)
		}
		trusts[i] = Trust{Origin: req.Origin, Signatures: req.Signatures, Keys: keys}
	}
	return trusts, nil
}

func (r *Reconciler) readKeys(ctx context.Context, key client.ObjectKey) (map[string][]byte, error) {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("secret %s: %w", key, err)
	}
	if len(secret.Data) == 0 {
		return nil, fmt.Errorf("secret %s holds no keys", key)
	}
	return secret.Data, nil
}

// secretKey reads a Secret reference given as namespace/name, or as a bare name in the operator's namespace
// (RUNTIME_NAMESPACE, as for Flux's controllers).
func secretKey(ref, runtimeNamespace string) (client.ObjectKey, error) {
	if namespace, name, ok := strings.Cut(ref, "/"); ok {
		return client.ObjectKey{Namespace: namespace, Name: name}, nil
	}
	namespace := runtimeNamespace
	if namespace == "" {
		return client.ObjectKey{}, fmt.Errorf("signature keys secret %q: give namespace/name, or set RUNTIME_NAMESPACE", ref)
	}
	return client.ObjectKey{Namespace: namespace, Name: ref}, nil
}
