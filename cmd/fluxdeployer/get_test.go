package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestFluxGestureUsage: get, events and trace refuse a command line they cannot act on before reaching for a
// cluster (exit 2).
func TestFluxGestureUsage(t *testing.T) {
	for _, args := range [][]string{
		{"get"}, {"get", "pod"}, {"get", "vd", "a", "b"}, {"get", "vd", "shop", "-A"}, {"get", "vd", "-o", "wide"},
		{"events", "shop"}, {"events", "--for", "shop"}, {"events", "--for", "pod/x"}, {"events", "--for", "vd/"},
		{"events", "--for", "vd/shop", "-A"},
		{"trace"}, {"trace", "web"}, {"trace", "deployment/"}, {"trace", "a/b/c"}, {"trace", "deployment", "web", "x"},
		{"trace", "deployment/web", "-A"},
	} {
		if _, stderr, code := runBinary(t, append(args, "--kubeconfig", filepath.Join(t.TempDir(), "none"))...); code != exitUsage ||
			strings.Contains(stderr, "unknown command") {
			t.Errorf("%v: exit %d, want %d as a usage error of the command: %s", args, code, exitUsage, stderr)
		}
	}
}

// TestFluxGestures runs get, events and trace as a user would, against a real API server, with the objects the
// operator and Flux would write (their status too) written by the test: a VectorDeployment of two artifacts, one
// through a HelmRelease and one through a Kustomization, what each applied, and their events.
func TestFluxGestures(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	c := env.Client
	ns := newTestNamespace(t, c, "gestures")
	other := newTestNamespace(t, c, "gestures-other")
	kubeconfig := kubeconfigWithContexts(t, env.Kubeconfig, ns)
	cli, must := envtestCLI(t, kubeconfig)

	const (
		vector      = "registry.example.com/vectors//acme.org/vectors/shop:1.0.0"
		digest      = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		ksRevision  = "0.4.0@sha256:2222222222222222222222222222222222222222222222222222222222222222"
		dirtyText   = "install failed:\x1b[31m boom\nsecond line\u202e"
		cleanedText = "install failed:[31m boom second line"
	)
	landscape := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"}, Spec: konfidencev1.StageSpec{Vector: vector}}
	create(t, c, landscape)
	shop := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(landscape, konfidencev1.GroupVersion.WithKind("Stage"))}},
		Spec: konfidencev1.VectorDeploymentSpec{Vector: vector}}
	create(t, c, shop)
	setStatus(t, c, landscape, func() {
		landscape.Status.ActiveVectorDeployment = shop.Name
		landscape.Status.LastAppliedVector = vector
		landscape.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionTrue, "Promoted", "runs shop")}
	})
	idle := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"},
		Spec: konfidencev1.VectorDeploymentSpec{Vector: vector, Suspend: true}}
	create(t, c, idle)
	elsewhere := testenv.CreateVectorDeployment(t, c, other, "elsewhere", vector)

	frontend := artifactDeployment(ns, "shop-frontend", "acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", shop)
	config := artifactDeployment(ns, "shop-config", "acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", shop)
	create(t, c, frontend, config)
	setStatus(t, c, shop, func() {
		shop.Status.VectorDigest = digest
		shop.Status.ResultingArtifactDeployments = map[string]konfidencev1.ResultingArtifactDeployment{
			"acme.org/artifacts/frontend": {Name: frontend.Name}, "acme.org/artifacts/config": {Name: config.Name}}
		shop.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionTrue, meta.SucceededReason, "2/2 artifacts ready")}
	})
	setStatus(t, c, frontend, func() {
		frontend.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionFalse, "InstallFailed", dirtyText)}
	})
	setStatus(t, c, config, func() {
		config.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionTrue, meta.SucceededReason, "applied")}
	})

	// The Flux objects the deployer creates, as Flux reports them.
	interval := metav1.Duration{Duration: time.Minute}
	helmRepo := &sourcev1.HelmRepository{ObjectMeta: fluxMeta(frontend), Spec: sourcev1.HelmRepositorySpec{
		Type: sourcev1.HelmRepositoryTypeOCI, URL: "oci://registry.example.com/charts", Interval: interval}}
	release := &helmv2.HelmRelease{ObjectMeta: fluxMeta(frontend), Spec: helmv2.HelmReleaseSpec{Interval: interval,
		Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "frontend",
			SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: frontend.Name}}}}}
	ociRepo := &sourcev1.OCIRepository{ObjectMeta: fluxMeta(config), Spec: sourcev1.OCIRepositorySpec{
		URL: "oci://registry.example.com/bundles/config", Interval: interval}}
	kustomization := &kustomizev1.Kustomization{ObjectMeta: fluxMeta(config), Spec: kustomizev1.KustomizationSpec{Interval: interval, Prune: true,
		SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: config.Name}}}
	foreign := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"}, Spec: kustomizev1.KustomizationSpec{
		Interval: interval, Prune: true, SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "foreign"}}}
	create(t, c, helmRepo, release, ociRepo, kustomization, foreign)
	ready := readyCondition(metav1.ConditionTrue, meta.SucceededReason, "done")
	if err := testenv.UpdateFluxStatus(ctx, c, release, func() { release.Status.LastAttemptedRevision = "1.2.3" }, ready); err != nil {
		t.Fatal(err)
	}
	if err := testenv.UpdateFluxStatus(ctx, c, ociRepo, func() {
		ociRepo.Status.Artifact = &meta.Artifact{Path: "a.tar.gz", URL: "http://source-controller/a.tar.gz", Revision: ksRevision,
			Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222", LastUpdateTime: metav1.Now()}
	}, ready); err != nil {
		t.Fatal(err)
	}
	if err := testenv.UpdateFluxStatus(ctx, c, kustomization, func() { kustomization.Status.LastAppliedRevision = ksRevision }, ready); err != nil {
		t.Fatal(err)
	}

	// What Flux applied: helm-controller labels a release's objects, kustomize-controller a Kustomization's.
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
		Labels: map[string]string{helmNameLabel: release.Name, helmNamespaceLabel: ns}}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/web:1.2.3"}}}}}}
	create(t, c, web,
		configMap(ns, "settings", map[string]string{kustomizeNameLabel: kustomization.Name, kustomizeNamespaceLabel: ns}, nil),
		configMap(ns, "annotated", nil, map[string]string{helmReleaseNameAnnotation: release.GetReleaseName(), helmReleaseNamespaceAnnotation: ns}),
		configMap(ns, "plain", nil, nil),
		configMap(ns, "foreign-cm", map[string]string{kustomizeNameLabel: foreign.Name, kustomizeNamespaceLabel: ns}, nil))

	// Events, oldest first as events prints them.
	now := time.Now()
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d).Truncate(time.Second)) }
	for _, e := range []struct {
		namespace, apiVersion, kind, name, eventType, reason, message string
		at                                                            metav1.Time
	}{
		{ns, konfidencev1.GroupVersion.String(), "Stage", landscape.Name, corev1.EventTypeNormal, "Promoted", "runs shop", ago(7 * time.Minute)},
		{ns, konfidencev1.GroupVersion.String(), "VectorDeployment", "shop", corev1.EventTypeNormal, "ArtifactDeploymentsCreated", "created 2", ago(5 * time.Minute)},
		{ns, konfidencev1.GroupVersion.String(), "ArtifactDeployment", frontend.Name, corev1.EventTypeWarning, "InstallFailed", dirtyText, ago(4 * time.Minute)},
		{ns, sourcev1.GroupVersion.String(), sourcev1.HelmChartKind, ns + "-" + release.Name, corev1.EventTypeNormal, "ChartPullSucceeded", "pulled", ago(3 * time.Minute)},
		{ns, helmv2.GroupVersion.String(), helmv2.HelmReleaseKind, release.Name, corev1.EventTypeWarning, "InstallFailed", "helm install", ago(2 * time.Minute)},
		{ns, kustomizev1.GroupVersion.String(), kustomizev1.KustomizationKind, kustomization.Name, corev1.EventTypeNormal, "ReconciliationSucceeded", "applied", ago(time.Minute)},
		{ns, konfidencev1.GroupVersion.String(), "VectorDeployment", "idle", corev1.EventTypeNormal, "Suspended", "suspended", ago(30 * time.Second)},
		{ns, "apps/v1", "Deployment", "web", corev1.EventTypeNormal, "ScalingReplicaSet", "scaled", ago(20 * time.Second)},
		{ns, kustomizev1.GroupVersion.String(), kustomizev1.KustomizationKind, foreign.Name, corev1.EventTypeNormal, "ReconciliationSucceeded", "foreign", ago(10 * time.Second)},
		{other, konfidencev1.GroupVersion.String(), "VectorDeployment", elsewhere.Name, corev1.EventTypeNormal, "Ready", "elsewhere", ago(6 * time.Minute)},
	} {
		create(t, c, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: e.namespace, GenerateName: e.name + "."},
			InvolvedObject: corev1.ObjectReference{APIVersion: e.apiVersion, Kind: e.kind, Namespace: e.namespace, Name: e.name},
			Type:           e.eventType, Reason: e.reason, Message: e.message, Count: 1,
			FirstTimestamp: e.at, LastTimestamp: e.at, Source: corev1.EventSource{Component: "test"},
		})
	}

	t.Run("get vd", func(t *testing.T) {
		out := must("get", "vd")
		rows := tableRows(t, out, "NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE")
		want := [][]string{{"idle", "", "True", "Unknown", ""}, {"shop", digest, "False", "True", "2/2 artifacts ready"}}
		assertRows(t, out, rows, want)
		if out := must("get", "vd", "shop"); len(tableRows(t, out, "NAME")) != 1 {
			t.Errorf("get vd shop:\n%s", out)
		}
		var row getRow
		if err := json.Unmarshal([]byte(must("get", "vd", "shop", "-o", "json")), &row); err != nil ||
			row != (getRow{Namespace: ns, Name: "shop", Revision: digest, Ready: "True", Message: "2/2 artifacts ready"}) {
			t.Errorf("get vd shop -o json: %+v, %v", row, err)
		}
	})

	t.Run("get ad: the Flux object's revision, the message made printable", func(t *testing.T) {
		out := must("get", "ad")
		if strings.ContainsAny(out, "\x1b\u202e") {
			t.Errorf("control characters in the output: %q", out)
		}
		assertRows(t, out, tableRows(t, out, "NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"), [][]string{
			{config.Name, ksRevision, "False", "True", "applied"},
			{frontend.Name, "1.2.3", "False", "False", cleanedText},
		})
	})

	t.Run("get st: the vector the Stage moved to", func(t *testing.T) {
		out := must("get", "st")
		assertRows(t, out, tableRows(t, out, "NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"), [][]string{
			{"landscape", vector, "False", "True", "runs shop"},
		})
	})

	t.Run("get -A names the namespace first", func(t *testing.T) {
		out := must("get", "vds", "-A")
		rows := tableRows(t, out, "NAMESPACE", "NAME", "REVISION")
		for _, want := range [][]string{{ns, "shop", digest}, {other, "elsewhere", ""}} {
			if !slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r, want) }) {
				t.Errorf("get vds -A has no row %v:\n%s", want, out)
			}
		}
	})

	t.Run("get: none is no table, a missing object fails", func(t *testing.T) {
		if stdout, stderr, code := cli("get", "ad", "-n", other); code != exitSuccess || stdout != "" || !strings.Contains(stderr, "No ArtifactDeployments found.") {
			t.Errorf("get ad -n %s: exit %d, stdout %q, stderr %q", other, code, stdout, stderr)
		}
		_, stderr, code := cli("get", "ad", "missing")
		if code != exitFailure || !strings.Contains(stderr, "ArtifactDeployment "+ns+"/missing not found") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("get --watch prints a row for each change", func(t *testing.T) {
		var out syncBuffer
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			root := newRootCommand()
			root.SetArgs([]string{"get", "vd", "shop", "--watch", "--kubeconfig", kubeconfig, "--context", "envtest"})
			root.SetOut(&out)
			root.SetErr(&out)
			done <- root.ExecuteContext(ctx)
		}()
		testenv.Eventually(t, 30*time.Second, func() error { return out.contains("2/2 artifacts ready") })
		setStatus(t, c, shop, func() {
			shop.Status.Conditions = []metav1.Condition{readyCondition(metav1.ConditionFalse, "ArtifactsNotReady", "1/2 artifacts ready")}
		})
		testenv.Eventually(t, 30*time.Second, func() error { return out.contains("1/2 artifacts ready") })
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("get --watch ended with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("get --watch did not end with its context")
		}
		rows := tableRows(t, out.String(), "NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE")
		assertRows(t, out.String(), rows, [][]string{{"shop", digest, "False", "True", "2/2 artifacts ready"}, {"shop", digest, "False", "False", "1/2 artifacts ready"}})
	})

	t.Run("events --for vd: the VectorDeployment's, its ArtifactDeployments' and their Flux objects'", func(t *testing.T) {
		out := must("events", "--for", "vd/shop")
		assertRows(t, out, tableRows(t, out, "TYPE", "REASON", "OBJECT", "MESSAGE"), [][]string{
			{"Normal", "ArtifactDeploymentsCreated", "VectorDeployment/shop", "created 2"},
			{"Warning", "InstallFailed", "ArtifactDeployment/" + frontend.Name, cleanedText},
			{"Normal", "ChartPullSucceeded", "HelmChart/" + ns + "-" + release.Name, "pulled"},
			{"Warning", "InstallFailed", "HelmRelease/" + release.Name, "helm install"},
			{"Normal", "ReconciliationSucceeded", "Kustomization/" + kustomization.Name, "applied"},
		})
		// LAST SEEN: how long ago, as kubectl words it (the test's own time adds seconds).
		for i, prefix := range []string{"5m", "4m", "3m", "2m", ""} {
			if seen := tableRows(t, out, "LAST SEEN")[i][0]; !strings.HasPrefix(seen, prefix) || i == 4 && !strings.HasSuffix(seen, "s") {
				t.Errorf("event %d last seen %q, want %s…", i+1, seen, prefix)
			}
		}
		out = must("events", "--for", "st/landscape")
		if rows := tableRows(t, out, "OBJECT"); len(rows) != 6 || rows[0][0] != "Stage/landscape" || rows[1][0] != "VectorDeployment/shop" {
			t.Errorf("events --for st/landscape:\n%s", out)
		}
		out = must("events", "--for", "ad/"+config.Name)
		assertRows(t, out, tableRows(t, out, "OBJECT", "MESSAGE"), [][]string{{"Kustomization/" + kustomization.Name, "applied"}})
	})

	t.Run("events: every event of this project's kinds", func(t *testing.T) {
		out := must("events")
		assertRows(t, out, tableRows(t, out, "OBJECT", "MESSAGE"), [][]string{{"Stage/landscape", "runs shop"},
			{"VectorDeployment/shop", "created 2"}, {"ArtifactDeployment/" + frontend.Name, cleanedText}, {"VectorDeployment/idle", "suspended"},
		})
		out = must("events", "-A")
		rows := tableRows(t, out, "NAMESPACE", "TYPE", "REASON", "OBJECT")
		if len(rows) != 5 || !slices.Equal(rows[1], []string{other, "Normal", "Ready", "VectorDeployment/elsewhere"}) {
			t.Errorf("events -A:\n%s", out)
		}
		if _, stderr, code := cli("events", "--for", "vd/missing"); code != exitFailure || !strings.Contains(stderr, "VectorDeployment "+ns+"/missing not found") {
			t.Errorf("events --for vd/missing: exit %d, %s", code, stderr)
		}
	})

	t.Run("trace a Deployment of a HelmRelease up to its vector", func(t *testing.T) {
		for _, target := range [][]string{{"deployment/web"}, {"deploy", "web"}, {"deployments.apps/web"}} {
			out := must(append([]string{"trace"}, target...)...)
			assertSteps(t, out, [][]string{
				{"Object: Deployment/web", "Namespace: " + ns, "Status: InProgress"},
				{"HelmRelease: " + release.Name, "Namespace: " + ns, "Revision: 1.2.3", "Status: Ready=True Succeeded", "Message: done"},
				{"HelmRepository: " + helmRepo.Name, "Namespace: " + ns},
				{"ArtifactDeployment: " + frontend.Name, "Namespace: " + ns, "Component: acme.org/artifacts/frontend 1.2.3",
					"Status: Ready=False InstallFailed", "Message: " + cleanedText},
				{"VectorDeployment: shop", "Namespace: " + ns, "Vector: " + vector, "Digest: " + digest},
				{"Stage: landscape", "Namespace: " + ns, "Vector: " + vector, "Active: shop", "Status: Ready=True Promoted"},
			})
		}
	})

	t.Run("trace a ConfigMap of a Kustomization, and one known by Helm's annotations", func(t *testing.T) {
		assertSteps(t, must("trace", "configmap/settings"), [][]string{
			{"Object: ConfigMap/settings", "Namespace: " + ns, "Status: Current"},
			{"Kustomization: " + kustomization.Name, "Namespace: " + ns, "Revision: " + ksRevision, "Status: Ready=True Succeeded"},
			{"OCIRepository: " + ociRepo.Name, "Namespace: " + ns, "Revision: " + ksRevision, "Status: Ready=True Succeeded"},
			{"ArtifactDeployment: " + config.Name, "Namespace: " + ns, "Component: acme.org/artifacts/config 0.4.0", "Status: Ready=True Succeeded"},
			{"VectorDeployment: shop", "Namespace: " + ns, "Vector: " + vector, "Digest: " + digest},
			{"Stage: landscape"},
		})
		out := must("trace", "cm", "annotated")
		if !strings.Contains(normalize(out), "HelmRelease: "+release.Name+"\n") || !strings.Contains(normalize(out), "VectorDeployment: shop\n") {
			t.Errorf("trace cm annotated:\n%s", out)
		}
	})

	t.Run("trace fails for what Flux or fluxdeployer did not apply", func(t *testing.T) {
		for _, c := range []struct {
			target, stdout, stderr string
		}{
			{"configmap/plain", "", "ConfigMap " + ns + "/plain was not applied by Flux"},
			{"configmap/foreign-cm", "Kustomization: foreign", "Kustomization " + ns + "/foreign, which applied ConfigMap " + ns + "/foreign-cm, is not an ArtifactDeployment's"},
			{"deployment/missing", "", "Deployment " + ns + "/missing not found"},
			{"nosuchkind/x", "", `the API server serves no kind "nosuchkind"`},
		} {
			stdout, stderr, code := cli("trace", c.target)
			if code != exitFailure || !strings.Contains(stderr, c.stderr) || !strings.Contains(normalize(stdout), c.stdout) {
				t.Errorf("trace %s: exit %d\n%s%s", c.target, code, stdout, stderr)
			}
		}
	})
}

func artifactDeployment(ns, name, component, version, manifest string, owner *konfidencev1.VectorDeployment) *konfidencev1.ArtifactDeployment {
	return &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: konfidencev1.GroupVersion.String(), Kind: "VectorDeployment", Name: owner.Name, UID: owner.UID}}},
		Spec: konfidencev1.ArtifactDeploymentSpec{Manifest: konfidencev1.ArtifactManifest{Type: manifest},
			Component: konfidencev1.Component{Name: component, Version: version}},
	}
}

// fluxMeta is the metadata the deployer gives ad's Flux objects: its name, its label, its controller reference.
func fluxMeta(ad *konfidencev1.ArtifactDeployment) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name, Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ad, konfidencev1.GroupVersion.WithKind("ArtifactDeployment"))}}
}

func configMap(ns, name string, labels, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations}}
}

func readyCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
}

// setStatus writes obj's status as change sets it, reading obj again first.
func setStatus(t *testing.T, c client.Client, obj client.Object, change func()) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return c.Status().Update(context.Background(), obj)
	})
}

// tableRows reads a table the CLI printed: for each row, the cells of the named columns, cut at the columns'
// positions in the header line.
func tableRows(t *testing.T, out string, columns ...string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := lines[0]
	var names []string // every column of the header, in order, with their positions
	var starts []int
	for _, f := range []string{"NAMESPACE", "LAST SEEN", "NAME", "REVISION", "SUSPENDED", "READY", "TYPE", "REASON", "OBJECT", "MESSAGE"} {
		if i := headerIndex(header, f); i >= 0 {
			names, starts = append(names, f), append(starts, i)
		}
	}
	type col struct {
		name  string
		start int
	}
	cols := make([]col, len(names))
	for i := range names {
		cols[i] = col{names[i], starts[i]}
	}
	slices.SortFunc(cols, func(a, b col) int { return a.start - b.start })
	var rows [][]string
	for _, line := range lines[1:] {
		if line == "" || line == header {
			continue
		}
		var row []string
		for _, want := range columns {
			i := slices.IndexFunc(cols, func(c col) bool { return c.name == want })
			if i < 0 {
				t.Fatalf("no column %s in:\n%s", want, out)
			}
			end := len(line)
			if i+1 < len(cols) {
				end = min(cols[i+1].start, len(line))
			}
			start := min(cols[i].start, len(line))
			row = append(row, strings.TrimSpace(line[start:end]))
		}
		rows = append(rows, row)
	}
	return rows
}

// headerIndex is where column name starts in a header line: as a whole word ("NAME" is not the end of
// "NAMESPACE").
func headerIndex(header, name string) int {
	for i := 0; i+len(name) <= len(header); i++ {
		if header[i:i+len(name)] == name && (i == 0 || header[i-1] == ' ') && (i+len(name) == len(header) || header[i+len(name)] == ' ') {
			return i
		}
	}
	return -1
}

func assertRows(t *testing.T, out string, got, want [][]string) {
	t.Helper()
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("rows %q, want %q; output:\n%s", got, want, out)
	}
}

// normalize is the output with each line's runs of spaces made one, so that an aligned "Label:   value" reads
// "Label: value".
func normalize(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// assertSteps checks that trace printed the steps in order, separated by ---, each with the lines given (among
// others).
func assertSteps(t *testing.T, out string, want [][]string) {
	t.Helper()
	steps := strings.Split(normalize(out), "\n---\n")
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d:\n%s", len(steps), len(want), out)
	}
	for i, lines := range want {
		have := strings.Split(steps[i], "\n")
		for _, l := range lines {
			if !slices.Contains(have, l) {
				t.Errorf("step %d has no line %q:\n%s", i+1, l, out)
			}
		}
	}
}

// syncBuffer is a buffer a command writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) contains(s string) error {
	if out := b.String(); !strings.Contains(out, s) {
		return &missingText{s, out}
	}
	return nil
}

type missingText struct{ want, out string }

func (e *missingText) Error() string { return "no " + e.want + " in:\n" + e.out }
