package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestVectorVerify: `vector verify` accepts a vector signed with the key, refuses it with the reason otherwise,
// and `vector inspect` shows the digest each resource is pinned by.
func TestVectorVerify(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	key, other := cliKey(t), cliKey(t)
	chart, err := ocmtest.PushPinnedChart(context.Background(), reg.Host, "charts", ocmtest.WebChart("web", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	app := ocmtest.Artifact("acme.org/artifacts/web", "1.0.0", "cloud.konfidence.flux.helm", true)
	app.Resources[1] = chart
	signed := ocmtest.Vector("acme.org/vectors/shop", "1.0.0", app)
	signed.Signers = []ocmtest.Signer{{Name: "release", Key: key}}
	unsigned := ocmtest.Vector("acme.org/vectors/shop", "2.0.0", app)
	reg.Push(t, "", app, signed, unsigned)
	keyFile, otherFile := publicKeyFile(t, &key.PublicKey), publicKeyFile(t, &other.PublicKey)
	ref := reg.Ref("", "acme.org/vectors/shop", "1.0.0")

	for _, args := range [][]string{{"--public-key", keyFile}, {"--public-key", keyFile, "--signature", "release"}} {
		out, err := runCLI(t, append([]string{"vector", "verify", ref}, args...)...)
		if err != nil || !strings.HasPrefix(out, "verified acme.org/vectors/shop:1.0.0 (sha256:") {
			t.Errorf("verify %v: %v\n%s", args, err, out)
		}
	}
	for _, c := range []struct {
		args       []string
		wantPrefix string
	}{
		{[]string{ref, "--public-key", otherFile}, "SignatureInvalid: "},
		{[]string{ref, "--public-key", keyFile, "--signature", "other"}, "SignatureMissing: "},
		{[]string{reg.Ref("", "acme.org/vectors/shop", "2.0.0"), "--public-key", keyFile}, "SignatureMissing: "},
	} {
		if _, err := runCLI(t, append([]string{"vector", "verify"}, c.args...)...); err == nil || !strings.HasPrefix(err.Error(), c.wantPrefix) {
			t.Errorf("verify %v: error %v, want prefix %q", c.args, err, c.wantPrefix)
		}
	}

	out, err := runCLI(t, "vector", "inspect", ref, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Artifacts []struct {
			Resources []struct{ Digest string } `json:"resources"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if d := got.Artifacts[0].Resources[0].Digest; d != "sha256:"+chart.Digest.Value {
		t.Errorf("inspect digest = %q, want sha256:%s", d, chart.Digest.Value)
	}
	table, err := runCLI(t, "vector", "inspect", ref)
	if err != nil || !strings.Contains(table, "chart(helmChart)@sha256:"+chart.Digest.Value[:12]) {
		t.Errorf("inspect table does not show the pinned digest: %v\n%s", err, table)
	}
}

func cliKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func publicKeyFile(t *testing.T, pub *rsa.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
