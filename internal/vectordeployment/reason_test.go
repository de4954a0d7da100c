package vectordeployment

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// TestFailureReasonIsNeverEmpty: a condition needs a reason, so an error without a typed one still gets one. The
// errors of OCM and of naming get theirs where they enter the reconciler.
func TestFailureReasonIsNeverEmpty(t *testing.T) {
	_, _, nameErr := identity{}.name(0, naming.HashLength)
	for _, tc := range []struct {
		err       error
		reason    string
		permanent bool
	}{
		{fromOCM(fmt.Errorf("wrapped: %w", ocm.ErrManifestMissing)), string(ocm.ReasonManifestMissing), true},
		{fromOCM(fmt.Errorf("wrapped: %w", ocm.ErrUnavailable)), string(ocm.ReasonUnavailable), false},
		{fmt.Errorf("component: %w", nameErr), konfidencev1.InvalidNameInputReason, true},
		{errors.New("something else"), meta.ReconciliationFailedReason, false},
	} {
		if got := FailureReason(tc.err); got != tc.reason {
			t.Errorf("FailureReason(%v) = %q, want %q", tc.err, got, tc.reason)
		}
		if got := outcome.Stalls(tc.err); got != tc.permanent {
			t.Errorf("Stalls(%v) = %v, want %v", tc.err, got, tc.permanent)
		}
	}
	if !errors.Is(nameErr, naming.ErrInvalidInput) {
		t.Errorf("the naming error %v lost its cause", nameErr)
	}
}
