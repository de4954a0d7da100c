package doctest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The documents name the registry a user publishes to and installs from as registry.example, over HTTPS on its
// default port, as a user's registry is named. So that the commands run exactly as written, the test runs in a
// network namespace and a mount namespace of its own: loopback and an interface that leads nowhere, an /etc/hosts
// that names registry.example (127.0.0.1, or on a real node the host's end of the node's veth, which pods reach
// too), and the test's registry serving HTTPS there with a certificate of a CA made for the run. The CA is one of
// the machine's: the namespace's /etc/ssl/certs/ca-certificates.crt is the machine's bundle and the CA, so every
// program trusts it as a user's machine trusts their registry's CA, and so do the images built from that bundle
// (the operator's, by make image-push; Flux's, on the real node); SSL_CERT_FILE names the same bundle. No other
// address is reachable, so nothing the documents run can leave the machine.

const (
	// insideEnv marks the test binary started inside the namespaces.
	insideEnv = "FLUXDEPLOYER_DOCTEST_INSIDE"
	// certEnv and keyEnv name the registry's serving certificate and key.
	certEnv = "FLUXDEPLOYER_DOCTEST_CERT"
	keyEnv  = "FLUXDEPLOYER_DOCTEST_KEY"
	// toolsEnv names the folder of the programs the documents call (kubectl, fluxdeployer), built before the
	// namespaces are entered, where the Go module proxy is still reachable.
	toolsEnv = "FLUXDEPLOYER_DOCTEST_TOOLS"
	// releaseEnv names the folder of a release's files (make release), where docs/release.md's commands run.
	releaseEnv = "FLUXDEPLOYER_DOCTEST_RELEASE"
	// registryHost is the name the documents give the user's registry.
	registryHost = "registry.example"
	// loopback is registryHost's address on the embedded control plane, whose controllers run in the test's own
	// network namespace.
	loopback = "127.0.0.1"
	// systemBundle is the machine's CA bundle, where Go's TLS and hack/image look for it first.
	systemBundle = "/etc/ssl/certs/ca-certificates.crt"
)

// inside tells whether the test runs in its namespaces.
func inside() bool { return os.Getenv(insideEnv) != "" }

// runInside runs this test again in new network and mount namespaces (see above), where registryHost is ip, and
// fails when it fails there. Root enters them directly; another user through a user namespace where it is root.
func runInside(t *testing.T, tools, release, ip string) {
	t.Helper()
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCertificates(t, dir)
	hosts, resolv, bundle := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+ip+" "+registryHost+"\n::1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	machines, err := os.ReadFile(systemBundle)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, append(machines, ca...), 0o644); err != nil {
		t.Fatal(err)
	}
	// A name not in hosts is refused at once on loopback instead of waiting for a nameserver out of reach.
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unshare := []string{"--net", "--mount", "--fork"}
	if os.Geteuid() != 0 {
		unshare = append([]string{"--user", "--map-root-user"}, unshare...)
	}
	// kube-apiserver advertises the address of the default route's interface and refuses to start without one:
	// one end of a veth pair made here holds a documentation address (TEST-NET-1) and the default route; what is
	// sent there reaches the other end, which has no address, and goes no further.
	setup := `ip link set lo up && ip link add doctest0 type veth peer name doctest1 && ip addr add 192.0.2.1/32 dev doctest0 && ` +
		`ip link set doctest0 up && ip link set doctest1 up && ip route add default dev doctest0 && ` +
		`mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/resolv.conf && ` +
		`{ [ ! -e ` + systemBundle + ` ] || mount --bind "$2" ` + systemBundle + `; } && shift 2 && exec "$@"`
	args := append(unshare, "--", "sh", "-c", setup, hosts, resolv, bundle,
		os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.timeout=50m")
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), insideEnv+"=1", "SSL_CERT_FILE="+bundle, certEnv+"="+certFile, keyEnv+"="+keyFile,
		toolsEnv+"="+tools, releaseEnv+"="+release,
		// Inside, the Go module proxy is out of reach: a build must use the module cache, and fail at once if it
		// cannot.
		"GOPROXY=off")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s in its own network and mount namespaces (unshare %s): %v", t.Name(), strings.Join(unshare, " "), err)
	}
}

// writeCertificates makes a CA and a serving certificate of it for registryHost, and returns the files of the
// CA's certificate, the serving certificate and its key.
func writeCertificates(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fluxdeployer doc test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: registryHost}, DNSNames: []string{registryHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "registry.pem"), filepath.Join(dir, "registry-key.pem")
	for file, block := range map[string]*pem.Block{
		caFile: {Type: "CERTIFICATE", Bytes: caDER}, certFile: {Type: "CERTIFICATE", Bytes: leafDER}, keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}
