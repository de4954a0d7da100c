package v1alpha1

import (
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StageSpec names the vector a landscape should run. Unlike a VectorDeployment's, the vector may change: each new
// vector gets a VectorDeployment of its own, the candidate, and the one running now stays until the candidate is
// Ready.
// +kubebuilder:validation:XValidation:rule="!has(self.semver) || !self.vector.matches(':[^/]+$')",message="spec.vector must name no version when spec.semver is set"
type StageSpec struct {
	// Vector is the OCM reference of the vector component version the landscape runs, e.g.
	// http://registry:5000//acme.org/vectors/shop:1.0.0. With spec.semver it names the component without a version,
	// e.g. http://registry:5000//acme.org/vectors/shop.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Vector string `json:"vector"`

	// Semver is a version range (Masterminds' syntax, as Flux's ref.semver), e.g. ">=1.0.0 <2.0.0": the Stage runs
	// the newest version of spec.vector's component in the registry that is in the range and, when signatures
	// are required (spec.verify or the operator's --require-signatures), verifies. The registry is asked every
	// spec.interval and on a reconcile request.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Semver string `json:"semver,omitempty"`

	// Interval is how often the registry is asked for the newest version in spec.semver's range, and how often the
	// Stage is reconciled without an event, in Flux's duration format. Default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// SecretRef names a kubernetes.io/dockerconfigjson Secret in this namespace with the registry credentials,
	// passed on to every VectorDeployment the Stage creates and used for the Stage's own version lookups.
	// +optional
	SecretRef *meta.LocalObjectReference `json:"secretRef,omitempty"`

	// Verify is passed on to every VectorDeployment the Stage creates; with spec.semver a version that does not
	// verify is skipped.
	// +optional
	Verify *VectorVerification `json:"verify,omitempty"`

	// Suspend stops the Stage from moving, and is passed on to its VectorDeployments: nothing is read or
	// created, and what runs keeps running.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// ProgressDeadline is how long a new vector's VectorDeployment may take to become Ready before the move fails
	// (ProgressDeadlineExceeded), in Flux's duration format. Default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// HistoryLimit is the number of moves status.history keeps, newest first. Default 10.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	HistoryLimit *int32 `json:"historyLimit,omitempty"`
}

// Outcomes of a move, as status.history records them.
const (
	// MoveProgressing: the vector's VectorDeployment is the candidate, on its way to Ready.
	MoveProgressing = "Progressing"
	// MovePromoted: the vector's VectorDeployment became Ready and replaced the one before it. It runs until
	// ended is set, when a later move was promoted.
	MovePromoted = "Promoted"
	// MoveFailed: the candidate stalled (UpgradeFailed) or was not Ready within spec.progressDeadline
	// (ProgressDeadlineExceeded); the landscape kept running the active vector.
	MoveFailed = "Failed"
	// MoveSuperseded: spec.vector changed again before the candidate was Ready; the candidate was removed.
	MoveSuperseded = "Superseded"
)

// StageHistoryEntry is one move of a Stage: a vector and what became of it.
type StageHistoryEntry struct {
	// Vector is the resolved OCM reference of the vector, with its version.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Vector string `json:"vector"`

	// Digest is the vector's manifest digest, as its VectorDeployment read it; empty until it was read.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Digest string `json:"digest,omitempty"`

	// VectorDeployment is the name of the VectorDeployment the Stage created for the vector.
	// +required
	// +kubebuilder:validation:MaxLength=63
	VectorDeployment string `json:"vectorDeployment"`

	// Started is when the Stage created the VectorDeployment.
	// +required
	Started metav1.Time `json:"started"`

	// Ended is when the move failed or was superseded, or, for a promoted vector, when the next vector replaced
	// it; unset while it is in progress or running.
	// +optional
	Ended *metav1.Time `json:"ended,omitempty"`

	// Outcome is Progressing, Promoted, Failed or Superseded.
	// +required
	// +kubebuilder:validation:Enum=Progressing;Promoted;Failed;Superseded
	Outcome string `json:"outcome"`

	// Message says why a move failed: the failing artifacts and their reasons.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// StageStatus is the observed state of a Stage.
type StageStatus struct {
	// ObservedGeneration is the last generation the controller acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	meta.ReconcileRequestStatus `json:",inline"`

	// ActiveVectorDeployment is the VectorDeployment the landscape runs: the last one that became Ready.
	// +optional
	ActiveVectorDeployment string `json:"activeVectorDeployment,omitempty"`

	// CandidateVectorDeployment is the VectorDeployment of the vector being moved to, until it is promoted; a
	// failed candidate stays for inspection until the next move.
	// +optional
	CandidateVectorDeployment string `json:"candidateVectorDeployment,omitempty"`

	// LastAppliedVector is the resolved vector reference the Stage last created a VectorDeployment for.
	// +optional
	LastAppliedVector string `json:"lastAppliedVector,omitempty"`

	// History holds the moves, newest first, at most spec.historyLimit of them.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	History []StageHistoryEntry `json:"history,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, VectorDeploymentCreated, VectorDeployed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Stage runs a landscape on one vector at a time and moves it to the next without an outage: it creates a
// VectorDeployment for each vector and deletes the previous one only once the new one is Ready.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=st,categories=konfidence
// +kubebuilder:printcolumn:name="Vector",type=string,JSONPath=`.status.lastAppliedVector`,priority=1
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.activeVectorDeployment`
// +kubebuilder:printcolumn:name="Candidate",type=string,JSONPath=`.status.candidateVectorDeployment`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Stage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   StageSpec   `json:"spec"`
	Status StageStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (github.com/fluxcd/pkg/runtime/conditions.Getter).
func (in *Stage) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions (github.com/fluxcd/pkg/runtime/conditions.Setter).
func (in *Stage) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// SetObservedGeneration records the generation the status reports on.
func (in *Stage) SetObservedGeneration(g int64) { in.Status.ObservedGeneration = g }

// StageList is a list of Stages.
// +kubebuilder:object:root=true
type StageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Stage `json:"items"`
}

// Condition types and reasons of a Stage.
const (
	// VectorDeploymentCreatedCondition: the VectorDeployment of the Stage's current vector exists.
	VectorDeploymentCreatedCondition = "VectorDeploymentCreated"
	// VectorDeployedCondition: the Stage's current vector is deployed: its VectorDeployment is Ready and active.
	VectorDeployedCondition = "VectorDeployed"

	// PromotedReason: the candidate became Ready and is now the active VectorDeployment (a Normal event).
	PromotedReason = "Promoted"
	// UpgradeFailedReason: the candidate stalled; the active VectorDeployment keeps running (a Warning event).
	UpgradeFailedReason = "UpgradeFailed"
	// ProgressDeadlineExceededReason: the candidate was not Ready within spec.progressDeadline; the active
	// VectorDeployment keeps running.
	ProgressDeadlineExceededReason = "ProgressDeadlineExceeded"
	// VersionSkippedReason: a version in spec.semver's range was skipped because it does not verify (a Warning
	// event naming it).
	VersionSkippedReason = "VersionSkipped"
	// NoMatchingVersionReason: no version of the vector's component in the registry is in spec.semver's range (and
	// verifies); retried every spec.interval.
	NoMatchingVersionReason = "NoMatchingVersion"
	// SemverInvalidReason: spec.semver is not a version range.
	SemverInvalidReason = "SemverInvalid"
	// VectorDeploymentConflictReason: the name of the VectorDeployment for the vector is taken by one the Stage does
	// not own; nothing of it is changed.
	VectorDeploymentConflictReason = "VectorDeploymentConflict"
	// VectorDeploymentRefusedReason: the API server refused the VectorDeployment the Stage would create (a
	// validation rule of its CRD), so the Stage cannot move to the vector as it is.
	VectorDeploymentRefusedReason = "VectorDeploymentRefused"
)

// StageUIDAnnotation is written on the ArtifactDeployments of non-reusable artifacts that a Stage's
// VectorDeployments share: the instance belongs to the Stage, whose UID it holds, not to one VectorDeployment, so
// a move to a vector with the same artifact at the same version keeps it.
const StageUIDAnnotation = "konfidence.cloud/stage-uid"
