package signing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// Normalisation and hash algorithm names as they appear in digest specifications.
const (
	// NormalisationV4alpha1 is what current OCM writes: RFC 8785 (JCS) over the v2 document, with the
	// exclusions of excludeDescriptor.
	NormalisationV4alpha1 = "jsonNormalisation/v4alpha1"
	// NormalisationV3 is OCM v1's name for the same rules; current OCM maps it to v4alpha1.
	NormalisationV3 = "jsonNormalisation/v3"
	// NormalisationV2 is v3 after OCM v1's legacy identity defaulting (defaultVersionIntoExtraIdentity).
	NormalisationV2 = "jsonNormalisation/v2"

	HashSHA256 = "SHA-256"
)

// Normalise returns the bytes a component descriptor's digest is computed over. descriptor is the v2 document
// as JSON (any encoding of it, YAML converted to JSON).
func Normalise(descriptor []byte, algorithm string) ([]byte, error) {
	if err := supportedNormalisation(algorithm); err != nil {
		return nil, err // before decoding: an unknown name costs nothing
	}
	var d v2Descriptor
	if err := json.Unmarshal(descriptor, &d); err != nil {
		return nil, fmt.Errorf("decoding component descriptor: %w", err)
	}
	if algorithm == NormalisationV2 {
		defaultVersionIntoExtraIdentity(d.Component.Resources)
	}
	d.Component.defaultLists()
	// The rules apply to the document as OCM's v2 types serialise it: only known fields, omitempty honoured.
	projected, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	var generic map[string]any
	if err := json.Unmarshal(projected, &generic); err != nil {
		return nil, err
	}
	return canonical(excludeDescriptor(generic))
}

func supportedNormalisation(algorithm string) error {
	switch algorithm {
	case NormalisationV4alpha1, NormalisationV3, NormalisationV2:
		return nil
	}
	return fmt.Errorf("unsupported normalisation algorithm %q", algorithm)
}

// Digest returns the hex SHA-256 of the normalised descriptor. SHA-256 is the only hash accepted: it is what OCM
// and Konfidence write.
func Digest(descriptor []byte, normalisation, hash string) (string, error) {
	if hash != HashSHA256 {
		return "", fmt.Errorf("unsupported hash algorithm %q", hash)
	}
	normalised, err := Normalise(descriptor, normalisation)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(normalised)
	return hex.EncodeToString(sum[:]), nil
}

// canonical encodes v per RFC 8785: OCM encodes with encoding/json (no HTML escaping) and canonicalises the result
// with the JCS reference implementation, which is the library used here too.
func canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return jsoncanonicalizer.Transform(buf.Bytes())
}

// The v2 types below mirror the fields and omitempty tags of OCM's bindings/go/descriptor/v2 types: the
// normalisation runs over the document as those types serialise it, so a field they drop (an unknown one, an
// empty extraIdentity, signing: false) must be dropped here too, and the reference digest, a struct, is always
// present.
type v2Descriptor struct {
	Meta          json.RawMessage `json:"meta"`
	Component     v2Component     `json:"component"`
	Signatures    json.RawMessage `json:"signatures,omitempty"`
	NestedDigests json.RawMessage `json:"nestedDigests,omitempty"`
}

type v2Component struct {
	v2ObjectMeta
	CreationTime       string            `json:"creationTime,omitempty"`
	RepositoryContexts []json.RawMessage `json:"repositoryContexts"`
	Provider           v2Provider        `json:"provider"`
	Resources          []v2Resource      `json:"resources"`
	Sources            []v2Source        `json:"sources"`
	References         []v2Reference     `json:"componentReferences"`
}

// defaultLists sets absent or null lists to empty ones, as OCM's DefaultComponent does before normalising.
func (c *v2Component) defaultLists() {
	if c.RepositoryContexts == nil {
		c.RepositoryContexts = []json.RawMessage{}
	}
	if c.Resources == nil {
		c.Resources = []v2Resource{}
	}
	if c.Sources == nil {
		c.Sources = []v2Source{}
	}
	if c.References == nil {
		c.References = []v2Reference{}
	}
}

type v2ObjectMeta struct {
	Name    string    `json:"name"`
	Version string    `json:"version"`
	Labels  []v2Label `json:"labels,omitempty"`
}

type v2ElementMeta struct {
	v2ObjectMeta
	ExtraIdentity map[string]string `json:"extraIdentity,omitempty"`
}

type v2Resource struct {
	v2ElementMeta
	SourceRefs json.RawMessage `json:"srcRefs,omitempty"`
	Type       string          `json:"type"`
	Relation   string          `json:"relation"`
	Access     json.RawMessage `json:"access"`
	Digest     *v2Digest       `json:"digest,omitempty"`
}

type v2Source struct {
	v2ElementMeta
	Type   string          `json:"type"`
	Access json.RawMessage `json:"access"`
}

type v2Reference struct {
	v2ElementMeta
	ComponentName string   `json:"componentName"`
	Digest        v2Digest `json:"digest"`
}

type v2Digest struct {
	HashAlgorithm          string `json:"hashAlgorithm"`
	NormalisationAlgorithm string `json:"normalisationAlgorithm"`
	Value                  string `json:"value"`
}

type v2Label struct {
	Name    string          `json:"name"`
	Value   json.RawMessage `json:"value"`
	Signing bool            `json:"signing,omitempty"`
	Version string          `json:"version,omitempty"`
}

// v2Provider is the provider string of the v2 schema: a plain name or a JSON object {name, labels} held in a
// string. An object written in place of the string is read as that string would be.
type v2Provider string

func (p *v2Provider) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*p = v2Provider(s)
		return nil
	}
	*p = v2Provider(bytes.TrimSpace(data))
	return nil
}

// excludeDescriptor applies jsonNormalisation/v4alpha1's exclusion rules (OCM
// bindings/go/descriptor/normalisation/json/v4alpha1/normalisation.go ExclusionRules) to the projected document:
// meta, signatures and nestedDigests go, and within the component: repositoryContexts go; the provider becomes an
// object; labels keep only signing ones; resources lose access and srcRefs (and their digest when the access type
// is none); sources lose access. OCM keys its reference rule "references", which never meets the v2 key
// componentReferences, so references are kept whole, labels included.
func excludeDescriptor(d map[string]any) map[string]any {
	c, _ := d["component"].(map[string]any)
	out := map[string]any{}
	for k, v := range c {
		switch k {
		case "repositoryContexts":
		case "provider":
			out[k] = withSigningLabels(providerAsMap(v))
		case "labels":
			setLabels(out, v)
		case "resources":
			out[k] = mapElements(v, excludeResource)
		case "sources":
			out[k] = mapElements(v, func(s map[string]any) map[string]any { return withSigningLabels(without(s, "access")) })
		default:
			setPresent(out, k, v)
		}
	}
	return map[string]any{"component": out}
}

func excludeResource(r map[string]any) map[string]any {
	if access, ok := r["access"].(map[string]any); ok {
		if t, _ := access["type"].(string); t == "none" || t == "None" {
			r = without(r, "digest") // a resource without access has nothing its digest could describe
		}
	}
	return withSigningLabels(without(r, "access", "srcRefs"))
}

// providerAsMap reads the provider string as a JSON object, or else takes it as the provider's name.
func providerAsMap(v any) map[string]any {
	if s, ok := v.(string); ok {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil && m != nil {
			return m
		}
	}
	return map[string]any{"name": v}
}

// withSigningLabels returns m with its labels filtered by setLabels and null values dropped.
func withSigningLabels(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k == "labels" {
			setLabels(out, v)
		} else {
			setPresent(out, k, v)
		}
	}
	return out
}

// setLabels keeps the labels marked signing: true, each reduced to name, version, value and signing, and omits
// the field when none is left (OCM's LabelExcludes, an ExcludeEmpty rule).
func setLabels(out map[string]any, v any) {
	labels, ok := v.([]any)
	if !ok {
		setPresent(out, "labels", v)
		return
	}
	var kept []any
	for _, l := range labels {
		label, ok := l.(map[string]any)
		if !ok || (label["signing"] != true && label["signing"] != "true") {
			continue
		}
		reduced := map[string]any{}
		for _, k := range []string{"name", "version", "value", "signing"} {
			setPresent(reduced, k, label[k])
		}
		kept = append(kept, reduced)
	}
	if len(kept) > 0 {
		out["labels"] = kept
	}
}

func mapElements(v any, f func(map[string]any) map[string]any) any {
	elems, ok := v.([]any)
	if !ok {
		return dropNulls(v)
	}
	out := make([]any, len(elems))
	for i, e := range elems {
		if m, ok := e.(map[string]any); ok {
			out[i] = f(m)
		} else {
			out[i] = dropNulls(e)
		}
	}
	return out
}

func without(m map[string]any, keys ...string) map[string]any {
	out := maps.Clone(m)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// setPresent sets out[k] unless v is null: OCM's JCS engine skips null object members at every depth.
func setPresent(out map[string]any, k string, v any) {
	if v != nil {
		out[k] = dropNulls(v)
	}
}

// dropNulls removes null object members recursively; null array elements stay, as in OCM's engine.
func dropNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			setPresent(out, k, e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = dropNulls(e)
		}
		return out
	}
	return v
}

// defaultVersionIntoExtraIdentity is OCM v1's legacy step of jsonNormalisation/v2 (ocm
// api/ocm/compdesc/normalizations/legacy/legacy.go): a resource whose name and extra identity equal another's
// gets its version added to its extra identity, in order, each change seen by the comparisons after it.
func defaultVersionIntoExtraIdentity(resources []v2Resource) {
	for i := range resources {
		for j := range resources {
			if i == j || resources[i].Name != resources[j].Name || !maps.Equal(resources[i].ExtraIdentity, resources[j].ExtraIdentity) {
				continue
			}
			id := maps.Clone(resources[i].ExtraIdentity)
			if id == nil {
				id = map[string]string{}
			}
			id["version"] = resources[i].Version
			resources[i].ExtraIdentity = id
			break
		}
	}
}
