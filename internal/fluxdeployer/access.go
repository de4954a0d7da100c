package fluxdeployer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fluxcd/pkg/apis/meta"
	"oras.land/oras-go/v2/registry"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// OCM access types by every alias OCM accepts for them (type names are compared exactly, as OCM does).
var (
	ociAccessTypes = map[string]bool{
		"OCIImage/v1": true, "OCIImage": true, "ociImage/v1": true, "ociImage": true,
		"ociArtifact/v1": true, "ociArtifact": true, "ociRegistry/v1": true, "ociRegistry": true,
	}
	helmAccessTypes = map[string]bool{"Helm/v1": true, "Helm": true, "helm/v1": true, "helm": true}
)

// artifact is where Flux pulls the artifact from: an OCI repository (host, repository, tag and/or digest) or, for
// the helm access, a Helm repository URL with a chart name and version.
type artifact struct {
	host       string // registry host[:port]; the key of authenticationSecretRefs
	repository string // path within the registry, without tag or digest
	tag        string
	digest     string
	insecure   bool // plain HTTP

	helmRepositoryURL string // set for the helm access only
	chart, version    string // set for the helm access only
}

func (a artifact) isOCI() bool { return a.helmRepositoryURL == "" }

// ociURL is the OCIRepository URL of the whole artifact.
func (a artifact) ociURL() string { return "oci://" + a.host + "/" + a.repository }

// accessSpec holds the fields of every supported access type; the type decides which apply.
type accessSpec struct {
	Type           string `json:"type"`
	ImageReference string `json:"imageReference"`
	HelmRepository string `json:"helmRepository"`
	HelmChart      string `json:"helmChart"`
	Version        string `json:"version"`
}

// resolveAccess reads the resource's access specification.
func resolveAccess(r *konfidencev1.Resource) (artifact, error) {
	if r.Content == nil {
		return artifact{}, outcome.Stallingf(konfidencev1.InvalidAccessSpecReason, "resource %s has no access specification", r.Name)
	}
	var spec accessSpec
	if err := json.Unmarshal(r.Content.Raw, &spec); err != nil {
		return artifact{}, outcome.Stallingf(konfidencev1.InvalidAccessSpecReason, "resource %s: access: %v", r.Name, err)
	}
	if err := checkUniqueKeys(r.Content.Raw); err != nil {
		return artifact{}, outcome.Stallingf(konfidencev1.InvalidAccessSpecReason, "resource %s: access: %v", r.Name, err)
	}
	switch {
	case ociAccessTypes[spec.Type]:
		a, err := parseImageReference(spec.ImageReference)
		if err != nil {
			return artifact{}, outcome.Stallingf(konfidencev1.InvalidAccessSpecReason, "resource %s: %v", r.Name, err)
		}
		return pinDigest(a, r)
	case helmAccessTypes[spec.Type]:
		a, err := parseHelmAccess(spec)
		if err != nil {
			return artifact{}, outcome.Stallingf(konfidencev1.InvalidAccessSpecReason, "resource %s: %v", r.Name, err)
		}
		return a, nil
	default:
		return artifact{}, outcome.Stallingf(konfidencev1.UnsupportedAccessTypeReason,
			"resource %s has access type %q; supported are the OCI image and Helm access types", r.Name, spec.Type)
	}
}

// checkUniqueKeys refuses an access whose keys repeat, exactly or in another case (imageReference and
// imagereference): encoding/json matches keys case-insensitively and keeps the last, so which one wins depends on
// the order the document happens to be in, which differs between the descriptor that was verified and the
// ArtifactDeployment as the API server stores it (keys sorted). Refused, no reader has a choice to make, and what
// is deployed is what was verified. Keys are compared folded as encoding/json folds them.
func checkUniqueKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the object's '{'; json.Unmarshal has accepted the document
		return err
	}
	seen := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // an object's tokens alternate key, value
		folded := foldKey(key)
		if other, dup := seen[folded]; dup {
			return fmt.Errorf("keys %q and %q name one field", other, key)
		}
		seen[folded] = key
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return err
		}
	}
	return nil
}

// foldKey folds a key as encoding/json matches keys to fields: ASCII letters to upper case, any other rune to the
// smallest rune of its Unicode case-folding orbit (so the Kelvin sign is K, and ſ is S).
func foldKey(key string) string {
	var b strings.Builder
	for _, r := range key {
		if r < utf8.RuneSelf {
			b.WriteRune(unicode.ToUpper(r))
			continue
		}
		smallest := r
		for next := unicode.SimpleFold(r); next != r; next = unicode.SimpleFold(next) {
			smallest = min(smallest, next)
		}
		b.WriteRune(smallest)
	}
	return b.String()
}

// checkCredentialsTLS refuses to hand Flux a pull Secret for an artifact it would pull over plain HTTP, unless the
// platform allows credentials in clear for that host (insecureRegistryCredentialsHosts): the scheme is the access's,
// i.e. the vector author's, to choose, and the Secret the platform's, which would then cross the network readable
// by anyone on the path. The OCM reader keeps the same rule for the operator's own credentials.
func (a artifact) checkCredentialsTLS(cfg config, pullSecret *meta.LocalObjectReference) error {
	if !a.insecure || pullSecret == nil || slices.Contains(cfg.insecureCredentialsHosts, a.host) {
		return nil
	}
	return outcome.Stallingf(konfidencev1.CredentialsRequireTLSReason,
		"the credentials of Secret %s for %s are not sent over plain HTTP: use an https or oci reference, or allow the host in %s",
		pullSecret.Name, a.host, insecureCredentialsHostsKey)
}

// pinDigest makes the resource's recorded digest select the OCI artifact, so Flux pulls the content the digest
// names whatever the tag names by now. An access that pins another digest contradicts it.
func pinDigest(a artifact, r *konfidencev1.Resource) (artifact, error) {
	switch {
	case r.Digest == "":
	case a.digest == "":
		a.digest = r.Digest
	case a.digest != r.Digest:
		return artifact{}, outcome.Stallingf(konfidencev1.DigestMismatchReason, "resource %s: access pins %s, the resource's digest is %s", r.Name, a.digest, r.Digest)
	}
	return a, nil
}

// parseImageReference reads host[:port]/path/name[:tag][@digest] with oras' OCI reference grammar (the one
// internal/ocm reads registry paths and tags with). OCM writers may prefix a scheme: http:// marks a plain-HTTP
// registry; https:// and oci:// carry no information. On top of the grammar the deployer needs a tag or a digest,
// and keeps the tag of name:tag@digest, which oras drops: a HelmRepository selects the chart by it.
func parseImageReference(ref string) (artifact, error) {
	var a artifact
	rest := ref
	switch {
	case strings.HasPrefix(rest, "http://"):
		rest, a.insecure = strings.TrimPrefix(rest, "http://"), true
	case strings.HasPrefix(rest, "https://"):
		rest = strings.TrimPrefix(rest, "https://")
	case strings.HasPrefix(rest, "oci://"):
		rest = strings.TrimPrefix(rest, "oci://")
	}
	name, digest, pinned := strings.Cut(rest, "@")
	parsed, err := registry.ParseReference(name)
	if err != nil {
		return artifact{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	a.host, a.repository, a.tag = parsed.Registry, parsed.Repository, parsed.Reference
	if pinned {
		parsed.Reference = digest
		if err := parsed.ValidateReferenceAsDigest(); err != nil {
			return artifact{}, fmt.Errorf("image reference %q: %w", ref, err)
		}
		a.digest = digest
	}
	if a.tag == "" && a.digest == "" {
		return artifact{}, fmt.Errorf("image reference %q has neither tag nor digest", ref)
	}
	return a, nil
}

// parseHelmAccess reads the helm access: a repository URL, the chart as name or name:version, and an optional
// version that must agree with the one in helmChart.
func parseHelmAccess(spec accessSpec) (artifact, error) {
	u, err := url.Parse(spec.HelmRepository)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") {
		return artifact{}, fmt.Errorf("helmRepository %q is not an http, https or oci URL", spec.HelmRepository)
	}
	chart, version, _ := strings.Cut(spec.HelmChart, ":")
	if chart == "" {
		return artifact{}, fmt.Errorf("helm access has no helmChart")
	}
	switch {
	case version == "":
		version = spec.Version
	case spec.Version != "" && spec.Version != version:
		return artifact{}, fmt.Errorf("helmChart %q and version %q disagree", spec.HelmChart, spec.Version)
	}
	if version == "" {
		return artifact{}, fmt.Errorf("helm access for chart %q has no version", chart)
	}
	return artifact{
		host:              u.Host,
		insecure:          u.Scheme == "http",
		helmRepositoryURL: strings.TrimSuffix(spec.HelmRepository, "/"),
		chart:             chart,
		version:           version,
	}, nil
}
