// Package outcome holds how a reconcile of this operator ends: the one error type its steps fail with, which
// carries the condition reason and whether the object stalls or is retried, and Finalize, which turns that outcome
// and the Ready condition the steps marked into the Reconciling, Stalled and observedGeneration kstatus reads,
// writes the status once and emits the event of a Ready transition. Both reconcilers end their reconciles with it,
// so a VectorDeployment and an ArtifactDeployment report the same outcome the same way, as Flux's controllers do.
package outcome

import (
	"errors"
	"fmt"
)

// Error is a failed step of a reconcile. Reason becomes the reason of the Ready condition and of the event;
// Stalled marks a failure retrying cannot fix: the object, its input or the configuration must change first, and
// a change is what reconciles it again.
type Error struct {
	Reason  string
	Stalled bool
	Err     error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Stalling is a failure of the input: retrying the same input cannot succeed.
func Stalling(reason string, err error) error {
	return &Error{Reason: reason, Stalled: true, Err: err}
}

// Stallingf is Stalling with a formatted cause.
func Stallingf(reason, format string, args ...any) error {
	return Stalling(reason, fmt.Errorf(format, args...))
}

// Retrying is a failure a retry with backoff may fix, e.g. a registry or API server that did not answer.
func Retrying(reason string, err error) error {
	return &Error{Reason: reason, Err: err}
}

// As returns the *Error in err's chain; an error no step classified is retried, under fallbackReason, since a
// condition needs a reason. nil for nil.
func As(err error, fallbackReason string) *Error {
	if err == nil {
		return nil
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		return e
	}
	return &Error{Reason: fallbackReason, Err: err}
}

// Stalls tells whether err is a failure retrying cannot fix.
func Stalls(err error) bool {
	e := As(err, "")
	return e != nil && e.Stalled
}
