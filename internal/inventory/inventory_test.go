package inventory

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		id      string
		want    Ref
		service bool
	}{
		{"apps_web__Service", Ref{Namespace: "apps", Name: "web", Kind: "Service"}, true},
		{"apps_web_apps_Deployment", Ref{Namespace: "apps", Name: "web", Group: "apps", Kind: "Deployment"}, false},
		{"apps_web_serving.knative.dev_Service", Ref{Namespace: "apps", Name: "web", Group: "serving.knative.dev", Kind: "Service"}, false},
		{"_admin_rbac.authorization.k8s.io_ClusterRole", Ref{Name: "admin", Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, false},
		{"broken", Ref{Name: "broken", Kind: "?"}, false},
	} {
		got := Parse(tc.id)
		if got != tc.want || got.IsService() != tc.service {
			t.Errorf("Parse(%q) = %+v (a Service: %v), want %+v (%v)", tc.id, got, got.IsService(), tc.want, tc.service)
		}
	}
}

func TestOf(t *testing.T) {
	hr := &helmv2.HelmRelease{Status: helmv2.HelmReleaseStatus{Inventory: &helmv2.ResourceInventory{
		Entries: []helmv2.ResourceRef{{ID: "apps_web__Service", Version: "v1"}}}}}
	ks := &kustomizev1.Kustomization{Status: kustomizev1.KustomizationStatus{Inventory: &kustomizev1.ResourceInventory{
		Entries: []kustomizev1.ResourceRef{{ID: "apps_web_apps_Deployment", Version: "v1"}, {ID: "apps_web__Service", Version: "v1"}}}}}
	for _, tc := range []struct {
		obj  client.Object
		want []Ref
	}{
		{hr, []Ref{{Namespace: "apps", Name: "web", Kind: "Service"}}},
		{ks, []Ref{{Namespace: "apps", Name: "web", Group: "apps", Kind: "Deployment"}, {Namespace: "apps", Name: "web", Kind: "Service"}}},
		{&helmv2.HelmRelease{}, nil},
		{&kustomizev1.Kustomization{}, nil},
		{&corev1.Service{}, nil},
	} {
		got := Of(tc.obj)
		if len(got) != len(tc.want) {
			t.Errorf("Of(%T) = %+v, want %+v", tc.obj, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("Of(%T)[%d] = %+v, want %+v", tc.obj, i, got[i], tc.want[i])
			}
		}
	}
}
