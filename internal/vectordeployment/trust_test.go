package vectordeployment

import (
	"reflect"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// TestTrustRequirements: the platform's requirement always holds, spec.verify is added to it, in that order.
func TestTrustRequirements(t *testing.T) {
	platform := TrustDefault{Require: true, Secret: client.ObjectKey{Namespace: "flux-system", Name: "operator-keys"}, Signatures: []string{"platform"}}
	withVerify := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop"},
		Spec: konfidencev1.VectorDeploymentSpec{Verify: &konfidencev1.VectorVerification{
			Signatures: []string{"release"}, SecretRef: meta.LocalObjectReference{Name: "keys"}}},
	}
	without := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop"}}
	platformReq := trustRequirement{Origin: platformOrigin, Secret: platform.Secret, Signatures: []string{"platform"}}
	tenantReq := trustRequirement{Origin: tenantOrigin, Secret: client.ObjectKey{Namespace: "shop", Name: "keys"}, Signatures: []string{"release"}}
	for _, tc := range []struct {
		name     string
		platform TrustDefault
		vd       *konfidencev1.VectorDeployment
		want     []trustRequirement
	}{
		{"nothing required", TrustDefault{}, without, nil},
		{"platform only", platform, without, []trustRequirement{platformReq}},
		{"spec.verify only", TrustDefault{}, withVerify, []trustRequirement{tenantReq}},
		{"spec.verify adds to the platform", platform, withVerify, []trustRequirement{platformReq, tenantReq}},
		{"platform not required, secret named", TrustDefault{Secret: platform.Secret}, without, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := trustRequirements(tc.platform, tc.vd); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("trustRequirements = %+v, want %+v", got, tc.want)
			}
		})
	}
}
