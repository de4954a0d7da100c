package fluxdeployer

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
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

// Grammar of the OCI distribution spec for names, tags and digests; the host is a DNS name or IP with an
// optional port.
var (
	hostPattern       = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](:[0-9]{1,5})?$`)
	repositoryPattern = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagPattern        = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
	digestPattern     = regexp.MustCompile(`^[a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`)
)

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
		return artifact{}, terminal(konfidencev1.InvalidAccessSpecReason, "resource %s has no access specification", r.Name)
	}
	var spec accessSpec
	if err := json.Unmarshal(r.Content.Raw, &spec); err != nil {
		return artifact{}, terminal(konfidencev1.InvalidAccessSpecReason, "resource %s: access: %v", r.Name, err)
	}
	switch {
	case ociAccessTypes[spec.Type]:
		a, err := parseImageReference(spec.ImageReference)
		if err != nil {
			return artifact{}, terminal(konfidencev1.InvalidAccessSpecReason, "resource %s: %v", r.Name, err)
		}
		return a, nil
	case helmAccessTypes[spec.Type]:
		a, err := parseHelmAccess(spec)
		if err != nil {
			return artifact{}, terminal(konfidencev1.InvalidAccessSpecReason, "resource %s: %v", r.Name, err)
		}
		return a, nil
	default:
		return artifact{}, terminal(konfidencev1.UnsupportedAccessTypeReason,
			"resource %s has access type %q; supported are the OCI image and Helm access types", r.Name, spec.Type)
	}
}

// parseImageReference reads host[:port]/path/name[:tag][@digest]. OCM writers may prefix a scheme: http:// marks
// a plain-HTTP registry; https:// and oci:// carry no information.
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
	if before, after, ok := strings.Cut(rest, "@"); ok {
		if !digestPattern.MatchString(after) {
			return artifact{}, fmt.Errorf("image reference %q: invalid digest %q", ref, after)
		}
		rest, a.digest = before, after
	}
	host, path, ok := strings.Cut(rest, "/")
	if !ok || !hostPattern.MatchString(host) {
		return artifact{}, fmt.Errorf("image reference %q: want host[:port]/path/name:tag", ref)
	}
	a.host = host
	// The tag is what follows the last colon of the last path segment; colons before the host's end are ports.
	if i := strings.LastIndex(path, ":"); i > strings.LastIndex(path, "/") {
		path, a.tag = path[:i], path[i+1:]
		if !tagPattern.MatchString(a.tag) {
			return artifact{}, fmt.Errorf("image reference %q: invalid tag %q", ref, a.tag)
		}
	}
	if !repositoryPattern.MatchString(path) {
		return artifact{}, fmt.Errorf("image reference %q: invalid repository %q", ref, path)
	}
	a.repository = path
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
