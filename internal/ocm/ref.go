package ocm

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	"oras.land/oras-go/v2/registry"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// Repository types as OCM prints them for a reference that did not name one.
const (
	TypeOCI = "OCIRepository/v1"
	TypeCTF = "CommonTransportFormat/v1"
)

// prefixes are tried in this order; "" gives the "//" form.
var prefixes = []string{spec.ComponentDescriptorsPath, ""}

var (
	componentRegex = regexp.MustCompile(`^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$`)
	// digestRegex is OCM's grammar for a component version's digest (OCM's oci/grammar.DigestRegexp), not the
	// OCI grammar: any algorithm name and 32 or more hex digits. The reader never sends it to a registry, so it
	// stays OCM's; every digest the OCI grammar (oras) accepts passes it too (internal/ocireftest pins that).
	digestRegex = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}$`)
	domainRegex = regexp.MustCompile(`^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$`)
)

const maxComponentNameLength = 255

// Ref is a parsed OCM component reference:
//
//	[<type>::]<repository>/[component-descriptors]/<component>[:<version>][@<digest>]
//
// where the repository is an OCI registry ([http://|https://|oci://]host[:port][/subPath]) or a CTF directory.
type Ref struct {
	// Type is the repository type as written, or TypeOCI / TypeCTF when the reference named none.
	Type string
	// BaseURL is [scheme://]host[:port] of an OCI registry.
	BaseURL string
	// SubPath is the path below the registry host, without leading slash.
	SubPath string
	// FilePath is a CTF's location, as written.
	FilePath string
	// Prefix is "component-descriptors" or "" (the "//" form); kept so String reproduces the input's form.
	Prefix    string
	Component string
	Version   string
	// Digest is carried for round-tripping and cache keys; like Konfidence, the reader does not verify it,
	// because OCM does not pin down what it hashes.
	Digest string
}

// ParseRef parses an OCM component reference as OCM's compref.Parse does with IgnoreSemverCompatibility (as
// Konfidence calls it), so aliases such as "latest" are accepted as versions. Unlike OCM it also rejects, at
// parse time, versions that cannot be OCI tags and subPaths that cannot be OCI repository paths, which OCM
// would only reject on first use.
func ParseRef(s string) (Ref, error) {
	r, err := parseRef(s)
	if err != nil {
		return Ref{}, &Error{Reason: ReasonReferenceInvalid, Ref: s, Err: err}
	}
	return r, nil
}

func parseRef(s string) (Ref, error) {
	var r Ref
	rest := s
	if typ, after, ok := strings.Cut(rest, "::"); ok {
		r.Type, rest = typ, after
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 && !strings.Contains(rest[i:], "/") {
		if r.Digest = rest[i+1:]; !digestRegex.MatchString(r.Digest) {
			return Ref{}, fmt.Errorf("invalid digest %q", r.Digest)
		}
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.Contains(rest[i:], "/") {
		if r.Version = rest[i+1:]; r.Version == "" {
			return Ref{}, fmt.Errorf("empty version")
		}
		rest = rest[:i]
	}
	repo, found := "", false
	for _, prefix := range prefixes {
		sep := "/" + prefix + "/"
		if i := strings.LastIndex(rest, sep); i >= 0 {
			repo, r.Prefix, r.Component, found = rest[:i], prefix, rest[i+len(sep):], true
			break
		}
	}
	if !found {
		return Ref{}, fmt.Errorf("no valid descriptor prefix found (want <repository>//<component> or <repository>/component-descriptors/<component>)")
	}
	if err := validateComponentVersion(r.Component, r.Version); err != nil {
		return Ref{}, err
	}
	if repo == "" {
		return Ref{}, fmt.Errorf("empty repository")
	}
	ctf, err := isCTF(r.Type, repo)
	if err != nil {
		return Ref{}, err
	}
	if ctf {
		r.FilePath = repo
		if r.Type == "" {
			r.Type = TypeCTF
		}
		return r, nil
	}
	if r.BaseURL, r.SubPath, err = parseOCIRepository(repo); err != nil {
		return Ref{}, err
	}
	if r.Type == "" {
		r.Type = TypeOCI
	}
	return r, nil
}

// isCTF decides the repository kind from an explicit type, or else guesses it from the repository's form as
// OCM's guessType does.
func isCTF(typ, repo string) (bool, error) {
	if typ != "" {
		name, version, _ := strings.Cut(typ, "/")
		if version != "" && version != "v1" {
			return false, fmt.Errorf("unknown repository type %q", typ)
		}
		switch name {
		case "OCIRepository", "OCI", "oci", "OCIRegistry", "ociRegistry":
			return false, nil
		case "CommonTransportFormat", "CTF", "ctf":
			return true, nil
		}
		return false, fmt.Errorf("unknown repository type %q", typ)
	}
	switch {
	case strings.HasPrefix(repo, "file://"), strings.HasPrefix(repo, "/"),
		strings.HasPrefix(repo, "./"), strings.HasPrefix(repo, "../"):
		return true, nil
	case strings.Contains(repo, "://"), strings.Contains(repo, ":"), repo == "localhost":
		return false, nil
	case strings.HasSuffix(repo, ".tar"), strings.HasSuffix(repo, ".tgz"), strings.HasSuffix(repo, ".tar.gz"):
		return true, nil
	}
	host, _, _ := strings.Cut(repo, "/")
	return !domainRegex.MatchString(host), nil
}

func parseOCIRepository(repo string) (baseURL, subPath string, err error) {
	raw := repo
	if !strings.Contains(repo, "://") {
		raw = "oci://" + repo
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("invalid OCI repository %q: %w", repo, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci":
		return "", "", fmt.Errorf("unsupported scheme %q in OCI repository %q", u.Scheme, repo)
	case u.Host == "":
		return "", "", fmt.Errorf("OCI repository %q has no host", repo)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", "", fmt.Errorf("OCI repository %q may not carry user info, a query or a fragment", repo)
	}
	baseURL = u.Host
	if strings.Contains(repo, "://") {
		baseURL = u.Scheme + "://" + u.Host
	}
	// The subPath becomes the front of every OCI repository path in this registry: OCI's path grammar (oras')
	// applies.
	subPath = strings.Trim(u.Path, "/")
	if subPath != "" {
		if err := (registry.Reference{Registry: u.Host, Repository: subPath}).ValidateRepository(); err != nil {
			return "", "", fmt.Errorf("invalid OCI repository path %q: %w", subPath, err)
		}
	}
	return baseURL, subPath, nil
}

// String prints the reference as OCM's Ref.String does: [Type::]Repository/Prefix/Component[:Version][@Digest].
func (r Ref) String() string {
	var b strings.Builder
	if r.Type != "" {
		b.WriteString(r.Type + "::")
	}
	b.WriteString(r.repository())
	b.WriteString("/" + r.Prefix + "/" + r.Component)
	if r.Version != "" {
		b.WriteString(":" + r.Version)
	}
	if r.Digest != "" {
		b.WriteString("@" + r.Digest)
	}
	return b.String()
}

// Describe names the component version and the repository it is read from for a person, e.g.
// "acme.org/vectors/shop:1.0.0 in OCI registry http://localhost:5000" or "… in CTF directory ./ctf". Messages use it
// rather than String: OCM's repository types ("OCIRepository/v1::…") read to a Flux user as Flux's OCIRepository
// kind. String and Pinned stay as they are: caches and the source annotation persist them.
func (r Ref) Describe() string {
	cv := r.Component
	if r.Version != "" {
		cv += ":" + r.Version
	}
	if r.Digest != "" {
		cv += "@" + r.Digest
	}
	if r.IsCTF() {
		return cv + " in CTF directory " + r.FilePath
	}
	return cv + " in OCI registry " + r.repository()
}

// Pinned is the reference to this component version pinned by digest, its repository written the one way
// cacheKey reads it: host[:port][/subPath], with http:// only for plain HTTP (https://, oci:// and no scheme are
// the same registry), and a CTF by its absolute path. Equal strings mean the same repository and the same bytes.
func (r Ref) Pinned(digest string) string {
	p := Ref{Prefix: "", Component: r.Component, Version: r.Version, Digest: digest}
	switch {
	case r.IsCTF():
		p.Type, p.FilePath = TypeCTF, strings.TrimPrefix(r.FilePath, "file://")
		if abs, err := filepath.Abs(p.FilePath); err == nil {
			p.FilePath = abs
		}
	case r.PlainHTTP():
		p.BaseURL, p.SubPath = "http://"+r.Host(), r.SubPath
	default:
		p.BaseURL, p.SubPath = r.Host(), r.SubPath
	}
	return p.String()
}

func (r Ref) repository() string {
	switch {
	case r.IsCTF():
		return r.FilePath
	case r.SubPath != "":
		return r.BaseURL + "/" + r.SubPath
	}
	return r.BaseURL
}

// IsCTF reports whether the reference points into a CTF directory rather than an OCI registry.
func (r Ref) IsCTF() bool { return r.FilePath != "" }

// Host is the registry's host[:port], without scheme.
func (r Ref) Host() string {
	_, host, found := strings.Cut(r.BaseURL, "://")
	if !found {
		return r.BaseURL
	}
	return host
}

// PlainHTTP reports whether the registry is to be spoken to without TLS: only when the reference says http://.
func (r Ref) PlainHTTP() bool { return strings.HasPrefix(r.BaseURL, "http://") }

// validateComponentVersion checks a component name against OCM's grammar and a version (or alias) for use as an
// OCI tag (oras' tag grammar). An empty version passes: a reference may omit it.
func validateComponentVersion(component, version string) error {
	if len(component) > maxComponentNameLength || !componentRegex.MatchString(component) {
		return fmt.Errorf("invalid component name %q", component)
	}
	if version == "" {
		return nil
	}
	if err := (registry.Reference{Reference: spec.VersionTag(version)}).ValidateReferenceAsTag(); err != nil {
		return fmt.Errorf("invalid version %q: %w", version, err)
	}
	return nil
}

// sibling is another component version in the same repository: OCM resolves component references in the
// repository of the referring component. Names come from a descriptor, so they are validated like parsed ones.
func (r Ref) sibling(component, version string) (Ref, error) {
	if err := validateComponentVersion(component, version); err != nil {
		return Ref{}, &Error{Reason: ReasonReferenceInvalid, Ref: r.Describe(), Err: fmt.Errorf("component reference: %w", err)}
	}
	r.Component, r.Version, r.Digest = component, version, ""
	return r, nil
}

// isVersion reports whether v is a version rather than an alias. Only versions are immutable, so only they may
// be cached. A version is what Masterminds/semver, the library OCM and Flux compare versions with, parses:
// semantic versions, also with a "v" or without minor and patch (like OCM's version grammar).
func isVersion(v string) bool {
	_, err := semver.NewVersion(v)
	return err == nil
}
