package sanitize

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestText: text from outside keeps what is printable, on one line, and loses every control and format character
// a terminal or a reader could be fooled by; it is cut to MaxTextLength bytes on a rune boundary.
func TestText(t *testing.T) {
	long := strings.Repeat("é", MaxTextLength) // 2 bytes a rune
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "plain text: ü, 日本, ✓", "plain text: ü, 日本, ✓"},
		{"empty", "", ""},
		{"line breaks and tabs", "a\nb\r\nc\td", "a b  c d"},
		{"CSI and cursor", "\x1b[31mred\x1b[0m\x1b[2J\x1b[H", "[31mred[0m[2J[H"},
		{"OSC 52 with BEL", "x\x1b]52;c;ZXZpbA==\x07y", "x]52;c;ZXZpbA==y"},
		{"C1 controls and DEL", "a\u009b31m\u0085b\x7fc", "a31mbc"},
		{"bidi controls", "bidi \u202egnp.exe\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c!", "bidi gnp.exe!"},
		{"separators", "a\u2028b\u2029c\u00a0d", "abc d"},
		{"invalid UTF-8", "a\xffb\xc3", "ab"},
		{"long", long, strings.Repeat("é", (MaxTextLength-len(ellipsis))/2) + ellipsis},
		{"long after dropping", strings.Repeat("\x1b", 5000) + "short", "short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Text(tc.in)
			if got != tc.want {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := Text(got); again != got {
				t.Errorf("Text(Text(%q)) = %q, want %q", tc.in, again, got)
			}
		})
	}
}

// TestBounded: the cut never splits a rune and never exceeds the bound, the ellipsis included.
func TestBounded(t *testing.T) {
	for _, tc := range []struct {
		in     string
		maxLen int
		want   string
	}{
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 6, "abc…"},
		{"日本語テキスト", 9, "日本…"},
		{"日本語テキスト", 8, "日…"},
		{"abcdef", 0, "…"},
	} {
		if got := Bounded(tc.in, tc.maxLen); got != tc.want {
			t.Errorf("Bounded(%q, %d) = %q, want %q", tc.in, tc.maxLen, got, tc.want)
		}
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"plain", "\x1b]52;c;eA==\x07", "\u202e" + strings.Repeat("日", 600), "a\xffb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := Text(in)
		if len(got) > MaxTextLength || !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q: %d bytes, valid UTF-8 %t", in, got, len(got), utf8.ValidString(got))
		}
		if i := strings.IndexFunc(got, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
			t.Fatalf("Text(%q) = %q keeps a non-printable character at %d", in, got, i)
		}
		if Text(got) != got {
			t.Fatalf("Text is not idempotent on %q", in)
		}
	})
}
