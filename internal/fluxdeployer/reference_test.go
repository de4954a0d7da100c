package fluxdeployer

import (
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/ocireftest"
)

// TestImageReferenceGrammarAgreesWithOCM feeds the image references of internal/ocireftest, which the OCM reader's
// test feeds to ocm.ParseRef: both packages judge them by oras' grammar.
func TestImageReferenceGrammarAgreesWithOCM(t *testing.T) {
	for _, c := range ocireftest.Cases {
		ref := c.ImageReference()
		if a, err := parseImageReference(ref); (err == nil) != c.Valid {
			t.Errorf("parseImageReference(%q) = %+v, %v; want valid=%v", ref, a, err, c.Valid)
		}
	}
}
