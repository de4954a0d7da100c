// Package sanitize turns arbitrary strings into valid Kubernetes names (RFC 1123 labels and subdomains), and text
// from outside the operator into bounded, printable text (Text).
//
// Every name function lowercases its input, replaces each run of characters that cannot appear in the result with a
// single '-', trims the ends to alphanumerics and caps the length. The result is always valid; when nothing of
// the input survives, the functions return ErrNoValidCharacters rather than an invalid empty name.
package sanitize

import (
	"errors"
	"strings"
	"unicode/utf8"
)

const (
	// MaxDNSLabelLength is the RFC 1123 label limit (Service, Namespace and most object names).
	MaxDNSLabelLength = 63
	// MaxDNSSubdomainLength is the RFC 1123 subdomain limit (metadata.name of most kinds).
	MaxDNSSubdomainLength = 253
)

// ErrNoValidCharacters is returned when an input has no character that can start a Kubernetes name.
var ErrNoValidCharacters = errors.New("no character of the input is valid in a Kubernetes name")

// DNSLabelName returns s as an RFC 1123 label ([a-z0-9-], alphanumeric at both ends) of at most maxLen
// characters; maxLen is clamped to [1, MaxDNSLabelLength].
func DNSLabelName(s string, maxLen int) (string, error) {
	var buf [MaxDNSLabelLength]byte
	return finish(AppendDNSLabel(buf[:0], s, maxLen))
}

// DNSSubdomainName returns s as an RFC 1123 subdomain (dot-separated labels) of at most maxLen characters;
// maxLen is clamped to [1, MaxDNSSubdomainLength]. Empty labels (e.g. from "a..b") collapse.
func DNSSubdomainName(s string, maxLen int) (string, error) {
	maxLen = clamp(maxLen, MaxDNSSubdomainLength)
	out := make([]byte, 0, min(len(s), maxLen))
	for label := range strings.SplitSeq(s, ".") {
		room := maxLen - len(out)
		if len(out) > 0 {
			room-- // the dot
		}
		if room < 1 {
			break
		}
		start := len(out)
		if start > 0 {
			out = append(out, '.')
		}
		if next := AppendDNSLabel(out, label, min(room, MaxDNSLabelLength)); len(next) > len(out) {
			out = next
		} else {
			out = out[:start] // nothing of this label survived: drop its dot too
		}
	}
	return finish(out)
}

// ResourceName returns s as a name valid for the metadata.name of any kind fluxdeployer creates: an RFC 1123
// subdomain of at most MaxDNSSubdomainLength characters.
func ResourceName(s string) (string, error) {
	return DNSSubdomainName(s, MaxDNSSubdomainLength)
}

// AppendDNSLabel appends the label DNSLabelName would return for s to dst and returns the extended buffer. It
// appends nothing when no character of s survives. It does not allocate when dst has room, which keeps name
// construction on the reconcile path cheap.
func AppendDNSLabel(dst []byte, s string, maxLen int) []byte {
	maxLen = clamp(maxLen, MaxDNSLabelLength)
	start := len(dst)
	pendingDash := false
	for i := 0; i < len(s) && len(dst)-start < maxLen; {
		c := s[i]
		if c >= utf8.RuneSelf { // a non-ASCII rune is a separator, whatever it lowercases to
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			pendingDash = true
			continue
		}
		i++
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if !isAlnum(c) {
			pendingDash = true
			continue
		}
		if pendingDash && len(dst) > start {
			if len(dst)-start+2 > maxLen { // the dash and c do not both fit: end here
				break
			}
			dst = append(dst, '-')
		}
		pendingDash = false
		dst = append(dst, c)
	}
	return dst
}

func finish(b []byte) (string, error) {
	if len(b) == 0 {
		return "", ErrNoValidCharacters
	}
	return string(b), nil
}

func clamp(n, limit int) int {
	return max(1, min(n, limit))
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}
