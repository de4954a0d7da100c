// Command collisions measures how many ArtifactDeployment names the real name hash yields before the first
// collision, with the hash cut to a few characters so that collisions happen within reach, and compares that
// with the birthday formula: among names drawn uniformly from N values, the first repeat comes after about
// sqrt(pi/2 * N) names. It then computes from the same formula what the full 10-character hash gives: how many
// names a namespace holds before a collision becomes 0.1% or 50% likely, and before giving up after every salt
// (HashCollisionLimitExceeded) becomes 0.1% likely.
//
// Each seed is a landscape of its own: one component and version deployed by VectorDeployments with random UIDs
// (reuse off, so the UID is hashed), the case where names share their prefix and only the hash tells them apart.
//
//	go run ./hack/collisions [-seeds 1000] [-lengths 3,4,5,6] [-csv docs/data/collisions.csv]
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

func main() {
	seeds := flag.Int("seeds", 1000, "landscapes per hash length")
	lengths := flag.String("lengths", "3,4,5,6", "hash lengths to measure, in base36 characters")
	csvPath := flag.String("csv", "", "also write the measured rows as CSV to this file (for hack/plots)")
	flag.Parse()
	if err := run(os.Stdout, *seeds, *lengths, *csvPath); err != nil {
		fmt.Fprintln(os.Stderr, "collisions:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, seeds int, lengthList, csvPath string) error {
	var rows []row
	for field := range strings.SplitSeq(lengthList, ",") {
		length, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			return fmt.Errorf("hash length %q: %w", field, err)
		}
		r, err := measure(length, seeds, nameHash(length))
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	printMeasured(out, rows)
	printFullLength(out)
	if csvPath == "" {
		return nil
	}
	return writeCSV(csvPath, rows)
}

// row is the measurement at one hash length.
type row struct {
	length, seeds int
	values        float64 // N
	mean, stddev  float64 // of the number of names at the first collision
}

// predicted is the birthday formula's expected number of names at the first collision.
func (r row) predicted() float64 { return firstCollisionExpected(r.values) }

// stdErr is the standard error of the measured mean.
func (r row) stdErr() float64 { return r.stddev / math.Sqrt(float64(r.seeds)) }

// firstCollisionExpected is sqrt(pi/2 * N), the expected number of uniform draws from N values until the first
// repeat (to within a constant below one).
func firstCollisionExpected(n float64) float64 { return math.Sqrt(math.Pi / 2 * n) }

// namesForOdds is how many names drawn from N values collide with probability p: the n for which
// 1 - exp(-n^2/2N) = p.
func namesForOdds(n, p float64) float64 { return math.Sqrt(-2 * n * math.Log1p(-p)) }

// namesForLimitOdds is how many names a namespace holds before some artifact finds all of its salts
// (tries = MaxCollisionCount+1 names) taken with probability p. The i-th name finds all taken with probability
// about (i/N)^tries, so after n names about n^(tries+1) / ((tries+1) N^tries) artifacts have, and the odds
// that one has are 1 - exp(-that).
func namesForLimitOdds(n, p float64, tries int) float64 {
	t := float64(tries)
	return math.Pow(-math.Log1p(-p)*(t+1)*math.Pow(n, t), 1/(t+1))
}

// values is the number of distinct hashes of a length: 36^length, capped by the FNV width pkg/hash uses.
func values(length int) float64 {
	bits := 32.0
	switch {
	case length > 13:
		bits = 128
	case length > 7:
		bits = 64
	}
	return math.Min(math.Pow(36, float64(length)), math.Pow(2, bits))
}

// hashFunc hashes an artifact deployed by the VectorDeployment with this UID.
type hashFunc func(uid string) (string, error)

// nameHash is the hash that ends an ArtifactDeployment name, cut to length characters.
func nameHash(length int) hashFunc {
	return func(uid string) (string, error) {
		_, hash, err := naming.ArtifactDeploymentNameWithHashLength("acme.org/artifacts/app", "1.0.0", uid, 0, length)
		return hash, err
	}
}

// measure draws landscapes until their first collision, one per seed, with the hash of a length.
func measure(length, seeds int, hash hashFunc) (row, error) {
	var sum, sumSq float64
	for seed := range seeds {
		n, err := firstCollision(hash, rand.New(rand.NewPCG(uint64(seed), uint64(length)))) //nolint:gosec // G404: reproducible landscapes, not secrets
		if err != nil {
			return row{}, err
		}
		sum += float64(n)
		sumSq += float64(n) * float64(n)
	}
	k := float64(seeds)
	mean := sum / k
	return row{length: length, seeds: seeds, values: values(length), mean: mean,
		stddev: math.Sqrt(max(0, sumSq/k-mean*mean) * k / max(1, k-1))}, nil
}

// firstCollision names one landscape's artifacts until a hash repeats and returns how many names that took,
// the repeating one included.
func firstCollision(hash hashFunc, rng *rand.Rand) (int, error) {
	seen := map[string]struct{}{}
	for n := 1; ; n++ {
		h, err := hash(randomUID(rng))
		if err != nil {
			return 0, err
		}
		if _, dup := seen[h]; dup {
			return n, nil
		}
		seen[h] = struct{}{}
	}
}

// randomUID renders 128 random bits as Kubernetes renders a UID (a version-4 UUID's layout).
func randomUID(rng *rand.Rand) string {
	hi, lo := rng.Uint64(), rng.Uint64()
	s := fmt.Sprintf("%016x%016x", hi, lo)
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// printMeasured and printFullLength write to standard output or a test's buffer: a failed write has nowhere to
// be reported.
func printMeasured(out io.Writer, rows []row) {
	_, _ = fmt.Fprintln(out, "| hash length | values N | landscapes | names at first collision (observed mean ± std. error) | sqrt(pi/2·N) | observed / formula |")
	_, _ = fmt.Fprintln(out, "|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		_, _ = fmt.Fprintf(out, "| %d | %.4g | %d | %.1f ± %.1f | %.1f | %.3f |\n",
			r.length, r.values, r.seeds, r.mean, r.stdErr(), r.predicted(), r.mean/r.predicted())
	}
}

// printFullLength computes from the formula what the production hash length gives.
func printFullLength(out io.Writer) {
	n := values(naming.HashLength)
	tries := konfidencev1.MaxCollisionCount + 1
	_, _ = fmt.Fprintf(out, "\nAt %d characters (N = %.4g), from the formula:\n\n", naming.HashLength, n)
	_, _ = fmt.Fprintln(out, "| names in one namespace with the same prefix | for 0.1% odds | for 50% odds |")
	_, _ = fmt.Fprintln(out, "|---|---:|---:|")
	_, _ = fmt.Fprintf(out, "| of a collision (recovered by the next salt) | %.3g | %.3g |\n", namesForOdds(n, 0.001), namesForOdds(n, 0.5))
	_, _ = fmt.Fprintf(out, "| of HashCollisionLimitExceeded (all %d salts taken) | %.3g | %.3g |\n",
		tries, namesForLimitOdds(n, 0.001, tries), namesForLimitOdds(n, 0.5, tries))
	_, _ = fmt.Fprintf(out, "\nThe first collision is expected after %.3g names.\n", firstCollisionExpected(n))
}

func writeCSV(path string, rows []row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"length", "values", "seeds", "observed_mean", "observed_stderr", "predicted"})
	for _, r := range rows {
		_ = w.Write([]string{strconv.Itoa(r.length), fmtFloat(r.values), strconv.Itoa(r.seeds),
			fmtFloat(r.mean), fmtFloat(r.stdErr()), fmtFloat(r.predicted())})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
