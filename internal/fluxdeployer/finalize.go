package fluxdeployer

import (
	"context"

	"github.com/fluxcd/pkg/apis/meta"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// finalize ends a reconcile of ad, whose status was original's when it began, with err, the failure of a step or
// nil: outcome.Finalize marks Ready False with the failure's reason (ReconciliationFailed for an error no step
// classified, so that Ready says something went wrong), normalises Reconciling, Stalled and observedGeneration,
// writes the status in one merge patch and emits the event of a Ready transition. The deployer is the only writer
// of an ArtifactDeployment's status, so the patch replaces the conditions without an optimistic lock. A stalled
// ArtifactDeployment is not retried: the watches requeue it when its input or the configuration changes.
func (r *Reconciler) finalize(ctx context.Context, original, ad *konfidencev1.ArtifactDeployment, err error) error {
	status := outcome.Status[*konfidencev1.ArtifactDeployment]{Client: r.client, Event: r.event, FieldOwner: FieldManager}
	if err != nil {
		err = outcome.As(err, meta.ReconciliationFailedReason)
	}
	return status.Finalize(ctx, original, ad, err)
}
