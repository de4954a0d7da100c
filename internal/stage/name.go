package stage

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fluxdeployer/fluxdeployer/pkg/hash"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

const (
	// hashLength is the length of the hash that ends a Stage's VectorDeployment names, as for ArtifactDeployments.
	hashLength = 10
	// maxNameLength keeps the name an RFC 1123 label, so that it may also be a label value.
	maxNameLength = sanitize.MaxDNSLabelLength
)

// VectorDeploymentName is the name of the VectorDeployment a Stage creates for a resolved vector reference:
// <stage>-<version>-<hash>, the hash covering the Stage's UID and the whole reference. It is a pure function of
// them, so a restarted operator, or a second replica, finds the VectorDeployment it created instead of creating a
// second one, and a Stage created again under the same name does not take over the VectorDeployments of the one
// before it while they are being deleted. Names are a persistence format: the golden test pins them. When too
// long, the Stage's name is shortened, then dropped, the version cut to what is left; the hash is never cut.
func VectorDeploymentName(stage string, uid types.UID, vector string) (string, error) {
	if vector == "" {
		return "", fmt.Errorf("no vector to name a VectorDeployment for")
	}
	var input []byte
	input = appendField(input, 'u', string(uid))
	input = appendField(input, 'r', vector)
	h, err := hash.Fnv(string(input), hashLength)
	if err != nil {
		return "", err
	}
	room := maxNameLength - hashLength - 1 // "<stage>-<version>" before "-<hash>"
	version, _ := sanitize.DNSLabelName(versionOf(vector), room)
	stageRoom := room
	if version != "" {
		stageRoom -= len(version) + 1
	}
	parts := make([]string, 0, 3)
	if stageRoom > 0 {
		if prefix, _ := sanitize.DNSLabelName(stage, stageRoom); prefix != "" {
			parts = append(parts, prefix)
		}
	}
	if version != "" {
		parts = append(parts, version)
	}
	parts = append(parts, h)
	return strings.Join(parts, "-"), nil
}

// versionOf is the version of an OCM reference, "" when it names none: what follows the last ':' that no '/'
// follows, without a digest.
func versionOf(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ""
	}
	return ref[i+1:]
}

// withVersion is a reference to version of the component ref names without one.
func withVersion(ref, version string) string { return ref + ":" + version }

// appendField encodes one hashed field as a tag, its length and its bytes, so that no two distinct inputs share
// an encoding.
func appendField(dst []byte, tag byte, value string) []byte {
	dst = append(dst, tag)
	dst = strconv.AppendInt(dst, int64(len(value)), 10)
	dst = append(dst, ':')
	return append(dst, value...)
}
