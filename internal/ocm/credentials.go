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
)

// Credentials maps a registry host[:port] to the credential the client presents there. Hosts without an entry
// are accessed anonymously.
type Credentials map[string]auth.Credential

// dockerConfig is the .dockerconfigjson format; only the fields registries need are read.
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

func (c Credentials) credential(_ context.Context, hostport string) (auth.Credential, error) {
	return c[hostport], nil // the zero value is auth.EmptyCredential: anonymous
}
