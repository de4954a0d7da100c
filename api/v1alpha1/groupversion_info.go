// Package v1alpha1 contains the konfidence.cloud/v1alpha1 API: VectorDeployment and ArtifactDeployment.
// +kubebuilder:object:generate=true
// +groupName=konfidence.cloud
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "konfidence.cloud", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme. It is apimachinery's, so that importing
	// the API does not pull in controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&VectorDeployment{}, &VectorDeploymentList{},
		&ArtifactDeployment{}, &ArtifactDeploymentList{},
		&Stage{}, &StageList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
