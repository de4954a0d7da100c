package ocm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	klru "k8s.io/utils/lru"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
	"github.com/fluxdeployer/fluxdeployer/pkg/allowlist"
)

// Defaults for Options fields left zero. The size limits are what real component versions need with room to
// spare, and no more, because decoding amplifies: a JSON array of empty objects costs some 150 times its bytes in
// heap, YAML as much (docs/security.md has the measurements and BenchmarkWorstAcceptedDescriptor reproduces them).
const (
	// DefaultMaxManifestSize caps OCI manifests, indexes and configs. A component version's manifest lists one
	// layer per local blob, about 300 bytes each with OCM's annotation: 64 KiB holds some 200.
	DefaultMaxManifestSize = 64 << 10
	// DefaultMaxDescriptorSize caps the component descriptor layer. A component reference takes about 250 bytes
	// with its digest, a resource 200 to 500: 192 KiB holds a vector of DefaultMaxReferences artifacts, or an
	// artifact of 400 resources (an ArtifactDeployment holds at most 64), and keeps the worst shape near 25 MiB.
	DefaultMaxDescriptorSize = 192 << 10
	// DefaultMaxBlobSize caps the local blobs read: Konfidence's artifact and task manifests, a few hundred bytes.
	DefaultMaxBlobSize = 64 << 10
	// DefaultMaxReferences caps the component references of a vector: each becomes an artifact to read and an
	// ArtifactDeployment.
	DefaultMaxReferences = 512
	DefaultTimeout       = time.Minute
	// DefaultHostConcurrency is half the operator's default --concurrent (4).
	DefaultHostConcurrency = 2
	// DefaultHostWait is far above a healthy registry's read time, and far below DefaultTimeout.
	DefaultHostWait = 10 * time.Second
	// DefaultNamespaceConcurrency is half the operator's default --concurrent (4): one namespace's reads hold at
	// most two workers whatever registries they name.
	DefaultNamespaceConcurrency = 2
	// DefaultNamespaceWait is above a healthy registry's read time and short, since a read waiting for its
	// namespace's turn holds a worker another namespace may be waiting for: past it, the read gives up and waits in
	// the controller's queue with backoff instead.
	DefaultNamespaceWait = 2 * time.Second
	DefaultConcurrency   = 4
	DefaultCacheSize     = 512
	// DefaultCacheBytes bounds each cache (vectors, artifacts) by what its entries retain. An artifact of a few
	// resources retains 1 to 2 KiB, a vector its artifacts besides: 32 MiB holds DefaultCacheSize of either with
	// room for vectors of hundreds of artifacts, yet the two caches together take an eighth of the operator's 512 Mi.
	DefaultCacheBytes = 32 << 20
)

// Timeouts of the registry transport, below Options.Timeout, which bounds each call as a whole: a registry that
// accepted a request and sent no response headers within responseHeaderTimeout is not going to, and an idle
// connection is closed after idleConnTimeout rather than kept open for a registry that may never be read again.
const (
	responseHeaderTimeout = 30 * time.Second
	idleConnTimeout       = 30 * time.Second
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// Credentials per registry host; other hosts are asked of CredentialStore, else accessed anonymously.
	Credentials Credentials
	// CredentialStore is a Docker credential store, e.g. oras' credentials.NewStore of a config.json, which also
	// asks the credential helpers the file names (credsStore, credHelpers). For the CLI: the operator reads Secrets.
	CredentialStore credentials.Store
	// InsecureCredentialHosts are the registry hosts (host[:port]) credentials may be sent to over plain HTTP. To
	// any other host an http:// reference is read anonymously.
	InsecureCredentialHosts []string
	// RootCAs verifies registry certificates; nil means the system pool.
	RootCAs *x509.CertPool
	// MaxManifestSize, MaxDescriptorSize and MaxBlobSize cap what is read of manifests (indexes, configs),
	// descriptor layers and local blobs, so that a hostile registry cannot exhaust memory; see the defaults.
	MaxManifestSize   int64
	MaxDescriptorSize int64
	MaxBlobSize       int64
	// MaxReferences caps the component references of a vector.
	MaxReferences int
	// AllowedHosts are the registry hosts (host[:port]) references, artifact accesses and redirects may name;
	// empty allows every host.
	AllowedHosts allowlist.Hosts
	// HostConcurrency bounds the vectors read at once from one registry host, and HostWait how long a read waits
	// for its turn before it fails as RegistryBusy: a registry that hangs then holds at most HostConcurrency of
	// the caller's workers. Keep HostConcurrency below the number of workers.
	HostConcurrency int
	HostWait        time.Duration
	// NamespaceConcurrency bounds the reads in flight for one namespace (Read.Namespace), and NamespaceWait how long
	// a read waits for its turn before it fails as NamespaceBusy: a tenant's registries, under however many hosts,
	// ports or names, then hold at most NamespaceConcurrency of the caller's workers, and other namespaces' reads go
	// on with the rest. Keep it below the number of workers.
	NamespaceConcurrency int
	NamespaceWait        time.Duration
	// Timeout bounds one ResolveVector call, and one VerifyVector call, on top of the caller's context.
	Timeout time.Duration
	// Concurrency bounds how many artifacts of a vector are resolved at once.
	Concurrency int
	// CacheSize bounds the number of cached vectors and, separately, artifacts. Negative disables caching.
	CacheSize int
	// CacheBytes bounds the bytes each cache retains, as it counts them (the retained, parsed form of its
	// entries): a registry decides how large its component versions are. Negative disables caching.
	CacheBytes int64
}

// withDefaults fills the fields left zero.
func (o Options) withDefaults() Options {
	setDefault(&o.MaxManifestSize, DefaultMaxManifestSize)
	setDefault(&o.MaxDescriptorSize, DefaultMaxDescriptorSize)
	setDefault(&o.MaxBlobSize, DefaultMaxBlobSize)
	setDefault(&o.MaxReferences, DefaultMaxReferences)
	setDefault(&o.Timeout, DefaultTimeout)
	setDefault(&o.HostConcurrency, DefaultHostConcurrency)
	setDefault(&o.HostWait, DefaultHostWait)
	setDefault(&o.NamespaceConcurrency, DefaultNamespaceConcurrency)
	setDefault(&o.NamespaceWait, DefaultNamespaceWait)
	setDefault(&o.Concurrency, DefaultConcurrency)
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	return o
}

func setDefault[T int | int64 | time.Duration](field *T, value T) {
	if *field <= 0 {
		*field = value
	}
}

// Read says how one ResolveVector or VerifyVector call reads, beside the Client's Options.
type Read struct {
	// Credentials are presented ahead of Options.Credentials and the CredentialStore: the operator passes those of
	// one VectorDeployment's reads, read for that reconcile from the Secrets it may use. Reads under different
	// credentials never share cached results or tokens.
	Credentials Credentials
	// BypassCache makes the reads go to the registry and refresh the cache with what they find. A version is
	// immutable, yet a user who asks for a reconcile expects the registry to be asked: a component version pushed
	// again under the same version (against OCM's rules, but it happens) or one deleted shows up this way.
	BypassCache bool
	// Revalidate serves a cached vector only while its version's tag still points at the manifest it was read
	// from, which costs one request; a vector whose tag moved is read again, its artifacts from the cache. It is
	// the cheap way to ask the registry: a caller that bypassed the cache a moment ago revalidates instead.
	Revalidate bool
	// Namespace is the namespace the reads are made for; the reads in flight for one namespace are bounded
	// (Options.NamespaceConcurrency). Empty: bounded per registry host only.
	Namespace string
}

// Client reads vectors and artifacts from OCI registries and CTF directories. It is safe for concurrent use;
// share one per process so its cache and registry tokens are shared.
type Client struct {
	opts Options
	http *http.Client
	// tokens holds one oras token cache per credential (by access.id), so that a token obtained with one
	// tenant's credentials is never presented for another's reads.
	tokens     *klru.Cache
	hosts      *limiter
	namespaces *limiter
	vectors    *lru[*Vector]
	artifacts  *lru[*Artifact]
	verified   *lru[struct{}] // VerifyVector's successes
}

// NewClient returns a Client.
func NewClient(opts Options) *Client {
	opts = opts.withDefaults()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
	transport.ResponseHeaderTimeout, transport.IdleConnTimeout = responseHeaderTimeout, idleConnTimeout
	return &Client{
		opts: opts,
		http: &http.Client{Transport: retry.NewTransport(allowedTransport{allowed: opts.AllowedHosts, next: countingTransport{next: transport}}),
			CheckRedirect: redirectPolicy(opts.AllowedHosts)},
		tokens:     klru.New(DefaultCacheSize),
		hosts:      newLimiter(opts.HostConcurrency, opts.HostWait, ReasonRegistryBusy, "registry"),
		namespaces: newLimiter(opts.NamespaceConcurrency, opts.NamespaceWait, ReasonNamespaceBusy, "namespace"),
		vectors:    newLRU("vector", opts.CacheSize, opts.CacheBytes, (*Vector).retainedBytes),
		artifacts:  newLRU("artifact", opts.CacheSize, opts.CacheBytes, (*Artifact).retainedBytes),
		verified:   newLRU("verification", opts.CacheSize, opts.CacheBytes, func(struct{}) int64 { return 0 }),
	}
}

// store is the OCI repository that holds one component's versions, in a registry or a CTF. remote.Repository
// satisfies it; ctfStore is the CTF counterpart.
type store interface {
	FetchReference(ctx context.Context, reference string) (ocispec.Descriptor, io.ReadCloser, error)
	Fetch(ctx context.Context, target ocispec.Descriptor) (io.ReadCloser, error)
}

func (c *Client) store(r Ref, a access) (store, error) {
	if r.IsCTF() {
		return newCTFStore(r)
	}
	ref := registry.Reference{Registry: r.Host(), Repository: spec.RepositoryPath(r.SubPath, r.Component)}
	if err := ref.ValidateRepository(); err != nil {
		return nil, &Error{Reason: ReasonReferenceInvalid, Ref: r.Describe(), Err: err}
	}
	return &remote.Repository{Client: c.authClient(a), Reference: ref, PlainHTTP: r.PlainHTTP()}, nil
}

// authClient is the HTTP client of the reads under one access: its credential, and its credential's tokens.
func (c *Client) authClient(a access) *auth.Client {
	return &auth.Client{Client: c.http, Cache: c.tokenCache(a.id), Credential: auth.StaticCredential(a.host, a.cred)}
}

// tokenCache returns the token cache of one credential.
func (c *Client) tokenCache(id string) auth.Cache {
	if cache, ok := c.tokens.Get(id); ok {
		return cache.(auth.Cache)
	}
	cache := auth.NewCache()
	c.tokens.Add(id, cache)
	return cache
}
