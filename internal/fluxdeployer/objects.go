package fluxdeployer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// fluxMeta is the metadata of every Flux object of an ArtifactDeployment: its name verbatim (the name is unique
// per artifact instance by construction), its namespace, the label that finds it, and the ArtifactDeployment as
// controller, so deleting the ArtifactDeployment deletes the Flux objects and Flux uninstalls the workloads. The
// ArtifactDeployment's shard key, when it has one, is copied as it is, so that the Flux objects are in the shard
// of the operator instance and of the Flux controllers that reconcile the ArtifactDeployment's shard.
func fluxMeta(ad *konfidencev1.ArtifactDeployment) metav1.ObjectMeta {
	labels := map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name}
	if key, ok := ad.Labels[konfidencev1.ShardKeyLabel]; ok {
		labels[konfidencev1.ShardKeyLabel] = key
	}
	return metav1.ObjectMeta{
		Name:            ad.Name,
		Namespace:       ad.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ad, konfidencev1.GroupVersion.WithKind("ArtifactDeployment"))},
	}
}

// workloadLabels are stamped on every object Flux renders, so the deployment's Services can be found.
func workloadLabels(ad *konfidencev1.ArtifactDeployment) map[string]string {
	return map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name}
}
