package v1alpha1

import (
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VectorDeploymentSpec names the vector to deploy. The vector is immutable (suspend, secretRef and verify may
// change): deploying another vector is a new VectorDeployment, so the ArtifactDeployments of the old one are never
// silently replaced.
// +kubebuilder:validation:XValidation:rule="self.vector == oldSelf.vector",message="VectorDeployment spec is immutable"
type VectorDeploymentSpec struct {
	// Vector is the OCM reference of the vector component version, e.g.
	// http://registry:5000//acme.org/vectors/shop:1.0.0.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Vector string `json:"vector"`

	// SecretRef names a kubernetes.io/dockerconfigjson Secret in this namespace holding the credentials the
	// vector and its artifacts are read with. It is read at every reconcile, so a rotated Secret takes effect at
	// the next one. Credentials are sent over TLS only, unless the operator allows a host in clear.
	// +optional
	SecretRef *meta.LocalObjectReference `json:"secretRef,omitempty"`

	// Suspend stops the reconciler of this VectorDeployment: no registry reads, no writes. Its
	// ArtifactDeployments, and Flux behind them, keep running; suspend those to freeze the deployments.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Verify requires the vector to carry OCM signatures that verify with the given keys, and the artifacts to
	// match the digests the vector pins them with. Nothing of an unverified vector is deployed. It adds to the
	// operator's --require-signatures requirement and never replaces it: with that flag the vector must also
	// verify with the operator's keys.
	// +optional
	Verify *VectorVerification `json:"verify,omitempty"`
}

// ResultingArtifactDeployment is the ArtifactDeployment created for one artifact of the vector.
type ResultingArtifactDeployment struct {
	// Name of the ArtifactDeployment.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// CollisionCount is the number of salts folded into the name's hash after genuine name collisions. Once
	// bumped it stays, so the name of this slot never changes back.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CollisionCount *int32 `json:"collisionCount,omitempty"`
}

// VectorDeploymentStatus is the observed state of a VectorDeployment.
type VectorDeploymentStatus struct {
	// ObservedGeneration is the last generation the controller acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	meta.ReconcileRequestStatus `json:",inline"`

	// VectorDigest is the manifest digest of the vector as the last reconcile read it.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	VectorDigest string `json:"vectorDigest,omitempty"`

	// Artifacts is the number of artifacts in the vector.
	// +optional
	Artifacts int32 `json:"artifacts,omitempty"`

	// Ready is the number of artifacts whose ArtifactDeployment is Ready.
	// +optional
	Ready int32 `json:"ready,omitempty"`

	// ReadySummary is ready/artifacts, e.g. 2/3, for the printer column (a column cannot compute it).
	// +optional
	ReadySummary string `json:"readySummary,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, VectorDownloaded, ArtifactDeploymentsCreated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ResultingArtifactDeployments maps each artifact's component name to its ArtifactDeployment.
	// +optional
	ResultingArtifactDeployments map[string]ResultingArtifactDeployment `json:"resultingArtifactDeployments,omitempty"`

	// DeploymentResults maps each artifact's component name to the results its ArtifactDeployment reported.
	// +optional
	DeploymentResults map[string][]DeploymentResult `json:"deploymentResults,omitempty"`
}

// VectorDeployment deploys every artifact of a vector, one ArtifactDeployment each.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vd;vds,categories=konfidence
// +kubebuilder:printcolumn:name="Vector",type=string,JSONPath=`.spec.vector`,priority=1
// +kubebuilder:printcolumn:name="Artifacts",type=string,JSONPath=`.status.readySummary`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VectorDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   VectorDeploymentSpec   `json:"spec"`
	Status VectorDeploymentStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (github.com/fluxcd/pkg/runtime/conditions.Getter).
func (in *VectorDeployment) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions (github.com/fluxcd/pkg/runtime/conditions.Setter).
func (in *VectorDeployment) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// SetObservedGeneration records the generation the status reports on.
func (in *VectorDeployment) SetObservedGeneration(g int64) { in.Status.ObservedGeneration = g }

// VectorDeploymentList is a list of VectorDeployments.
// +kubebuilder:object:root=true
type VectorDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VectorDeployment `json:"items"`
}
