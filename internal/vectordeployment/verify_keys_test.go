package vectordeployment

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"math/big"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// verifiedVD creates a VectorDeployment that requires the signature "acme", verified with the keys of Secret keys.
func verifiedVD(t *testing.T, namespace, name, vector string, mutate ...func(*konfidencev1.VectorDeployment)) *konfidencev1.VectorDeployment {
	t.Helper()
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: konfidencev1.VectorDeploymentSpec{Vector: vector,
			Verify: &konfidencev1.VectorVerification{Signatures: []string{"acme"}, SecretRef: meta.LocalObjectReference{Name: "keys"}}},
	}
	for _, m := range mutate {
		m(vd)
	}
	if err := env.Client.Create(context.Background(), vd); err != nil {
		t.Fatal(err)
	}
	return vd
}

// TestKeysOutsideTheSizeRangeAreRejected runs against the real API server: a VectorDeployment whose key Secret
// holds an RSA key of 1024 or of 8200 bits is refused with KeyRejected, on its conditions and as an event, before
// any signature is checked with it: verifying with such a key would fail only as SignatureInvalid, and a key of
// 512 kbit would cost ~7 s of CPU per reconcile.
func TestKeysOutsideTheSizeRangeAreRejected(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	app := ocmtest.Artifact("acme.org/artifacts/web", "1.0.0", helmType, true)
	reg.Push(t, "", app)
	v := ocmtest.Vector("acme.org/vectors/shop", "1.0.0", app)
	v.Signers = []ocmtest.Signer{{Name: "acme", Key: newRSAKey(t)}}
	reg.Push(t, "", v)
	startManager(t, managerOptions{})

	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	// Only the size of the large key matters to its refusal, so its modulus is made up rather than generated.
	large := new(big.Int).Lsh(big.NewInt(1), 8199)
	for name, pub := range map[string]*rsa.PublicKey{
		"rsa-1024": &small.PublicKey,
		"rsa-8200": {N: large.Or(large, big.NewInt(1)), E: 65537},
	} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			createKeySecret(t, ns, "keys", pub)
			expectRefused(t, verifiedVD(t, ns, name, reg.Ref("", v.Name, v.Version)), konfidencev1.KeyRejectedReason)
		})
	}
}

// TestVerificationReadsPrivateChartsWithTheSecretRef runs against the real API server: a signed vector's chart is
// in a registry behind basic auth. A VectorDeployment whose spec.secretRef holds that registry's credentials
// verifies the chart's digest with them and deploys; one without is refused as Unauthorized, not as a digest
// mismatch. Before, the digest was read without credentials and both failed as DigestMismatch.
func TestVerificationReadsPrivateChartsWithTheSecretRef(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	charts := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "right"), ocmtest.WithTLS())
	chart, err := charts.PushPinnedChart(ctx, "charts", ocmtest.WebChart("web", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	key := newRSAKey(t)
	app := ocmtest.Artifact("acme.org/artifacts/web", "1.0.0", helmType, true)
	app.Resources[1] = chart
	reg.Push(t, "", app)
	v := ocmtest.Vector("acme.org/vectors/shop", "1.0.0", app)
	v.Signers = []ocmtest.Signer{{Name: "acme", Key: key}}
	reg.Push(t, "", v)
	vector := reg.Ref("", v.Name, v.Version)
	startManager(t, managerOptions{resolver: ocm.NewClient(ocm.Options{RootCAs: charts.CertPool()})})

	withCredentials := newNamespace(t)
	createKeySecret(t, withCredentials, "keys", &key.PublicKey)
	if err := env.Client.Create(ctx, pullSecret(withCredentials, "pull", charts)); err != nil {
		t.Fatal(err)
	}
	vd := verifiedVD(t, withCredentials, "shop", vector, withSecretRef("pull"))
	waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionTrue, meta.SucceededReason)
	for _, ad := range listADs(t, withCredentials) {
		if got := ad.Spec.Component.Resources[0].Digest; got != "sha256:"+chart.Digest.Value {
			t.Errorf("resource digest on %s = %q, want the chart's manifest digest", ad.Name, got)
		}
	}

	without := newNamespace(t)
	createKeySecret(t, without, "keys", &key.PublicKey)
	expectRefused(t, verifiedVD(t, without, "shop", vector), string(ocm.ReasonUnauthorized))
}
