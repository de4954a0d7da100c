package ocm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Credentials maps a registry host[:port] to the credential the client presents there. Hosts without an entry
// are accessed anonymously.
type Credentials map[string]auth.Credential

// dockerConfig is the .dockerconfigjson format; only the fields registries need are read. Kept by hand rather
// than oras' credentials.NewMemoryStoreFromDockerConfig: that returns an opaque store (no per-host map, so no
// "later Secrets win" across Secrets), its errors quote the decoded auth field, i.e. the password, and a Secret
// must not name credential helpers for the operator to run (the CLI gets them: Options.CredentialStore).
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
		RegistryToken string `json:"registrytoken"`
	} `json:"auths"`
}

// CredentialsFromSecrets reads the credentials of kubernetes.io/dockerconfigjson Secrets. Later secrets win
// for a host they share with earlier ones. Errors name the secret but never carry its content.
func CredentialsFromSecrets(secrets ...corev1.Secret) (Credentials, error) {
	creds := Credentials{}
	for _, s := range secrets {
		if s.Type != corev1.SecretTypeDockerConfigJson {
			return nil, fmt.Errorf("secret %s/%s has type %q, want %q", s.Namespace, s.Name, s.Type, corev1.SecretTypeDockerConfigJson)
		}
		if err := creds.AddDockerConfigJSON(s.Data[corev1.DockerConfigJsonKey]); err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return creds, nil
}

// AddDockerConfigJSON adds the credentials of a .dockerconfigjson document, keyed by the host of each entry
// (entries may be written as URLs, e.g. https://index.docker.io/v1/).
func (c Credentials) AddDockerConfigJSON(data []byte) error {
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		// The decoder's message can quote the input; report only the position-free gist.
		return fmt.Errorf("%s is not valid JSON", corev1.DockerConfigJsonKey)
	}
	for key, entry := range cfg.Auths {
		cred := auth.Credential{
			Username:     entry.Username,
			Password:     entry.Password,
			RefreshToken: entry.IdentityToken,
			AccessToken:  entry.RegistryToken,
		}
		if entry.Auth != "" {
			decoded, err := base64.StdEncoding.DecodeString(entry.Auth)
			if err != nil {
				return fmt.Errorf("auth of registry %s is not base64", key)
			}
			user, pass, ok := strings.Cut(string(decoded), ":")
			if !ok {
				return fmt.Errorf("auth of registry %s is not user:password", key)
			}
			cred.Username, cred.Password = user, pass
		}
		c[registryHost(key)] = cred
	}
	return nil
}

func registryHost(key string) string {
	if strings.Contains(key, "://") {
		if u, err := url.Parse(key); err == nil {
			return u.Host
		}
	}
	host, _, _ := strings.Cut(key, "/")
	return host
}

// credential answers the registry client: Credentials first, then the CredentialStore, else anonymous.
func (o Options) credential(ctx context.Context, hostport string) (auth.Credential, error) {
	if c, ok := o.Credentials[hostport]; ok || o.CredentialStore == nil {
		return c, nil // the zero value is auth.EmptyCredential: anonymous
	}
	c, err := credentials.Credential(o.CredentialStore)(ctx, hostport)
	if err != nil {
		// oras' message can quote the decoded auth field; name only the host.
		return auth.EmptyCredential, fmt.Errorf("credential store: invalid entry for %s", hostport)
	}
	return c, nil
}
