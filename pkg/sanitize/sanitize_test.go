package sanitize

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestDNSLabelName(t *testing.T) {
	for _, tc := range []struct {
		in     string
		maxLen int
		want   string
	}{
		{"Shop-Frontend", 63, "shop-frontend"},
		{"acme.org/x/app", 63, "acme-org-x-app"},
		{"--a__b..c--", 63, "a-b-c"},
		{"1.2.3+build.5", 63, "1-2-3-build-5"},
		{"ünïcödé", 63, "n-c-d"},
		{"abc-def", 4, "abc"}, // never end on the dash
		{"abcdef", 3, "abc"},
		{strings.Repeat("a", 100), 0, "a"},
		{strings.Repeat("a", 100), 1000, strings.Repeat("a", 63)},
	} {
		got, err := DNSLabelName(tc.in, tc.maxLen)
		if err != nil || got != tc.want {
			t.Errorf("DNSLabelName(%q, %d) = %q, %v; want %q", tc.in, tc.maxLen, got, err, tc.want)
		}
	}
}

func TestEmptyResultIsAnError(t *testing.T) {
	for _, in := range []string{"", "---", "äöü", "..."} {
		if got, err := DNSLabelName(in, 63); !errors.Is(err, ErrNoValidCharacters) {
			t.Errorf("DNSLabelName(%q) = %q, %v; want ErrNoValidCharacters", in, got, err)
		}
		if got, err := ResourceName(in); !errors.Is(err, ErrNoValidCharacters) {
			t.Errorf("ResourceName(%q) = %q, %v; want ErrNoValidCharacters", in, got, err)
		}
	}
}

func TestDNSSubdomainName(t *testing.T) {
	for _, tc := range []struct {
		in     string
		maxLen int
		want   string
	}{
		{"Acme.Org/X", 253, "acme.org-x"},
		{"a..b", 253, "a.b"},
		{".a.", 253, "a"},
		{"a.äöü.b", 253, "a.b"},
		{"abc.def", 5, "abc.d"},
		{"abc.def", 4, "abc"},
		{strings.Repeat("a", 70) + ".b", 253, strings.Repeat("a", 63) + ".b"},
	} {
		got, err := DNSSubdomainName(tc.in, tc.maxLen)
		if err != nil || got != tc.want {
			t.Errorf("DNSSubdomainName(%q, %d) = %q, %v; want %q", tc.in, tc.maxLen, got, err, tc.want)
		}
	}
}

func FuzzNamesAreAlwaysValid(f *testing.F) {
	for _, s := range []string{"Shop", "a.b.c", "ÜNÏ--cöde..", strings.Repeat("x.", 200)} {
		f.Add(s, 63)
	}
	f.Fuzz(func(t *testing.T, in string, maxLen int) {
		if label, err := DNSLabelName(in, maxLen); err == nil {
			if errs := validation.IsDNS1123Label(label); len(errs) > 0 || len(label) > max(1, maxLen) {
				t.Fatalf("DNSLabelName(%q, %d) = %q: %v", in, maxLen, label, errs)
			}
		} else if strings.ContainsFunc(in, isASCIIAlnum) {
			t.Fatalf("DNSLabelName(%q) failed although the input has alphanumerics: %v", in, err)
		}
		if sub, err := DNSSubdomainName(in, maxLen); err == nil {
			if errs := validation.IsDNS1123Subdomain(sub); len(errs) > 0 || len(sub) > max(1, maxLen) {
				t.Fatalf("DNSSubdomainName(%q, %d) = %q: %v", in, maxLen, sub, errs)
			}
		}
	})
}

func isASCIIAlnum(r rune) bool {
	return r < 128 && (isAlnum(byte(r)) || r >= 'A' && r <= 'Z')
}

func BenchmarkDNSLabelName(b *testing.B) {
	for b.Loop() {
		_, _ = DNSLabelName("Acme.org/Vectors/Shop-Frontend_1.2.3+build.5", 63)
	}
}
