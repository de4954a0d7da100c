package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
)

func entryOf(vector, vd, outcome string, ended bool) konfidencev1.StageHistoryEntry {
	e := konfidencev1.StageHistoryEntry{Vector: vector, VectorDeployment: vd, Outcome: outcome}
	if ended {
		e.Ended = &metav1.Time{}
	}
	return e
}

// TestRollbackTarget: a rollback moves to the newest vector that ran before the active one: Promoted, and not the
// active vector itself; the active vector is the last applied one when no move is under way, else its entry's.
func TestRollbackTarget(t *testing.T) {
	const v0, v1, v2, v3, v4 = "r//shop:0.9.0", "r//shop:1.0.0", "r//shop:2.0.0", "r//shop:3.0.0", "r//shop:4.0.0"
	promoted := func(v string) konfidencev1.StageHistoryEntry {
		return entryOf(v, "vd-"+v, konfidencev1.MovePromoted, false)
	}
	replaced := func(v string) konfidencev1.StageHistoryEntry {
		return entryOf(v, "vd-"+v, konfidencev1.MovePromoted, true)
	}
	failed := func(v string) konfidencev1.StageHistoryEntry {
		return entryOf(v, "vd-"+v, konfidencev1.MoveFailed, true)
	}
	superseded := func(v string) konfidencev1.StageHistoryEntry {
		return entryOf(v, "vd-"+v, konfidencev1.MoveSuperseded, true)
	}
	progressing := func(v string) konfidencev1.StageHistoryEntry {
		return entryOf(v, "vd-"+v, konfidencev1.MoveProgressing, false)
	}
	steady := func(v string, history ...konfidencev1.StageHistoryEntry) konfidencev1.StageStatus {
		return konfidencev1.StageStatus{ActiveVectorDeployment: "vd-" + v, LastAppliedVector: v, History: history}
	}
	moving := func(active, to string, history ...konfidencev1.StageHistoryEntry) konfidencev1.StageStatus {
		return konfidencev1.StageStatus{ActiveVectorDeployment: "vd-" + active, CandidateVectorDeployment: "vd-" + to, LastAppliedVector: to, History: history}
	}
	for _, c := range []struct {
		name        string
		status      konfidencev1.StageStatus
		active      string
		activeKnown bool
		target      string // empty: none
	}{
		{"steady: the vector before the active one", steady(v2, promoted(v2), replaced(v1), replaced(v0)), v2, true, v1},
		{"failed and superseded moves never ran", steady(v2, promoted(v2), failed(v4), superseded(v3), replaced(v1)), v2, true, v1},
		{"a failed move: the vector before the active one, not the active one", moving(v2, v3, failed(v3), promoted(v2), replaced(v1)), v2, true, v1},
		{"a move under way: the active vector from its entry", moving(v2, v3, progressing(v3), promoted(v2), replaced(v1)), v2, true, v1},
		{"an earlier run of the active vector is no step back", steady(v2, promoted(v2), replaced(v1), replaced(v2), replaced(v0)), v2, true, v1},
		{"back on a vector run before: the one run in between", steady(v1, promoted(v1), replaced(v2), replaced(v1)), v1, true, v2},
		{"nothing ran before the active vector", steady(v1, promoted(v1)), v1, true, ""},
		{"nothing ran before the active vector but failures", moving(v1, v2, failed(v2), promoted(v1)), v1, true, ""},
		{"no active VectorDeployment: the newest vector that ran",
			konfidencev1.StageStatus{CandidateVectorDeployment: "vd-" + v3, LastAppliedVector: v3, History: []konfidencev1.StageHistoryEntry{failed(v3), replaced(v2)}}, "", true, v2},
		{"the active entry cut from the history: not known", moving(v1, v4, progressing(v4), failed(v3)), "", false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			active, known := activeVector(c.status)
			if active != c.active || known != c.activeKnown {
				t.Errorf("activeVector = %q, %t; want %q, %t", active, known, c.active, c.activeKnown)
			}
			if !known {
				return
			}
			target, ok := rollbackTarget(c.status.History, active)
			if target != c.target || ok != (c.target != "") {
				t.Errorf("rollbackTarget = %q, %t; want %q", target, ok, c.target)
			}
		})
	}
}

// TestHistoryRoles: the active mark goes to the newest Promoted entry of the active VectorDeployment and the
// candidate mark to the newest entry of the candidate; older entries of the same name (the Stage ran the vector
// before) are neither.
func TestHistoryRoles(t *testing.T) {
	status := konfidencev1.StageStatus{
		ActiveVectorDeployment: "a", CandidateVectorDeployment: "c",
		History: []konfidencev1.StageHistoryEntry{
			entryOf("r//shop:3", "c", konfidencev1.MoveFailed, true),
			entryOf("r//shop:2", "a", konfidencev1.MovePromoted, false),
			entryOf("r//shop:3", "c", konfidencev1.MoveFailed, true),
			entryOf("r//shop:2", "a", konfidencev1.MovePromoted, true),
			entryOf("r//shop:1", "b", konfidencev1.MovePromoted, true),
		},
	}
	var roles []string
	for _, e := range historyOf(status) {
		roles = append(roles, e.VectorDeployment+":"+orDash(e.Role))
	}
	if got, want := strings.Join(roles, " "), "c:candidate a:active c:- a:- b:-"; got != want {
		t.Errorf("roles %s, want %s", got, want)
	}
}

// TestTreeRoot: a tree starts at NAME, a VectorDeployment as before, or at KIND/NAME or KIND NAME, a
// VectorDeployment or a Stage.
func TestTreeRoot(t *testing.T) {
	for _, c := range []struct {
		args       []string
		kind, name string // kind empty: a usage error
	}{
		{nil, "VectorDeployment", ""},
		{[]string{"shop"}, "VectorDeployment", "shop"},
		{[]string{"vd/shop"}, "VectorDeployment", "shop"},
		{[]string{"st/shop"}, "Stage", "shop"},
		{[]string{"Stage/shop"}, "Stage", "shop"},
		{[]string{"stages", "shop"}, "Stage", "shop"},
		{[]string{"vd", "shop"}, "VectorDeployment", "shop"},
		{[]string{"st"}, "VectorDeployment", "st"},
		{[]string{"ad/shop"}, "", ""},
		{[]string{"pod/shop"}, "", ""},
		{[]string{"st/"}, "", ""},
		{[]string{"a", "b"}, "", ""},
		{[]string{"st", "a", "b"}, "", ""},
	} {
		k, name, err := treeRoot(c.args)
		switch {
		case c.kind == "" && (err == nil || exitCode(err) != exitUsage):
			t.Errorf("%q: %s %q, err %v; want a usage error", c.args, k.kind, name, err)
		case c.kind != "" && (err != nil || k.kind != c.kind || name != c.name):
			t.Errorf("%q: %s %q, err %v; want %s %q", c.args, k.kind, name, err, c.kind, c.name)
		}
	}
}

// TestStageCommands runs history, rollback, diff, tree, reconcile, suspend, resume and wait on Stages against a
// real API server, the test playing the Stage and VectorDeployment reconcilers: it writes the Stages, their
// VectorDeployments and ArtifactDeployments as the reconcilers would (the ArtifactDeployments built by the
// reconciler's own code), and their status through the status subresource.
func TestStageCommands(t *testing.T) {
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	ns := newTestNamespace(t, env.Client, "stage")
	kubeconfig := kubeconfigWithContexts(t, env.Kubeconfig, ns)
	cli, must := envtestCLI(t, kubeconfig)

	reg := ocmtest.NewRegistry(t)
	const helm = "cloud.konfidence.flux.helm"
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", helm, true)
	database := ocmtest.Artifact("acme.org/artifacts/database", "16.4.0", helm, false)
	database17 := ocmtest.Artifact("acme.org/artifacts/database", "17.0.0", helm, false)
	cache := ocmtest.Artifact("acme.org/artifacts/cache", "7.0.0", helm, true)
	reg.Push(t, "", frontend, database, database17, cache,
		ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, database),
		ocmtest.Vector("acme.org/vectors/shop", "2.0.0", frontend, database, cache),
		ocmtest.Vector("acme.org/vectors/shop", "3.0.0", frontend, database17, cache))
	v1, v2, v3 := reg.Ref("", "acme.org/vectors/shop", "1.0.0"), reg.Ref("", "acme.org/vectors/shop", "2.0.0"), reg.Ref("", "acme.org/vectors/shop", "3.0.0")
	s := &stageScene{t: t, c: env.Client, ns: ns}

	// shop ran 1.0.0, then 2.0.0 after a move to 1.5.0 was superseded; its move to 3.0.0 failed, and 2.0.0 runs.
	shop := s.createStage("shop", konfidencev1.StageSpec{Vector: v3})
	vd2 := s.vectorDeployment(shop, v2, ready("3/3 artifacts ready"))
	vd3 := s.vectorDeployment(shop, v3, stalled(konfidencev1.ArtifactLimitsExceededReason, "1/3 artifacts ready; database-17-0-0: InstallFailed"))
	ads := s.artifactDeployments(vd2, v2)
	ads3 := s.artifactDeployments(vd3, v3) // the frontend's and the cache's adopted
	vd1, vd15 := s.name(shop, v1), s.name(shop, "http://other.example//acme.org/vectors/shop:1.5.0")
	// A history message may hold a line break; the table keeps it on its row.
	failure := "VectorDeployment " + vd3.Name + " stalled: ArtifactLimitsExceeded: 1/3 artifacts ready;\ndatabase-17-0-0: InstallFailed; VectorDeployment " + vd2.Name + " keeps running"
	failureLine := strings.ReplaceAll(failure, "\n", " ")
	at := func(hour int) metav1.Time { return metav1.Date(2026, 3, 4, hour, 5, 6, 0, time.UTC) }
	ended := func(hour int) *metav1.Time { tm := at(hour); return &tm }
	digest := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	s.setStatus(shop, func(st *konfidencev1.Stage) {
		st.Status.ActiveVectorDeployment, st.Status.CandidateVectorDeployment, st.Status.LastAppliedVector = vd2.Name, vd3.Name, v3
		st.Status.History = []konfidencev1.StageHistoryEntry{
			{Vector: v3, Digest: digest('3'), VectorDeployment: vd3.Name, Started: at(12), Ended: ended(13), Outcome: konfidencev1.MoveFailed, Message: failure},
			{Vector: v2, Digest: digest('2'), VectorDeployment: vd2.Name, Started: at(10), Outcome: konfidencev1.MovePromoted},
			{Vector: "http://other.example//acme.org/vectors/shop:1.5.0", VectorDeployment: vd15, Started: at(9), Ended: ended(10), Outcome: konfidencev1.MoveSuperseded},
			{Vector: v1, Digest: digest('1'), VectorDeployment: vd1, Started: at(8), Ended: ended(11), Outcome: konfidencev1.MovePromoted},
		}
		markStalled(st, konfidencev1.UpgradeFailedReason, "moving to vector "+v3+" failed: "+failureLine)
	})

	t.Run("history prints the moves newest first, the active and candidate marked", func(t *testing.T) {
		want := fmt.Sprintf(`VECTOR  DIGEST  VECTORDEPLOYMENT  STARTED  ENDED  OUTCOME  MESSAGE
%[1]s  sha256:333333333333  %[4]s (candidate)  2026-03-04T12:05:06Z  2026-03-04T13:05:06Z  Failed  %[8]s
%[2]s  sha256:222222222222  %[5]s (active)  2026-03-04T10:05:06Z  -  Promoted  -
http://other.example//acme.org/vectors/shop:1.5.0  -  %[6]s  2026-03-04T09:05:06Z  2026-03-04T10:05:06Z  Superseded  -
%[3]s  sha256:111111111111  %[7]s  2026-03-04T08:05:06Z  2026-03-04T11:05:06Z  Promoted  -
`, v3, v2, v1, vd3.Name, vd2.Name, vd15, vd1, failureLine)
		if got := must("history", "stage", "shop"); squeeze(got) != want {
			t.Errorf("history (spaces squeezed):\n%s\nwant:\n%s", squeeze(got), want)
		}
		for _, format := range []string{"json", "yaml"} {
			var entries []historyEntry
			if err := yaml.Unmarshal([]byte(must("history", "st", "shop", "-o", format)), &entries); err != nil {
				t.Fatal(err)
			}
			if len(entries) != 4 || entries[0].Role != tree.RoleCandidate || entries[1].Role != tree.RoleActive || entries[2].Role != "" ||
				entries[0].Message != failure || entries[1].Digest != digest('2') || !entries[3].Ended.Equal(ended(11)) {
				t.Errorf("history -o %s: %+v", format, entries)
			}
		}
		if _, stderr, code := cli("history", "vd", vd2.Name); code != exitUsage || !strings.Contains(stderr, "only a Stage (st) has a history") {
			t.Errorf("history of a VectorDeployment: exit %d, %s", code, stderr)
		}
		if _, stderr, code := cli("history", "st", "nothere"); code != exitFailure || !strings.Contains(stderr, "Stage "+ns+"/nothere not found") {
			t.Errorf("history of a missing Stage: exit %d, %s", code, stderr)
		}
	})

	t.Run("tree starts at the Stage", func(t *testing.T) {
		want := fmt.Sprintf(`Stage/shop  Ready=False UpgradeFailed: moving to vector %[1]s failed: %[2]s
├── VectorDeployment/%[3]s (active)  Ready=True Succeeded
│   ├── ArtifactDeployment/%[5]s  Ready=True Succeeded
│   ├── ArtifactDeployment/%[6]s  Ready=True Succeeded
│   └── ArtifactDeployment/%[7]s  Ready=True Succeeded
└── VectorDeployment/%[4]s (candidate)  Ready=False ArtifactLimitsExceeded: 1/3 artifacts ready; database-17-0-0: InstallFailed
    ├── ArtifactDeployment/%[5]s  Ready=True Succeeded
    ├── ArtifactDeployment/%[8]s  Ready=True Succeeded
    └── ArtifactDeployment/%[7]s  Ready=True Succeeded
`, v3, failureLine, vd2.Name, vd3.Name, ads["acme.org/artifacts/cache"].Name, ads["acme.org/artifacts/database"].Name,
			ads["acme.org/artifacts/frontend"].Name, ads3["acme.org/artifacts/database"].Name)
		for _, args := range [][]string{{"tree", "st/shop"}, {"tree", "stage", "shop"}} {
			if got := must(args...); got != want {
				t.Errorf("%v:\n%s\nwant:\n%s", args, got, want)
			}
		}
		var root tree.Node
		if err := json.Unmarshal([]byte(must("tree", "st/shop", "-o", "json")), &root); err != nil {
			t.Fatal(err)
		}
		var printed strings.Builder
		if err := tree.Print(&printed, &root); err != nil || printed.String() != want {
			t.Errorf("tree st/shop -o json, printed (%v):\n%s", err, printed.String())
		}
		// A VectorDeployment's tree is as it was: no role, whether the Stage's or not.
		vdTree := must("tree", vd2.Name)
		if !strings.HasPrefix(vdTree, "VectorDeployment/"+vd2.Name+"  Ready=True Succeeded\n") || strings.Contains(vdTree, "(active)") {
			t.Errorf("tree %s:\n%s", vd2.Name, vdTree)
		}
		if got := must("tree", "vd/"+vd2.Name); got != vdTree {
			t.Errorf("tree vd/%s:\n%s\nwant:\n%s", vd2.Name, got, vdTree)
		}
		// The status names an active VectorDeployment that is gone, and one the Stage controls is on its way out.
		ghost := s.createStage("ghost", konfidencev1.StageSpec{Vector: v1})
		s.setStatus(ghost, func(st *konfidencev1.Stage) { st.Status.ActiveVectorDeployment = "gone" })
		leaving := &konfidencev1.VectorDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name(ghost, v2), Finalizers: []string{"test.konfidence.cloud/hold"}},
			Spec:       konfidencev1.VectorDeploymentSpec{Vector: v2},
		}
		if err := controllerutil.SetControllerReference(ghost, leaving, s.scheme()); err != nil {
			t.Fatal(err)
		}
		create(t, env.Client, leaving)
		if err := env.Client.Delete(context.Background(), leaving); err != nil {
			t.Fatal(err)
		}
		if got, want := must("tree", "st/ghost"), "Stage/ghost  Ready=Unknown\n"+
			"├── VectorDeployment/gone (active)  Ready=Unknown NotFound\n"+
			"└── VectorDeployment/"+leaving.Name+" (deleting)  Ready=Unknown\n"; got != want {
			t.Errorf("tree st/ghost:\n%s\nwant:\n%s", got, want)
		}
		if _, stderr, code := cli("tree", "ad/"+ads["acme.org/artifacts/cache"].Name); code != exitUsage || !strings.Contains(stderr, "a tree starts at a VectorDeployment (vd) or a Stage (st)") {
			t.Errorf("tree of an ArtifactDeployment: exit %d, %s", code, stderr)
		}
	})

	t.Run("diff plans the Stage's move from its active VectorDeployment", func(t *testing.T) {
		// Back to 1.0.0: the database of the same version is the Stage's instance, kept; the candidate's move to
		// 3.0.0 is superseded, and what only it and the active one own goes.
		p := planOf(t, must("diff", "st", "shop", "--vector", v1, "-o", "json"))
		want := map[string]string{
			actionKeep + " acme.org/artifacts/frontend 1.2.3":    ads["acme.org/artifacts/frontend"].Name,
			actionKeep + " acme.org/artifacts/database 16.4.0":   ads["acme.org/artifacts/database"].Name,
			actionDelete + " acme.org/artifacts/cache 7.0.0":     ads["acme.org/artifacts/cache"].Name,
			actionDelete + " acme.org/artifacts/database 17.0.0": ads3["acme.org/artifacts/database"].Name,
		}
		assertPlan(t, p, want)
		var full plan
		if err := json.Unmarshal([]byte(must("diff", "stage", "shop", "--vector", v1, "-o", "json")), &full); err != nil {
			t.Fatal(err)
		}
		if full.Stage != ns+"/shop" || full.VectorDeployment != ns+"/"+vd2.Name || full.NewVectorDeployment != ns+"/"+vd1 || full.Supersedes != ns+"/"+vd3.Name ||
			full.From != v2 || full.To != v1 {
			t.Errorf("plan: %+v", full)
		}
		text := must("diff", "st", "shop", "--vector", v1)
		if !strings.HasPrefix(text, "Stage "+ns+"/shop: "+v2+" -> "+v1+"\n"+
			"The Stage creates VectorDeployment "+ns+"/"+vd1+" and deletes VectorDeployment "+ns+"/"+vd2.Name+" once it is Ready.\n"+
			"VectorDeployment "+ns+"/"+vd3.Name+", the candidate of the move under way, is superseded: deleted too.\n") ||
			strings.Contains(text, "named for the new VectorDeployment's UID") {
			t.Errorf("diff st:\n%s", text)
		}

		// To the candidate's own vector: nothing superseded; what the candidate made is kept.
		p = planOf(t, must("diff", "st", "shop", "--vector", v3, "-o", "yaml"))
		assertPlan(t, p, map[string]string{
			actionKeep + " acme.org/artifacts/frontend 1.2.3":    ads["acme.org/artifacts/frontend"].Name,
			actionKeep + " acme.org/artifacts/cache 7.0.0":       ads["acme.org/artifacts/cache"].Name,
			actionKeep + " acme.org/artifacts/database 17.0.0":   ads3["acme.org/artifacts/database"].Name,
			actionDelete + " acme.org/artifacts/database 16.4.0": ads["acme.org/artifacts/database"].Name,
		})

		// To the vector it runs: the active VectorDeployment stays, with all it has; the candidate goes.
		p = planOf(t, must("diff", "st", "shop", "--vector", v2, "-o", "json"))
		assertPlan(t, p, map[string]string{
			actionKeep + " acme.org/artifacts/frontend 1.2.3":    ads["acme.org/artifacts/frontend"].Name,
			actionKeep + " acme.org/artifacts/database 16.4.0":   ads["acme.org/artifacts/database"].Name,
			actionKeep + " acme.org/artifacts/cache 7.0.0":       ads["acme.org/artifacts/cache"].Name,
			actionDelete + " acme.org/artifacts/database 17.0.0": ads3["acme.org/artifacts/database"].Name,
		})
		if text := must("diff", "st", "shop", "--vector", v2); !strings.Contains(text, "\nThe Stage runs this vector already, as VectorDeployment "+ns+"/"+vd2.Name+": it stays.\n") {
			t.Errorf("diff st to the vector it runs:\n%s", text)
		}

		// The same move planned for the VectorDeployment alone, as before: a new VectorDeployment is no Stage's, so
		// the database is a new instance, and the candidate still owns what it shares.
		p = planOf(t, must("diff", "vd", vd2.Name, "--vector", v1, "-o", "json"))
		if p[actionCreate+" acme.org/artifacts/database 16.4.0"] == "" || p[actionCreate+" acme.org/artifacts/database 16.4.0"] == ads["acme.org/artifacts/database"].Name ||
			p[actionDelete+" acme.org/artifacts/database 16.4.0"] != ads["acme.org/artifacts/database"].Name ||
			p[actionRelease+" acme.org/artifacts/cache 7.0.0"] != ads["acme.org/artifacts/cache"].Name || len(p) != 4 {
			t.Errorf("diff vd: %v", p)
		}

		if _, stderr, code := cli("diff", "ad", "x", "--vector", v1); code != exitUsage || !strings.Contains(stderr, "diff plans VectorDeployments (vd) and Stages (st)") {
			t.Errorf("diff ad: exit %d, %s", code, stderr)
		}
		fresh := s.createStage("fresh", konfidencev1.StageSpec{Vector: v1})
		if _, stderr, code := cli("diff", "st", fresh.Name, "--vector", v2); code != exitFailure || !strings.Contains(stderr, "runs no VectorDeployment yet") {
			t.Errorf("diff of a Stage that runs nothing: exit %d, %s", code, stderr)
		}
	})

	t.Run("rollback sets the vector that ran before the active one", func(t *testing.T) {
		out := must("rollback", "stage", "shop")
		if out != "Stage "+ns+"/shop: spec.vector set to "+v1+" (was "+v3+")\n" {
			t.Errorf("rollback:\n%s", out)
		}
		s.get(shop)
		if shop.Spec.Vector != v1 {
			t.Errorf("spec.vector %s, want %s", shop.Spec.Vector, v1)
		}
		out = must("rollback", "st", "shop", "--to", v2)
		if s.get(shop); shop.Spec.Vector != v2 || out != "Stage "+ns+"/shop: spec.vector set to "+v2+" (was "+v1+")\n" {
			t.Errorf("rollback --to: spec.vector %s:\n%s", shop.Spec.Vector, out)
		}
		if out := must("rollback", "st", "shop", "--to", v2); out != "Stage "+ns+"/shop: spec.vector is "+v2+" already\n" {
			t.Errorf("rollback --to the vector set:\n%s", out)
		}
	})

	t.Run("rollback refuses what it cannot roll back", func(t *testing.T) {
		s.createStage("semver", konfidencev1.StageSpec{Vector: strings.TrimSuffix(v1, ":1.0.0"), Semver: ">=1.0.0 <3.0.0"})
		for _, args := range [][]string{{"rollback", "st", "semver"}, {"rollback", "st", "semver", "--to", v1}} {
			if _, stderr, code := cli(args...); code != exitFailure || !strings.Contains(stderr, `follows spec.semver ">=1.0.0 <3.0.0"`) ||
				!strings.Contains(stderr, "change spec.semver") {
				t.Errorf("%v: exit %d, %s", args, code, stderr)
			}
		}
		once := s.createStage("once", konfidencev1.StageSpec{Vector: v1})
		only := s.vectorDeployment(once, v1, ready("2/2 artifacts ready"))
		s.setStatus(once, func(st *konfidencev1.Stage) {
			st.Status.ActiveVectorDeployment, st.Status.LastAppliedVector = only.Name, v1
			st.Status.History = []konfidencev1.StageHistoryEntry{{Vector: v1, VectorDeployment: only.Name, Started: at(8), Outcome: konfidencev1.MovePromoted}}
			markReady(st, "vector "+v1+" runs as VectorDeployment "+only.Name)
		})
		if _, stderr, code := cli("rollback", "st", "once"); code != exitFailure || !strings.Contains(stderr, "has no vector to roll back to") ||
			!strings.Contains(stderr, "--to") {
			t.Errorf("rollback with nothing before: exit %d, %s", code, stderr)
		}
		for _, args := range [][]string{{"rollback", "vd", only.Name}, {"rollback", "st"}, {"rollback", "st", "once", "--to="}, {"rollback", "st", "once", "-A"}} {
			if _, stderr, code := cli(args...); code != exitUsage {
				t.Errorf("%v: exit %d, want a usage error: %s", args, code, stderr)
			}
		}
		if s.get(once); once.Spec.Vector != v1 {
			t.Errorf("a refused rollback changed spec.vector to %s", once.Spec.Vector)
		}
	})

	t.Run("rollback --wait", func(t *testing.T) {
		// The Stage's move to the rolled-back vector: its VectorDeployment created, then promoted.
		s.setStatus(shop, func(st *konfidencev1.Stage) { st.Status.ObservedGeneration = st.Generation })
		stop := s.playStage(shop, func(st *konfidencev1.Stage) {
			vd := s.vectorDeployment(st, st.Spec.Vector, ready("2/2 artifacts ready"))
			st.Status.ActiveVectorDeployment, st.Status.CandidateVectorDeployment, st.Status.LastAppliedVector = vd.Name, "", st.Spec.Vector
			markReady(st, "vector "+st.Spec.Vector+" runs as VectorDeployment "+vd.Name)
		})
		out := must("rollback", "st", "shop", "--to", v1, "--wait", "--timeout", "1m")
		stop()
		if !strings.Contains(out, "Stage "+ns+"/shop: spec.vector set to "+v1+" (was "+v2+")\n") ||
			!strings.Contains(out, "Stage "+ns+"/shop: Ready: vector "+v1+" runs as VectorDeployment "+vd1+"\n") {
			t.Errorf("rollback --wait:\n%s", out)
		}

		// A move that fails: the Stage Stalls, and the reason is the command's.
		stop = s.playStage(shop, func(st *konfidencev1.Stage) {
			markStalled(st, konfidencev1.UpgradeFailedReason, "moving to vector "+st.Spec.Vector+" failed: VectorDeployment x stalled")
		})
		_, stderr, code := cli("rollback", "st", "shop", "--to", v3, "--wait", "--timeout", "1m")
		stop()
		if code != exitFailure || !strings.Contains(stderr, "Stage "+ns+"/shop: Stalled: UpgradeFailed: moving to vector "+v3+" failed") {
			t.Errorf("rollback --wait of a failing move: exit %d, %s", code, stderr)
		}

		// Ready, but for another vector than the rollback's: spec.vector changed meanwhile.
		stop = s.playStage(shop, func(st *konfidencev1.Stage) {
			markReady(st, "vector "+v1+" runs as VectorDeployment "+vd1)
		})
		_, stderr, code = cli("rollback", "st", "shop", "--to", v2, "--wait", "--timeout", "1m")
		stop()
		if code != exitFailure || !strings.Contains(stderr, "Stage "+ns+"/shop: Ready running VectorDeployment "+vd1+", not "+vd2.Name) {
			t.Errorf("rollback --wait, Ready with another VectorDeployment: exit %d, %s", code, stderr)
		}

		// No reconciler: the timeout, naming the VectorDeployment waited for.
		_, stderr, code = cli("rollback", "st", "shop", "--to", v3, "--wait", "--timeout", "2s")
		if code != exitFailure || !strings.Contains(stderr, "Stage "+ns+"/shop: timed out waiting for VectorDeployment "+vd3.Name+" to be active") {
			t.Errorf("rollback --wait with no reconciler: exit %d, %s", code, stderr)
		}
	})

	t.Run("reconcile, suspend, resume and wait take st", func(t *testing.T) {
		calm := s.createStage("calm", konfidencev1.StageSpec{Vector: v1})
		running := s.vectorDeployment(calm, v1, ready("2/2 artifacts ready"))
		stop := s.playStage(calm, func(st *konfidencev1.Stage) {
			st.Status.ActiveVectorDeployment, st.Status.LastAppliedVector = running.Name, v1
			markReady(st, "vector "+v1+" runs as VectorDeployment "+running.Name)
		})
		defer stop()
		if out := must("wait", "st", "calm", "--timeout", "1m"); out != "Stage "+ns+"/calm: Ready: vector "+v1+" runs as VectorDeployment "+running.Name+"\n" {
			t.Errorf("wait st:\n%s", out)
		}
		out := must("reconcile", "st", "calm", "--wait", "--timeout", "1m")
		s.get(calm)
		requested := calm.Annotations[meta.ReconcileRequestAnnotation]
		if requested == "" || calm.Status.LastHandledReconcileAt != requested ||
			!strings.Contains(out, "Stage "+ns+"/calm: reconcile requested ("+meta.ReconcileRequestAnnotation+"="+requested+")\n") ||
			!strings.Contains(out, "Stage "+ns+"/calm: Ready: ") {
			t.Errorf("reconcile st --wait: requested %q, handled %q:\n%s", requested, calm.Status.LastHandledReconcileAt, out)
		}
		if out := must("suspend", "stage", "calm"); out != "Stage "+ns+"/calm: suspended\n" {
			t.Errorf("suspend st:\n%s", out)
		}
		if s.get(calm); !calm.Spec.Suspend {
			t.Error("suspend st did not set spec.suspend")
		}
		if _, stderr, code := cli("reconcile", "st", "calm"); code != exitFailure || !strings.Contains(stderr, "Stage "+ns+"/calm is suspended") {
			t.Errorf("reconcile of a suspended Stage: exit %d, %s", code, stderr)
		}
		if out := must("resume", "st", "calm", "--wait", "--timeout", "1m"); !strings.Contains(out, "Stage "+ns+"/calm: resumed\n") ||
			!strings.Contains(out, "Stage "+ns+"/calm: Ready: ") {
			t.Errorf("resume st --wait:\n%s", out)
		}
		if s.get(calm); calm.Spec.Suspend {
			t.Error("resume st did not clear spec.suspend")
		}
		s.setStatus(shop, func(st *konfidencev1.Stage) {
			markStalled(st, konfidencev1.UpgradeFailedReason, "moving to vector "+st.Spec.Vector+" failed: VectorDeployment x stalled")
		})
		if _, stderr, code := cli("wait", "st", "shop", "--timeout", "1m"); code != exitFailure || !strings.Contains(stderr, "Stage "+ns+"/shop: Stalled: UpgradeFailed: ") {
			t.Errorf("wait st of a failed move: exit %d, %s", code, stderr)
		}
		out = must("suspend", "st", "--all")
		for _, name := range []string{"calm", "fresh", "once", "semver", "shop"} {
			if !strings.Contains(out, "Stage "+ns+"/"+name+": suspended\n") {
				t.Errorf("suspend st --all did not suspend %s:\n%s", name, out)
			}
		}
	})
}

// squeeze collapses each run of two spaces or more to two, so that a table compares without its column widths.
func squeeze(s string) string { return columnGap.ReplaceAllString(s, "  ") }

var columnGap = regexp.MustCompile(` {2,}`)

func assertPlan(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	for key, name := range want {
		if got[key] != name {
			t.Errorf("%s: planned %q, want %q (plan %v)", key, got[key], name, got)
		}
	}
}

// stageScene writes Stages and what their reconcilers make of them, as the reconcilers would.
type stageScene struct {
	t  *testing.T
	c  client.Client
	ns string
}

func (s *stageScene) createStage(name string, spec konfidencev1.StageSpec) *konfidencev1.Stage {
	s.t.Helper()
	st := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}, Spec: spec}
	if err := s.c.Create(context.Background(), st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

func (s *stageScene) get(obj client.Object) {
	s.t.Helper()
	if err := s.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stageScene) name(st *konfidencev1.Stage, vector string) string {
	s.t.Helper()
	name, err := stage.VectorDeploymentName(st.Name, st.UID, vector)
	if err != nil {
		s.t.Fatal(err)
	}
	return name
}

// setStatus writes the Stage's status as change leaves it, through the status subresource.
func (s *stageScene) setStatus(st *konfidencev1.Stage, change func(*konfidencev1.Stage)) {
	s.t.Helper()
	testenv.Eventually(s.t, 10*time.Second, func() error {
		if err := s.c.Get(context.Background(), client.ObjectKeyFromObject(st), st); err != nil {
			return err
		}
		change(st)
		return s.c.Status().Update(context.Background(), st)
	})
}

// vectorDeployment creates (or reads) the VectorDeployment the Stage reconciler creates for vector, controlled by
// the Stage, and writes its status: the Ready condition given, for its generation.
func (s *stageScene) vectorDeployment(st *konfidencev1.Stage, vector string, cond metav1.Condition) *konfidencev1.VectorDeployment {
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: st.Namespace, Name: s.name(st, vector)},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: vector},
	}
	scheme := s.scheme()
	if err := controllerutil.SetControllerReference(st, vd, scheme); err != nil {
		s.t.Error(err)
		return vd
	}
	if err := s.c.Create(context.Background(), vd); err != nil {
		if err := s.c.Get(context.Background(), client.ObjectKeyFromObject(vd), vd); err != nil {
			s.t.Error(err)
			return vd
		}
	}
	vd.Status.ObservedGeneration = vd.Generation
	conditions.Set(vd, &cond)
	if cond.Reason != meta.SucceededReason {
		conditions.MarkStalled(vd, cond.Reason, "%s", cond.Message)
	}
	if err := s.c.Status().Update(context.Background(), vd); err != nil {
		s.t.Error(err)
	}
	return vd
}

// artifactDeployments creates the ArtifactDeployments of vector's artifacts as the VectorDeployment reconciler
// builds them for vd, Ready, or adopts one that exists, and records them in vd's status; by component.
func (s *stageScene) artifactDeployments(vd *konfidencev1.VectorDeployment, vector string) map[string]*konfidencev1.ArtifactDeployment {
	s.t.Helper()
	ctx := context.Background()
	v, err := ocm.NewClient(ocm.Options{}).ResolveVector(ctx, vector, ocm.Read{})
	if err != nil {
		s.t.Fatal(err)
	}
	ads := map[string]*konfidencev1.ArtifactDeployment{}
	vd.Status.ResultingArtifactDeployments = map[string]konfidencev1.ResultingArtifactDeployment{}
	for _, d := range desiredArtifacts(s.scheme(), vd, vectordeployment.ArtifactsOf(v)) {
		if d.Err != nil {
			s.t.Fatal(d.Err)
		}
		ad := d.deployment
		switch err := s.c.Create(ctx, ad); {
		case apierrors.IsAlreadyExists(err):
			s.get(ad)
			s.adopt(ad, vd)
		case err != nil:
			s.t.Fatal(err)
		default:
			conditions.MarkTrue(ad, meta.ReadyCondition, meta.SucceededReason, "deployed")
			ad.Status.ObservedGeneration = ad.Generation
			if err := s.c.Status().Update(ctx, ad); err != nil {
				s.t.Fatal(err)
			}
		}
		ads[d.Component] = ad
		vd.Status.ResultingArtifactDeployments[d.Component] = konfidencev1.ResultingArtifactDeployment{Name: ad.Name}
	}
	if err := s.c.Status().Update(ctx, vd); err != nil {
		s.t.Fatal(err)
	}
	return ads
}

// adopt adds vd to the owners of ad, as a VectorDeployment that reuses it does.
func (s *stageScene) adopt(ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment) {
	s.t.Helper()
	if err := controllerutil.SetOwnerReference(vd, ad, s.scheme()); err != nil {
		s.t.Fatal(err)
	}
	if err := s.c.Update(context.Background(), ad); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stageScene) scheme() *runtime.Scheme {
	scheme, err := newScheme()
	if err != nil {
		s.t.Fatal(err)
	}
	return scheme
}

// playStage plays the Stage reconciler for st until stop is called: each generation and reconcile request it has
// not answered yet is answered by the status answer leaves, recorded as observed and handled.
func (s *stageScene) playStage(st *konfidencev1.Stage, answer func(*konfidencev1.Stage)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			current := &konfidencev1.Stage{}
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(st), current); err == nil {
				requested, _ := meta.ReconcileAnnotationValue(current.Annotations)
				if !current.Spec.Suspend && (current.Status.ObservedGeneration != current.Generation || requested != current.Status.LastHandledReconcileAt) {
					answer(current)
					current.Status.ObservedGeneration, current.Status.LastHandledReconcileAt = current.Generation, requested
					_ = s.c.Status().Update(ctx, current) // a conflict is answered on the next round
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func ready(message string) metav1.Condition {
	return metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason, Message: message}
}

func stalled(reason, message string) metav1.Condition {
	return metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: message}
}

// markReady leaves the Stage's conditions as the reconciler does for a vector that runs.
func markReady(st *konfidencev1.Stage, message string) {
	conditions.MarkTrue(st, meta.ReadyCondition, konfidencev1.PromotedReason, "%s", message)
	conditions.Delete(st, meta.StalledCondition)
	conditions.Delete(st, meta.ReconcilingCondition)
}

// markStalled leaves the Stage's conditions as the reconciler does for a move that failed.
func markStalled(st *konfidencev1.Stage, reason, message string) {
	conditions.MarkFalse(st, meta.ReadyCondition, reason, "%s", message)
	conditions.MarkStalled(st, reason, "%s", message)
	conditions.Delete(st, meta.ReconcilingCondition)
	st.Status.ObservedGeneration = st.Generation
}
