package vectordeployment

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestVerifiedVectors runs against the real API server: a VectorDeployment that requires signatures deploys a
// signed vector, with each resource's digest on its ArtifactDeployment, and refuses, with the reason and an event
// and without creating any ArtifactDeployment, vectors that are unsigned, signed by another key, or whose
// artifacts do not match what the signature pins. The operator-wide default applies to VectorDeployments without
// spec.verify.
func TestVerifiedVectors(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	key, otherKey := newRSAKey(t), newRSAKey(t)
	chart, err := ocmtest.PushPinnedChart(ctx, reg.Host, "charts", ocmtest.WebChart("web", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	app := ocmtest.Artifact("acme.org/artifacts/web", "1.0.0", helmType, true)
	app.Resources[1] = chart
	reg.Push(t, "", app)
	signedBy := func(version string, k *rsa.PrivateKey, artifacts ...ocmtest.ComponentVersion) string {
		v := ocmtest.Vector("acme.org/vectors/shop", version, artifacts...)
		if k != nil {
			v.Signers = []ocmtest.Signer{{Name: "acme", Key: k}}
		}
		reg.Push(t, "", v)
		return reg.Ref("", v.Name, v.Version)
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
				waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionTrue, meta.SucceededReason)
				ads := listADs(t, ns)
				if len(ads) != 1 {
					t.Fatalf("ArtifactDeployments: %v", keys(ads))
				}
				for _, ad := range ads {
					if got := ad.Spec.Component.Resources[0].Digest; got != "sha256:"+chart.Digest.Value {
						t.Errorf("resource digest on %s = %q, want the chart's manifest digest", ad.Name, got)
					}
				}
				return
			}
			vd = waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionFalse, tc.reason)
			if conditions.IsReady(vd) || conditions.GetReason(vd, konfidencev1.ReadyCondition) != tc.reason {
				t.Errorf("Ready = %+v", conditions.Get(vd, konfidencev1.ReadyCondition))
			}
			waitForEvent(t, ns, vd.Name, tc.reason)
			if ads := listADs(t, ns); len(ads) != 0 {
				t.Errorf("created %v from an unverified vector", keys(ads))
			}
		})
	}
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
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       map[string][]byte{"acme": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})},
	}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}
