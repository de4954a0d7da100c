package vectordeployment

import (
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// identity is what makes two ArtifactDeployments the same deployment: the same artifact, shared by every
// VectorDeployment when reuse is allowed, or owned by one VectorDeployment when it is not. A name taken by the
// same identity is reuse; taken by another, a collision.
type identity struct {
	component, version string
	allowReuse         bool
	// vectorDeploymentUID is set only when reuse is off and the VectorDeployment was not created by a Stage.
	vectorDeploymentUID types.UID
	// stageUID is set only when reuse is off and a Stage created the VectorDeployment: the instance belongs to the
	// landscape, so that every VectorDeployment of the Stage that deploys the same artifact at the same version
	// keeps it, and a move keeps a database's volumes.
	stageUID types.UID
}

func identityOf(a Artifact, vd *konfidencev1.VectorDeployment) identity {
	id := identity{component: a.Component, version: a.Version, allowReuse: a.Manifest.AllowReuse}
	switch stage := stageOf(vd); {
	case id.allowReuse:
	case stage != "":
		id.stageUID = stage
	default:
		id.vectorDeploymentUID = vd.UID
	}
	return id
}

// stageOf returns the UID of the Stage that controls vd, if one does. The owner reference is what the Stage
// reconciler writes when it creates vd; a tenant who writes one by hand only shares instances among VectorDeployments
// of its own namespace, which it could do anyway.
func stageOf(vd *konfidencev1.VectorDeployment) types.UID {
	ref := metav1.GetControllerOfNoCopy(vd)
	if ref == nil || ref.Kind != "Stage" || ref.APIVersion != konfidencev1.GroupVersion.String() {
		return ""
	}
	return ref.UID
}

// instanceOwner is the UID folded into the name of a non-reusable artifact's ArtifactDeployment: its Stage's or its
// VectorDeployment's; empty for a reusable one.
func (id identity) instanceOwner() string {
	if id.stageUID != "" {
		return string(id.stageUID)
	}
	return string(id.vectorDeploymentUID)
}

// identityOfObject reads the identity an ArtifactDeployment was created for from its annotations.
func identityOfObject(ad *konfidencev1.ArtifactDeployment) identity {
	a := ad.Annotations
	return identity{
		component:           a[konfidencev1.ArtifactComponentAnnotation],
		version:             a[konfidencev1.ArtifactVersionAnnotation],
		allowReuse:          a[konfidencev1.AllowReuseAnnotation] == "true",
		vectorDeploymentUID: types.UID(a[konfidencev1.VectorDeploymentUIDAnnotation]),
		stageUID:            types.UID(a[konfidencev1.StageUIDAnnotation]),
	}
}

// name returns the ArtifactDeployment name and hash for this identity under a collision count. An identity no
// name can be built from stalls its artifact: the same input fails again.
func (id identity) name(collisionCount int32, hashLength int) (name, hash string, err error) {
	name, hash, err = naming.ArtifactDeploymentNameWithHashLength(id.component, id.version, id.instanceOwner(), collisionCount, hashLength)
	if errors.Is(err, naming.ErrInvalidInput) {
		err = outcome.Stalling(konfidencev1.InvalidNameInputReason, err)
	}
	return name, hash, err
}

func (id identity) String() string {
	if id.allowReuse {
		return fmt.Sprintf("%s:%s (reusable)", id.component, id.version)
	}
	if id.stageUID != "" {
		return fmt.Sprintf("%s:%s (for Stage %s)", id.component, id.version, id.stageUID)
	}
	return fmt.Sprintf("%s:%s (for VectorDeployment %s)", id.component, id.version, id.vectorDeploymentUID)
}

// annotations are written on the ArtifactDeployment so that this identity can be recognised later, by this
// controller and by the Flux deployer, without recomputing anything.
func (id identity) annotations(hash string, collisionCount int32) map[string]string {
	a := map[string]string{
		konfidencev1.ArtifactComponentAnnotation: id.component,
		konfidencev1.ArtifactVersionAnnotation:   id.version,
		konfidencev1.ArtifactHashAnnotation:      hash,
		konfidencev1.AllowReuseAnnotation:        strconv.FormatBool(id.allowReuse),
	}
	if id.vectorDeploymentUID != "" {
		a[konfidencev1.VectorDeploymentUIDAnnotation] = string(id.vectorDeploymentUID)
	}
	if id.stageUID != "" {
		a[konfidencev1.StageUIDAnnotation] = string(id.stageUID)
	}
	if collisionCount > 0 {
		a[konfidencev1.CollisionCountAnnotation] = strconv.Itoa(int(collisionCount))
	}
	return a
}

// collisionCountOf reads the salt an existing ArtifactDeployment's name carries.
func collisionCountOf(ad *konfidencev1.ArtifactDeployment) int32 {
	n, err := strconv.ParseInt(ad.Annotations[konfidencev1.CollisionCountAnnotation], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// label is the value of ArtifactIdentityLabel: the full-length hash of the unsalted identity, so that every
// ArtifactDeployment of this identity is found by one label selector whatever salt its name carries.
func (id identity) label() string {
	return naming.IdentityHash(id.component, id.version, id.instanceOwner())
}

// SameIdentity tells whether two ArtifactDeployments are one deployment to the reconciler, whatever salt their
// names carry: built for the same artifact identity (component, version, reuse, and owner when reuse is off). A
// VectorDeployment adopts the existing one rather than creating the other; `fluxdeployer diff` uses it to tell
// which deployments a VectorDeployment of another vector keeps.
func SameIdentity(a, b *konfidencev1.ArtifactDeployment) bool {
	return identityOfObject(a) == identityOfObject(b)
}

// matches tells whether an existing ArtifactDeployment was created for this identity.
func (id identity) matches(ad *konfidencev1.ArtifactDeployment) bool {
	return identityOfObject(ad) == id
}
