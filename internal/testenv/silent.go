package testenv

import (
	"net"
	"sync"
	"testing"
)

// SilentServer accepts TCP connections and never answers on them, as a hung server or registry does: the
// connection succeeds and every request waits for a reply. It closes everything when the test ends.
type SilentServer struct {
	// Addr is the loopback host:port it listens on.
	Addr string

	listener net.Listener
	mu       sync.Mutex
	conns    []net.Conn
}

// NewSilentServer starts a SilentServer.
func NewSilentServer(t testing.TB) *SilentServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SilentServer{Addr: l.Addr().String(), listener: l}
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *SilentServer) accept() {
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		s.conns = append(s.conns, conn)
		s.mu.Unlock()
	}
}

// Accepted is the number of connections accepted so far.
func (s *SilentServer) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *SilentServer) close() {
	_ = s.listener.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}
