package hash

import (
	"bufio"
	"fmt"
	stdfnv "hash/fnv"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"
)

// reference renders the standard library's FNV-1a through math/big, independently of the fast path.
func reference(content string, length int) string {
	var sum []byte
	switch {
	case length <= 7:
		h := stdfnv.New32a()
		h.Write([]byte(content))
		sum = h.Sum(nil)
	case length <= 13:
		h := stdfnv.New64a()
		h.Write([]byte(content))
		sum = h.Sum(nil)
	default:
		h := stdfnv.New128a()
		h.Write([]byte(content))
		sum = h.Sum(nil)
	}
	s := new(big.Int).SetBytes(sum).Text(36)
	s = strings.Repeat("0", MaxLength) + s
	return s[len(s)-length:]
}

func TestFnvMatchesStandardLibrary(t *testing.T) {
	inputs := []string{"", "a", "acme.org/x/app", "\x00\xff", strings.Repeat("long input ", 100), "ünïcödé"}
	for _, in := range inputs {
		for length := 1; length <= MaxLength; length++ {
			got, err := Fnv(in, length)
			if err != nil {
				t.Fatalf("Fnv(%q, %d): %v", in, length, err)
			}
			if want := reference(in, length); got != want {
				t.Errorf("Fnv(%q, %d) = %q, want %q", in, length, got, want)
			}
		}
	}
}

func TestFnvKnownValues(t *testing.T) {
	// Pinned values, also computed independently of Go: changing them renames every deployed ArtifactDeployment.
	for _, tc := range []struct {
		in     string
		length int
		want   string
	}{
		{"", 10, "iihzj4ux45"},
		{"acme.org/x/app", 10, "ra4fogk7ik"},
		{"acme.org/x/app", 6, "soakb0"},
		{"acme.org/x/app", 25, "3bd38qmtnokj6f7oym0xzhzv0"},
	} {
		got, err := Fnv(tc.in, tc.length)
		if err != nil || got != tc.want {
			t.Errorf("Fnv(%q, %d) = %q, %v; want %q (names are a persistence format)", tc.in, tc.length, got, err, tc.want)
		}
	}
}

func TestFnvRejectsLengthOutOfRange(t *testing.T) {
	for _, length := range []int{-1, 0, MaxLength + 1, 1 << 20} {
		if got, err := Fnv("x", length); err == nil {
			t.Errorf("Fnv(x, %d) = %q, want an error", length, got)
		}
	}
}

func TestAppendFnvAppends(t *testing.T) {
	got, err := AppendFnv([]byte("prefix-"), []byte("acme.org/x/app"), 10)
	want, _ := Fnv("acme.org/x/app", 10)
	if err != nil || string(got) != "prefix-"+want {
		t.Fatalf("AppendFnv = %q, %v; want %q", got, err, "prefix-"+want)
	}
}

// TestCollisionOddsTable recomputes the collision-odds table in the package documentation from the birthday
// formula, so the documented figures are the project's own numbers and cannot drift.
func TestCollisionOddsTable(t *testing.T) {
	f, err := os.Open("fnv.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ns := []float64{1e3, 1e4, 1e5, 1e6}
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(sc.Text(), "//"))
		if len(fields) != 2+len(ns) {
			continue
		}
		length, err := strconv.Atoi(fields[0])
		if err != nil {
			continue
		}
		rows++
		bitsOf := 32.0
		if length > 7 {
			bitsOf = 64
		}
		n := math.Min(math.Pow(36, float64(length)), math.Pow(2, bitsOf))
		if want := fmt.Sprintf("%.3e", n); fields[1] != want {
			t.Errorf("length %d: documented N %s, computed %s", length, fields[1], want)
		}
		for i, k := range ns {
			p := -math.Expm1(-k * (k - 1) / (2 * n))
			if want := fmt.Sprintf("%.3e", p); fields[2+i] != want {
				t.Errorf("length %d, n=%g: documented p %s, birthday formula gives %s", length, k, fields[2+i], want)
			}
		}
	}
	if rows != 4 {
		t.Fatalf("found %d rows of the collision-odds table in the package doc, want 4 (6, 8, 10, 13)", rows)
	}
}

// TestBase36AgreesAtEveryWidth checks the fast single-word path of base36 against math/big on values near the
// word boundaries, where a carry mistake would show.
func TestBase36AgreesAtEveryWidth(t *testing.T) {
	for _, v := range []struct{ hi, lo uint64 }{{0, 0}, {0, 35}, {0, 36}, {0, math.MaxUint64}, {1, 0}, {math.MaxUint64, math.MaxUint64}} {
		var d [MaxLength]byte
		base36(d[:], v.hi, v.lo)
		got := make([]byte, MaxLength)
		for i := range d {
			got[MaxLength-1-i] = d[i]
		}
		x := new(big.Int).Lsh(new(big.Int).SetUint64(v.hi), 64)
		x.Or(x, new(big.Int).SetUint64(v.lo))
		want := strings.Repeat("0", MaxLength) + x.Text(36)
		if string(got) != want[len(want)-MaxLength:] {
			t.Errorf("base36(%x:%x) = %s, want %s", v.hi, v.lo, got, want[len(want)-MaxLength:])
		}
	}
}

func FuzzFnv(f *testing.F) {
	f.Add("acme.org/x/app", 10)
	f.Add("", 25)
	f.Fuzz(func(t *testing.T, content string, length int) {
		got, err := Fnv(content, length)
		if length < 1 || length > MaxLength {
			if err == nil {
				t.Fatalf("no error for length %d", length)
			}
			return
		}
		if err != nil || got != reference(content, length) {
			t.Fatalf("Fnv(%q, %d) = %q, %v; want %q", content, length, got, err, reference(content, length))
		}
	})
}

func BenchmarkFnv10(b *testing.B) {
	for b.Loop() {
		_, _ = Fnv("acme.org/vectors/shop-frontend\x001.2.3", 10)
	}
}
