package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

const (
	helmType           = "cloud.konfidence.flux.helm"
	artifactsPerVector = 10
	// reusablePerVector of each vector's artifacts may be shared: one ArtifactDeployment for every
	// VectorDeployment of the vector, with an owner reference from each.
	reusablePerVector = 2
	// outage is how long the registry answers 503 during the chaos run.
	outage = 30 * time.Second
)

// During the kill phase leases are short: a SIGKILLed leader never releases its lease, and its successor waits
// for it to expire before it works; with the defaults (35 s) 20 kills would take a quarter of an hour. A replica
// that misses its renew deadline on the loaded machine exits, and is restarted like the others. Everything else
// (the undisturbed run, the end of the chaos run, failover) runs with the binary's defaults, as installed.
var shortLease = []string{"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=5s", "--leader-election-retry-period=1s"}

const defaultLease, defaultRetry = 35 * time.Second, 5 * time.Second

// landscape is what the benchmark deploys: vectors of artifactsPerVector artifacts, each deployed by the same
// number of VectorDeployments.
type landscape struct {
	vectors    []string // references
	perVector  int
	components map[string]bool // component name -> reusable
}

func (l landscape) vectorDeployments() int { return len(l.vectors) * l.perVector }

// artifactDeployments is how many ArtifactDeployments the landscape needs: one per reusable artifact of a vector,
// one per VectorDeployment for the others.
func (l landscape) artifactDeployments() int {
	return len(l.vectors) * (reusablePerVector + (artifactsPerVector-reusablePerVector)*l.perVector)
}

// envInt reads a scale knob; the defaults are the issue's: 100 VectorDeployments of 10 artifacts, 20 kills.
func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func publish(tb testing.TB, reg *ocmtest.Registry, vds int) landscape {
	vectors := min(10, vds)
	l := landscape{perVector: max(1, vds/vectors), components: map[string]bool{}}
	for v := range vectors {
		var artifacts []ocmtest.ComponentVersion
		for a := range artifactsPerVector {
			name := fmt.Sprintf("acme.org/artifacts/v%d-app%d", v, a)
			l.components[name] = a < reusablePerVector
			artifacts = append(artifacts, ocmtest.Artifact(name, "1.0.0", helmType, a < reusablePerVector))
		}
		vector := fmt.Sprintf("acme.org/vectors/shop%d", v)
		reg.Push(tb, "", artifacts...)
		reg.Push(tb, "", ocmtest.Vector(vector, "1.0.0", artifacts...))
		l.vectors = append(l.vectors, reg.Ref("", vector, "1.0.0"))
	}
	return l
}

// BenchmarkChaosAtScale: see the package comment. Run it with `make chaos` (-benchtime=1x: one iteration takes
// minutes); FLUXDEPLOYER_CHAOS_VDS (default 100, of 10 artifacts each) and FLUXDEPLOYER_CHAOS_KILLS (default 20)
// scale it. It runs the phases of scenario, logging each by name, and reports the undisturbed and the disturbed
// convergence time, the kills, and the failover time of two replicas.
func BenchmarkChaosAtScale(b *testing.B) {
	var m measurements
	for b.Loop() {
		m = scenario(b, func(name string, phase func(testing.TB)) bool {
			b.Logf("phase %s", name)
			phase(b)
			return !b.Failed()
		})
	}
	b.Logf("undisturbed %s (%d exits of its own); with %d kills, an API server restart and a %s registry outage %s (%d exits of its own); "+
		"failover %s (lease %s), first new work %s after the kill", m.undisturbed.Round(time.Second), m.calmExits, m.kills, outage,
		m.disturbed.Round(time.Second), m.chaosExits, m.failover.Round(100*time.Millisecond), defaultLease, m.recovery.Round(100*time.Millisecond))
	b.ReportMetric(m.undisturbed.Seconds(), "undisturbed-s")
	b.ReportMetric(m.disturbed.Seconds(), "chaos-s")
	b.ReportMetric(float64(m.kills), "kills")
	b.ReportMetric(float64(m.calmExits+m.chaosExits), "own-exits")
	b.ReportMetric(m.failover.Seconds(), "failover-s")
	b.ReportMetric(m.recovery.Seconds(), "failover-work-s")
	b.ReportMetric(float64(m.artifacts), "artifacts")
}

// TestChaosAtScale runs the same phases as subtests, so that `go test -run 'TestChaosAtScale/failover'` names
// the phase that failed. It takes minutes, so it runs only with FLUXDEPLOYER_CHAOS=1 (make test does not set it).
func TestChaosAtScale(t *testing.T) {
	if os.Getenv("FLUXDEPLOYER_CHAOS") == "" {
		t.Skip("minutes long: set FLUXDEPLOYER_CHAOS=1, or run make chaos")
	}
	scenario(t, func(name string, phase func(testing.TB)) bool {
		return t.Run(name, func(t *testing.T) { phase(t) })
	})
}

// measurements are what the phases of the scenario measure.
type measurements struct {
	undisturbed, disturbed, failover, recovery time.Duration
	kills, calmExits, chaosExits, artifacts    int
}

// scenario sets up the cluster, the operator binary and the landscape under tb, and runs the phases in order,
// each through run under its name; a phase that fails ends the scenario. A phase reports its failures to the tb
// it is given.
func scenario(tb testing.TB, run func(name string, phase func(testing.TB)) bool) measurements {
	vds, minKills := envInt(tb, "FLUXDEPLOYER_CHAOS_VDS", 100), envInt(tb, "FLUXDEPLOYER_CHAOS_KILLS", 20)
	ctx := context.Background()
	cluster, err := controlplane.StartOperatorCluster(ctx, os.Stderr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cluster.Stop() })
	bin, err := controlplane.BuildFluxdeployer(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	reg := ocmtest.NewRegistry(tb)
	l := publish(tb, reg, vds)
	h := &harness{tb: tb, cluster: cluster, bin: bin, l: l}
	tb.Logf("landscape: %d VectorDeployments, %d artifact slots, %d ArtifactDeployments", l.vectorDeployments(),
		l.vectorDeployments()*artifactsPerVector, l.artifactDeployments())

	m := measurements{artifacts: l.vectorDeployments() * artifactsPerVector}
	var calm, chaotic string
	phase := func(name string, f func()) bool {
		return run(name, func(tb testing.TB) { h.tb = tb; f() })
	}
	_ = phase("undisturbed", func() {
		calm = h.newNamespace("calm")
		m.undisturbed, m.calmExits = h.undisturbedRun(calm)
	}) && phase("chaos", func() {
		chaotic = h.newNamespace("chaos")
		m.disturbed, m.kills, m.chaosExits = h.chaosRun(chaotic, reg, minKills)
	}) && phase("same-state", func() {
		h.compare(h.snapshot(calm), h.snapshot(chaotic))
		h.expectNoCollisions(chaotic)
	}) && phase("failover", func() {
		m.failover, m.recovery = h.failover(chaotic)
	})
	return m
}

type harness struct {
	// tb is the running phase's.
	tb      testing.TB
	cluster *controlplane.Cluster
	bin     string
	l       landscape
}

func (h *harness) client() client.Client { return h.cluster.Client }

func (h *harness) newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := h.client().Create(context.Background(), ns); err != nil {
		h.tb.Fatal(err)
	}
	return ns.Name
}

// start runs one replica of the operator. Whatever it was refused by the API server fails the benchmark: it runs
// with config/rbac's rights only.
func (h *harness) start(args ...string) *controlplane.Process {
	p, err := h.cluster.StartFluxdeployer(h.bin, args...)
	if err != nil {
		h.tb.Fatal(err)
	}
	return p
}

func (h *harness) checkRefused(p *controlplane.Process) {
	if refused := p.Lines(`is forbidden: User "system:serviceaccount:`); len(refused) > 0 {
		h.tb.Errorf("fluxdeployer was refused by the API server:\n%s", strings.Join(refused, "\n"))
	}
}

// replica is one operator pod whose container kubelet restarts whenever it exits (restartPolicy Always): after
// a SIGKILL, and after an exit of its own, such as leadership lost under load, which it counts.
type replica struct {
	h *harness
	// tb is the phase's that started it, which it reports to and is stopped with.
	tb   testing.TB
	args []string
	mu   sync.Mutex
	p    *controlplane.Process
	// killed marks the exit of p as caused by Kill; stopped ends the supervision.
	killed, stopped bool
	unplannedExits  int
	done            chan struct{}
}

func (h *harness) startReplica(args ...string) *replica {
	r := &replica{h: h, tb: h.tb, args: args, p: h.start(args...), done: make(chan struct{})}
	go r.supervise()
	r.tb.Cleanup(func() { // after a failure: what the replica said last, and no restarts after its phase
		if r.tb.Failed() {
			r.tb.Logf("last lines of fluxdeployer:\n%s", r.tail())
		}
		r.Stop()
	})
	return r
}

func (r *replica) tail() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p.Tail(40)
}

func (r *replica) supervise() {
	defer close(r.done)
	for {
		r.mu.Lock()
		p := r.p
		r.mu.Unlock()
		<-p.Exited()
		r.h.checkRefused(p)
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		if !r.killed {
			r.unplannedExits++
		}
		r.killed = false
		next, err := r.h.cluster.StartFluxdeployer(r.h.bin, r.args...)
		if err != nil {
			r.tb.Errorf("restarting fluxdeployer: %v", err)
			r.stopped = true
			r.mu.Unlock()
			return
		}
		r.p = next
		r.mu.Unlock()
	}
}

// Kill sends SIGKILL to the running process; the supervision starts the next one.
func (r *replica) Kill() {
	r.mu.Lock()
	r.killed = true
	p := r.p
	r.mu.Unlock()
	p.Kill()
}

// Stop ends the supervision and stops the running process gracefully, and returns the unplanned exits.
func (r *replica) Stop() int {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		<-r.done
		return r.unplannedExits
	}
	r.stopped = true
	p := r.p
	r.mu.Unlock()
	p.Stop()
	<-r.done
	return r.unplannedExits
}

func (h *harness) createVectorDeployments(namespace string) {
	for v, ref := range h.l.vectors {
		for i := range h.l.perVector {
			testenv.CreateVectorDeployment(h.tb, h.client(), namespace, fmt.Sprintf("shop%d-%d", v, i), ref)
		}
	}
}

// undisturbedRun converges the landscape with one operator left alone, and returns how long that took and how
// often the operator exited on its own.
func (h *harness) undisturbedRun(namespace string) (time.Duration, int) {
	op := h.startReplica()
	start := time.Now()
	h.createVectorDeployments(namespace)
	h.waitConverged(namespace, 30*time.Minute)
	took := time.Since(start)
	return took, op.Stop()
}

// chaosRun converges the landscape while the leader is killed 3 to 8 seconds after it took the lease, minKills
// times, and then a replica with the default lease is left to finish; the registry is unavailable for outage from the second kill on, and the
// API server restarts under a running operator after the eighth. It returns the time to convergence, the kills
// and the operator's exits of its own.
func (h *harness) chaosRun(namespace string, reg *ocmtest.Registry, minKills int) (time.Duration, int, int) {
	rng := rand.New(rand.NewPCG(12, 2026)) //nolint:gosec // G404: a reproducible schedule, not a secret
	op := h.startReplica(shortLease...)
	start := time.Now()
	h.createVectorDeployments(namespace)
	converged := h.watchConvergence(namespace, start)
	kills, previous := 0, ""
	for kills < minKills {
		previous = h.waitLeaseHolder(previous) // the restarted replica leads, and works
		time.Sleep(3*time.Second + time.Duration(rng.IntN(5000))*time.Millisecond)
		op.Kill()
		kills++
		switch kills {
		case 2:
			reg.SetUnavailable(true)
			time.AfterFunc(outage, func() { reg.SetUnavailable(false) })
			h.tb.Logf("[%5.1fs] registry unavailable for %s", time.Since(start).Seconds(), outage)
		case 8:
			time.Sleep(2 * time.Second)
			if err := h.cluster.Restart(); err != nil {
				h.tb.Fatal(err)
			}
			h.tb.Logf("[%5.1fs] API server restarted", time.Since(start).Seconds())
		}
	}
	exits := op.Stop()
	h.tb.Logf("[%5.1fs] %d kills done", time.Since(start).Seconds(), kills)
	// A replica as installed converges what is left, or keeps the state converged: nothing a restart does may
	// change it.
	last := h.startReplica()
	h.waitConverged(namespace, 30*time.Minute)
	for converged.Load() == 0 {
		time.Sleep(100 * time.Millisecond)
	}
	convergedAfter := time.Duration(converged.Load())
	h.tb.Logf("[%5.1fs] converged", convergedAfter.Seconds())
	return convergedAfter, kills, exits + last.Stop()
}

// watchConvergence polls the namespace every second and stores, once, how long after start it first converged.
func (h *harness) watchConvergence(namespace string, start time.Time) *atomic.Int64 {
	var after atomic.Int64
	go func() {
		for after.Load() == 0 {
			if h.converged(namespace) == nil {
				after.Store(int64(time.Since(start)))
			}
			time.Sleep(time.Second)
		}
	}()
	return &after
}

// failover runs two replicas with the default lease, kills the leader with SIGKILL and measures how long until
// the other one holds the lease, and until it has created the ArtifactDeployments of a new VectorDeployment.
func (h *harness) failover(namespace string) (acquired, working time.Duration) {
	// The previous replica may have left its lease behind: the leader is whoever takes it after first starts.
	previous := h.leaseHolder()
	first := h.start()
	leader := h.waitLeaseHolder(previous)
	second := h.start()
	defer func() { second.Stop(); h.checkRefused(second) }()
	time.Sleep(5 * time.Second) // the second replica is running and standing by
	if holder := h.leaseHolder(); holder != leader {
		h.tb.Fatalf("lease moved from %s to %s without a failure", leader, holder)
	}
	killed := time.Now()
	first.Kill()
	h.checkRefused(first)
	vd := testenv.CreateVectorDeployment(h.tb, h.client(), namespace, "after-failover", h.l.vectors[0])
	h.waitLeaseHolder(leader)
	acquired = time.Since(killed)
	testenv.Eventually(h.tb, 5*time.Minute, func() error {
		got := &konfidencev1.VectorDeployment{}
		if err := h.client().Get(context.Background(), client.ObjectKeyFromObject(vd), got); err != nil {
			return err
		}
		if !conditions.IsTrue(got, konfidencev1.ArtifactDeploymentsCreatedCondition) {
			return fmt.Errorf("the new leader has not created the ArtifactDeployments of %s", vd.Name)
		}
		return nil
	})
	working = time.Since(killed)
	// client-go's standby judges the lease by its own clock, not the lease's renewTime (clocks may be skewed): the
	// lease is expired a lease duration after the standby saw the last renewal, and it polls every retry period
	// stretched by up to JitterFactor. The last renewal came at most a retry period before the kill; the standby
	// saw it up to one stretched poll later and takes the lease up to one stretched poll after its expiry:
	// between 30 s and 57 s with the defaults, 41 s expected. 5 s more for a loaded machine's scheduling.
	stretched := time.Duration(float64(defaultRetry) * (1 + leaderelection.JitterFactor))
	if limit := defaultLease + 2*stretched + 5*time.Second; acquired > limit {
		h.tb.Errorf("failover took %s, more than the lease duration %s and two polls of the standby (%s each at most)", acquired, defaultLease, stretched)
	}
	return acquired, working
}

func (h *harness) leaseHolder() string {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: controlplane.OperatorNamespace, Name: "fluxdeployer.konfidence.cloud"}
	if err := h.client().Get(context.Background(), key, lease); err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// waitLeaseHolder waits until the lease is held by someone other than previous, polling every 100 ms.
func (h *harness) waitLeaseHolder(previous string) string {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if holder := h.leaseHolder(); holder != "" && holder != previous {
			return holder
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.tb.Fatalf("nobody but %q took the lease within 3 minutes", previous)
	return ""
}

func (h *harness) waitConverged(namespace string, timeout time.Duration) {
	testenv.Eventually(h.tb, timeout, func() error { return h.converged(namespace) })
}

// fluxKinds are the Flux objects the Flux deployer may write for a Helm artifact.
var fluxKinds = []schema.GroupVersionKind{
	{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"},
	{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmRepository"},
	{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"},
}

// state is what is in a namespace.
type state struct {
	vds  []konfidencev1.VectorDeployment
	ads  map[string]*konfidencev1.ArtifactDeployment
	flux map[string][]*unstructured.Unstructured // by the ArtifactDeployment they belong to
}

func (h *harness) read(namespace string) (state, error) {
	ctx := context.Background()
	s := state{ads: map[string]*konfidencev1.ArtifactDeployment{}, flux: map[string][]*unstructured.Unstructured{}}
	vds := &konfidencev1.VectorDeploymentList{}
	if err := h.client().List(ctx, vds, client.InNamespace(namespace)); err != nil {
		return s, err
	}
	s.vds = vds.Items
	ads := &konfidencev1.ArtifactDeploymentList{}
	if err := h.client().List(ctx, ads, client.InNamespace(namespace)); err != nil {
		return s, err
	}
	for i := range ads.Items {
		s.ads[ads.Items[i].Name] = &ads.Items[i]
	}
	for _, gvk := range fluxKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := h.client().List(ctx, list, client.InNamespace(namespace)); err != nil {
			return s, err
		}
		for i := range list.Items {
			o := &list.Items[i]
			ad := o.GetLabels()[konfidencev1.ArtifactDeploymentLabel]
			s.flux[ad] = append(s.flux[ad], o)
		}
	}
	return s, nil
}

// converged: every VectorDeployment has its ArtifactDeployments, the Flux deployer has handled each of them
// (its observed generation), and each has a source and a HelmRelease. Without Flux's controllers this is as far
// as the operator can take a landscape; Ready needs helm-controller to install the charts.
func (h *harness) converged(namespace string) error {
	s, err := h.read(namespace)
	if err != nil {
		return err
	}
	if got, want := len(s.vds), h.l.vectorDeployments(); got != want {
		return fmt.Errorf("%d of %d VectorDeployments", got, want)
	}
	created := 0
	for i := range s.vds {
		if conditions.IsTrue(&s.vds[i], konfidencev1.ArtifactDeploymentsCreatedCondition) {
			created++
		}
	}
	if created < len(s.vds) {
		return fmt.Errorf("%d of %d VectorDeployments have their ArtifactDeployments", created, len(s.vds))
	}
	if got, want := len(s.ads), h.l.artifactDeployments(); got != want {
		return fmt.Errorf("%d ArtifactDeployments, want %d", got, want)
	}
	handled, complete := 0, 0
	for name, ad := range s.ads {
		if ad.Status.ObservedGeneration == ad.Generation {
			handled++
		}
		if len(s.flux[name]) == 2 {
			complete++
		}
	}
	if handled < len(s.ads) || complete < len(s.ads) {
		return fmt.Errorf("of %d ArtifactDeployments %d handled by the Flux deployer, %d with a source and a HelmRelease", len(s.ads), handled, complete)
	}
	return nil
}

// snapshot describes a converged namespace independently of its name and UIDs: for each VectorDeployment and
// artifact, the slot's collision count, whether the ArtifactDeployment has the name the naming function gives
// the identity, its owners, and its Flux objects' kinds and specs with the namespace and the ArtifactDeployment's
// name abstracted. Duplicates and orphans are failures.
func (h *harness) snapshot(namespace string) map[string]string {
	s, err := h.read(namespace)
	if err != nil {
		h.tb.Fatal(err)
	}
	out := map[string]string{}
	used := map[string]bool{}
	for _, vd := range s.vds {
		for component, slot := range vd.Status.ResultingArtifactDeployments {
			uid := string(vd.UID)
			if h.l.components[component] {
				uid = ""
			}
			want, _, err := naming.ArtifactDeploymentName(component, "1.0.0", uid, 0)
			if err != nil {
				h.tb.Fatal(err)
			}
			used[slot.Name] = true
			out[vd.Name+"/"+component] = describeSlot(namespace, slot, want, s)
		}
	}
	for name := range s.ads {
		if !used[name] {
			h.tb.Errorf("%s: ArtifactDeployment %s belongs to no slot (a duplicate)", namespace, name)
		}
	}
	for ad := range s.flux {
		if s.ads[ad] == nil {
			h.tb.Errorf("%s: Flux objects of ArtifactDeployment %q, which does not exist", namespace, ad)
		}
	}
	return out
}

func describeSlot(namespace string, slot konfidencev1.ResultingArtifactDeployment, want string, s state) string {
	var b strings.Builder
	fmt.Fprintf(&b, "named as computed: %t; collision count %v", slot.Name == want, slot.CollisionCount)
	ad := s.ads[slot.Name]
	if ad == nil {
		b.WriteString("; no ArtifactDeployment")
		return b.String()
	}
	var owners []string
	for _, ref := range ad.OwnerReferences {
		owners = append(owners, ref.Name)
	}
	slices.Sort(owners)
	fmt.Fprintf(&b, "; owners %v", owners)
	var objs []string
	for _, o := range s.flux[slot.Name] {
		spec, _ := json.Marshal(o.Object["spec"]) // decoded JSON marshals again
		abstract := strings.NewReplacer(slot.Name, "<ad>", namespace, "<ns>").Replace(string(spec))
		objs = append(objs, o.GetKind()+" "+abstract)
	}
	slices.Sort(objs)
	fmt.Fprintf(&b, "; %s", strings.Join(objs, "; "))
	return b.String()
}

// compare fails on every slot that differs between the undisturbed and the disturbed namespace.
func (h *harness) compare(calm, chaotic map[string]string) {
	if len(calm) != h.l.vectorDeployments()*artifactsPerVector {
		h.tb.Errorf("the undisturbed run has %d slots, want %d", len(calm), h.l.vectorDeployments()*artifactsPerVector)
	}
	for key, want := range calm {
		if !strings.HasPrefix(want, "named as computed: true; collision count <nil>") {
			h.tb.Errorf("undisturbed %s: %s", key, want)
		}
		if got := chaotic[key]; got != want {
			h.tb.Errorf("%s differs after chaos:\n got: %s\nwant: %s", key, got, want)
		}
	}
	for key := range chaotic {
		if _, ok := calm[key]; !ok {
			h.tb.Errorf("%s exists only after chaos", key)
		}
	}
}

// expectNoCollisions: no collision was ever recorded in the namespace, neither as a counter in a slot (compared
// above) nor as an event.
func (h *harness) expectNoCollisions(namespace string) {
	events := &corev1.EventList{}
	if err := h.client().List(context.Background(), events, client.InNamespace(namespace)); err != nil {
		h.tb.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == konfidencev1.ArtifactDeploymentHashCollisionReason || e.Reason == konfidencev1.HashCollisionLimitExceededReason {
			h.tb.Errorf("collision event on %s: %s", e.InvolvedObject.Name, e.Message)
		}
	}
}
