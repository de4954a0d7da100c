package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// stageProgressDeadline is the Stage's spec.progressDeadline in TestNodeStageMovesWithoutAnOutage: short, so that
// the failed move ends within the test's budget, and longer than a healthy candidate takes here (Helm waits for its
// pods, 20 to 40 s on 2 cores), so that only the crashing one misses it.
const stageProgressDeadline = 60 * time.Second

// stageReportSlack bounds how long after the deadline the Stage may report a missed one: the reconcile the deadline
// requeued, and its status write.
const stageReportSlack = 15 * time.Second

// TestNodeStageMovesWithoutAnOutage moves a Stage, on the real node, through the vectors of a landscape of two
// charts (web, worker) and a Kustomize bundle (api) whose Deployments serve HTTP, while a prober asks every
// artifact's Services every 200 ms from the node's network (through kube-proxy, as a client pod would): an artifact
// answers when one Service of any of its releases does. Not one probe may fail across the moves:
//   - to v2, whose worker crashes: the Stage reports the failed move (ProgressDeadlineExceeded, or UpgradeFailed
//     when the candidate stalls first) within spec.progressDeadline, and v1 runs on, its pods not restarted;
//   - to v3, whose worker is fixed at a new version and whose api is new: promoted; v1's worker and api and v2's
//     worker are uninstalled, and web, unchanged since v1, is never reinstalled: the same ArtifactDeployment, its
//     HelmRelease's generation, Helm's one revision, its Deployment and its pods as they were;
//   - back to v1: the same guarantees, web still untouched.
func TestNodeStageMovesWithoutAnOutage(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dialer, err := realCluster.NetnsDialer()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dialer.Close()
	reg := newRegistry(t)
	// Helm and Kustomize wait for the workloads' readiness; a crashing one fails after 30 s, not Flux's 5 min.
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})

	const vector = "acme.org/vectors/landscape"
	web := workloadArtifact{name: "web", version: "1.0.0"}
	api := workloadArtifact{name: "api", version: "1.0.0", bundle: true}
	v1 := publishWorkloads(t, reg, vector, "1.0.0", web, api, workloadArtifact{name: "worker", version: "1.0.0"})
	v2 := publishWorkloads(t, reg, vector, "2.0.0", web, api, workloadArtifact{name: "worker", version: "1.0.1", args: []string{"-crash"}})
	v3 := publishWorkloads(t, reg, vector, "3.0.0", web, workloadArtifact{name: "api", version: "1.1.0", bundle: true},
		workloadArtifact{name: "worker", version: "1.0.2"})
	refs := map[string]string{}
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0"} {
		refs[v] = reg.Ref("", vector, v)
	}
	releasesOf := map[string]string{} // ArtifactDeployment → artifact
	for _, cv := range slices.Concat(v1, v2, v3) {
		releasesOf[adName(t, cv, nil)] = cv.Name
	}
	webAD := adName(t, v1[0], nil)

	ns := newNamespace(t, "stage")
	began := time.Now()
	st := createStage(t, &konfidencev1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"},
		Spec:       konfidencev1.StageSpec{Vector: refs["1.0.0"], ProgressDeadline: &metav1.Duration{Duration: stageProgressDeadline}},
	})
	// Registered after the namespace's deletion, so it runs before it.
	t.Cleanup(func() {
		if t.Failed() {
			logStage(t, st)
		}
	})
	vdName := func(version string) string {
		name, err := stage.VectorDeploymentName(st.Name, st.UID, refs[version])
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	waitStage(t, 4*time.Minute, st, promotedTo(refs["1.0.0"]))
	t.Logf("v1 deployed: promoted %s after the Stage's creation", time.Since(began).Round(100*time.Millisecond))
	waitLandscape(t, ns, v1)
	v1VD := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: vdName("1.0.0")}, v1VD); err != nil {
		t.Fatal(err)
	}

	p := startProber(t, dialer, ns, releasesOf)
	defer p.stop()
	// kube-proxy programs a new Service's rules a moment after it is created: the probes count from the first
	// round in which every artifact answered.
	p.waitUp(t, time.Minute)
	v1Pods := podFingerprints(t, ns, nil)

	// v2: its worker crashes. The move fails and v1 keeps running.
	began = time.Now()
	setStageVector(t, st, refs["2.0.0"])
	waitStage(t, stageProgressDeadline+stageReportSlack+30*time.Second, st, moveFailed)
	failedAfter := time.Since(began)
	t.Logf("v2 (crashing worker): the move failed %s after spec.vector changed (spec.progressDeadline %s): %s: %s",
		failedAfter.Round(100*time.Millisecond), stageProgressDeadline, conditions.GetReason(st, konfidencev1.ReadyCondition),
		conditions.GetMessage(st, konfidencev1.ReadyCondition))
	p.assertNoFailure(t, "the failed move to v2")
	assertPodsUnchanged(t, "v1's pods after the failed move to v2", v1Pods, podFingerprints(t, ns, nil))
	if failedAfter > stageProgressDeadline+stageReportSlack {
		t.Errorf("the failed move was reported %s after spec.vector changed, later than spec.progressDeadline %s (+%s)",
			failedAfter.Round(time.Second), stageProgressDeadline, stageReportSlack)
	}
	if st.Status.ActiveVectorDeployment != v1VD.Name || st.Status.CandidateVectorDeployment != vdName("2.0.0") {
		t.Errorf("after the failed move: active %q, candidate %q, want v1's %s and v2's %s", st.Status.ActiveVectorDeployment,
			st.Status.CandidateVectorDeployment, v1VD.Name, vdName("2.0.0"))
	}
	assertUnwritten(t, v1VD)

	// v3: worker fixed at a new version, api new, web unchanged since v1.
	webBefore := webState(t, ns, webAD)
	writes := countWrites(t, ns, webAD)
	began = time.Now()
	setStageVector(t, st, refs["3.0.0"])
	waitStage(t, 3*time.Minute, st, promotedTo(refs["3.0.0"]))
	t.Logf("v3: promoted %s after spec.vector changed", time.Since(began).Round(100*time.Millisecond))
	waitLandscape(t, ns, v3)
	t.Logf("v3: v1's and v2's changed releases uninstalled %s after spec.vector changed", time.Since(began).Round(100*time.Millisecond))
	p.assertNoFailure(t, "the move to v3")
	assertWebUntouched(t, "the move to v3", webBefore, webState(t, ns, webAD), writes)

	// Back to v1: spec.vector set back, a move like any other.
	writes = countWrites(t, ns, webAD)
	began = time.Now()
	setStageVector(t, st, refs["1.0.0"])
	waitStage(t, 3*time.Minute, st, promotedTo(refs["1.0.0"]))
	t.Logf("rollback to v1: promoted %s after spec.vector changed", time.Since(began).Round(100*time.Millisecond))
	waitLandscape(t, ns, v1)
	t.Logf("rollback to v1: v3's changed releases uninstalled %s after spec.vector changed", time.Since(began).Round(100*time.Millisecond))
	p.assertNoFailure(t, "the rollback to v1")
	assertWebUntouched(t, "the rollback to v1", webBefore, webState(t, ns, webAD), writes)
	t.Logf("probes over the three moves: %s", p.total())

	// The history tells the moves, newest first.
	var got []string
	for _, e := range st.Status.History {
		got = append(got, fmt.Sprintf("%s %s ended=%t", e.VectorDeployment, e.Outcome, e.Ended != nil))
	}
	want := []string{
		vdName("1.0.0") + " Promoted ended=false", vdName("3.0.0") + " Promoted ended=true",
		vdName("2.0.0") + " Failed ended=true", vdName("1.0.0") + " Promoted ended=true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Stage history %v, want %v", got, want)
	}
}

// logStage logs the Stage's status, its VectorDeployments' Ready conditions and the pods of its namespace, for a
// failure.
func logStage(t *testing.T, st *konfidencev1.Stage) {
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(st), st); err != nil {
		t.Logf("Stage %s: %v", st.Name, err)
		return
	}
	t.Logf("Stage %s: active %q, candidate %q, conditions %+v, history %+v", st.Name, st.Status.ActiveVectorDeployment,
		st.Status.CandidateVectorDeployment, st.Status.Conditions, st.Status.History)
	vds := &konfidencev1.VectorDeploymentList{}
	if err := env.Client.List(ctx, vds, client.InNamespace(st.Namespace)); err != nil {
		t.Log(err)
	}
	for _, vd := range vds.Items {
		t.Logf("VectorDeployment %s (deleted %v): %+v", vd.Name, vd.DeletionTimestamp, conditions.Get(&vd, konfidencev1.ReadyCondition))
	}
	t.Logf("pods: %s", realCluster.PodStates(ctx, st.Namespace, nil))
}

// waitLandscape waits until the namespace runs exactly the artifacts of a vector: their ArtifactDeployments and
// no other, the Helm releases of its charts and no other, one Deployment each and no pod of another, every pod
// Ready. Then what the moves before removed is gone: VectorDeployments torn down, releases uninstalled.
func waitLandscape(t *testing.T, namespace string, artifacts []ocmtest.ComponentVersion) {
	t.Helper()
	ctx := context.Background()
	var want, wantReleases []string
	for _, cv := range artifacts {
		name := adName(t, cv, nil)
		want = append(want, name)
		if cv.Resources[1].Type == "helmChart" {
			wantReleases = append(wantReleases, name)
		}
	}
	slices.Sort(want)
	slices.Sort(wantReleases)
	testenv.Eventually(t, 3*time.Minute, func() error {
		if got := artifactDeploymentNames(t, namespace); !slices.Equal(got, want) {
			return fmt.Errorf("ArtifactDeployments %v, want %v", got, want)
		}
		if got := slices.Sorted(maps.Keys(releases(t, namespace))); !slices.Equal(got, wantReleases) {
			return fmt.Errorf("Helm releases %v, want %v", got, wantReleases)
		}
		deployments := &appsv1.DeploymentList{}
		if err := env.Client.List(ctx, deployments, client.InNamespace(namespace)); err != nil {
			return err
		}
		var got []string
		for _, d := range deployments.Items {
			got = append(got, d.Labels[konfidencev1.ArtifactDeploymentLabel])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("Deployments of ArtifactDeployments %v, want %v", got, want)
		}
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(namespace)); err != nil {
			return err
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}) {
				ready++
			}
		}
		if len(pods.Items) != len(want) || ready != len(want) {
			return fmt.Errorf("%d pods, %d Ready, want %d: %s", len(pods.Items), ready, len(want), realCluster.PodStates(ctx, namespace, nil))
		}
		return nil
	})
}

// podFingerprints are the namespace's pods matching labels (all when nil), by name: UID, start time and each
// container's restarts and start. A pod restarted, replaced or started again changes it.
func podFingerprints(t *testing.T, namespace string, labels map[string]string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	fingerprints := map[string]string{}
	for _, p := range pods.Items {
		var b strings.Builder
		fmt.Fprintf(&b, "uid %s started %v", p.UID, p.Status.StartTime)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s restarts=%d", c.Name, c.RestartCount)
			if c.State.Running != nil {
				fmt.Fprintf(&b, " running since %v", c.State.Running.StartedAt)
			}
		}
		fingerprints[p.Name] = b.String()
	}
	return fingerprints
}

// assertPodsUnchanged checks that every pod before is there after as it was; pods after that were not there before
// are not looked at.
func assertPodsUnchanged(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if len(before) == 0 {
		t.Errorf("%s: no pods to compare", what)
	}
	kept := maps.Clone(after)
	maps.DeleteFunc(kept, func(name, _ string) bool { _, ok := before[name]; return !ok })
	if !maps.Equal(before, kept) {
		t.Errorf("%s changed (pod: before → after):%s", what, diff(before, kept))
	}
}

// artifactState is what a reinstall or an upgrade of a chart's release would change: its ArtifactDeployment's
// UID, its HelmRelease's UID and generation, the revisions Helm stored, its Deployment's UID and generation, and
// its pods.
type artifactState struct {
	adUID, hrUID, deploymentUID string
	hrGeneration, deploymentGen int64
	revisions                   []string
	pods                        map[string]string
}

func webState(t *testing.T, namespace, ad string) artifactState {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: namespace, Name: ad}
	a, hr, d := &konfidencev1.ArtifactDeployment{}, &helmv2.HelmRelease{}, &appsv1.Deployment{}
	for _, obj := range []client.Object{a, hr, d} {
		if err := env.Client.Get(ctx, key, obj); err != nil {
			t.Fatal(err)
		}
	}
	revisions := releases(t, namespace)[ad]
	slices.Sort(revisions)
	return artifactState{
		adUID: string(a.UID), hrUID: string(hr.UID), deploymentUID: string(d.UID),
		hrGeneration: hr.Generation, deploymentGen: d.Generation, revisions: revisions,
		pods: podFingerprints(t, namespace, d.Spec.Selector.MatchLabels),
	}
}

// assertWebUntouched checks that the unchanged artifact was neither reinstalled nor upgraded during a move, and
// logs the writes its objects had and what they changed: its ArtifactDeployment's owners change as
// VectorDeployments adopt and let go of it, while its workload — Deployment, Service and Helm's storage — is not
// written at all.
func assertWebUntouched(t *testing.T, move string, before, after artifactState, w *writeCounter) {
	t.Helper()
	writes, changed := w.stop(t)
	if after.adUID != before.adUID || after.hrUID != before.hrUID || after.deploymentUID != before.deploymentUID {
		t.Errorf("%s: web's objects were created anew: ArtifactDeployment %s → %s, HelmRelease %s → %s, Deployment %s → %s", move,
			before.adUID, after.adUID, before.hrUID, after.hrUID, before.deploymentUID, after.deploymentUID)
	}
	if after.hrGeneration != before.hrGeneration || after.deploymentGen != before.deploymentGen {
		t.Errorf("%s: web's spec was written: HelmRelease generation %d → %d, Deployment generation %d → %d", move,
			before.hrGeneration, after.hrGeneration, before.deploymentGen, after.deploymentGen)
	}
	if !slices.Equal(after.revisions, before.revisions) || len(before.revisions) != 1 {
		t.Errorf("%s: web's Helm revisions %v → %v, want its one first revision kept", move, before.revisions, after.revisions)
	}
	assertPodsUnchanged(t, move+": web's pods", before.pods, after.pods)
	for _, id := range slices.Sorted(maps.Keys(writes)) {
		kind, _, _ := strings.Cut(id, "/")
		if kind == "Deployment" || kind == "Service" || kind == "Secret" {
			t.Errorf("%s: web's workload was written: %s: %d writes: %v", move, id, writes[id], changed[id])
		}
	}
	var log strings.Builder
	for _, id := range slices.Sorted(maps.Keys(writes)) {
		fmt.Fprintf(&log, "\n  %s: %d writes", id, writes[id])
		for i, c := range changed[id] {
			fmt.Fprintf(&log, "\n    %d. %s", i+1, c)
		}
	}
	t.Logf("%s: writes to web's objects (the API server's watch events; none to the others):%s", move, log.String())
}

// writeCounter counts, from the API server's watch events, the writes to a set of objects from the moment it
// was started: each change, creation or deletion of one of them is one write. It keeps what each change changed.
type writeCounter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	writes map[string]int
	// last is each object as last seen, changed what its writes changed (field paths, old → new).
	last    map[string]map[string]string
	changed map[string][]string
	// closed lists the watches the API server ended early: their counts may be short.
	closed []string
}

// countWrites watches the objects of the artifact deployed as ArtifactDeployment ad: the ArtifactDeployment, its
// HelmRelease, Helm's storage Secrets of its release, its Deployment, Service and pods. Each watch starts at the
// resourceVersion of a list, so that no write between the list and the watch is missed.
func countWrites(t *testing.T, namespace, ad string) *writeCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writeCounter{cancel: cancel, writes: map[string]int{}, last: map[string]map[string]string{}, changed: map[string][]string{}}
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	byName := client.MatchingFields{"metadata.name": ad}
	for _, target := range []struct {
		kind string
		list client.ObjectList
		opt  client.ListOption
	}{
		{"ArtifactDeployment", &konfidencev1.ArtifactDeploymentList{}, byName},
		{"HelmRelease", &helmv2.HelmReleaseList{}, byName},
		{"Deployment", &appsv1.DeploymentList{}, byName},
		{"Service", &corev1.ServiceList{}, byName},
		{"Secret", &corev1.SecretList{}, client.MatchingLabels{"owner": "helm", "name": ad}},
		{"Pod", &corev1.PodList{}, client.MatchingLabels{"app.kubernetes.io/instance": ad}},
	} {
		if err := wc.List(ctx, target.list, client.InNamespace(namespace), target.opt); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(target.list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			obj := o.(client.Object)
			w.last[target.kind+"/"+obj.GetName()] = flatten(t, obj)
		}
		rv := target.list.(metav1.ListInterface).GetResourceVersion()
		watcher, err := wc.Watch(ctx, target.list, client.InNamespace(namespace), target.opt, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			t.Fatal(err)
		}
		w.wg.Add(1)
		go w.count(ctx, t, target.kind, watcher)
	}
	return w
}

func (w *writeCounter) count(ctx context.Context, t *testing.T, kind string, watcher watch.Interface) {
	defer w.wg.Done()
	defer watcher.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				w.mu.Lock()
				w.closed = append(w.closed, kind)
				w.mu.Unlock()
				return
			}
			obj, isObject := ev.Object.(client.Object)
			if ev.Type == watch.Bookmark || ev.Type == watch.Error || !isObject {
				continue
			}
			id := kind + "/" + obj.GetName()
			now := flatten(t, obj)
			w.mu.Lock()
			w.writes[id]++
			change := string(ev.Type)
			if ev.Type == watch.Modified {
				change = fieldChanges(w.last[id], now)
			}
			w.changed[id] = append(w.changed[id], change)
			w.last[id] = now
			w.mu.Unlock()
		}
	}
}

// stop ends the watches and returns the writes by object, and what each changed; a watch the API server ended
// early fails the test.
func (w *writeCounter) stop(t *testing.T) (writes map[string]int, changed map[string][]string) {
	t.Helper()
	w.cancel()
	w.wg.Wait()
	if len(w.closed) > 0 {
		t.Errorf("the API server ended the watches of %v early: their writes were not all counted", w.closed)
	}
	return w.writes, w.changed
}

// flatten maps each field path of the object's JSON to its value, but the resourceVersion and managedFields that
// every write changes, and the type.
func flatten(t *testing.T, obj client.Object) map[string]string {
	data, err := json.Marshal(obj)
	if err != nil {
		t.Error(err)
		return nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Error(err)
		return nil
	}
	fields := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if refs, ok := v.([]any); ok && path == ".metadata.ownerReferences" {
			// Owners by name, so that adopting and letting go read as one change each.
			var names []string
			for _, ref := range refs {
				if ref, ok := ref.(map[string]any); ok {
					names = append(names, fmt.Sprint(ref["name"]))
				}
			}
			fields[path] = fmt.Sprint(names)
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		default:
			b, _ := json.Marshal(v)
			fields[path] = string(b)
		}
	}
	walk("", v)
	for path := range fields {
		// The list's items carry their kind, the watch's objects do not: neither is written.
		if path == ".metadata.resourceVersion" || strings.HasPrefix(path, ".metadata.managedFields") || path == ".apiVersion" || path == ".kind" {
			delete(fields, path)
		}
	}
	return fields
}

// fieldChanges lists the fields that differ, old → new.
func fieldChanges(before, after map[string]string) string {
	var changes []string
	for path, v := range after {
		if before[path] != v {
			changes = append(changes, fmt.Sprintf("%s: %s → %s", path, cmp.Or(before[path], "none"), v))
		}
	}
	for path, v := range before {
		if _, ok := after[path]; !ok {
			changes = append(changes, fmt.Sprintf("%s: %s → none", path, v))
		}
	}
	slices.Sort(changes)
	return strings.Join(changes, ", ")
}

// probeInterval is how often the prober samples the landscape; probeTimeout bounds one request. A request to a
// Service whose endpoints are gone fails at once (kube-proxy rejects it); one to a pod that went away before
// kube-proxy noticed hangs until the timeout, and fails too. The timeout leaves room for a running pod's answer on
// a loaded machine: with 2 s, one probe in 1,362 timed out, and no other failed, while the machine compiled the
// other half of make test beside it.
const (
	probeInterval = 200 * time.Millisecond
	probeTimeout  = 5 * time.Second
)

// prober samples a landscape every probeInterval: in each round it lists the namespace's Services, and asks each
// Service of each artifact for its greeting, from the cluster's network through kube-proxy. An artifact's probe
// succeeds when one Service of any of its releases answers: the landscape is up while every artifact is.
type prober struct {
	namespace string
	// releasesOf maps each ArtifactDeployment the landscape may run to its artifact; artifacts lists the artifacts.
	releasesOf map[string]string
	artifacts  []string
	api        client.Client
	http       *http.Client
	cancel     context.CancelFunc
	done       chan struct{}

	mu sync.Mutex
	// since counts the rounds since the last take, all those since the counts started.
	since, all probeCounts
	// lastUp: every artifact answered in the last round.
	lastUp bool
}

// probeCounts are the prober's rounds and probes, by outcome.
type probeCounts struct {
	rounds, probes, failed int
	// listErrors are rounds in which the Services could not be listed, which probe nothing.
	listErrors int
	// failures describes the first failed probes.
	failures []string
}

func (c probeCounts) String() string {
	return fmt.Sprintf("%d rounds, %d probes of artifacts, %d failed, %d rounds without the Services listed", c.rounds, c.probes, c.failed, c.listErrors)
}

func (c *probeCounts) add(round probeCounts) {
	c.rounds += round.rounds
	c.probes += round.probes
	c.failed += round.failed
	c.listErrors += round.listErrors
	if room := 20 - len(c.failures); room > 0 {
		c.failures = append(c.failures, round.failures[:min(room, len(round.failures))]...)
	}
}

// startProber starts sampling the namespace's landscape until stop.
func startProber(t *testing.T, dialer *node.NetnsDialer, namespace string, releasesOf map[string]string) *prober {
	t.Helper()
	// A client of its own: client-go's default limit (5 requests a second) would hold the rounds back behind the
	// test's own polling.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 50, 100
	api, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{
		namespace: namespace, releasesOf: releasesOf, artifacts: slices.Compact(slices.Sorted(maps.Values(releasesOf))), api: api, cancel: cancel, done: make(chan struct{}),
		// A new connection for every request, as a new client has: each goes through kube-proxy's rules as they are.
		http: &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}},
	}
	go p.run(ctx)
	return p
}

func (p *prober) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	for {
		round := p.round(ctx)
		if ctx.Err() != nil {
			return // a round cut short by stop says nothing of the landscape
		}
		p.mu.Lock()
		p.since.add(round)
		p.all.add(round)
		p.lastUp = round.listErrors == 0 && round.failed == 0
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round probes every artifact once: all its Services at once, until one answers. The requests still under way
// then are cancelled, so that a Service kube-proxy has no rules for yet (whose requests hang until the timeout)
// does not hold the round back when another release of its artifact answered.
func (p *prober) round(ctx context.Context) probeCounts {
	round := probeCounts{rounds: 1}
	services := &corev1.ServiceList{}
	if err := p.api.List(ctx, services, client.InNamespace(p.namespace)); err != nil {
		round.listErrors = 1
		round.failures = []string{fmt.Sprintf("%s listing the Services: %v", time.Now().Format(time.StampMilli), err)}
		return round
	}
	type answer struct {
		artifact, service string
		err               error
	}
	asking, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer)
	pending, requests := map[string]int{}, 0
	for _, svc := range services.Items {
		artifact, ok := p.releasesOf[svc.Labels[konfidencev1.ArtifactDeploymentLabel]]
		if !ok || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		pending[artifact]++
		requests++
		go func() {
			answers <- answer{artifact, fmt.Sprintf("%s (%s)", svc.Name, svc.Spec.ClusterIP), p.get(asking, "http://"+svc.Spec.ClusterIP+"/")}
		}()
	}
	up, why := map[string]bool{}, map[string][]string{}
	undecided := len(pending)
	for range requests {
		a := <-answers
		if up[a.artifact] {
			continue // decided; cancelled or answered late
		}
		pending[a.artifact]--
		if a.err == nil {
			up[a.artifact] = true
		} else {
			why[a.artifact] = append(why[a.artifact], fmt.Sprintf("%s: %v", a.service, a.err))
		}
		if up[a.artifact] || pending[a.artifact] == 0 {
			if undecided--; undecided == 0 {
				cancel()
			}
		}
	}
	now := time.Now().Format(time.StampMilli)
	for _, artifact := range p.artifacts {
		round.probes++
		if up[artifact] {
			continue
		}
		round.failed++
		reason := "no Service"
		if len(why[artifact]) > 0 {
			slices.Sort(why[artifact])
			reason = strings.Join(why[artifact], "; ")
		}
		round.failures = append(round.failures, fmt.Sprintf("%s %s: %s", now, artifact, reason))
	}
	return round
}

// get asks url for the workload's greeting.
func (p *prober) get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hello from") {
		return fmt.Errorf("%s: %q", resp.Status, body)
	}
	return nil
}

// waitUp waits for a round in which every artifact answered, and starts the counts from there.
func (p *prober) waitUp(t *testing.T, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.lastUp {
			return fmt.Errorf("the landscape has not answered whole yet: %v", p.since.failures)
		}
		p.since, p.all = probeCounts{}, probeCounts{}
		return nil
	})
}

// take returns the counts since the last take and starts them again.
func (p *prober) take() probeCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.since
	p.since = probeCounts{}
	return c
}

func (p *prober) total() probeCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all
}

// assertNoFailure checks that no probe failed since the last take, and that the prober sampled all along.
func (p *prober) assertNoFailure(t *testing.T, move string) {
	t.Helper()
	c := p.take()
	t.Logf("probes during %s: %s", move, c)
	if c.failed > 0 || c.listErrors > 0 {
		t.Errorf("during %s the landscape did not answer whole: %s; first failures:\n%s", move, c, strings.Join(c.failures, "\n"))
	}
	if c.rounds == 0 {
		t.Errorf("the prober sampled nothing during %s", move)
	}
}

// stop ends the sampling and waits for the round under way.
func (p *prober) stop() {
	p.cancel()
	<-p.done
}
