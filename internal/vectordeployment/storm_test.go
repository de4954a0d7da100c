package vectordeployment

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// stormGroups are the sizes of the groups of a collision storm: the artifacts of a group share their name's
// prefix, so at 2 characters they compete for 1,296 names. make test runs the small storm; FLUXDEPLOYER_STORM=full
// (make collisions) runs 2,000 artifacts, with groups large enough for HashCollisionLimitExceeded to be likely.
func stormGroups() []int {
	if os.Getenv("FLUXDEPLOYER_STORM") == "full" {
		return []int{200, 400, 600, 800}
	}
	return []int{100, 200}
}

// stormVectorSize is the number of artifacts per vector; a group of m artifacts is m/stormVectorSize
// VectorDeployments of its vector.
const stormVectorSize = 10

// stormExpectation is what the birthday model predicts for a group of artifacts sharing n names.
type stormExpectation struct {
	bumps, bumpsVariance float64 // recovered collisions (one per salt tried beyond the first)
	limits               float64 // artifacts given up on: HashCollisionLimitExceeded
}

// saltOdds adds one artifact whose first salt finds a fraction first of the names taken and every later salt a
// fraction later: it needs salt k+1 with probability first*later^(k-1), and gives up when all tries are taken.
func (e *stormExpectation) saltOdds(first, later float64, tries int) (limit float64) {
	var mean, square float64
	for k := 1; k < tries; k++ {
		p := first * math.Pow(later, float64(k-1)) // P(at least k salts are taken)
		mean += p
		square += float64(2*k-1) * p
	}
	limit = first * math.Pow(later, float64(tries-1))
	e.bumps += mean
	e.bumpsVariance += square - mean*mean
	e.limits += limit
	return limit
}

// expectStorm brackets a group of m artifacts deployed at once into n names with up to tries salts each. The
// artifacts take their first salts one after another, the i-th finding the names of those before it taken. When
// the later salts are tried right away, as an API server retrying generateName would, they find the same
// fraction taken: the birthday formula of the background analysis, the lower bracket. The controller tries them
// in later reconciles, after others took more names; at the latest all find the final fraction taken, the upper
// bracket.
func expectStorm(m int, n float64, tries int) (immediate, late stormExpectation) {
	occupied := 0.0
	for range m {
		f := occupied / n
		occupied += 1 - immediate.saltOdds(f, f, tries)
	}
	// Late retries: the first salts alone fill the names in order; the final fraction depends on how many give up,
	// which a few rounds of fixed-point iteration settle.
	final := occupied / n
	for range 20 {
		late, occupied = stormExpectation{}, 0
		for range m {
			f := occupied / n
			late.saltOdds(f, final, tries)
			occupied += 1 - f
		}
		final = (float64(m) - late.limits) / n
	}
	return immediate, late
}

// stormSlot is one artifact of one VectorDeployment after the storm.
type stormSlot struct {
	vd        *konfidencev1.VectorDeployment
	component string
	count     int32
}

// TestCollisionStorm deploys thousands of artifacts whose names share prefixes with the hash cut to 2
// characters, so that collisions are the rule: every collision must be recovered by the next salt (the slot's
// name is its identity's first salt not held by another identity, and no identity is deployed twice), the
// recovered-collision counter must equal the salts used, and HashCollisionLimitExceeded must come only where the
// birthday model makes it likely, in the numbers it predicts.
func TestCollisionStorm(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	ns := newNamespace(t)
	t.Cleanup(func() { // the next tests' managers would cache thousands of leftovers
		_ = env.Client.DeleteAllOf(context.Background(), &konfidencev1.ArtifactDeployment{}, client.InNamespace(ns))
		_ = env.Client.DeleteAllOf(context.Background(), &konfidencev1.VectorDeployment{}, client.InNamespace(ns))
	})
	groups := stormGroups()
	recoveredBefore, limitsBefore := testutil.ToFloat64(collisionsRecovered), testutil.ToFloat64(collisionsLimitExceeded)
	startManager(t, managerOptions{hashLength: shortHash})
	var vds [][]*konfidencev1.VectorDeployment
	for g, size := range groups {
		var artifacts []ocmtest.ComponentVersion
		for a := range stormVectorSize {
			// One basename per group: the names of a group differ only in their hash.
			artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/a%d/group%d", a, g), "1.0.0", helmType, false))
		}
		vector := pushVector(t, reg, fmt.Sprintf("acme.org/vectors/group%d", g), artifacts...)
		var group []*konfidencev1.VectorDeployment
		for i := range size / stormVectorSize {
			group = append(group, createVectorDeployment(t, ns, fmt.Sprintf("group%d-%03d", g, i), vector))
		}
		vds = append(vds, group)
	}
	settled := waitStormSettled(t, ns, sum(groups)/stormVectorSize)

	ads := listADs(t, ns)
	byIdentity := map[identity]*konfidencev1.ArtifactDeployment{}
	for _, ad := range ads {
		id := identityOfObject(ad)
		if other, dup := byIdentity[id]; dup {
			t.Errorf("%s deployed twice: %s and %s", id, other.Name, ad.Name)
		}
		byIdentity[id] = ad
	}

	var salts float64
	limitedVDs := 0
	n := math.Pow(36, shortHash)
	t.Logf("%-6s %-9s %-30s %s", "group", "artifacts", "recovered collisions", "HashCollisionLimitExceeded")
	for g, group := range vds {
		var bumps, limits int
		for _, vd := range group {
			vd = settled[vd.Name]
			vdLimited := false
			for component, slot := range vd.Status.ResultingArtifactDeployments {
				s := stormSlot{vd: vd, component: component, count: ptr.Deref(slot.CollisionCount, 0)}
				limited := checkStormSlot(t, s, slot.Name, ads, byIdentity)
				bumps += int(s.count)
				if limited {
					limits++
					vdLimited = true
				}
			}
			if got := len(vd.Status.ResultingArtifactDeployments); got != stormVectorSize {
				t.Errorf("%s records %d slots, want %d", vd.Name, got, stormVectorSize)
			}
			if vdLimited {
				limitedVDs++
			}
		}
		salts += float64(bumps)
		low, high := expectStorm(groups[g], n, konfidencev1.MaxCollisionCount+1)
		t.Logf("%-6d %-9d %5d (model %6.1f to %6.1f) %5d (model %6.3f to %6.3f)", g, groups[g], bumps, low.bumps, high.bumps, limits, low.limits, high.limits)
		tolerance := 5*math.Sqrt(max(low.bumpsVariance, high.bumpsVariance)) + 2
		if float64(bumps) < low.bumps-tolerance || float64(bumps) > high.bumps+tolerance {
			t.Errorf("group of %d: %d recovered collisions, the model expects %.1f to %.1f (± %.1f)", groups[g], bumps, low.bumps, high.bumps, tolerance)
		}
		// Where the model makes giving up unlikely it must not happen at all; elsewhere as often as predicted.
		if high.limits < 0.01 && limits > 0 ||
			float64(limits) < low.limits-5*math.Sqrt(low.limits)-1 || float64(limits) > high.limits+5*math.Sqrt(high.limits)+1 {
			t.Errorf("group of %d: %d artifacts hit HashCollisionLimitExceeded, the model expects %.3f to %.3f", groups[g], limits, low.limits, high.limits)
		}
	}
	// Every salt used is one recovered collision, counted once (none twice from a stale read), and each
	// VectorDeployment that gave up is counted once.
	if got := testutil.ToFloat64(collisionsRecovered) - recoveredBefore; got != salts {
		t.Errorf("recovered-collision counter rose by %v, the slots used %v salts", got, salts)
	}
	if got := testutil.ToFloat64(collisionsLimitExceeded) - limitsBefore; got != float64(limitedVDs) {
		t.Errorf("limit_exceeded counter rose by %v, %d VectorDeployments gave up", got, limitedVDs)
	}
}

// checkStormSlot checks one slot after the storm and tells whether it was given up on. A deployed slot's
// ArtifactDeployment carries the name of its collision count, and every lower salt's name is held by another
// identity; a slot given up on used every salt, each held by another identity, and its VectorDeployment says so.
func checkStormSlot(t *testing.T, s stormSlot, recorded string, ads map[string]*konfidencev1.ArtifactDeployment,
	byIdentity map[identity]*konfidencev1.ArtifactDeployment) (limited bool) {
	t.Helper()
	id := identity{component: s.component, version: "1.0.0", vectorDeploymentUID: s.vd.UID}
	ad, deployed := byIdentity[id]
	last := s.count
	if deployed {
		last--
		if want := mustName(t, s.component, "1.0.0", string(s.vd.UID), s.count, shortHash); ad.Name != want || recorded != want {
			t.Errorf("%s %s: deployed as %s, recorded %s, its collision count %d names %s", s.vd.Name, s.component, ad.Name, recorded, s.count, want)
		}
	} else if s.count != konfidencev1.MaxCollisionCount || conditions.GetReason(s.vd, konfidencev1.ArtifactDeploymentsCreatedCondition) != konfidencev1.HashCollisionLimitExceededReason {
		t.Errorf("%s %s: not deployed, collision count %d, %+v", s.vd.Name, s.component, s.count, conditions.Get(s.vd, konfidencev1.ArtifactDeploymentsCreatedCondition))
	}
	for c := int32(0); c <= last; c++ {
		name := mustName(t, s.component, "1.0.0", string(s.vd.UID), c, shortHash)
		if holder, ok := ads[name]; !ok || identityOfObject(holder) == id {
			t.Errorf("%s %s: salt %d (%s) was skipped: it is free or its own", s.vd.Name, s.component, c, name)
		}
	}
	return !deployed
}

// waitStormSettled waits until every VectorDeployment has its ArtifactDeployments or gave up on some for
// collisions, and returns them by name.
func waitStormSettled(t *testing.T, namespace string, want int) map[string]*konfidencev1.VectorDeployment {
	t.Helper()
	settled := map[string]*konfidencev1.VectorDeployment{}
	testenv.Eventually(t, 15*time.Minute, func() error {
		list := &konfidencev1.VectorDeploymentList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			return err
		}
		clear(settled)
		for i := range list.Items {
			vd := &list.Items[i]
			c := conditions.Get(vd, konfidencev1.ArtifactDeploymentsCreatedCondition)
			if c != nil && (c.Reason == "Succeeded" || c.Reason == konfidencev1.HashCollisionLimitExceededReason) {
				settled[vd.Name] = vd
			}
		}
		if len(settled) < want {
			return fmt.Errorf("%d of %d VectorDeployments settled", len(settled), want)
		}
		return nil
	})
	return settled
}

func sum(s []int) int {
	total := 0
	for _, v := range s {
		total += v
	}
	return total
}
