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

// hostLimiter bounds the reads in flight per registry host, so that a registry that answers slowly or never
// holds at most that many of the operator's workers; reads of other registries go on with the rest.
type hostLimiter struct {
	limit int
	// wait is how long a read waits for a slot before it gives up as RegistryBusy and frees its worker.
	wait  time.Duration
	mu    sync.Mutex
	hosts map[string]*hostSlots
}

// hostSlots is one host's semaphore; users counts holders and waiters, so an idle host's entry is dropped and
// the map does not grow with every host a reference ever named.
type hostSlots struct {
	slots chan struct{}
	users int
}

func newHostLimiter(limit int, wait time.Duration) *hostLimiter {
	return &hostLimiter{limit: limit, wait: wait, hosts: map[string]*hostSlots{}}
}

// acquire takes one of host's slots, waiting at most l.wait; release gives it back.
func (l *hostLimiter) acquire(ctx context.Context, host, ref string) (release func(), err error) {
	h := l.use(host)
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case h.slots <- struct{}{}:
		return func() { <-h.slots; l.leave(host, h) }, nil
	case <-timer.C:
		err = newError(ReasonRegistryBusy, ref, "%d reads of registry %s are in flight, the limit per registry; none ended within %s", l.limit, host, l.wait)
	case <-ctx.Done():
		err = &Error{Reason: ReasonUnavailable, Ref: ref, Err: fmt.Errorf("waiting for a read slot of registry %s: %w", host, ctx.Err())}
	}
	l.leave(host, h)
	return nil, err
}

func (l *hostLimiter) use(host string) *hostSlots {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.hosts[host]
	if !ok {
		h = &hostSlots{slots: make(chan struct{}, l.limit)}
		l.hosts[host] = h
	}
	h.users++
	return h
}

func (l *hostLimiter) leave(host string, h *hostSlots) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.users--; h.users == 0 {
		delete(l.hosts, host)
	}
}
