package main

import (
	"math"
	"testing"
)

// zScore is how many standard errors the measured mean lies from the birthday formula.
func zScore(r row) float64 { return math.Abs(r.mean-r.predicted()) / r.stdErr() }

// TestFirstCollisionMatchesBirthdayFormula: the real name hash, cut to 3 to 5 characters, collides first after
// as many names as uniformly drawn values would, within 5 standard errors over 200 landscapes (about ±18%).
// A hash that used its characters unevenly collides sooner; the poor hash below shows the test would notice.
func TestFirstCollisionMatchesBirthdayFormula(t *testing.T) {
	for _, length := range []int{3, 4, 5} {
		r, err := measure(length, 200, nameHash(length))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("length %d: %.1f ± %.1f names at the first collision, formula %.1f (z = %.2f)", length, r.mean, r.stdErr(), r.predicted(), zScore(r))
		if z := zScore(r); z > 5 {
			t.Errorf("length %d: observed %.1f ± %.1f, formula %.1f: %.1f standard errors apart", length, r.mean, r.stdErr(), r.predicted(), z)
		}
	}
}

// TestPoorHashIsCaught: a hash whose last character is constant has 36 times fewer values than its length
// promises; the comparison with the formula for that length fails.
func TestPoorHashIsCaught(t *testing.T) {
	const length = 4
	short := nameHash(length - 1)
	poor := func(uid string) (string, error) {
		h, err := short(uid)
		return h + "0", err
	}
	r, err := measure(length, 200, poor)
	if err != nil {
		t.Fatal(err)
	}
	if z := zScore(r); z <= 5 {
		t.Errorf("a hash with %d effective characters passed for %d: observed %.1f, formula %.1f, z = %.2f", length-1, length, r.mean, r.predicted(), z)
	}
}

// TestLimitOddsAgreeWithTheRecurrence: the closed form for the odds of HashCollisionLimitExceeded agrees with
// the recurrence of the background analysis, C(n) = C(n-1) + (1 - C(n-1)) ((n-1)/N)^tries, at 2 characters.
func TestLimitOddsAgreeWithTheRecurrence(t *testing.T) {
	n, tries := values(2), 6
	for _, p := range []float64{0.001, 0.5} {
		c, names := 0.0, 0
		for names = 1; c < p; names++ {
			c += (1 - c) * math.Pow(float64(names-1)/n, float64(tries))
		}
		if got := namesForLimitOdds(n, p, tries); math.Abs(got-float64(names))/float64(names) > 0.05 {
			t.Errorf("odds %g: closed form %.0f names, recurrence %d", p, got, names)
		}
	}
}
