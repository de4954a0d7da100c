package vectordeployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
)

// ocmSource reads vectors through the OCM client and turns its artifacts into ArtifactDeployment spec parts.
type ocmSource struct {
	resolver vectorReader
}

// vectorReader reads and verifies vectors; *ocm.Client implements it.
type vectorReader interface {
	ocm.Resolver
	VerifyVector(ctx context.Context, v *ocm.Vector, policy ocm.TrustPolicy) error
}

func (s ocmSource) ResolveVector(ctx context.Context, ref string, trust []Trust) ([]ResolvedArtifact, error) {
	// A CTF reference names a directory on the operator's own file system: no tenant may point it there.
	if r, err := ocm.ParseRef(ref); err == nil && r.IsCTF() {
		return nil, &ocm.Error{Reason: ocm.ReasonReferenceInvalid, Ref: ref,
			Err: errors.New("a VectorDeployment must name an OCI registry, not a CTF directory of the operator's file system")}
	}
	v, err := s.resolver.ResolveVector(ctx, ref)
	if v == nil {
		return nil, err
	}
	// The vector verified is the one deployed: one read serves every policy and the deployment.
	for _, t := range trust {
		if err := s.verify(ctx, v, t); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Origin, err)
		}
	}
	return ArtifactsOf(v), nil
}

// ArtifactsOf turns a vector read by the OCM client into the artifacts the reconciler deploys, in reference order.
func ArtifactsOf(v *ocm.Vector) []ResolvedArtifact {
	out := make([]ResolvedArtifact, len(v.References))
	for i, name := range v.References {
		out[i] = ResolvedArtifact{Ref: name, Component: v.Components[i], Err: v.Errors[i]}
		if v.Artifacts[i] != nil {
			out[i].Artifact = artifactFromOCM(v.Artifacts[i])
		}
	}
	return out
}

func (s ocmSource) verify(ctx context.Context, v *ocm.Vector, trust Trust) error {
	keys, err := signing.ParseKeys(trust.Keys)
	if err != nil {
		return ocm.KeyError(v.Component+":"+v.Version, fmt.Errorf("trusted keys: %w", err))
	}
	return s.resolver.VerifyVector(ctx, v, ocm.TrustPolicy{Keys: keys, Signatures: trust.Signatures})
}

// artifactFromOCM copies what an ArtifactDeployment needs; the OCM client's values are shared with its cache.
func artifactFromOCM(a *ocm.Artifact) Artifact {
	out := Artifact{
		Component: a.Component,
		Version:   a.Version,
		Manifest:  konfidencev1.ArtifactManifest{Type: a.Type, AllowReuse: a.AllowReuse},
		Source:    a.Source,
	}
	for _, t := range a.Tasks {
		out.Tasks = append(out.Tasks, konfidencev1.TaskManifest{
			Name: t.Name, Type: t.Type, DependsOn: append([]string(nil), t.DependsOn...), Spec: rawJSON(t.Spec),
		})
	}
	for _, r := range a.Resources {
		out.Resources = append(out.Resources, konfidencev1.Resource{Name: r.Name, Type: r.Type, Content: rawJSON(r.Access), Digest: r.Digest})
	}
	return out
}

func rawJSON(raw []byte) *apiextensionsv1.JSON {
	if len(raw) == 0 {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: append([]byte(nil), raw...)}
}

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
// those of vd's own Secret (spec.secretRef), which win for the hosts they name.
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

// secretError is a registry Secret that could not be read, with its condition reason.
type secretError struct {
	reason string
	err    error
}

func (e *secretError) Error() string { return e.err.Error() }
func (e *secretError) Unwrap() error { return e.err }

// registryCredentials reads kubernetes.io/dockerconfigjson Secrets; later ones win for a host they share.
func registryCredentials(ctx context.Context, reader client.Reader, keys []client.ObjectKey) (ocm.Credentials, error) {
	secrets := make([]corev1.Secret, len(keys))
	for i, key := range keys {
		if err := reader.Get(ctx, key, &secrets[i]); err != nil {
			reason := konfidencev1.RegistrySecretInvalidReason
			if apierrors.IsNotFound(err) {
				reason = konfidencev1.RegistrySecretNotFoundReason
			}
			return nil, &secretError{reason: reason, err: fmt.Errorf("registry secret %s: %w", key, err)}
		}
	}
	creds, err := ocm.CredentialsFromSecrets(secrets...)
	if err != nil {
		return nil, &secretError{reason: konfidencev1.RegistrySecretInvalidReason, err: err}
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
