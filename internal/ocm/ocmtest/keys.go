package ocmtest

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KeysSecret is a Secret of trusted public keys as a VectorDeployment's or Stage's spec.verify.secretRef names it:
// each key PEM-encoded (PKIX) under its signature's name.
func KeysSecret(t testing.TB, namespace, name string, keys map[string]*rsa.PublicKey) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{}}
	for signature, key := range keys {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			t.Fatal(err)
		}
		secret.Data[signature] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	return secret
}
