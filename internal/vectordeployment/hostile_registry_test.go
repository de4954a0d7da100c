package vectordeployment

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// TestHostileDescriptorsAreRefused: a vector whose descriptor exceeds the size limit, and one whose descriptor is
// not JSON although its media type says so, are refused with a specific reason and a Warning event before they
// cost the operator more than the limit (issue 9, finding 2).
func TestHostileDescriptorsAreRefused(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	const vector = "acme.org/vectors/shop"
	head := `{"meta":{"schemaVersion":"v2"},"component":{"name":"` + vector + `","version":"1.0.0","provider":"p","resources":[`
	oversized := ocmtest.ComponentVersion{Name: vector, Version: "1.0.0",
		RawDescriptor: []byte(head + strings.Repeat(`{},`, ocm.DefaultMaxDescriptorSize/3) + `{}]}}`)}
	notJSON := ocmtest.ComponentVersion{Name: vector, Version: "1.0.0",
		RawDescriptor: []byte("meta:\n  schemaVersion: v2\ncomponent:\n  name: " + vector + "\n  version: 1.0.0\n")}
	reg.Push(t, "oversized", oversized)
	reg.Push(t, "not-json", notJSON)
	startManager(t, managerOptions{})

	for _, tc := range []struct {
		subPath   string
		reason    ocm.Reason
		permanent bool
	}{
		{"oversized", ocm.ReasonBlobTooLarge, false},
		{"not-json", ocm.ReasonDescriptorInvalid, true},
	} {
		t.Run(tc.subPath, func(t *testing.T) {
			ns := newNamespace(t)
			vd := createVectorDeployment(t, ns, "shop", reg.Ref(tc.subPath, vector, "1.0.0"))
			vd = waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionFalse, string(tc.reason))
			if conditions.IsReady(vd) || conditions.IsStalled(vd) != tc.permanent {
				t.Errorf("conditions %+v", vd.Status.Conditions)
			}
			waitForEvent(t, ns, vd.Name, string(tc.reason))
			if ads := listADs(t, ns); len(ads) != 0 {
				t.Errorf("created %v", keys(ads))
			}
		})
	}
}
