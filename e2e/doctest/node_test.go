package doctest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// nodePages are the pages TestNodeDocs runs whole, in this order: those with blocks that need pods to start. The
// README installs the operator as its Deployment (with make, then again with Helm) and leaves it for the pages
// after it, as a user's cluster keeps it; troubleshooting.md reads its pod's logs and patches it; release.md goes
// last, since it replaces the operator's image with the release's.
var nodePages = []string{"README.md", "docs/troubleshooting.md", "docs/release.md"}

// TestNodeDocs runs the pages that install or change the operator's Deployment on the real node (make e2e-node,
// as root): every block of each page, those that need a pod to start included, against Flux installed from its
// install manifests, with registry.example served where the host, containerd and the pods reach it.
func TestNodeDocs(t *testing.T) {
	if os.Getenv("E2E_NODE") == "" {
		t.Skip("needs the real node: E2E_NODE=1, as root (make e2e-node)")
	}
	if !inside() {
		// What the node runs is built before the namespaces are entered, where the Go module proxy is reachable.
		for _, assets := range []func(io.Writer) (string, error){controlplane.KubeAssets, controlplane.NodeAssets, controlplane.FluxAssets} {
			if _, err := assets(os.Stderr); err != nil {
				t.Fatal(err)
			}
		}
		runInside(t, buildTools(t), buildRelease(t), node.HostIP)
		return
	}
	ctx := context.Background()
	landscape := startNodeLandscape(ctx, t)
	for _, page := range nodePages {
		landscape.runPageIfAny(ctx, t, page)
	}
}

// startNodeLandscape starts the node, serves registry.example at the host's end of its veth with what the
// documents deploy, answers the pods' lookups of that name there, and installs Flux; the pages install the
// operator themselves.
func startNodeLandscape(ctx context.Context, t *testing.T) *landscape {
	t.Helper()
	cluster, err := node.Start(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the node's programs:\n%s", cluster.Logs())
		}
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	serveNames(t, node.HostIP, registryHost)
	if err := cluster.SetPodNameserver(node.HostIP); err != nil {
		t.Fatal(err)
	}
	reg := ocmtest.NewRegistry(t)
	serveAsRegistryExample(t, reg, node.HostIP)
	publishVectors(ctx, t, reg)
	if err := cluster.InstallFlux(ctx, os.Stderr); err != nil {
		t.Fatal(err)
	}
	return &landscape{
		client: cluster.Client, adminKubeconfig: cluster.AdminKubeconfig, tools: os.Getenv(toolsEnv), onNode: true,
		keep: map[string]bool{controlplane.OperatorNamespace: true},
	}
}

// serveNames answers DNS queries over UDP at ip:53 as a user's resolver answers them for their registry: name is
// ip, every other name does not exist. Pods look names up there (node.SetPodNameserver), and nowhere else.
func serveNames(t *testing.T, ip, name string) {
	t.Helper()
	conn, err := net.ListenPacket("udp", net.JoinHostPort(ip, "53"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	addr := [4]byte(net.ParseIP(ip).To4())
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFrom(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			} else if err != nil {
				continue
			}
			if answer, err := answerQuery(buf[:n], name, addr); err == nil {
				_, _ = conn.WriteTo(answer, from)
			}
		}
	}()
}

// answerQuery answers a DNS query: an A record of addr for name, no record of another type for it (so that a
// resolver asking for AAAA too goes on with the A record), NXDOMAIN for any other name.
func answerQuery(query []byte, name string, addr [4]byte) ([]byte, error) {
	var p dnsmessage.Parser
	header, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	header.Response, header.Authoritative, header.RecursionAvailable = true, true, true
	known := strings.EqualFold(strings.TrimSuffix(q.Name.String(), "."), name)
	if !known {
		header.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, header)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if known && q.Type == dnsmessage.TypeA {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60}
		if err := b.AResource(rh, dnsmessage.AResource{A: addr}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// TestAnswerQuery: the registry's name gets its address, the same name asked for AAAA no record and no error, and
// another name NXDOMAIN.
func TestAnswerQuery(t *testing.T) {
	addr := [4]byte{10, 250, 0, 1}
	for _, tt := range []struct {
		name  string
		qtype dnsmessage.Type
		rcode dnsmessage.RCode
		a     bool
	}{
		{"registry.example.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, true},
		{"Registry.Example.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, true},
		{"registry.example.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, false},
		{"ghcr.io.", dnsmessage.TypeA, dnsmessage.RCodeNameError, false},
	} {
		t.Run(tt.name+tt.qtype.String(), func(t *testing.T) {
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
			if err := b.StartQuestions(); err != nil {
				t.Fatal(err)
			}
			if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(tt.name), Type: tt.qtype, Class: dnsmessage.ClassINET}); err != nil {
				t.Fatal(err)
			}
			query, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			raw, err := answerQuery(query, registryHost, addr)
			if err != nil {
				t.Fatal(err)
			}
			var m dnsmessage.Message
			if err := m.Unpack(raw); err != nil {
				t.Fatal(err)
			}
			if m.ID != 7 || !m.Response || m.RCode != tt.rcode {
				t.Errorf("header %+v, want ID 7, a response, %s", m.Header, tt.rcode)
			}
			got := m.Answers
			if tt.a != (len(got) == 1) {
				t.Fatalf("answers %+v, want an A record: %t", got, tt.a)
			}
			if tt.a {
				if a, ok := got[0].Body.(*dnsmessage.AResource); !ok || a.A != addr {
					t.Errorf("answer %+v, want A %v", got[0], addr)
				}
			}
		})
	}
}
