package ocmtest

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// Registry is an in-process OCI registry (go-containerregistry's, speaking the distribution API) that counts
// requests and can require basic auth, serve TLS and tamper with blobs.
type Registry struct {
	// Host is 127.0.0.1:<port>.
	Host      string
	server    *httptest.Server
	plainHTTP bool
	username  string
	password  string
	requests  atomic.Int64
	inFlight  atomic.Int64
	peak      atomic.Int64 // the most requests served at once
	down      atomic.Bool
	mu        sync.Mutex
	tampered  map[string]bool // blob digests whose content is served corrupted
	// authorizations are the Authorization headers received, in order, empty ones left out.
	authorizations []string
	hanging        atomic.Bool
	refusal        atomic.Pointer[string] // the message every request is refused with, when set
	redirect       atomic.Pointer[string] // the host every request is redirected to, when set
	realm          atomic.Pointer[string] // the token service every request without a bearer token is sent to, when set
	closed         chan struct{}          // closed by Close, releasing hanging requests
	closeOnce      sync.Once
}

// RegistryOption configures NewRegistry.
type RegistryOption func(*Registry)

// WithBasicAuth requires these credentials on every request.
func WithBasicAuth(username, password string) RegistryOption {
	return func(r *Registry) { r.username, r.password = username, password }
}

// WithTLS serves HTTPS with httptest's certificate, trusted by CertPool.
func WithTLS() RegistryOption {
	return func(r *Registry) { r.plainHTTP = false }
}

// NewRegistry starts a registry that stops with the test.
func NewRegistry(t testing.TB, opts ...RegistryOption) *Registry {
	r := StartRegistry(opts...)
	t.Cleanup(r.Close)
	return r
}

// StartRegistry starts a registry on a free loopback port; Close stops it.
func StartRegistry(opts ...RegistryOption) *Registry {
	return startRegistry(nil, opts...)
}

// ListenRegistry starts a registry listening on addr (host:port; port 0 picks a free one).
func ListenRegistry(addr string, opts ...RegistryOption) (*Registry, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return startRegistry(l, opts...), nil
}

func startRegistry(l net.Listener, opts ...RegistryOption) *Registry {
	r := &Registry{plainHTTP: true, tampered: map[string]bool{}, closed: make(chan struct{})}
	for _, o := range opts {
		o(r)
	}
	h := r.handler(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	r.server = httptest.NewUnstartedServer(h)
	if l != nil {
		_ = r.server.Listener.Close()
		r.server.Listener = l
	}
	r.server.Config.ErrorLog = log.New(io.Discard, "", 0) // rejected handshakes are what TLS tests provoke
	if r.plainHTTP {
		r.server.Start()
	} else {
		r.server.StartTLS()
	}
	r.Host = strings.TrimPrefix(strings.TrimPrefix(r.server.URL, "http://"), "https://")
	return r
}

// Close stops the registry.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		close(r.closed)
		r.server.Close()
	})
}

// SetHanging makes the registry accept every further request and never answer it while hanging is true, as a
// hostile or broken registry may: such a request ends only when its client gives up or the registry is closed.
func (r *Registry) SetHanging(hanging bool) { r.hanging.Store(hanging) }

// SetRefusing makes the registry answer every further request with 403 and a distribution-spec error whose
// message is message, as a hostile registry may word its errors; "" answers normally again.
func (r *Registry) SetRefusing(message string) {
	if message == "" {
		r.refusal.Store(nil)
		return
	}
	r.refusal.Store(&message)
}

// HostileText is error text of at most n bytes (at least one chunk of it) a hostile registry may answer with:
// terminal escapes (an OSC 52 sequence that sets the clipboard, a screen clear, a cursor move), BEL, CR, a C1 CSI
// and right-to-left overrides among plain words. Its JSON encoding stays below the 8 KiB of an error body the OCI
// client reads, for n up to 6 KiB.
func HostileText(n int) string {
	const chunk = "registry says no \x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1;1H\r\u009b31m\u202egnp.exe plain words to pad the chunk out "
	return strings.Repeat(chunk, max(1, n/len(chunk)))
}

func (r *Registry) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		r.notePeak(r.inFlight.Add(1))
		defer r.inFlight.Add(-1)
		r.recordAuthorization(req.Header.Get("Authorization"))
		if r.down.Load() {
			http.Error(w, "registry unavailable", http.StatusServiceUnavailable)
			return
		}
		if msg := r.refusal.Load(); msg != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": "DENIED", "message": *msg}}})
			return
		}
		if to := r.redirect.Load(); to != nil {
			target := *req.URL
			target.Scheme, target.Host = "http", *to
			http.Redirect(w, req, target.String(), http.StatusTemporaryRedirect) //nolint:gosec // G710: redirecting anywhere is what this hostile test registry is for
			return
		}
		if realm := r.realm.Load(); realm != nil && !strings.HasPrefix(req.Header.Get("Authorization"), "Bearer ") {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="ocmtest"`, *realm))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.hanging.Load() {
			select {
			case <-req.Context().Done():
			case <-r.closed:
			}
			return
		}
		if r.username != "" {
			if user, pass, ok := req.BasicAuth(); !ok || user != r.username || pass != r.password {
				w.Header().Set("WWW-Authenticate", `Basic realm="ocmtest"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if req.Method == http.MethodGet && r.isTampered(req.URL.Path) {
			w = &corruptingWriter{ResponseWriter: w}
		}
		next.ServeHTTP(w, req)
	})
}

func (r *Registry) isTampered(path string) bool {
	_, dig, ok := strings.Cut(path, "/blobs/")
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tampered[dig]
}

// corruptingWriter flips the first byte of the body: same length and headers, different content, as a
// compromised registry or mirror would serve it.
type corruptingWriter struct {
	http.ResponseWriter
	written bool
}

func (w *corruptingWriter) Write(p []byte) (int, error) {
	if !w.written && len(p) > 0 {
		w.written = true
		p = append([]byte{p[0] ^ 0xff}, p[1:]...)
	}
	return w.ResponseWriter.Write(p)
}

// Tamper makes the registry serve the blob with this digest corrupted.
func (r *Registry) Tamper(digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tampered[digest] = true
}

// RedirectTo makes the registry answer every further request with 307 Temporary Redirect to the same path and
// query on host (plain HTTP), as registries redirect blob reads to a storage host, and as a hostile registry
// redirects to whatever address it wants read.
func (r *Registry) RedirectTo(host string) { r.redirect.Store(&host) }

// SetBearerRealm answers every request without a bearer token with a challenge naming realm as the token
// service (RFC 6750, as the distribution API's token authentication does), and takes any bearer token: a registry
// that sends its clients, and their credentials, to whatever host it names.
func (r *Registry) SetBearerRealm(realm string) { r.realm.Store(&realm) }

// SetUnavailable makes the registry answer every request with 503 Service Unavailable while down is true, as
// a registry in maintenance or behind a failing load balancer does.
func (r *Registry) SetUnavailable(down bool) { r.down.Store(down) }

func (r *Registry) recordAuthorization(header string) {
	if header == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.authorizations = append(r.authorizations, header)
}

// Authorizations returns the Authorization headers received so far, in order; requests without one are left out.
// Whether they came over TLS is the registry's: a WithTLS registry receives nothing in clear.
func (r *Registry) Authorizations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.authorizations)
}

// Requests is the number of HTTP requests served so far, including rejected ones.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// PeakConcurrency is the most requests the registry has served at once since it started or ResetPeakConcurrency.
func (r *Registry) PeakConcurrency() int64 { return r.peak.Load() }

func (r *Registry) notePeak(inFlight int64) {
	for {
		peak := r.peak.Load()
		if inFlight <= peak || r.peak.CompareAndSwap(peak, inFlight) {
			return
		}
	}
}

// ResetPeakConcurrency starts a new measurement of PeakConcurrency.
func (r *Registry) ResetPeakConcurrency() { r.peak.Store(r.inFlight.Load()) }

// Certificate is the registry's self-signed TLS certificate, nil without WithTLS.
func (r *Registry) Certificate() *x509.Certificate { return r.server.Certificate() }

// CertPool trusts the registry's TLS certificate.
func (r *Registry) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	if r.server.Certificate() != nil {
		pool.AddCert(r.server.Certificate())
	}
	return pool
}

// Ref is the component reference of a component version stored below subPath; http:// only for plain HTTP.
func (r *Registry) Ref(subPath, component, version string) string {
	base := r.Host
	if r.plainHTTP {
		base = "http://" + base
	}
	if subPath != "" {
		base += "/" + subPath
	}
	return base + "//" + component + ":" + version
}

// DockerConfigJSON is a .dockerconfigjson document holding the registry's credentials.
func (r *Registry) DockerConfigJSON() []byte {
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{ // maps of strings always marshal
		r.server.URL: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(r.username + ":" + r.password))},
	}})
	return data
}

// Repository writes below subPath, with the registry's credentials and certificate.
func (r *Registry) Repository(subPath string) Repository {
	return RegistryRepository(r.client(), r.Host, subPath, r.plainHTTP)
}

// client presents the registry's credentials and trusts its certificate.
func (r *Registry) client() *auth.Client {
	return &auth.Client{
		Client:     r.server.Client(),
		Credential: auth.StaticCredential(r.Host, auth.Credential{Username: r.username, Password: r.password}),
	}
}

// PushPinnedChart pushes a chart below repository with the registry's credentials, as PushHelmChart does, and
// returns the helmChart resource naming it (http:// only for plain HTTP) with its manifest digest, as OCM records it.
func (r *Registry) PushPinnedChart(ctx context.Context, repository string, c Chart) (Resource, error) {
	path, tag := chartPath(repository, c)
	manifest, err := pushChart(ctx, &remote.Repository{Client: r.client(), Reference: orasregistry.Reference{Registry: r.Host, Repository: path}, PlainHTTP: r.plainHTTP}, c)
	if err != nil {
		return Resource{}, err
	}
	ref := r.Host + "/" + path + ":" + tag
	if r.plainHTTP {
		ref = "http://" + ref
	}
	return ChartResource(c.Version, ref).WithOCIDigest(manifest.Digest.String()), nil
}

// Push writes component versions below subPath and fails the test on error.
func (r *Registry) Push(t testing.TB, subPath string, cvs ...ComponentVersion) {
	t.Helper()
	for _, cv := range cvs {
		if _, err := Write(context.Background(), r.Repository(subPath), cv); err != nil {
			t.Fatalf("pushing %s:%s: %v", cv.Name, cv.Version, err)
		}
	}
}

// PushCTF copies the component versions of a CTF directory below subPath and fails the test on error.
func (r *Registry) PushCTF(t testing.TB, subPath, dir string) {
	t.Helper()
	if err := CopyCTF(context.Background(), dir, r.Repository(subPath)); err != nil {
		t.Fatalf("copying CTF %s: %v", dir, err)
	}
}

// WriteCTF writes component versions into a CTF directory and fails the test on error.
func WriteCTF(t testing.TB, dir string, cvs ...ComponentVersion) {
	t.Helper()
	for _, cv := range cvs {
		if _, err := Write(context.Background(), CTFRepository(dir), cv); err != nil {
			t.Fatalf("writing %s:%s to CTF: %v", cv.Name, cv.Version, err)
		}
	}
}
