package ocm

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
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

// credential finds the credential for a registry host: the read's first (Read.Credentials), then
// Options.Credentials, then the CredentialStore, else anonymous.
func (c *Client) credential(ctx context.Context, hostport string, creds Credentials) (auth.Credential, error) {
	if cred, ok := creds[hostport]; ok {
		return cred, nil
	}
	if cred, ok := c.opts.Credentials[hostport]; ok || c.opts.CredentialStore == nil {
		return cred, nil // the zero value is auth.EmptyCredential: anonymous
	}
	cred, err := credentials.Credential(c.opts.CredentialStore)(ctx, hostport)
	if err != nil {
		// oras' message can quote the decoded auth field; name only the host.
		return auth.EmptyCredential, fmt.Errorf("credential store: invalid entry for %s", hostport)
	}
	return cred, nil
}

// access is how the reads of one repository authenticate, decided once per ResolveVector.
type access struct {
	host string
	cred auth.Credential
	// id identifies cred in cache keys ("" when anonymous): results read with a credential are served only to reads
	// that present the same one, so one tenant's credentials never open another tenant's reads.
	id string
	// withheld: a credential exists for host, but the reference asks for plain HTTP and the operator did not allow
	// credentials in clear for host, so the reads go anonymously.
	withheld bool
}

// access decides the credential r's reads present.
func (c *Client) access(ctx context.Context, r Ref, creds Credentials) (access, error) {
	if r.IsCTF() {
		return access{}, nil
	}
	return c.hostAccess(ctx, r.Host(), r.PlainHTTP(), r.Describe(), creds)
}

// hostAccess decides the credential the reads of a registry host present, for ref. Credentials go in clear only
// to the hosts Options.InsecureCredentialHosts lists: the scheme is the reference's, i.e. the tenant's, to choose.
func (c *Client) hostAccess(ctx context.Context, host string, plainHTTP bool, ref string, creds Credentials) (access, error) {
	a := access{host: host}
	cred, err := c.credential(ctx, a.host, creds)
	switch {
	case err != nil:
		return a, &Error{Reason: ReasonUnauthorized, Ref: ref, Err: err}
	case cred == auth.EmptyCredential:
		return a, nil
	case plainHTTP && !slices.Contains(c.opts.InsecureCredentialHosts, a.host):
		a.withheld = true
		return a, nil
	}
	a.cred, a.id = cred, credentialID(cred)
	return a, nil
}

// explain turns the registry's refusal of an anonymous read into why the read was anonymous, when credentials
// were withheld.
func (a access) explain(err error) error {
	if !a.withheld || !errors.Is(err, ErrUnauthorized) {
		return err
	}
	return &Error{Reason: ReasonCredentialsRequireTLS, Ref: a.host, Err: fmt.Errorf(
		"credentials for %s are not sent over plain HTTP: use an https reference, or allow the host with --insecure-registry-credentials-hosts: %w", a.host, err)}
}

// credentialID is a digest of the credential, for cache keys; it does not reveal the credential.
func credentialID(cred auth.Credential) string {
	h := sha256.New()
	for _, part := range []string{cred.Username, cred.Password, cred.RefreshToken, cred.AccessToken} {
		_, _ = fmt.Fprintf(h, "%d:%s", len(part), part) // a hash.Hash never fails to write
	}
	return hex.EncodeToString(h.Sum(nil))
}

// credentialsID identifies the credentials a read presents (Read.Credentials), for the cache keys of outcomes that
// depend on what those reads could see: one tenant's verification, which read a private registry with its
// credentials, is not served to another tenant.
func credentialsID(creds Credentials) string {
	h := sha256.New()
	for _, host := range slices.Sorted(maps.Keys(creds)) {
		_, _ = fmt.Fprintf(h, "%d:%s %s\n", len(host), host, credentialID(creds[host])) // a hash.Hash never fails to write
	}
	return hex.EncodeToString(h.Sum(nil))
}
