package controlplane

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRestartKeepsDataAndCredentials: after Restart the objects are still there (same etcd), and the admin
// client and a ServiceAccount token issued before the restart still authenticate (same port, CA and signing key).
func TestRestartKeepsDataAndCredentials(t *testing.T) {
	assets, err := KubeAssets(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	s, err := StartAPIServer(assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "before-restart"}}
	if err := s.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := s.ServiceAccountKubeconfig(ctx, sa.Namespace, sa.Name)
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}

	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(sa), &corev1.ServiceAccount{}); err != nil {
		t.Errorf("the ServiceAccount created before the restart: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount has no rights: forbidden means its token was accepted, unauthorized that it was not.
	if err := c.List(ctx, &corev1.NamespaceList{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing namespaces with the token issued before the restart: %v, want forbidden", err)
	}
}
