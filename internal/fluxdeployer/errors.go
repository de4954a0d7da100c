package fluxdeployer

import (
	"errors"
	"fmt"
)

// stepError is a failed step of a reconcile. Its reason becomes the Ready condition's reason and the event's;
// stalled marks failures that retrying cannot fix: the ArtifactDeployment or the configuration must change first.
type stepError struct {
	reason  string
	stalled bool
	err     error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// terminal is a failure of the input: the reconcile stops and waits for a change of the ArtifactDeployment or the
// configuration, which requeue it. Not controller-runtime's reconcile.TerminalError: Reconcile returns nil for it,
// as Flux's controllers do for a stalling error, since Stalled=True and a warning event report it; returned, a
// TerminalError would be logged as a reconciler error on every bad input (and Reconcile's tests want nil), and as
// a mere marker it would say no more than the stalled flag.
func terminal(reason, format string, args ...any) error {
	return &stepError{reason: reason, stalled: true, err: fmt.Errorf(format, args...)}
}

// transient is a failure that a retry with backoff may fix, e.g. an API server error.
func transient(reason string, err error) error {
	return &stepError{reason: reason, err: err}
}

// asStepError returns err's stepError, wrapping an unclassified error as transient with the fallback reason.
func asStepError(err error, fallbackReason string) *stepError {
	var se *stepError
	if errors.As(err, &se) {
		return se
	}
	return &stepError{reason: fallbackReason, err: err}
}
