package vectordeployment

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TrustDefault is the operator-wide verification policy, for VectorDeployments without spec.verify.
type TrustDefault struct {
	// Require makes every such VectorDeployment verify against the keys in Secret.
	Require bool
	// Secret holds the keys, PEM by signature name.
	Secret client.ObjectKey
	// Signatures are the names required; empty: any signature with a key.
	Signatures []string
}

// trust returns the policy vd's vector must satisfy: its own spec.verify, else the operator's default, else none.
// Keys are read from the API server on every reconcile, so a rotated Secret applies at the next one.
func (r *Reconciler) trust(ctx context.Context, vd *konfidencev1.VectorDeployment) (*Trust, error) {
	switch {
	case vd.Spec.Verify != nil:
		key := client.ObjectKey{Namespace: vd.Namespace, Name: vd.Spec.Verify.SecretRef.Name}
		return r.readTrust(ctx, key, vd.Spec.Verify.Signatures)
	case r.TrustDefault.Require:
		return r.readTrust(ctx, r.TrustDefault.Secret, r.TrustDefault.Signatures)
	}
	return nil, nil
}

func (r *Reconciler) readTrust(ctx context.Context, key client.ObjectKey, signatures []string) (*Trust, error) {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		return nil, fmt.Errorf("secret %s: %w", key, err)
	}
	if len(secret.Data) == 0 {
		return nil, fmt.Errorf("secret %s holds no keys", key)
	}
	return &Trust{Signatures: signatures, Keys: secret.Data}, nil
}

// secretKey reads a Secret reference given as namespace/name, or as a bare name in the operator's namespace
// (RUNTIME_NAMESPACE, as for Flux's controllers).
func secretKey(ref string) (client.ObjectKey, error) {
	if namespace, name, ok := strings.Cut(ref, "/"); ok {
		return client.ObjectKey{Namespace: namespace, Name: name}, nil
	}
	namespace := os.Getenv("RUNTIME_NAMESPACE")
	if namespace == "" {
		return client.ObjectKey{}, fmt.Errorf("signature keys secret %q: give namespace/name, or set RUNTIME_NAMESPACE", ref)
	}
	return client.ObjectKey{Namespace: namespace, Name: ref}, nil
}
