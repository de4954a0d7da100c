package v1alpha1

import (
	"github.com/fluxcd/pkg/apis/meta"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ArtifactDeploymentSpec is everything the Flux deployer needs to deploy one artifact. It is immutable but for
// suspend: other inputs give another name, hence another ArtifactDeployment.
// +kubebuilder:validation:XValidation:rule="self.manifest == oldSelf.manifest && self.component == oldSelf.component",message="ArtifactDeployment spec is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.taskManifests) == has(oldSelf.taskManifests)",message="ArtifactDeployment spec is immutable"
type ArtifactDeploymentSpec struct {
	// Manifest is the artifact's deployment manifest.
	// +required
	Manifest ArtifactManifest `json:"manifest"`

	// TaskManifests are the artifact's tasks. Immutable: compared here while present before and after (a
	// transition rule), and the rule on the spec forbids adding or removing them.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ArtifactDeployment spec is immutable"
	TaskManifests []TaskManifest `json:"taskManifests,omitempty"`

	// Component is the OCM component version that carries the artifact.
	// +required
	Component Component `json:"component"`

	// Suspend stops the deployer for this ArtifactDeployment and suspends its Flux objects (spec.suspend), so
	// helm-controller and kustomize-controller leave the deployment as it is; clearing it resumes them.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// ArtifactManifest says how an artifact is deployed.
type ArtifactManifest struct {
	// Type is the deployment mechanism, e.g. helm or kustomize.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Type string `json:"type"`

	// AllowReuse lets VectorDeployments share one deployment of the artifact.
	// +optional
	AllowReuse bool `json:"allowReuse"`
}

// TaskManifest is one task of an artifact.
type TaskManifest struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Type string `json:"type"`

	// DependsOn names tasks that must complete first.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	DependsOn []string `json:"dependsOn,omitempty"`

	// Spec is the task's own configuration, passed through as stored in the artifact.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec *apiextensionsv1.JSON `json:"spec,omitempty"`
}

// Component identifies an OCM component version and its resources.
type Component struct {
	// Name is the OCM component name, e.g. acme.org/artifacts/frontend.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`

	// Version is the OCM component version.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version"`

	// Resources are the component's resources other than its manifests.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Resources []Resource `json:"resources,omitempty"`
}

// Resource is one OCM resource of the artifact's component.
type Resource struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Type string `json:"type"`

	// Content is the resource's access specification, as stored in the component descriptor.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Content *apiextensionsv1.JSON `json:"content,omitempty"`

	// Digest is the content digest the component descriptor records for the resource (for an OCI artifact, its
	// manifest digest). The deployer pulls an OCI artifact by it, whatever its configuration, so a tag moved to
	// other content is never deployed. A helm access's chart is selected by version, which no digest can pin: its
	// digest is not enforced, and a VectorDeployment that verifies signatures refuses helm accesses.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest,omitempty"`
}

// DeploymentResult is one result of a deployment, e.g. the address of a Service it created.
type DeploymentResult struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Type string `json:"type"`

	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec *apiextensionsv1.JSON `json:"spec,omitempty"`
}

// ArtifactDeploymentStatus is the observed state of an ArtifactDeployment.
type ArtifactDeploymentStatus struct {
	// ObservedGeneration is the last generation the controller acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	meta.ReconcileRequestStatus `json:",inline"`

	// FluxKind is the kind of the Flux object that deploys the artifact: HelmRelease or Kustomization.
	// +optional
	FluxKind string `json:"fluxKind,omitempty"`

	// ReleaseName is the Helm release name of a HelmRelease.
	// +optional
	ReleaseName string `json:"releaseName,omitempty"`

	// NameSuffix is the suffix a Kustomization appends to the name of every object it renders.
	// +optional
	NameSuffix string `json:"nameSuffix,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, ArtifactFetched, ArtifactDeployed, AppHealthy,
	// DeploymentResultCreated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DeploymentResult lists what the deployment produced.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=256
	DeploymentResult []DeploymentResult `json:"deploymentResult,omitempty"`
}

// ArtifactDeployment deploys one artifact through Flux.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ad;ads,categories=konfidence
// +kubebuilder:printcolumn:name="Component",type=string,JSONPath=`.spec.component.name`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.component.version`,priority=1
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.manifest.type`
// +kubebuilder:printcolumn:name="Flux",type=string,JSONPath=`.status.fluxKind`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.status.releaseName`,priority=1
// +kubebuilder:printcolumn:name="Suffix",type=string,JSONPath=`.status.nameSuffix`,priority=1
// +kubebuilder:printcolumn:name="Fetched",type=string,JSONPath=`.status.conditions[?(@.type=="ArtifactFetched")].status`,priority=1
// +kubebuilder:printcolumn:name="Deployed",type=string,JSONPath=`.status.conditions[?(@.type=="ArtifactDeployed")].status`,priority=1
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="AppHealthy")].status`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ArtifactDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ArtifactDeploymentSpec   `json:"spec"`
	Status ArtifactDeploymentStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (github.com/fluxcd/pkg/runtime/conditions.Getter).
func (in *ArtifactDeployment) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions (github.com/fluxcd/pkg/runtime/conditions.Setter).
func (in *ArtifactDeployment) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// SetObservedGeneration records the generation the status reports on.
func (in *ArtifactDeployment) SetObservedGeneration(g int64) { in.Status.ObservedGeneration = g }

// ArtifactDeploymentList is a list of ArtifactDeployments.
// +kubebuilder:object:root=true
type ArtifactDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ArtifactDeployment `json:"items"`
}
