package ui

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestPageSaysWhenTheClusterIsLostAndBack puts a loopback TCP proxy between the view and the API server, cuts
// it, and expects the open page's stream to say the connection is lost, then, once the proxy serves again on the
// same port, that it is back.
func TestPageSaysWhenTheClusterIsLostAndBack(t *testing.T) {
	fixture(t)
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: u.Host}
	p.listen(t, "127.0.0.1:0")
	t.Cleanup(p.cut)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + p.addr
	_, ts := startView(t, cfg, shop, false)
	events := stream(t, ts, "/")
	if lost := next(t, events, "connection", 5*time.Second); lost != "" {
		t.Fatalf("connected view reports %q", lost)
	}
	p.cut()
	if lost := next(t, events, "connection", 10*time.Second); lost == "" {
		t.Fatal("the cut connection is reported as connected")
	} else {
		t.Logf("lost: %s", lost)
	}
	p.listen(t, p.addr)
	if lost := next(t, events, "connection", 10*time.Second); lost != "" {
		t.Fatalf("after the proxy is back: %q, want connected", lost)
	}
}

// tcpProxy forwards loopback connections to target until cut.
type tcpProxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func (p *tcpProxy) listen(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
}

// cut stops accepting and closes every connection, as a network partition would end them.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
