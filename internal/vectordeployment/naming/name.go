// Package naming builds ArtifactDeployment names: a pure function of an artifact's identity and a collision
// counter. Names are a persistence format; the golden vectors in testdata pin them.
package naming

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fluxdeployer/fluxdeployer/pkg/hash"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

const (
	// HashLength is the length of the hash that ends every ArtifactDeployment name.
	HashLength = 10
	// MaxNameLength bounds ArtifactDeployment names: the name becomes a HelmRelease's spec.releaseName, which
	// Helm (and the HelmRelease CRD) caps at 53 characters.
	MaxNameLength = 53
)

// ErrInvalidInput reports a component or version from which no name can be built.
var ErrInvalidInput = errors.New("invalid ArtifactDeployment name input")

// ArtifactDeploymentName returns the name of the ArtifactDeployment for an artifact, and the hash that ends it.
//
// Names are a persistence format: for given inputs the name must never change, because it names deployed Flux
// objects and, through Helm release names and Kustomize name suffixes, the workloads themselves. The golden
// vectors in testdata pin it.
//
// The hash covers component and version; uid (the VectorDeployment's UID) only when the artifact may not be
// reused, so each VectorDeployment gets its own instance; and collisionCount only when it is above zero, so a
// fresh artifact's name is a pure function of its identity and a counter bump yields a new, still
// deterministic name. The name is <basename>-<version>-<hash>, basename being the component's last path
// segment, as an RFC 1123 label of at most MaxNameLength characters: when too long, the basename is shortened
// first, then dropped, then the version; the hash is never cut.
func ArtifactDeploymentName(component, version, uid string, collisionCount int32) (name, hashValue string, err error) {
	return ArtifactDeploymentNameWithHashLength(component, version, uid, collisionCount, HashLength)
}

// ArtifactDeploymentNameWithHashLength is ArtifactDeploymentName with another hash length. Only tests use it:
// a short hash makes collisions happen on their own.
func ArtifactDeploymentNameWithHashLength(component, version, uid string, collisionCount int32, hashLength int) (name, hashValue string, err error) {
	switch {
	case strings.TrimSpace(component) == "":
		return "", "", fmt.Errorf("%w: component name is empty", ErrInvalidInput)
	case strings.TrimSpace(version) == "":
		return "", "", fmt.Errorf("%w: version of %s is empty", ErrInvalidInput, component)
	case collisionCount < 0:
		return "", "", fmt.Errorf("%w: negative collision count %d", ErrInvalidInput, collisionCount)
	}

	var inputBuf [512]byte
	input := appendHashInput(inputBuf[:0], component, version, uid, collisionCount)

	prefixRoom := MaxNameLength - hashLength - 1 // "<prefix>-<hash>"
	var versionBuf [sanitize.MaxDNSLabelLength]byte
	versionLabel := sanitize.AppendDNSLabel(versionBuf[:0], version, sanitize.MaxDNSLabelLength)
	basenameRoom := prefixRoom
	switch {
	case len(versionLabel) > prefixRoom: // the version does not fit: the hash alone
		versionLabel, basenameRoom = nil, 0
	case len(versionLabel) > 0:
		basenameRoom -= len(versionLabel) + 1
	}

	var nameBuf [MaxNameLength]byte
	out := nameBuf[:0]
	if basenameRoom > 0 {
		if out = sanitize.AppendDNSLabel(out, component[strings.LastIndexByte(component, '/')+1:], basenameRoom); len(out) > 0 {
			out = append(out, '-')
		}
	}
	if len(versionLabel) > 0 {
		out = append(append(out, versionLabel...), '-')
	}
	if out, err = hash.AppendFnv(out, input, hashLength); err != nil {
		return "", "", err
	}
	name = string(out)
	return name, name[len(name)-hashLength:], nil
}

// appendHashInput encodes the hashed fields unambiguously: each is a one-letter tag, its length and its bytes,
// so that no two distinct tuples share an encoding (("a/app", "1.2") and ("a/app1", ".2") differ, and uid and
// collisionCount cannot bleed into each other). Absent fields add nothing.
func appendHashInput(dst []byte, component, version, uid string, collisionCount int32) []byte {
	dst = appendField(dst, 'c', component)
	dst = appendField(dst, 'v', version)
	if uid != "" {
		dst = appendField(dst, 'u', uid)
	}
	if collisionCount > 0 {
		var n [10]byte
		dst = appendField(dst, 'n', strconv.AppendInt(n[:0], int64(collisionCount), 10))
	}
	return dst
}

func appendField[T string | []byte](dst []byte, tag byte, value T) []byte {
	dst = append(dst, tag)
	dst = strconv.AppendInt(dst, int64(len(value)), 10)
	dst = append(dst, ':')
	return append(dst, value...)
}

// IdentityHash is the full-length hash of an unsalted identity (collision count 0), the same for every salted
// name of that identity.
func IdentityHash(component, version, uid string) string {
	var buf [512]byte
	input := appendHashInput(buf[:0], component, version, uid, 0)
	h, _ := hash.AppendFnv(make([]byte, 0, HashLength), input, HashLength) // HashLength is in range
	return string(h)
}
