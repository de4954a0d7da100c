package vectordeployment

import (
	"context"

	"net"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestBadVectors: each failure of the vector itself shows as a specific reason on the VectorDeployment, with an
// event; retryable ones keep Reconciling, permanent ones are Stalled; nothing is created.
func TestBadVectors(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	secured := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("user", "secret"))
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	securedVector := pushVector(t, secured, "acme.org/vectors/shop", app)
	startManager(t, managerOptions{})

	for _, tc := range []struct {
		name, vector string
		reason       ocm.Reason
		permanent    bool
	}{
		{"unreachable", "http://" + closedPort(t) + "//acme.org/vectors/shop:1.0.0", ocm.ReasonUnavailable, false},
		{"not-found", reg.Ref("", "acme.org/vectors/missing", "1.0.0"), ocm.ReasonNotFound, false},
		{"unauthorized", securedVector, ocm.ReasonUnauthorized, false},
		{"invalid-reference", "http://registry:5000//Not A Component:1.0.0", ocm.ReasonReferenceInvalid, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			vd := createVectorDeployment(t, ns, tc.name, tc.vector)
			vd = waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionFalse, string(tc.reason))
			if conditions.IsReady(vd) || conditions.GetReason(vd, konfidencev1.ReadyCondition) != string(tc.reason) {
				t.Errorf("Ready = %+v", conditions.Get(vd, konfidencev1.ReadyCondition))
			}
			// A permanent failure stalls; any other is retried, so the VectorDeployment is still reconciling.
			type state struct{ Stalled, Reconciling bool }
			if diff := cmp.Diff(state{tc.permanent, !tc.permanent}, state{conditions.IsStalled(vd), conditions.IsReconciling(vd)}); diff != "" {
				t.Errorf("permanent=%v (-want +got):\n%s", tc.permanent, diff)
			}
			waitForEvent(t, ns, vd.Name, string(tc.reason))
			if ads := listADs(t, ns); len(ads) != 0 {
				t.Errorf("created %v for a broken vector", keys(ads))
			}
		})
	}
}

// TestRegistryCredentialsFromSecrets: the operator's own Secret (--registry-secrets) opens a private registry for
// a VectorDeployment only when --registry-secrets-hosts lists the host; without that the vector fails
// Unauthorized, as it would for anyone.
func TestRegistryCredentialsFromSecrets(t *testing.T) {
	secured := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("user", "secret"), ocmtest.WithTLS())
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	vector := pushVector(t, secured, "acme.org/vectors/shop", app)
	operatorNS, ns := newNamespace(t), newNamespace(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "registry"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: secured.DockerConfigJSON()},
	}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	secrets, err := parseSecretKeys([]string{operatorNS + "/registry"})
	if err != nil {
		t.Fatal(err)
	}
	resolver := ocm.NewClient(ocm.Options{RootCAs: secured.CertPool()})

	stop := startManager(t, managerOptions{resolver: resolver, credentials: RegistryCredentials{Secrets: secrets}})
	vd := createVectorDeployment(t, ns, "shop", vector)
	waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionFalse, string(ocm.ReasonUnauthorized))
	stop()

	startManager(t, managerOptions{resolver: resolver, credentials: RegistryCredentials{Secrets: secrets, Hosts: []string{secured.Host}}})
	waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")

	if _, err := parseSecretKeys([]string{"no-namespace"}); err == nil {
		t.Error("a registry Secret reference without namespace was accepted")
	}
}

// TestBrokenArtifactsFailAlone: an artifact that cannot be read, or whose manifest is missing or invalid, gets no
// ArtifactDeployment and names its reason on the VectorDeployment; the vector's other artifacts are deployed.
func TestBrokenArtifactsFailAlone(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	good := ocmtest.Artifact("acme.org/artifacts/good", "1.0.0", helmType, true)
	missing := ocmtest.Artifact("acme.org/artifacts/missing", "1.0.0", helmType, true)
	missing.Resources = missing.Resources[1:] // drop the artifact manifest
	invalid := ocmtest.Artifact("acme.org/artifacts/invalid", "1.0.0", helmType, true)
	invalid.Resources[0].Blob = []byte(`{"type": 42}`)
	startManager(t, managerOptions{})

	for _, tc := range []struct {
		broken ocmtest.ComponentVersion
		reason ocm.Reason
	}{{missing, ocm.ReasonManifestMissing}, {invalid, ocm.ReasonManifestInvalid}} {
		t.Run(string(tc.reason), func(t *testing.T) {
			ns := newNamespace(t)
			vector := pushVector(t, reg, "acme.org/vectors/"+tc.broken.Name[len("acme.org/artifacts/"):], good, tc.broken)
			vd := createVectorDeployment(t, ns, "shop", vector)
			vd = waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionFalse, string(tc.reason))
			if !conditions.IsStalled(vd) || conditions.GetReason(vd, konfidencev1.ReadyCondition) != string(tc.reason) ||
				conditions.GetReason(vd, konfidencev1.VectorDownloadedCondition) != string(tc.reason) {
				t.Errorf("conditions %+v", vd.Status.Conditions)
			}
			if msg := conditions.GetMessage(vd, konfidencev1.ReadyCondition); !strings.Contains(msg, tc.broken.Name) {
				t.Errorf("Ready message %q does not name %s", msg, tc.broken.Name)
			}
			ads := listADs(t, ns)
			if _, ok := ads[mustName(t, good.Name, good.Version, "", 0, naming.HashLength)]; !ok || len(ads) != 1 {
				t.Errorf("want only the good artifact deployed, got %v", keys(ads))
			}
		})
	}
}

func TestCTFReferencesAreRejected(t *testing.T) {
	startManager(t, managerOptions{})
	ns := newNamespace(t)
	vd := createVectorDeployment(t, ns, "local", "ctf::/etc//acme.org/vectors/shop:1.0.0")
	vd = waitForCondition(t, vd, konfidencev1.StalledCondition, metav1.ConditionTrue, string(ocm.ReasonReferenceInvalid))
	if msg := conditions.GetMessage(vd, konfidencev1.ReadyCondition); !strings.Contains(msg, "CTF") {
		t.Errorf("Ready message %q does not explain the rejection", msg)
	}
}
