package tree

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// LastSeen is when an event last happened, whichever of the fields its recorder filled (a series' last
// observation, the legacy lastTimestamp, the events.k8s.io eventTime, else its creation).
func LastSeen(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
