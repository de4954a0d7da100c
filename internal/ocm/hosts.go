package ocm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
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
	if len(c.opts.AllowedHosts) == 0 || slices.Contains(c.opts.AllowedHosts, host) {
		return nil
	}
	return newError(ReasonRegistryNotAllowed, ref, "registry %s is not among the allowed registries (--allowed-registries)", host)
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
