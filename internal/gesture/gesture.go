// Package gesture holds the three things a person does to a VectorDeployment, an ArtifactDeployment or a Stage,
// from the command line and from the web view alike: ask for a reconcile, suspend, resume. Each is one merge patch
// sent with the person's own credentials, as the Flux CLI sends them.
package gesture

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Gesture is one of Reconcile, Suspend and Resume.
type Gesture string

const (
	// Reconcile sets reconcile.fluxcd.io/requestedAt to the current time, as `flux reconcile` does.
	Reconcile Gesture = "reconcile"
	// Suspend sets spec.suspend.
	Suspend Gesture = "suspend"
	// Resume clears spec.suspend and requests a reconcile in the same patch, as `flux resume` does.
	Resume Gesture = "resume"
)

// Parse reads a gesture's name.
func Parse(name string) (Gesture, error) {
	switch g := Gesture(name); g {
	case Reconcile, Suspend, Resume:
		return g, nil
	}
	return "", fmt.Errorf("unknown action %q (want reconcile, suspend or resume)", name)
}

// Do sends the gesture's patch for obj and returns the requestedAt value it set (empty for Suspend).
func Do(ctx context.Context, c client.Writer, obj client.Object, g Gesture) (requested string, err error) {
	patch := map[string]any{}
	switch g {
	case Suspend:
		patch["spec"] = map[string]any{"suspend": true}
	case Resume:
		patch["spec"] = map[string]any{"suspend": false}
		fallthrough
	case Reconcile:
		requested = time.Now().Format(time.RFC3339Nano)
		patch["metadata"] = map[string]any{"annotations": map[string]any{meta.ReconcileRequestAnnotation: requested}}
	default:
		return "", fmt.Errorf("unknown action %q", g)
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return "", err
	}
	return requested, c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw))
}
