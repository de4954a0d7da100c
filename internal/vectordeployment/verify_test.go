package vectordeployment

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestVerifiedVectors runs against the real API server: a VectorDeployment that requires signatures deploys a
// signed vector, with each resource's digest on its ArtifactDeployment, and refuses, with the reason and an event
// and without creating any ArtifactDeployment, vectors that are unsigned, signed by another key, or whose
// artifacts do not match what the signature pins. The operator-wide requirement applies to VectorDeployments with
// spec.verify and without.
func TestVerifiedVectors(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	key, otherKey := newRSAKey(t), newRSAKey(t)
	app, chart := pushVerifiableArtifact(t, reg, "web")
	signedBy := func(version string, k *rsa.PrivateKey, artifacts ...ocmtest.ComponentVersion) string {
		var signers []ocmtest.Signer
		if k != nil {
			signers = []ocmtest.Signer{{Name: "acme", Key: k}}
		}
		return pushSignedVector(t, reg, version, signers, artifacts...)
	}
	// An artifact whose descriptor changed after the vector pinned it.
	moved := ocmtest.Artifact("acme.org/artifacts/moved", "1.0.0", helmType, true)
	moved.Resources[1] = chart
	reg.Push(t, "", moved)
	movedVector := signedBy("4.0.0", key, moved)
	moved.Resources = append(moved.Resources, ocmtest.TaskResource(ocm.Task{Name: "inject", Type: "k8s-job"}))
	reg.Push(t, "", moved)

	defaultNS := newNamespace(t)
	createKeySecret(t, defaultNS, "operator-keys", &key.PublicKey)
	startManager(t, managerOptions{trust: TrustDefault{Require: true, Secret: client.ObjectKey{Namespace: defaultNS, Name: "operator-keys"}}})

	for _, tc := range []struct {
		name, vector string
		verify       bool // spec.verify with the key; else the operator's default
		reason       string
		secret       string // spec.verify's Secret, when not the one holding the key
	}{
		{"signed", signedBy("1.0.0", key, app), true, "", ""},
		{"unsigned", signedBy("2.0.0", nil, app), true, konfidencev1.SignatureMissingReason, ""},
		{"other-key", signedBy("3.0.0", otherKey, app), true, konfidencev1.SignatureInvalidReason, ""},
		{"artifact-changed", movedVector, true, konfidencev1.DigestMismatchReason, ""},
		{"default-signed", reg.Ref("", "acme.org/vectors/shop", "1.0.0"), false, "", ""},
		{"default-unsigned", reg.Ref("", "acme.org/vectors/shop", "2.0.0"), false, konfidencev1.SignatureMissingReason, ""},
		{"no-key-secret", reg.Ref("", "acme.org/vectors/shop", "1.0.0"), true, konfidencev1.SignatureInvalidReason, "absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			vd := &konfidencev1.VectorDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
				Spec:       konfidencev1.VectorDeploymentSpec{Vector: tc.vector},
			}
			if tc.verify {
				createKeySecret(t, ns, "keys", &key.PublicKey)
				secret := "keys"
				if tc.secret != "" {
					secret = tc.secret
				}
				vd.Spec.Verify = &konfidencev1.VectorVerification{Signatures: []string{"acme"}, SecretRef: meta.LocalObjectReference{Name: secret}}
			}
			if err := env.Client.Create(ctx, vd); err != nil {
				t.Fatal(err)
			}
			if tc.reason == "" {
				for _, ad := range expectDeployed(t, vd, 1) {
					if got := ad.Spec.Component.Resources[0].Digest; got != "sha256:"+chart.Digest.Value {
						t.Errorf("resource digest on %s = %q, want the chart's manifest digest", ad.Name, got)
					}
				}
				return
			}
			expectRefused(t, vd, tc.reason)
		})
	}
}

// TestPlatformSignaturesCannotBeReplaced runs against the real API server and registry: under the operator's
// --require-signatures a VectorDeployment's spec.verify adds a requirement and never replaces the platform's. A
// vector signed only with the tenant's key, with spec.verify naming the tenant's Secret, is refused with the
// signature reason and an event and creates no ArtifactDeployment — also when the tenant signs under the
// platform's signature name. A vector signed by both deploys; one signed by the platform only is refused when
// spec.verify requires the tenant's signature.
func TestPlatformSignaturesCannotBeReplaced(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	platformKey, tenantKey := newRSAKey(t), newRSAKey(t)
	app, _ := pushVerifiableArtifact(t, reg, "web")
	platform := ocmtest.Signer{Name: "platform", Key: platformKey}
	tenant := ocmtest.Signer{Name: "tenant", Key: tenantKey}
	tenantAsPlatform := ocmtest.Signer{Name: "platform", Key: tenantKey}

	operatorNS := newNamespace(t)
	createKeysSecret(t, operatorNS, "operator-keys", map[string]*rsa.PublicKey{"platform": &platformKey.PublicKey})
	startManager(t, managerOptions{trust: TrustDefault{Require: true,
		Secret: client.ObjectKey{Namespace: operatorNS, Name: "operator-keys"}, Signatures: []string{"platform"}}})

	for _, tc := range []struct {
		name    string
		signers []ocmtest.Signer
		// tenantKeys is the tenant's Secret, by signature name; spec.verify requires every name in it.
		tenantKeys map[string]*rsa.PublicKey
		reason     string
		// failed is the origin of the policy the message must name as failed.
		failed string
	}{
		{"tenant-signed", []ocmtest.Signer{tenant}, map[string]*rsa.PublicKey{"tenant": &tenantKey.PublicKey},
			konfidencev1.SignatureMissingReason, platformOrigin},
		{"tenant-signed-as-platform", []ocmtest.Signer{tenantAsPlatform}, map[string]*rsa.PublicKey{"platform": &tenantKey.PublicKey},
			konfidencev1.SignatureInvalidReason, platformOrigin},
		{"platform-signed-tenant-required", []ocmtest.Signer{platform}, map[string]*rsa.PublicKey{"tenant": &tenantKey.PublicKey},
			konfidencev1.SignatureMissingReason, tenantOrigin},
		{"both-signed", []ocmtest.Signer{platform, tenant}, map[string]*rsa.PublicKey{"tenant": &tenantKey.PublicKey}, "", ""},
		{"platform-signed-no-spec-verify", []ocmtest.Signer{platform}, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			vd := &konfidencev1.VectorDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
				Spec:       konfidencev1.VectorDeploymentSpec{Vector: pushSignedVector(t, reg, "1.0.0-"+tc.name, tc.signers, app)},
			}
			if tc.tenantKeys != nil {
				createKeysSecret(t, ns, "tenant-keys", tc.tenantKeys)
				vd.Spec.Verify = &konfidencev1.VectorVerification{Signatures: slices.Sorted(maps.Keys(tc.tenantKeys)),
					SecretRef: meta.LocalObjectReference{Name: "tenant-keys"}}
			}
			if err := env.Client.Create(context.Background(), vd); err != nil {
				t.Fatal(err)
			}
			if tc.reason == "" {
				expectDeployed(t, vd, 1)
				return
			}
			vd = expectRefused(t, vd, tc.reason)
			if msg := conditions.GetMessage(vd, konfidencev1.ReadyCondition); !strings.Contains(msg, tc.failed+": ") {
				t.Errorf("Ready message %q does not name the failed policy %q", msg, tc.failed)
			}
		})
	}
}

// TestTenantVerificationWithoutPlatformRequirement runs against the real API server and registry: without the
// operator's --require-signatures, spec.verify alone decides, with the tenant's keys.
func TestTenantVerificationWithoutPlatformRequirement(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	tenantKey, otherKey := newRSAKey(t), newRSAKey(t)
	app, _ := pushVerifiableArtifact(t, reg, "web")
	startManager(t, managerOptions{})

	for _, tc := range []struct {
		name    string
		signers []ocmtest.Signer
		reason  string
	}{
		{"tenant-signed", []ocmtest.Signer{{Name: "acme", Key: tenantKey}}, ""},
		{"other-key", []ocmtest.Signer{{Name: "acme", Key: otherKey}}, konfidencev1.SignatureInvalidReason},
		{"unsigned", nil, konfidencev1.SignatureMissingReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			createKeySecret(t, ns, "keys", &tenantKey.PublicKey)
			vd := &konfidencev1.VectorDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
				Spec: konfidencev1.VectorDeploymentSpec{Vector: pushSignedVector(t, reg, "1.0.0-"+tc.name, tc.signers, app),
					Verify: &konfidencev1.VectorVerification{Signatures: []string{"acme"}, SecretRef: meta.LocalObjectReference{Name: "keys"}}},
			}
			if err := env.Client.Create(context.Background(), vd); err != nil {
				t.Fatal(err)
			}
			if tc.reason == "" {
				expectDeployed(t, vd, 1)
				return
			}
			expectRefused(t, vd, tc.reason)
		})
	}
}

// pushVerifiableArtifact pushes a pinned chart and a reusable Helm artifact acme.org/artifacts/<name>:1.0.0 whose
// chart resource is that chart, so that a vector of it verifies transitively.
func pushVerifiableArtifact(t testing.TB, reg *ocmtest.Registry, name string) (ocmtest.ComponentVersion, ocmtest.Resource) {
	t.Helper()
	chart, err := ocmtest.PushPinnedChart(context.Background(), reg.Host, "charts", ocmtest.WebChart(name, "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	app := ocmtest.Artifact("acme.org/artifacts/"+name, "1.0.0", helmType, true)
	app.Resources[1] = chart
	reg.Push(t, "", app)
	return app, chart
}

// pushSignedVector pushes the vector acme.org/vectors/shop of this version, signed by the signers in order, and returns
// its reference.
func pushSignedVector(t testing.TB, reg *ocmtest.Registry, version string, signers []ocmtest.Signer, artifacts ...ocmtest.ComponentVersion) string {
	t.Helper()
	v := ocmtest.Vector("acme.org/vectors/shop", version, artifacts...)
	v.Signers = signers
	reg.Push(t, "", v)
	return reg.Ref("", v.Name, v.Version)
}

// expectDeployed waits until vd's vector is read and its n ArtifactDeployments exist, and returns them.
func expectDeployed(t testing.TB, vd *konfidencev1.VectorDeployment, n int) map[string]*konfidencev1.ArtifactDeployment {
	t.Helper()
	waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionTrue, meta.SucceededReason)
	ads := listADs(t, vd.Namespace)
	if len(ads) != n {
		t.Fatalf("ArtifactDeployments: %v, want %d", keys(ads), n)
	}
	return ads
}

// expectRefused waits until vd's vector is refused with reason, on VectorDownloaded and Ready and in an event,
// checks that no ArtifactDeployment was created from it, and returns vd as refused.
func expectRefused(t testing.TB, vd *konfidencev1.VectorDeployment, reason string) *konfidencev1.VectorDeployment {
	t.Helper()
	vd = waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionFalse, reason)
	if conditions.IsReady(vd) || conditions.GetReason(vd, konfidencev1.ReadyCondition) != reason {
		t.Errorf("Ready = %+v", conditions.Get(vd, konfidencev1.ReadyCondition))
	}
	waitForEvent(t, vd.Namespace, vd.Name, reason)
	if ads := listADs(t, vd.Namespace); len(ads) != 0 {
		t.Errorf("created %v from an unverified vector", keys(ads))
	}
	return vd
}

func newRSAKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// createKeySecret stores a public key as PEM under the signature name "acme".
func createKeySecret(t testing.TB, namespace, name string, pub *rsa.PublicKey) {
	t.Helper()
	createKeysSecret(t, namespace, name, map[string]*rsa.PublicKey{"acme": pub})
}

// createKeysSecret stores public keys as PEM by signature name.
func createKeysSecret(t testing.TB, namespace, name string, pubs map[string]*rsa.PublicKey) {
	t.Helper()
	if err := env.Client.Create(context.Background(), ocmtest.KeysSecret(t, namespace, name, pubs)); err != nil {
		t.Fatal(err)
	}
}
