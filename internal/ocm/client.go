package ocm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxBlobSize = 4 << 20
	DefaultTimeout     = time.Minute
	DefaultConcurrency = 4
	DefaultCacheSize   = 512
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// Credentials per registry host; other hosts are asked of CredentialStore, else accessed anonymously.
	Credentials Credentials
	// CredentialStore is a Docker credential store, e.g. oras' credentials.NewStore of a config.json, which also
	// asks the credential helpers the file names (credsStore, credHelpers). For the CLI: the operator reads Secrets.
	CredentialStore credentials.Store
	// RootCAs verifies registry certificates; nil means the system pool.
	RootCAs *x509.CertPool
	// MaxBlobSize caps every manifest, config, descriptor and manifest blob read, so a hostile registry cannot
	// exhaust memory.
	MaxBlobSize int64
	// Timeout bounds one ResolveVector call, on top of the caller's context.
	Timeout time.Duration
	// Concurrency bounds how many artifacts of a vector are resolved at once.
	Concurrency int
	// CacheSize bounds the number of cached vectors and, separately, artifacts. Negative disables caching.
	CacheSize int
}

// Client reads vectors and artifacts from OCI registries and CTF directories. It is safe for concurrent use;
// share one per process so its cache and registry tokens are shared.
type Client struct {
	opts      Options
	http      *auth.Client
	vectors   *lru[*Vector]
	artifacts *lru[*Artifact]
	verified  *lru[struct{}] // VerifyVector's successes
}

// NewClient returns a Client.
func NewClient(opts Options) *Client {
	if opts.MaxBlobSize <= 0 {
		opts.MaxBlobSize = DefaultMaxBlobSize
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
	return &Client{
		opts: opts,
		http: &auth.Client{
			Client:     &http.Client{Transport: retry.NewTransport(countingTransport{next: transport})},
			Cache:      auth.NewCache(),
			Credential: opts.credential,
		},
		vectors:   newLRU[*Vector]("vector", opts.CacheSize),
		artifacts: newLRU[*Artifact]("artifact", opts.CacheSize),
		verified:  newLRU[struct{}]("verification", opts.CacheSize),
	}
}

// store is the OCI repository that holds one component's versions, in a registry or a CTF. remote.Repository
// satisfies it; ctfStore is the CTF counterpart.
type store interface {
	FetchReference(ctx context.Context, reference string) (ocispec.Descriptor, io.ReadCloser, error)
	Fetch(ctx context.Context, target ocispec.Descriptor) (io.ReadCloser, error)
}

func (c *Client) store(r Ref) (store, error) {
	if r.IsCTF() {
		return newCTFStore(r)
	}
	ref := registry.Reference{Registry: r.Host(), Repository: spec.RepositoryPath(r.SubPath, r.Component)}
	if err := ref.ValidateRepository(); err != nil {
		return nil, &Error{Reason: ReasonReferenceInvalid, Ref: r.String(), Err: err}
	}
	return &remote.Repository{Client: c.http, Reference: ref, PlainHTTP: r.PlainHTTP()}, nil
}
