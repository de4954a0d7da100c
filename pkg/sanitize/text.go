package sanitize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTextLength bounds, in bytes, a text from outside the operator (a registry's error, a Flux controller's
// condition message, a descriptor's field) as a condition message or an event repeats it: a hostile registry
// answers errors of any length, and each copy is kept in etcd, in every watcher's cache and in every notification.
const MaxTextLength = 1024

// ellipsis marks a text cut to its bound.
const ellipsis = "…"

// Text is s as a status, an event or a terminal may show text someone else wrote: Printable, cut on a rune
// boundary to at most MaxTextLength bytes, the cut marked with an ellipsis.
func Text(s string) string {
	return Bounded(s, MaxTextLength)
}

// Bounded is Printable(s) cut on a rune boundary to at most maxLen bytes, an ellipsis marking the cut; maxLen is
// at least the ellipsis' length. Bounded(Bounded(s, n), n) is Bounded(s, n), so that a status written from its own
// sanitized message does not change again.
func Bounded(s string, maxLen int) string {
	maxLen = max(maxLen, len(ellipsis))
	p := Printable(s)
	if len(p) <= maxLen {
		return p
	}
	cut := maxLen - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return p[:cut] + ellipsis
}

// Printable is s on one line without control or format characters: line breaks, tabs and the spaces other than
// U+0020 become spaces, and every other character that is not printable (C0 and C1 controls such as ESC, BEL and CR's cousins, DEL, the
// bidirectional controls U+202A–U+202E, U+2066–U+2069, U+200E, U+200F and U+061C, line and paragraph separators,
// invalid UTF-8 and U+FFFD, which stands for it) is dropped. Such text can then neither move a terminal's cursor, ring, set its clipboard (OSC 52)
// nor change its state, nor reorder what follows it on screen, nor break a table's or a log's lines.
func Printable(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t' || unicode.Is(unicode.Zs, r):
			b.WriteByte(' ')
		case r != utf8.RuneError && unicode.IsPrint(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isPrintable tells whether Printable would return s as it is, without allocating.
func isPrintable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
