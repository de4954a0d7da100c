package ui

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// hub tells the open pages that something they may show changed: every informer event names its namespace, and a
// page is told of changes in the namespace it shows (the overview of every change). It also knows whether the
// cluster answers.
type hub struct {
	mu   sync.Mutex
	subs map[chan struct{}]string
	// lost is why the cluster does not answer; empty while it does.
	lost string
}

func newHub() *hub { return &hub{subs: map[chan struct{}]string{}} }

// subscribe returns a channel that receives a signal (coalesced: one pending at most) when an object of namespace
// changes, or of any namespace when it is empty, and when the connection state changes.
func (h *hub) subscribe(namespace string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = namespace
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *hub) notify(namespace string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, ns := range h.subs {
		if ns == "" || namespace == "" || ns == namespace {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (h *hub) handler() toolscache.ResourceEventHandler {
	changed := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(client.Object); ok {
			h.notify(o.GetNamespace())
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}
}

// connection is "" while the cluster answers, else why it does not.
func (h *hub) connection() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

func (h *hub) setLost(why string) {
	h.mu.Lock()
	changed := h.lost != why
	h.lost = why
	h.mu.Unlock()
	if changed {
		h.notify("")
	}
}

// watchFailed is the informers' watch error handler: a watch that fails is the first sign of a cluster gone.
func (h *hub) watchFailed(err error) {
	h.setLost("watching the cluster failed: " + err.Error())
}

// monitor asks the API server every period whether it answers (one request for the whole view, however many
// objects it shows), so that a page says when the connection is lost and when it is back.
func (h *hub) monitor(ctx context.Context, ping func() error, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := ping(); err != nil {
			h.setLost("the API server does not answer: " + err.Error())
		} else {
			h.setLost("")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// settle is how long the live stream waits after a change before rendering, so that a burst of informer events
// (a reconcile writes several objects) is one update.
const settle = 100 * time.Millisecond

// live streams a page's content as server-sent events: "content" with the page's HTML each time it changes, and
// "connection" with the cluster's state ("" when connected, else why not).
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	page, err := url.Parse(r.URL.Query().Get("page"))
	if err != nil || !strings.HasPrefix(page.Path, "/") || page.Host != "" {
		http.Error(w, "page: a path of this view", http.StatusBadRequest)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	namespace := namespaceOf(page.Path)
	changes, cancel := s.hub.subscribe(namespace)
	defer cancel()
	var sent []byte
	lost := "unsent"
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		if now := s.hub.connection(); now != lost {
			lost = now
			writeEvent(w, "connection", []byte(now))
		}
		content, _, err := s.content(r.Context(), page)
		if err != nil {
			content = []byte(err.Error())
		}
		if !bytes.Equal(content, sent) {
			sent = content
			writeEvent(w, "content", content)
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			_, _ = fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		case <-changes:
			time.Sleep(settle)
		}
	}
}

// writeEvent writes one server-sent event; each line of data is a data field, as the format requires.
func writeEvent(w http.ResponseWriter, event string, data []byte) {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(bytes.TrimSuffix(line, []byte("\r")))
		b.WriteString("\n")
	}
	b.WriteString("\n")
	_, _ = w.Write(b.Bytes())
}

// namespaceOf is the namespace an object page shows, empty for the overview.
func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) == 3 {
		return parts[1]
	}
	return ""
}
