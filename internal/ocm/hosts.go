package ocm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/fluxdeployer/fluxdeployer/pkg/allowlist"
)

// allowed refuses a reference to a registry host the operator did not list. CTF references name no host.
func (c *Client) allowed(r Ref) error {
	if r.IsCTF() {
		return nil
	}
	return c.allowedHost(r.Host(), r.Describe())
}

// allowedHost refuses, for ref, a registry host the operator did not list (Options.AllowedHosts; empty allows
// every host): a reference may name any host, internal addresses included, and the operator would read it.
func (c *Client) allowedHost(host, ref string) error {
	if c.opts.AllowedHosts.Allows(host) {
		return nil
	}
	return newError(ReasonRegistryNotAllowed, ref, "registry %s is not among the allowed registries (--allowed-registries)", host)
}

// allowedAccesses refuses a vector one of whose artifacts has a resource whose access names a host the operator
// did not list. Deployers have the resource fetched from that host (Flux's source-controller pulls it, outside the
// operator's network policy), so an allow-list that covered only the vector's registry would still let a vector
// reach any address, cloud metadata endpoints included. The vector is refused as a whole: nothing of it is
// deployed while it names such a host.
func (c *Client) allowedAccesses(v *Vector) error {
	if len(c.opts.AllowedHosts) == 0 {
		return nil
	}
	for _, entry := range v.Artifacts {
		a := entry.Artifact
		if a == nil {
			continue
		}
		for _, res := range a.Resources {
			host, ok := accessHost(res.Access)
			if !ok {
				continue
			}
			if err := c.allowedHost(host, a.Component+":"+a.Version); err != nil {
				var e *Error
				errors.As(err, &e) // allowedHost returns only *Error
				return &Error{Reason: e.Reason, Ref: e.Ref, Err: fmt.Errorf("resource %s: %w", res.Name, e.Err)}
			}
		}
	}
	return nil
}

// accessHost is the host an access has its content fetched from: the registry of an OCI access's imageReference,
// the host of a Helm access's helmRepository. ok is false for other accesses (a local blob is read from the
// artifact's own registry, which the vector's reference names) and for an access that does not parse, which no
// deployer fetches from anywhere.
func accessHost(raw json.RawMessage) (host string, ok bool) {
	var access struct {
		Type           string `json:"type"`
		ImageReference string `json:"imageReference"`
		HelmRepository string `json:"helmRepository"`
	}
	if err := json.Unmarshal(raw, &access); err != nil {
		return "", false
	}
	switch {
	case isOCIAccessType(access.Type):
		ref, _, err := parseImageReference(access.ImageReference)
		return ref.Registry, err == nil
	case isHelmAccessType(access.Type):
		u, err := url.Parse(access.HelmRepository)
		return u.Host, err == nil && u.Host != ""
	}
	return "", false
}

// maxRedirects is net/http's own limit on the redirects of one request.
const maxRedirects = 10

// redirectPolicy holds every redirect to the allow-list the first request passed: a registry of an allowed host
// answers what it likes, and a redirect would otherwise take the read, and the token oras attaches to requests of
// the same host, to any host, internal addresses included. Registries do redirect blob reads to storage hosts
// (S3, GCS); with an allow-list, those hosts are listed too. No request is sent to a refused host.
func redirectPolicy(allowed allowlist.Hosts) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if allowed.Allows(req.URL.Host) {
			return nil
		}
		// No Ref: the HTTP client does not know the reference; classify gives the error the read's.
		return newError(ReasonRegistryNotAllowed, "",
			"registry %s redirected to %s, which is not among the allowed registries (--allowed-registries)", via[len(via)-1].URL.Host, req.URL.Host)
	}
}

// slots takes a read slot of the reads' namespace (Read.Namespace), then one of the registry host; release gives
// both back. The namespace's comes first: a read over its namespace's bound takes no slot of a host that other
// namespaces read as well.
func (c *Client) slots(ctx context.Context, read Read, host, ref string) (release func(), err error) {
	releaseNamespace := func() {}
	if read.Namespace != "" {
		if releaseNamespace, err = c.namespaces.acquire(ctx, read.Namespace, ref); err != nil {
			return nil, err
		}
	}
	releaseHost, err := c.hosts.acquire(ctx, host, ref)
	if err != nil {
		releaseNamespace()
		return nil, err
	}
	return func() { releaseHost(); releaseNamespace() }, nil
}

// limiter bounds the reads in flight per key. Per registry host, a registry that answers slowly or never holds at
// most that many of the operator's workers, and reads of other registries go on with the rest. A tenant names
// hosts as it likes, though (one registry under many ports or names is many hosts), so per namespace too: one
// namespace's reads hold at most that many workers, however many registries they name, and the reads of other
// namespaces go on with the rest.
type limiter struct {
	limit int
	// wait is how long a read waits for a slot before it gives up, as reason, and frees its worker: the controller
	// retries it with backoff, so a key's excess waits in the work queue, not in a worker.
	wait   time.Duration
	reason Reason
	// per names what a key is, in messages: "registry", "namespace".
	per  string
	mu   sync.Mutex
	keys map[string]*keySlots
}

// keySlots is one key's semaphore; users counts holders and waiters, so an idle key's entry is dropped and the
// map does not grow with every host or namespace ever read for.
type keySlots struct {
	slots chan struct{}
	users int
}

func newLimiter(limit int, wait time.Duration, reason Reason, per string) *limiter {
	return &limiter{limit: limit, wait: wait, reason: reason, per: per, keys: map[string]*keySlots{}}
}

// acquire takes one of key's slots for a read of ref, waiting at most l.wait; release gives it back.
func (l *limiter) acquire(ctx context.Context, key, ref string) (release func(), err error) {
	k := l.use(key)
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case k.slots <- struct{}{}:
		return func() { <-k.slots; l.leave(key, k) }, nil
	case <-timer.C:
		err = newError(l.reason, ref, "%d reads for %s %s are in flight, the limit per %s; none ended within %s", l.limit, l.per, key, l.per, l.wait)
	case <-ctx.Done():
		err = &Error{Reason: ReasonUnavailable, Ref: ref, Err: fmt.Errorf("waiting for a read slot of %s %s: %w", l.per, key, ctx.Err())}
	}
	l.leave(key, k)
	return nil, err
}

func (l *limiter) use(key string) *keySlots {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.keys[key]
	if !ok {
		k = &keySlots{slots: make(chan struct{}, l.limit)}
		l.keys[key] = k
	}
	k.users++
	return k
}

func (l *limiter) leave(key string, k *keySlots) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.users--; k.users == 0 {
		delete(l.keys, key)
	}
}

// allowedTransport holds every request the reads send to the allow-list, whatever sent it there: a registry's token
// service is a host the registry names in its challenge (WWW-Authenticate: Bearer realm=...), and oras presents the
// read's credentials to it, so a registry of an allowed host could otherwise have the operator send a tenant's
// registry credentials, and requests, to any host, internal addresses included. Registries do name token services
// on other hosts (Docker Hub's auth.docker.io); with an allow-list, those hosts are listed too. The first request
// of a read is checked before it is made (Client.allowed), with the reference named; a redirect by redirectPolicy.
type allowedTransport struct {
	allowed allowlist.Hosts
	next    http.RoundTripper
}

func (t allowedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.allowed.Allows(req.URL.Host) {
		return nil, newError(ReasonRegistryNotAllowed, "",
			"a registry sent the read to %s (its token service), which is not among the allowed registries (--allowed-registries)", req.URL.Host)
	}
	return t.next.RoundTrip(req)
}
