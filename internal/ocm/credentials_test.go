package ocm_test

import (
	"context"
	"testing"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestCredentialsAreNeverSentInClear: credentials configured for a registry host (here keyed https://HOST, as a
// docker login writes them) are not sent when a reference asks for http://HOST, whether they are the client's
// or the context's; the failure says why. Only a host the operator allows gets them in clear.
func TestCredentialsAreNeverSentInClear(t *testing.T) {
	reg := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "s3cr3t-pw"))
	a := ocmtest.Artifact("acme.org/artifacts/a", "1.0.0", "cloud.konfidence.flux.helm", true)
	reg.Push(t, "", a, ocmtest.Vector(vectorName, "1.0.0", a))
	ref := reg.Ref("", vectorName, "1.0.0") // http://HOST//…
	pushed := len(reg.Authorizations())     // the fixture writer's own
	creds := ocm.Credentials{}
	if err := creds.AddDockerConfigJSON([]byte(`{"auths":{"https://` + reg.Host + `":{"username":"robot","password":"s3cr3t-pw"}}}`)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, resolve := range map[string]func() (*ocm.Vector, error){
		"client credentials": func() (*ocm.Vector, error) {
			return ocm.NewClient(ocm.Options{Credentials: creds}).ResolveVector(ctx, ref, ocm.Read{})
		},
		"read credentials": func() (*ocm.Vector, error) {
			return ocm.NewClient(ocm.Options{}).ResolveVector(ctx, ref, ocm.Read{Credentials: creds})
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resolve()
			assertError(t, err, ocm.ErrCredentialsRequireTLS, false)
			if got := reg.Authorizations()[pushed:]; len(got) != 0 {
				t.Errorf("the registry received %d Authorization headers over plain HTTP", len(got))
			}
		})
	}

	allowed := ocm.NewClient(ocm.Options{Credentials: creds, InsecureCredentialHosts: []string{reg.Host}})
	if _, err := allowed.ResolveVector(ctx, ref, ocm.Read{}); err != nil {
		t.Fatalf("with the host allowed: %v", err)
	}
	if len(reg.Authorizations()) == pushed {
		t.Error("the allowed host received no credentials")
	}
}

// TestCachedReadsStayWithTheirCredentials: one client serves many tenants. A private vector one tenant read with
// its credentials is not served from the cache to a tenant without credentials, or with other ones (as after a
// Secret's rotation, they read afresh); a repeated read with the same credentials is served from the cache.
func TestCachedReadsStayWithTheirCredentials(t *testing.T) {
	reg := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "pw"), ocmtest.WithTLS())
	a := ocmtest.Artifact("acme.org/artifacts/a", "1.0.0", "cloud.konfidence.flux.helm", true)
	reg.Push(t, "", a, ocmtest.Vector(vectorName, "1.0.0", a))
	ref := reg.Ref("", vectorName, "1.0.0")
	c := ocm.NewClient(ocm.Options{RootCAs: reg.CertPool()})
	ctx := context.Background()
	tenant := func(user, password string) ocm.Read {
		return ocm.Read{Credentials: ocm.Credentials{reg.Host: auth.Credential{Username: user, Password: password}}}
	}

	if _, err := c.ResolveVector(ctx, ref, tenant("robot", "pw")); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]ocm.Read{
		"no credentials":    {},
		"other credentials": tenant("robot", "guess"),
	} {
		before := reg.Requests()
		_, err := c.ResolveVector(ctx, ref, read)
		assertError(t, err, ocm.ErrUnauthorized, false)
		if reg.Requests() == before {
			t.Errorf("%s: answered from the cache", name)
		}
	}
	before := reg.Requests()
	if _, err := c.ResolveVector(ctx, ref, tenant("robot", "pw")); err != nil || reg.Requests() != before {
		t.Errorf("the same credentials again: %d registry requests, %v; want 0, served from the cache", reg.Requests()-before, err)
	}
}
