package stage

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// resolve returns the vector reference the Stage should run: spec.vector, or with spec.semver the newest version in
// the range that verifies when signatures are required. A version newer than the one the Stage runs or moves to
// is verified before it is chosen; one that does not verify is skipped with a Warning event naming it, and the
// next older one is tried. The versions the Stage already deploys were verified by their VectorDeployments.
func (r *Reconciler) resolve(ctx context.Context, st *konfidencev1.Stage, owned []konfidencev1.VectorDeployment, fresh Freshness) (string, error) {
	if st.Spec.Semver == "" {
		return st.Spec.Vector, nil
	}
	constraint, err := semver.NewConstraint(st.Spec.Semver)
	if err != nil {
		return "", outcome.Stallingf(konfidencev1.SemverInvalidReason, "spec.semver %q is not a version range: %v", st.Spec.Semver, err)
	}
	listed, err := r.Vectors.Versions(ctx, desiredVectorDeployment(st, st.Spec.Vector))
	if err != nil {
		return "", fmt.Errorf("listing the versions of %s: %w", st.Spec.Vector, err)
	}
	deployed := map[string]bool{}
	for _, vd := range owned {
		if vd.DeletionTimestamp.IsZero() {
			deployed[vd.Spec.Vector] = true
		}
	}
	skipped := 0
	for _, v := range newestFirst(listed, constraint) {
		ref := withVersion(st.Spec.Vector, v)
		if deployed[ref] {
			return ref, nil
		}
		required, err := r.Vectors.Verify(ctx, desiredVectorDeployment(st, ref), fresh)
		switch {
		case !required || err == nil:
			return ref, nil
		case outcome.Stalls(err):
			r.event(st, corev1.EventTypeWarning, konfidencev1.VersionSkippedReason, "version %s of %s is skipped: %s", v, st.Spec.Vector, err)
			skipped++
			continue
		}
		return "", fmt.Errorf("verifying version %s of %s: %w", v, st.Spec.Vector, err)
	}
	msg := fmt.Sprintf("no version of %s in the registry is in the range %q", st.Spec.Vector, st.Spec.Semver)
	if skipped > 0 {
		msg += fmt.Sprintf(" and verifies (%d skipped)", skipped)
	}
	return "", outcome.Stalling(konfidencev1.NoMatchingVersionReason, errors.New(msg))
}

// newestFirst returns the versions in the range, newest first; versions that are not semantic versions are left
// out.
func newestFirst(versions []string, constraint *semver.Constraints) []string {
	type parsed struct {
		raw string
		v   *semver.Version
	}
	var in []parsed
	for _, raw := range versions {
		v, err := semver.NewVersion(raw)
		if err == nil && constraint.Check(v) {
			in = append(in, parsed{raw, v})
		}
	}
	slices.SortStableFunc(in, func(a, b parsed) int { return b.v.Compare(a.v) })
	out := make([]string, len(in))
	for i, p := range in {
		out[i] = p.raw
	}
	return out
}
