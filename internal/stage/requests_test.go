package stage_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestStageReconcileRequestsWithinTheBoundRevalidate: a Stage on a range that verifies signatures, with a newer
// version in the range that does not verify (unsigned, 32 artifacts), so that every reconcile verifies it again.
// Five reconcile requests in a row: the first reads that version and its artifacts around the cache; each later
// one, within the bound, costs a few requests whatever the number of artifacts, and is recorded as handled all
// the same. Before the bound, every request read the version and its 33 artifacts again (145 requests), as fast as
// a tenant could annotate the Stage.
func TestStageReconcileRequestsWithinTheBoundRevalidate(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const shop = "acme.org/vectors/shop"
	// The signed version's artifact is pinned by digest, so that its signature covers the bundle.
	bundle, err := ocmtest.PushKustomizeBundle(ctx, reg.Host, "bundles/app", "1.0.0",
		map[string]string{"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"})
	if err != nil {
		t.Fatal(err)
	}
	digest, err := ocmtest.ManifestDigest(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	app := ocmtest.Artifact("acme.org/artifacts/app", "1.0.0", kustomizeType, true)
	app.Resources[1] = ocmtest.BundleResource("1.0.0", bundle).WithOCIDigest(digest)
	signed := ocmtest.Vector(shop, "1.0.0", app)
	signed.Signers = []ocmtest.Signer{{Name: "release", Key: key}}
	artifacts := []ocmtest.ComponentVersion{app}
	for i := range 32 {
		artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/a%d", i), "1.0.0", kustomizeType, true))
	}
	reg.Push(t, "", append(artifacts, signed, ocmtest.Vector(shop, "1.1.0", artifacts...))...)

	startOperator(t)
	ns := newNamespace(t)
	playDeployer(t, ns)
	if err := env.Client.Create(ctx, ocmtest.KeysSecret(t, ns, "vector-keys", map[string]*rsa.PublicKey{"release": &key.PublicKey})); err != nil {
		t.Fatal(err)
	}
	st := &konfidencev1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: konfidencev1.StageSpec{
			Vector: strings.TrimSuffix(reg.Ref("", shop, "1.0.0"), ":1.0.0"), Semver: ">=1.0.0 <2.0.0",
			Verify: &konfidencev1.VectorVerification{Signatures: []string{"release"}, SecretRef: meta.LocalObjectReference{Name: "vector-keys"}},
		},
	}
	if err := env.Client.Create(ctx, st); err != nil {
		t.Fatal(err)
	}
	waitActive(t, st, reg.Ref("", shop, "1.0.0"))

	active := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: getStage(t, st).Status.ActiveVectorDeployment}}
	// request asks for a reconcile and returns the registry requests it causes: those of the Stage's reconcile, of
	// its VectorDeployment's, which the request is passed on to, and of the reconciles their status writes start.
	// Each records the request as handled with its status write; the reconciles those writes start are over once
	// the registry has been idle for a while. Counting up to the Stage's write alone would let the VectorDeployment's
	// requests of one request fall into the next one's count.
	request := func(token string) int64 {
		t.Helper()
		before := reg.Requests()
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token))
		if err := env.Client.Patch(ctx, st, patch); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			if got := getStage(t, st).Status.LastHandledReconcileAt; got != token {
				return fmt.Errorf("Stage: lastHandledReconcileAt %q, want %q", got, token)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(active), active); err != nil {
				return err
			}
			if got := active.Status.LastHandledReconcileAt; got != token {
				return fmt.Errorf("VectorDeployment %s: lastHandledReconcileAt %q, want %q", active.Name, got, token)
			}
			return nil
		})
		idle := reg.Requests()
		testenv.Eventually(t, 30*time.Second, func() error {
			time.Sleep(time.Second)
			if n := reg.Requests(); n != idle {
				idle = n
				return fmt.Errorf("the registry still serves requests")
			}
			return nil
		})
		return idle - before
	}
	first := request("first")
	if first < 4*32 {
		t.Errorf("the first reconcile request made %d registry requests, want version 1.1.0 and its 33 artifacts read again", first)
	}
	var again []int64
	for i := range 4 {
		n := request(fmt.Sprintf("again-%d", i))
		// The Stage's tag list and 1.1.0's tag resolved again, 1.0.0's tag resolved again by its VectorDeployment,
		// which the request is passed on to, and a tag list for each reconcile of the Stage that the
		// VectorDeployment's status writes start: 4 or 5 measured.
		if n > 10 {
			t.Errorf("reconcile request %d within the bound made %d registry requests, want at most 10, none for the artifacts", i+2, n)
		}
		again = append(again, n)
	}
	t.Logf("registry requests of five reconcile requests: %d, then %v", first, again)
	if got := getStage(t, st).Status.LastAppliedVector; got != reg.Ref("", shop, "1.0.0") {
		t.Errorf("the Stage left 1.0.0 for a version that does not verify: lastAppliedVector %s", got)
	}
}
