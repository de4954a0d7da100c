package vectordeployment

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestFailureReasonIsNeverEmpty: a condition needs a reason, so an error without a typed one still gets one.
func TestFailureReasonIsNeverEmpty(t *testing.T) {
	for _, tc := range []struct {
		err       error
		reason    string
		permanent bool
	}{
		{fmt.Errorf("wrapped: %w", ocm.ErrManifestMissing), string(ocm.ReasonManifestMissing), true},
		{fmt.Errorf("wrapped: %w", ocm.ErrUnavailable), string(ocm.ReasonUnavailable), false},
		{fmt.Errorf("component: %w", naming.ErrInvalidInput), konfidencev1.InvalidNameInputReason, true},
		{errors.New("something else"), meta.ReconciliationFailedReason, false},
	} {
		if got := FailureReason(tc.err); got != tc.reason {
			t.Errorf("FailureReason(%v) = %q, want %q", tc.err, got, tc.reason)
		}
		if got := isPermanent(tc.err); got != tc.permanent {
			t.Errorf("isPermanent(%v) = %v, want %v", tc.err, got, tc.permanent)
		}
	}
}
