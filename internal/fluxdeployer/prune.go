package fluxdeployer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// pruneSources deletes the sources ad controls that its Flux objects no longer use, once the objects that replace
// them are applied. The source kind of a helm artifact can change while the ArtifactDeployment stays: an OCI chart
// with a digest moves from a HelmRepository to an OCIRepository, pinned (see buildHelm), and helmSource may be
// configured the other way. The HelmRepository left behind would keep pointing source-controller at the chart's
// tag, and a HelmChart made from it before the move could still be fetched through it. Only sources are pruned: a
// deployment kind follows from the manifest type, which cannot change, and deleting one would uninstall workloads.
// Reads come from the cache, so a reconcile with nothing to prune sends no request.
func (r *Reconciler) pruneSources(ctx context.Context, ad *konfidencev1.ArtifactDeployment, desired []client.Object) error {
	inUse := map[*fluxKind]bool{}
	for _, obj := range desired {
		k, err := kindOf(obj)
		if err != nil {
			return err
		}
		inUse[k] = true
	}
	for _, k := range ownedFluxKinds() {
		if k.healthy != "" || inUse[k] {
			continue // a deployment kind (no health condition of its own for a source), or a source in use
		}
		obj, key := k.new(), client.ObjectKeyFromObject(ad)
		switch err := r.client.Get(ctx, key, obj); {
		case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
			continue
		case err != nil:
			return outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("reading %s %s: %w", k.gvk.Kind, key, err))
		}
		if !metav1.IsControlledBy(obj, ad) || obj.GetDeletionTimestamp() != nil {
			continue
		}
		// The UID precondition: an object of that name created since the cache saw this one is not deleted unseen.
		uid := obj.GetUID()
		if err := r.client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("deleting %s %s, no longer used: %w", k.gvk.Kind, key, err))
		}
		r.event(ad, corev1.EventTypeNormal, konfidencev1.FluxObjectUpdatedReason, "deleted %s %s: no Flux object of the ArtifactDeployment uses it any more", k.gvk.Kind, key)
	}
	return nil
}
