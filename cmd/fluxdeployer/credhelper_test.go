package main

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestVectorInspectCredentialHelper: --docker-config names a credential helper for the registry instead of
// carrying the password, as docker login writes it on a workstation; the CLI asks the helper.
func TestVectorInspectCredentialHelper(t *testing.T) {
	// TLS: credentials are never sent over plain HTTP.
	reg := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "helper-pw"), ocmtest.WithTLS())
	reg.Push(t, "", fixtures()...)
	dir := t.TempDir()
	// A helper speaks the docker-credential-helpers protocol: "get" reads the server address on stdin.
	helper := "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread -r server\n" +
		`printf '{"ServerURL":"%s","Username":"robot","Secret":"helper-pw"}' "$server"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-fluxdeployer-test"), []byte(helper), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	ca, config := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "config.json")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: reg.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte(`{"credHelpers":{"`+reg.Host+`":"fluxdeployer-test"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref("", "acme.org/vectors/shop", "1.0.0")
	out, err := runCLI(t, "vector", "inspect", ref, "--ca-file", ca, "--docker-config", config, "-o", "json")
	if err != nil || !strings.Contains(out, `"acme.org/artifacts/backend"`) {
		t.Errorf("with a credential helper: %v\n%s", err, out)
	}
	// Over plain HTTP the credentials go only to a host the flag names.
	plain := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "helper-pw"))
	plain.Push(t, "", fixtures()...)
	plainRef := plain.Ref("", "acme.org/vectors/shop", "1.0.0")
	if err := os.WriteFile(config, []byte(`{"credHelpers":{"`+plain.Host+`":"fluxdeployer-test"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "vector", "inspect", plainRef, "--docker-config", config); err == nil || !strings.HasPrefix(err.Error(), "CredentialsRequireTLS: ") {
		t.Errorf("credentials over plain HTTP: error = %v, want CredentialsRequireTLS", err)
	}
	if _, err := runCLI(t, "vector", "inspect", plainRef, "--docker-config", config, "--insecure-registry-credentials-hosts", plain.Host); err != nil {
		t.Errorf("credentials over plain HTTP to an allowed host: %v", err)
	}
	if _, err := runCLI(t, "vector", "inspect", ref, "--docker-config", filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing --docker-config file was accepted")
	}
}
