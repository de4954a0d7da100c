// Package ui serves the read-only web view of a cluster's landscapes: every VectorDeployment and Stage the viewer
// may read, what each became (ArtifactDeployments, Flux objects, workloads) and their events, updated live from
// informers through server-sent events. It reads with the viewer's own credentials and only the kinds the viewer
// may list and watch; it never reads a Secret or a ConfigMap. Pages are rendered by the server (html/template
// escapes everything a tenant or a registry wrote); the one script and the one stylesheet are embedded, and the
// Content-Security-Policy allows nothing else.
package ui

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure the view.
type Options struct {
	// Config is the viewer's credentials at the API server.
	Config *rest.Config
	// Scheme knows this project's kinds, Flux's and Kubernetes' own.
	Scheme *runtime.Scheme
	// Namespace restricts the view to one namespace; empty is every namespace.
	Namespace string
	// Actions enables reconcile, suspend and resume, sent as the viewer.
	Actions bool
	// Addr is the address the view listens on, host:port; with ExternalURL, the hosts a request may name (a
	// request for any other Host is refused, so that a web page elsewhere cannot reach the view by rebinding a
	// DNS name to the loopback address).
	Addr string
	// ExternalURL is where users reach the view when it is behind a proxy: the links the monitoring kit's alerts
	// and dashboards give point there.
	ExternalURL string
	Log         *slog.Logger
}

// syncTimeout bounds the first listing of everything the view shows.
const syncTimeout = time.Minute

// Server is the view: a cache of what the viewer may read, the pages rendered from it, and the live updates.
type Server struct {
	opts   Options
	reader client.Reader
	writer client.Client
	denied map[string]bool
	hub    *hub
	// csrf is the token every action form carries; it is new each time the view starts.
	csrf  string
	hosts map[string]bool
	now   func() time.Time
	mux   *http.ServeMux
}

// Run starts the view's informers, waits for them to sync and returns the Server; they stop with ctx.
func Run(ctx context.Context, o Options) (*Server, error) {
	direct, err := client.New(o.Config, client.Options{Scheme: o.Scheme})
	if err != nil {
		return nil, err
	}
	may, denied, err := readable(ctx, direct, o.Namespace)
	if err != nil {
		return nil, err
	}
	h := newHub()
	co := cache.Options{
		Scheme:           o.Scheme,
		DefaultTransform: cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler: func(_ context.Context, _ *toolscache.Reflector, err error) {
			h.watchFailed(err)
		},
	}
	if o.Namespace != "" {
		co.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	c, err := cache.New(o.Config, co)
	if err != nil {
		return nil, err
	}
	for _, r := range may {
		inf, err := c.GetInformer(ctx, r.newObject(), cache.BlockUntilSynced(false))
		if meta.IsNoMatchError(err) && !r.required {
			denied[r.kind] = true // not installed in this cluster (Flux's CRDs, or a release without Stages)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", r.resource, err)
		}
		if _, err := inf.AddEventHandler(h.handler()); err != nil {
			return nil, err
		}
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			o.Log.Error("the view's informers stopped", "error", err)
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("the view's informers did not sync within %s: %w", syncTimeout, context.Cause(syncCtx))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	go h.monitor(ctx, func() error { _, err := dc.ServerVersion(); return err }, time.Second)
	return newServer(o, &gated{Reader: c, scheme: o.Scheme, denied: denied, namespace: o.Namespace}, direct, denied, h)
}

func newServer(o Options, reader client.Reader, writer client.Client, denied map[string]bool, h *hub) (*Server, error) {
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	s := &Server{opts: o, reader: reader, writer: writer, denied: denied, hub: h, csrf: base64.RawURLEncoding.EncodeToString(token),
		hosts: allowedHosts(o.Addr, o.ExternalURL), now: time.Now, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.page)
	for _, k := range kinds {
		s.mux.HandleFunc("GET /"+k.path+"/{namespace}/{name}", s.page)
	}
	s.mux.HandleFunc("GET /live", s.live)
	s.mux.Handle("GET /static/", http.FileServerFS(staticFS))
	if o.Actions {
		s.mux.HandleFunc("POST /action", s.action)
	}
	return s, nil
}

// allowedHosts are the Host headers the view answers: its listen address, the loopback names of its port, and the
// external URL's host.
func allowedHosts(addr, external string) map[string]bool {
	hosts := map[string]bool{addr: true}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
			hosts[h+":"+port] = true
		}
	}
	if u, err := url.Parse(external); err == nil && u.Host != "" {
		hosts[u.Host] = true
	}
	return hosts
}

// contentSecurityPolicy allows the view's own script, stylesheet and event stream, and nothing else: no inline
// script, no other origin, no frames.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP refuses a request for a host the view is not served as, and sets the security headers of every
// answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hosts[r.Host] {
		http.Error(w, "unknown host "+r.Host, http.StatusMisdirectedRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// sameOrigin says whether a request comes from a page of the view itself: its Origin header (every browser sends
// one with a POST) names a host the view is served as.
func (s *Server) sameOrigin(r *http.Request) bool {
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && s.hosts[u.Host] && !strings.Contains(u.Host, "@")
}
