package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

const kustomizeType = "cloud.konfidence.flux.kustomize"

// bundleArtifact publishes a Kustomize bundle of one ConfigMap named after the component and version (files, when
// given, instead) and returns its artifact component version, not yet pushed, the bundle pinned by digest.
func bundleArtifact(t *testing.T, reg *ocmtest.Registry, component, version string, allowReuse bool, files map[string]string) ocmtest.ComponentVersion {
	t.Helper()
	base := component[strings.LastIndex(component, "/")+1:]
	if files == nil {
		files = map[string]string{
			"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - configmap.yaml\n",
			"configmap.yaml":     fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  version: %q\n", base, version),
		}
	}
	bundle, err := ocmtest.PushKustomizeBundle(context.Background(), reg.Host, "bundles/"+base, version, files)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := ocmtest.ManifestDigest(context.Background(), bundle)
	if err != nil {
		t.Fatal(err)
	}
	a := ocmtest.Artifact(component, version, kustomizeType, allowReuse)
	// Pinned by digest, so that a signed vector's signature covers the bundle.
	a.Resources[1] = ocmtest.BundleResource(version, bundle).WithOCIDigest(digest)
	return a
}

// brokenBundle is a bundle kustomize-controller cannot build: its kustomization names a file that is not there.
var brokenBundle = map[string]string{
	"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - missing.yaml\n",
}

func createStage(t *testing.T, st *konfidencev1.Stage) *konfidencev1.Stage {
	t.Helper()
	if err := env.Client.Create(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	return st
}

// setStageVector moves the Stage to vector, as a GitOps commit of one field does.
func setStageVector(t *testing.T, st *konfidencev1.Stage, vector string) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"vector":%q}}`, vector))
	if err := env.Client.Patch(context.Background(), st, patch); err != nil {
		t.Fatal(err)
	}
}

// waitStage waits until check passes on the Stage as the API server has it, for its current generation.
func waitStage(t *testing.T, timeout time.Duration, st *konfidencev1.Stage, check func(*konfidencev1.Stage) error) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(st), st); err != nil {
			return err
		}
		if st.Status.ObservedGeneration != st.Generation && !conditions.Has(st, meta.ReconcilingCondition) {
			return fmt.Errorf("generation %d not observed yet", st.Generation)
		}
		return check(st)
	})
}

// promotedTo checks that the Stage runs vector as its active VectorDeployment, Ready, with no move under way.
func promotedTo(vector string) func(*konfidencev1.Stage) error {
	return func(st *konfidencev1.Stage) error {
		want, err := stage.VectorDeploymentName(st.Name, st.UID, vector)
		if err != nil {
			return err
		}
		if st.Status.ActiveVectorDeployment != want || st.Status.CandidateVectorDeployment != "" || !conditions.IsReady(st) ||
			st.Status.ObservedGeneration != st.Generation {
			return fmt.Errorf("not promoted to %s (%s): active %q, candidate %q, %+v", vector, want, st.Status.ActiveVectorDeployment,
				st.Status.CandidateVectorDeployment, st.Status.Conditions)
		}
		return nil
	}
}

// moveFailed checks that the Stage's move failed: its candidate missed the progress deadline or stalled first.
func moveFailed(st *konfidencev1.Stage) error {
	if reason := conditions.GetReason(st, meta.ReadyCondition); !conditions.IsStalled(st) ||
		(reason != konfidencev1.ProgressDeadlineExceededReason && reason != konfidencev1.UpgradeFailedReason) {
		return fmt.Errorf("the move to %s has not failed: %+v", st.Spec.Vector, st.Status.Conditions)
	}
	return nil
}

// artifactDeploymentOf returns the ArtifactDeployment of a component in the namespace (there must be one).
func artifactDeploymentOf(t *testing.T, ns, component, version string) *konfidencev1.ArtifactDeployment {
	t.Helper()
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var found []*konfidencev1.ArtifactDeployment
	for i := range list.Items {
		if a := list.Items[i].Annotations; a[konfidencev1.ArtifactComponentAnnotation] == component && a[konfidencev1.ArtifactVersionAnnotation] == version {
			found = append(found, &list.Items[i])
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d ArtifactDeployments of %s:%s in %s, want 1", len(found), component, version, ns)
	}
	return found[0]
}

// TestStageMovesOnlyOnceTheCandidateIsReady moves a landscape through the real Flux controllers: v1, then v2 (one
// artifact at a new version), then a broken v3, then back to v2. Each move keeps the active VectorDeployment until
// the candidate is Ready; the reusable artifact of an unchanged version and the landscape's own instance of a
// non-reusable one are kept, never reapplied; the broken move fails by its deadline without a write to what runs,
// and setting the vector back cancels it.
func TestStageMovesOnlyOnceTheCandidateIsReady(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	config := bundleArtifact(t, reg, "acme.org/artifacts/config", "0.4.0", true, nil)
	db := bundleArtifact(t, reg, "acme.org/artifacts/db", "16.4.0", false, nil)
	app1 := bundleArtifact(t, reg, "acme.org/artifacts/app", "1.0.0", true, nil)
	app2 := bundleArtifact(t, reg, "acme.org/artifacts/app", "1.1.0", true, nil)
	app3 := bundleArtifact(t, reg, "acme.org/artifacts/app", "1.2.0", true, brokenBundle)
	const shop = "acme.org/vectors/shop"
	reg.Push(t, "", config, db, app1, app2, app3,
		ocmtest.Vector(shop, "1.0.0", config, db, app1), ocmtest.Vector(shop, "2.0.0", config, db, app2), ocmtest.Vector(shop, "3.0.0", config, db, app3))
	v1, v2, v3 := reg.Ref("", shop, "1.0.0"), reg.Ref("", shop, "2.0.0"), reg.Ref("", shop, "3.0.0")

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "stage")
	deadline := 40 * time.Second
	st := createStage(t, &konfidencev1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec:       konfidencev1.StageSpec{Vector: v1, ProgressDeadline: &metav1.Duration{Duration: deadline}},
	})
	began := time.Now()
	waitStage(t, 3*time.Minute, st, promotedTo(v1))
	t.Logf("v1 promoted %s after the Stage's creation", time.Since(began).Round(100*time.Millisecond))
	v1VD := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: st.Status.ActiveVectorDeployment}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v1VD), v1VD); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(v1VD); ref == nil || ref.UID != st.UID {
		t.Fatalf("VectorDeployment %s is not controlled by the Stage: %+v", v1VD.Name, v1VD.OwnerReferences)
	}
	configAD, dbAD := artifactDeploymentOf(t, ns, config.Name, config.Version), artifactDeploymentOf(t, ns, db.Name, db.Version)
	if dbAD.Annotations[konfidencev1.StageUIDAnnotation] != string(st.UID) {
		t.Errorf("the db instance belongs to %q, want the Stage %s: %v", dbAD.Annotations[konfidencev1.StageUIDAnnotation], st.UID, dbAD.Annotations)
	}
	kept := map[string]kustomizationState{}
	for _, ad := range []*konfidencev1.ArtifactDeployment{configAD, dbAD} {
		kept[ad.Name] = kustomizationOf(t, ns, ad.Name)
	}
	app1AD := artifactDeploymentOf(t, ns, app1.Name, app1.Version)

	// v2: the candidate is created beside v1, promoted once Ready, and v1 is deleted.
	began = time.Now()
	setStageVector(t, st, v2)
	waitStage(t, 3*time.Minute, st, promotedTo(v2))
	t.Logf("v2 promoted %s after the move", time.Since(began).Round(100*time.Millisecond))
	waitGone(t, v1VD)
	waitGone(t, app1AD)
	assertKept(t, ns, kept)
	if h := st.Status.History; len(h) != 2 || h[0].Vector != v2 || h[0].Outcome != konfidencev1.MovePromoted || h[0].Ended != nil ||
		h[1].Vector != v1 || h[1].Outcome != konfidencev1.MovePromoted || h[1].Ended == nil || h[0].Digest == "" {
		t.Errorf("history after v2: %+v", h)
	}
	v2VD := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: st.Status.ActiveVectorDeployment}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v2VD), v2VD); err != nil {
		t.Fatal(err)
	}
	app2AD := artifactDeploymentOf(t, ns, app2.Name, app2.Version)
	kept[app2AD.Name] = kustomizationOf(t, ns, app2AD.Name)

	// v3 cannot be applied: the move fails by its deadline, and nothing of v2 is written to.
	began = time.Now()
	setStageVector(t, st, v3)
	waitStage(t, deadline+time.Minute, st, moveFailed)
	t.Logf("the move to v3 failed %s after it began (progress deadline %s): %s", time.Since(began).Round(100*time.Millisecond), deadline,
		conditions.GetMessage(st, meta.ReadyCondition))
	if msg := conditions.GetMessage(st, meta.ReadyCondition); !strings.Contains(msg, "app-1-2-0") || !strings.Contains(msg, v2VD.Name+" keeps running") {
		t.Errorf("the failure names neither the failing artifact nor what keeps running: %s", msg)
	}
	if st.Status.ActiveVectorDeployment != v2VD.Name || st.Status.CandidateVectorDeployment == "" {
		t.Errorf("active %q candidate %q after the failed move", st.Status.ActiveVectorDeployment, st.Status.CandidateVectorDeployment)
	}
	assertUnwritten(t, v2VD)
	assertKept(t, ns, kept)
	assertEvent(t, ns, "Stage", st.Name, corev1.EventTypeWarning, conditions.GetReason(st, meta.ReadyCondition))
	failed := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: st.Status.CandidateVectorDeployment}}

	// Back to v2: the failed candidate goes, v2 is not written to.
	setStageVector(t, st, v2)
	waitStage(t, time.Minute, st, promotedTo(v2))
	waitGone(t, failed)
	assertUnwritten(t, v2VD)
	assertKept(t, ns, kept)
	if h := st.Status.History; len(h) != 3 || h[0].Outcome != konfidencev1.MoveFailed || h[0].Vector != v3 || h[1].Vector != v2 || h[1].Outcome != konfidencev1.MovePromoted {
		t.Errorf("history after the failed move: %+v", h)
	}
	assertEvent(t, ns, "Stage", st.Name, corev1.EventTypeNormal, konfidencev1.PromotedReason)
}

// kustomizationState is what a kept deployment must keep: its ArtifactDeployment and its Kustomization's spec.
type kustomizationState struct {
	adUID      string
	generation int64
}

func kustomizationOf(t *testing.T, ns, name string) kustomizationState {
	t.Helper()
	ad := &konfidencev1.ArtifactDeployment{}
	ks := &kustomizev1.Kustomization{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ad); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ks); err != nil {
		t.Fatal(err)
	}
	return kustomizationState{adUID: string(ad.UID), generation: ks.Generation}
}

// assertKept checks that each kept deployment is the same ArtifactDeployment with an unchanged Kustomization.
func assertKept(t *testing.T, ns string, kept map[string]kustomizationState) {
	t.Helper()
	for name, want := range kept {
		if got := kustomizationOf(t, ns, name); got != want {
			t.Errorf("%s changed across the move: %+v, was %+v", name, got, want)
		}
	}
}

// assertUnwritten checks that nothing wrote to the VectorDeployment since it was read into vd.
func assertUnwritten(t *testing.T, vd *konfidencev1.VectorDeployment) {
	t.Helper()
	now := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(vd), now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != vd.ResourceVersion {
		t.Errorf("VectorDeployment %s was written to (resourceVersion %s, was %s): spec %+v, conditions %+v", vd.Name, now.ResourceVersion,
			vd.ResourceVersion, now.Spec, now.Status.Conditions)
	}
}

// assertEvent checks that an event of the type and reason was recorded on the object.
func assertEvent(t *testing.T, ns, kind, name, eventType, reason string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		list := &corev1.EventList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Type == eventType && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s event %s on %s/%s", eventType, reason, kind, name)
	})
}

// assertNoWarnings fails on any Warning event of the konfidence kinds in ns: a healthy install, however long Flux
// takes to fetch and apply, is progress, and a Warning would page whoever alerts on them.
func assertNoWarnings(t *testing.T, ns string) {
	t.Helper()
	for _, w := range konfidenceWarnings(t, ns) {
		t.Errorf("a Warning event on a healthy install: %s", w)
	}
}

// konfidenceWarnings describes the Warning events of ns on the konfidence kinds: kind, name, reason and message.
func konfidenceWarnings(t *testing.T, ns string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.InvolvedObject.APIVersion == konfidencev1.GroupVersion.String() {
			warnings = append(warnings, fmt.Sprintf("%s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
		}
	}
	return warnings
}

// TestStageFollowsSemver: a Stage on a range moves on its own to a newer version in it, ignores one out of it, and
// with verification on skips a newer version that is not signed, with a Warning event naming it.
func TestStageFollowsSemver(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	config := bundleArtifact(t, reg, "acme.org/artifacts/config", "0.4.0", true, nil)
	const shop = "acme.org/vectors/shop"
	signed := func(version string) ocmtest.ComponentVersion {
		v := ocmtest.Vector(shop, version, config)
		v.Signers = []ocmtest.Signer{{Name: "release", Key: key}}
		return v
	}
	reg.Push(t, "", config, signed("1.0.0"))

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "semver")
	if err := env.Client.Create(ctx, ocmtest.KeysSecret(t, ns, "vector-keys", map[string]*rsa.PublicKey{"release": &key.PublicKey})); err != nil {
		t.Fatal(err)
	}
	st := createStage(t, &konfidencev1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: konfidencev1.StageSpec{
			Vector: strings.TrimSuffix(reg.Ref("", shop, "1.0.0"), ":1.0.0"), Semver: ">=1.0.0 <2.0.0",
			Interval: &metav1.Duration{Duration: 2 * time.Second},
			Verify:   &konfidencev1.VectorVerification{Signatures: []string{"release"}, SecretRef: meta.LocalObjectReference{Name: "vector-keys"}},
		},
	})
	waitStage(t, 3*time.Minute, st, promotedTo(reg.Ref("", shop, "1.0.0")))

	// 1.1.0 is in the range: the Stage moves on its own, at its interval.
	reg.Push(t, "", signed("1.1.0"))
	waitStage(t, 2*time.Minute, st, promotedTo(reg.Ref("", shop, "1.1.0")))

	// 2.0.0 is out of the range, and an unsigned 1.2.0 does not verify: a reconcile request, handled, leaves the
	// Stage on 1.1.0, and the skip is a Warning event naming 1.2.0.
	unsigned := ocmtest.Vector(shop, "1.2.0", config)
	reg.Push(t, "", signed("2.0.0"), unsigned)
	requested := metav1.Now().Format(time.RFC3339Nano)
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, requested))
	if err := env.Client.Patch(ctx, st, patch); err != nil {
		t.Fatal(err)
	}
	waitStage(t, time.Minute, st, func(st *konfidencev1.Stage) error {
		if st.Status.LastHandledReconcileAt != requested {
			return fmt.Errorf("reconcile request %s not handled yet (%s)", requested, st.Status.LastHandledReconcileAt)
		}
		return promotedTo(reg.Ref("", shop, "1.1.0"))(st)
	})
	if st.Status.LastAppliedVector != reg.Ref("", shop, "1.1.0") {
		t.Errorf("lastAppliedVector %s, want 1.1.0", st.Status.LastAppliedVector)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		list := &corev1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Stage" && e.Reason == konfidencev1.VersionSkippedReason && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Message, "version 1.2.0 ") {
				return nil
			}
		}
		return fmt.Errorf("no Warning %s event naming 1.2.0", konfidencev1.VersionSkippedReason)
	})
}

// TestStageThroughGitOps: the Stage lives in a Flux source, an OCI artifact the test pushes, applied by the real
// kustomize-controller with wait: true. A new revision that changes spec.vector moves the landscape, and the
// Kustomization that applies it is Ready for that revision only once the Stage is promoted.
func TestStageThroughGitOps(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	config := bundleArtifact(t, reg, "acme.org/artifacts/config", "0.4.0", true, nil)
	app1 := bundleArtifact(t, reg, "acme.org/artifacts/app", "1.0.0", true, nil)
	app2 := bundleArtifact(t, reg, "acme.org/artifacts/app", "1.1.0", true, nil)
	const shop = "acme.org/vectors/shop"
	reg.Push(t, "", config, app1, app2, ocmtest.Vector(shop, "1.0.0", config, app1), ocmtest.Vector(shop, "2.0.0", config, app2))
	v1, v2 := reg.Ref("", shop, "1.0.0"), reg.Ref("", shop, "2.0.0")

	startFluxdeployer(t, nil)
	ns := newNamespace(t, "gitops")
	// A revision of the landscape's repository: one Stage, as a platform team keeps it in Git.
	commit := func(vector string) string {
		t.Helper()
		files := map[string]string{
			"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - stage.yaml\n",
			"stage.yaml": fmt.Sprintf("apiVersion: konfidence.cloud/v1alpha1\nkind: Stage\nmetadata:\n  name: shop\n  namespace: %s\n"+
				"spec:\n  vector: %s\n  progressDeadline: 2m\n", ns, vector),
		}
		ref, err := ocmtest.PushKustomizeBundle(ctx, reg.Host, "gitops/landscape", "latest", files)
		if err != nil {
			t.Fatal(err)
		}
		digest, err := ocmtest.ManifestDigest(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return digest
	}
	rev1 := commit(v1)
	source := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"},
		Spec: sourcev1.OCIRepositorySpec{URL: "oci://" + reg.Host + "/gitops/landscape", Reference: &sourcev1.OCIRepositoryRef{Tag: "latest"},
			Insecure: true, Interval: metav1.Duration{Duration: 2 * time.Second}},
	}
	ks := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "landscape"},
		Spec: kustomizev1.KustomizationSpec{
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: source.Name},
			Path:      "./", Prune: true, Wait: true,
			Interval: metav1.Duration{Duration: time.Minute}, Timeout: &metav1.Duration{Duration: 3 * time.Minute},
		},
	}
	for _, obj := range []client.Object{source, ks} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	st := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}}
	// readyFor tells whether the Kustomization is Ready having applied and health-checked revision.
	readyFor := func(revision string) bool {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			t.Fatal(err)
		}
		return conditions.IsReady(ks) && strings.HasSuffix(ks.Status.LastAppliedRevision, revision)
	}
	testenv.Eventually(t, 4*time.Minute, func() error {
		if !readyFor(rev1) {
			return fmt.Errorf("Kustomization not Ready for %s: %+v", rev1, ks.Status.Conditions)
		}
		return nil
	})
	waitStage(t, 10*time.Second, st, promotedTo(v1))

	// The next commit moves the landscape. Sampled throughout: whenever the Kustomization reads Ready for it, the
	// Stage read after it has been promoted.
	began := time.Now()
	rev2 := commit(v2)
	var samples int
	testenv.Eventually(t, 4*time.Minute, func() error {
		samples++
		ready := readyFor(rev2)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(st), st); err != nil {
			return err
		}
		promoted := promotedTo(v2)(st)
		if ready && promoted != nil {
			t.Fatalf("the Kustomization is Ready for %s before the Stage was promoted: %v", rev2, promoted)
		}
		if !ready {
			return fmt.Errorf("Kustomization not Ready for %s: %+v", rev2, ks.Status.Conditions)
		}
		return nil
	})
	t.Logf("the commit moved the landscape and the Kustomization was Ready %s after the push (%d samples)", time.Since(began).Round(100*time.Millisecond), samples)
	if h := st.Status.History; len(h) != 2 || h[0].Vector != v2 || h[1].Vector != v1 {
		t.Errorf("history: %+v", h)
	}
}

// TestStageResumesAfterSIGKILL kills the operator (SIGKILL: no cleanup, no status write) at each step of a move —
// candidate created, candidate Ready, previous one being deleted — and starts it again: each move ends as it would
// have, the Stage's VectorDeployments never hold one vector twice, and the history keeps every entry.
func TestStageResumesAfterSIGKILL(t *testing.T) {
	if cluster == nil {
		t.Skip("kills the operator process: needs the embedded control plane")
	}
	ctx := context.Background()
	reg := newRegistry(t)
	config := bundleArtifact(t, reg, "acme.org/artifacts/config", "0.4.0", true, nil)
	const shop = "acme.org/vectors/shop"
	var vectors []string
	for i := range 4 {
		version := fmt.Sprintf("1.%d.0", i)
		app := bundleArtifact(t, reg, "acme.org/artifacts/app", version, true, nil)
		reg.Push(t, "", config, app, ocmtest.Vector(shop, version, config, app))
		vectors = append(vectors, reg.Ref("", shop, version))
	}
	bin, err := fluxdeployerBinary()
	if err != nil {
		t.Fatal(err)
	}
	writeDeployerConfig(t, nil)
	var operator *controlplane.Process
	start := func() {
		t.Helper()
		// Without leader election, so that the next process need not wait for the killed one's lease to expire.
		if operator, err = cluster.StartFluxdeployer(bin, "--log-level=debug", "--enable-leader-election=false"); err != nil {
			t.Fatal(err)
		}
	}
	start()
	t.Cleanup(func() {
		deleteNamespaces(t)
		operator.Stop()
		if t.Failed() {
			t.Logf("last lines of the operator:\n%s", operator.Tail(40))
		}
	})
	ns := newNamespace(t, "restart")
	st := createStage(t, &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: konfidencev1.StageSpec{Vector: vectors[0]}})
	waitStage(t, 3*time.Minute, st, promotedTo(vectors[0]))

	// owned lists the Stage's VectorDeployments, failing the test when two of them are of one vector.
	owned := func() map[string]*konfidencev1.VectorDeployment {
		t.Helper()
		list := &konfidencev1.VectorDeploymentList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		byVector := map[string]*konfidencev1.VectorDeployment{}
		for i := range list.Items {
			vd := &list.Items[i]
			if other, ok := byVector[vd.Spec.Vector]; ok {
				t.Fatalf("VectorDeployments %s and %s are both of %s", other.Name, vd.Name, vd.Spec.Vector)
			}
			byVector[vd.Spec.Vector] = vd
		}
		return byVector
	}
	killWhen := func(step string, reached func(map[string]*konfidencev1.VectorDeployment) bool) {
		t.Helper()
		testenv.Eventually(t, 3*time.Minute, func() error {
			if !reached(owned()) {
				return fmt.Errorf("not yet at %s", step)
			}
			return nil
		})
		operator.Kill()
		t.Logf("killed the operator at %q", step)
		start()
	}

	setStageVector(t, st, vectors[1])
	killWhen("candidate created", func(vds map[string]*konfidencev1.VectorDeployment) bool { return vds[vectors[1]] != nil })
	waitStage(t, 3*time.Minute, st, promotedTo(vectors[1]))

	setStageVector(t, st, vectors[2])
	killWhen("candidate Ready", func(vds map[string]*konfidencev1.VectorDeployment) bool {
		return vds[vectors[2]] != nil && conditions.IsReady(vds[vectors[2]])
	})
	waitStage(t, 3*time.Minute, st, promotedTo(vectors[2]))

	setStageVector(t, st, vectors[3])
	killWhen("previous one being deleted", func(vds map[string]*konfidencev1.VectorDeployment) bool {
		return vds[vectors[2]] == nil || !vds[vectors[2]].DeletionTimestamp.IsZero()
	})
	waitStage(t, 3*time.Minute, st, promotedTo(vectors[3]))
	testenv.Eventually(t, 2*time.Minute, func() error {
		if vds := owned(); len(vds) != 1 || vds[vectors[3]] == nil {
			return fmt.Errorf("VectorDeployments of %d vectors, want only the last one's", len(vds))
		}
		return nil
	})
	h := st.Status.History
	if len(h) != len(vectors) {
		t.Fatalf("%d history entries, want %d: %+v", len(h), len(vectors), h)
	}
	for i, e := range h {
		want := vectors[len(vectors)-1-i]
		if e.Vector != want || e.Outcome != konfidencev1.MovePromoted || (i == 0) != (e.Ended == nil) {
			t.Errorf("history entry %d: %+v, want %s promoted", i, e, want)
		}
	}
}
