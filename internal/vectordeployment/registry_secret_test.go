package vectordeployment

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// pullSecret is a kubernetes.io/dockerconfigjson Secret holding reg's credentials.
func pullSecret(namespace, name string, reg *ocmtest.Registry) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfigJSON()},
	}
}

func withSecretRef(name string) func(*konfidencev1.VectorDeployment) {
	return func(vd *konfidencev1.VectorDeployment) { vd.Spec.SecretRef = &meta.LocalObjectReference{Name: name} }
}

// TestVectorDeploymentSecretRef: a tenant reads a private vector with the pull Secret its VectorDeployment names
// (spec.secretRef) in its own namespace. A missing Secret and wrong credentials have their reasons; a rotated
// Secret takes effect at the next reconcile, without a restart; another tenant without the Secret is not served
// the private vector from the operator's cache; and credentials are not sent over plain HTTP.
func TestVectorDeploymentSecretRef(t *testing.T) {
	private := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "right"), ocmtest.WithTLS())
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	vector := pushVector(t, private, "acme.org/vectors/shop", app)
	startManager(t, managerOptions{resolver: ocm.NewClient(ocm.Options{RootCAs: private.CertPool()})})
	ctx := context.Background()

	ns := newNamespace(t)
	vd := createVectorDeployment(t, ns, "shop", vector)
	vd = patchVD(t, vd, withSecretRef("pull"))
	waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionFalse, konfidencev1.RegistrySecretNotFoundReason)
	waitForEvent(t, ns, vd.Name, konfidencev1.RegistrySecretNotFoundReason, "pull")

	secret := pullSecret(ns, "pull", private)
	secret.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"` + private.Host + `":{"username":"robot","password":"wrong"}}}`)
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	patchVD(t, vd, requestReconcile("wrong-password"))
	waitForCondition(t, vd, konfidencev1.ReadyCondition, metav1.ConditionFalse, string(ocm.ReasonUnauthorized))

	// Rotating the Secret's content is seen by the same operator at the next reconcile.
	secret.Data[corev1.DockerConfigJsonKey] = private.DockerConfigJSON()
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	patchVD(t, vd, requestReconcile("rotated"))
	waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")

	// The vector is in the operator's cache now, read with the first tenant's credentials; a tenant without them
	// is not served it.
	other := newNamespace(t)
	stranger := createVectorDeployment(t, other, "shop", vector)
	waitForCondition(t, stranger, konfidencev1.ReadyCondition, metav1.ConditionFalse, string(ocm.ReasonUnauthorized))
	if ads := listADs(t, other); len(ads) != 0 {
		t.Errorf("a tenant without credentials got %v", keys(ads))
	}

	// Over plain HTTP the Secret's credentials are withheld, and the reason says so.
	plain := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "right"))
	plainVector := pushVector(t, plain, "acme.org/vectors/shop", app)
	pushed := len(plain.Authorizations())
	if err := env.Client.Create(ctx, pullSecret(other, "plain", plain)); err != nil {
		t.Fatal(err)
	}
	clear := createVectorDeployment(t, other, "plain", plainVector)
	clear = patchVD(t, clear, withSecretRef("plain"))
	waitForCondition(t, clear, konfidencev1.ReadyCondition, metav1.ConditionFalse, string(ocm.ReasonCredentialsRequireTLS))
	waitForEvent(t, other, clear.Name, string(ocm.ReasonCredentialsRequireTLS))
	if got := plain.Authorizations()[pushed:]; len(got) != 0 {
		t.Errorf("the plain-HTTP registry received %d Authorization headers", len(got))
	}
}
