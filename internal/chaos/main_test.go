package chaos

import (
	"io"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain silences controller-runtime's logger, which envtest uses while it installs CRDs.
func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	os.Exit(m.Run())
}
