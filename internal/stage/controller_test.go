package stage_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/operating"
	"github.com/fluxdeployer/fluxdeployer/internal/stage"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	testenv.Main(m, func(e *testenv.Env) { env = e })
}

const kustomizeType = "cloud.konfidence.flux.kustomize"

// startOperator runs the VectorDeployment reconciler, and with it the Stage reconciler, as the binary sets them up,
// against the shared API server. No Flux deployer runs: playDeployer stands in for it.
func startOperator(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	o := &vectordeployment.Options{}
	if err := o.SetupWithManager(mgr, operating.Options{Concurrent: 2, SkipNameValidation: true, RequeueDependency: time.Second}); err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
}

// playDeployer reports every ArtifactDeployment of the namespace Ready, as the Flux deployer does once Flux has
// deployed it, until the test ends.
func playDeployer(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			list := &konfidencev1.ArtifactDeploymentList{}
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err == nil {
				for i := range list.Items {
					if ad := &list.Items[i]; !conditions.IsReady(ad) && ad.DeletionTimestamp.IsZero() {
						_ = testenv.UpdateFluxStatus(ctx, env.Client, ad, nil,
							metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason, Message: "deployed"})
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "stage-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func getStage(t *testing.T, st *konfidencev1.Stage) *konfidencev1.Stage {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(st), st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestInstancesBelongToTheStage: a non-reusable artifact of a Stage's vector is the landscape's instance. The next
// vector with the same artifact at the same version keeps its ArtifactDeployment (the same object, owned by both
// VectorDeployments during the move, by the new one after it); a VectorDeployment created by hand for the same
// vector gets an instance of its own, named as before Stages existed.
func TestInstancesBelongToTheStage(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	db := ocmtest.Artifact("acme.org/artifacts/db", "16.4.0", kustomizeType, false)
	app1 := ocmtest.Artifact("acme.org/artifacts/app", "1.0.0", kustomizeType, true)
	app2 := ocmtest.Artifact("acme.org/artifacts/app", "1.1.0", kustomizeType, true)
	reg.Push(t, "", db, app1, app2, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", db, app1), ocmtest.Vector("acme.org/vectors/shop", "2.0.0", db, app2))
	v1, v2 := reg.Ref("", "acme.org/vectors/shop", "1.0.0"), reg.Ref("", "acme.org/vectors/shop", "2.0.0")

	startOperator(t)
	ns := newNamespace(t)
	playDeployer(t, ns)
	st := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: konfidencev1.StageSpec{Vector: v1}}
	if err := env.Client.Create(ctx, st); err != nil {
		t.Fatal(err)
	}
	waitActive(t, st, v1)
	if h := st.Status.History; len(h) != 1 || !strings.HasPrefix(h[0].Digest, "sha256:") {
		t.Errorf("the history does not record the digest its VectorDeployment read: %+v", h)
	}
	instance := instanceOf(t, ns, db)
	if instance.Annotations[konfidencev1.StageUIDAnnotation] != string(st.UID) || instance.Annotations[konfidencev1.VectorDeploymentUIDAnnotation] != "" {
		t.Fatalf("the instance is not the Stage's: %v", instance.Annotations)
	}

	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"vector":%q}}`, v2))
	if err := env.Client.Patch(ctx, st, patch); err != nil {
		t.Fatal(err)
	}
	waitActive(t, st, v2)
	testenv.Eventually(t, 30*time.Second, func() error {
		kept := instanceOf(t, ns, db)
		if kept.UID != instance.UID {
			return fmt.Errorf("the instance was replaced: %s, was %s", kept.UID, instance.UID)
		}
		if len(kept.OwnerReferences) != 1 || kept.OwnerReferences[0].Name != st.Status.ActiveVectorDeployment {
			return fmt.Errorf("owners of the kept instance: %+v, want only %s", kept.OwnerReferences, st.Status.ActiveVectorDeployment)
		}
		return nil
	})

	// By hand, the same vector's VectorDeployment has its own instance.
	byHand := testenv.CreateVectorDeployment(t, env.Client, ns, "by-hand", v2)
	testenv.Eventually(t, 30*time.Second, func() error {
		list := &konfidencev1.ArtifactDeploymentList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ad := range list.Items {
			if ad.Annotations[konfidencev1.VectorDeploymentUIDAnnotation] == string(byHand.UID) && ad.UID != instance.UID {
				return nil
			}
		}
		return fmt.Errorf("no instance of its own for VectorDeployment %s", byHand.Name)
	})
}

func waitActive(t *testing.T, st *konfidencev1.Stage, vector string) {
	t.Helper()
	want, err := stage.VectorDeploymentName(st.Name, st.UID, vector)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		st = getStage(t, st)
		if st.Status.ActiveVectorDeployment != want || st.Status.CandidateVectorDeployment != "" || !conditions.IsReady(st) {
			return fmt.Errorf("not promoted to %s: active %q candidate %q %+v", want, st.Status.ActiveVectorDeployment, st.Status.CandidateVectorDeployment, st.Status.Conditions)
		}
		return nil
	})
}

// instanceOf returns the one ArtifactDeployment of the artifact the Stage owns an instance of.
func instanceOf(t *testing.T, ns string, a ocmtest.ComponentVersion) *konfidencev1.ArtifactDeployment {
	t.Helper()
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var found []*konfidencev1.ArtifactDeployment
	for i := range list.Items {
		if ad := &list.Items[i]; ad.Spec.Component.Name == a.Name && ad.Annotations[konfidencev1.StageUIDAnnotation] != "" && ad.DeletionTimestamp.IsZero() {
			found = append(found, ad)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d instances of %s, want 1", len(found), a.Name)
	}
	return found[0]
}

// TestStageLeavesAVectorDeploymentItDoesNotControl: the name the Stage would give its VectorDeployment is taken by
// one created by hand. The Stage stalls with VectorDeploymentConflict and neither changes nor deletes it.
func TestStageLeavesAVectorDeploymentItDoesNotControl(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	app := ocmtest.Artifact("acme.org/artifacts/app", "1.0.0", kustomizeType, true)
	reg.Push(t, "", app, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", app))
	v1 := reg.Ref("", "acme.org/vectors/shop", "1.0.0")

	ns := newNamespace(t)
	// Suspended until the squatter is in place: its name depends on the Stage's UID.
	st := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: konfidencev1.StageSpec{Vector: v1, Suspend: true}}
	if err := env.Client.Create(ctx, st); err != nil {
		t.Fatal(err)
	}
	name, err := stage.VectorDeploymentName(st.Name, st.UID, v1)
	if err != nil {
		t.Fatal(err)
	}
	squatter := testenv.CreateVectorDeployment(t, env.Client, ns, name, v1)
	startOperator(t)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`))
	if err := env.Client.Patch(ctx, st, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		st = getStage(t, st)
		if !conditions.IsStalled(st) || conditions.GetReason(st, meta.ReadyCondition) != konfidencev1.VectorDeploymentConflictReason {
			return fmt.Errorf("not stalled on the conflict: %+v", st.Status.Conditions)
		}
		return nil
	})
	got := &konfidencev1.VectorDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(squatter), got); err != nil {
		t.Fatalf("the squatter: %v", err)
	}
	if len(got.OwnerReferences) != 0 || got.Spec.Suspend || !got.DeletionTimestamp.IsZero() {
		t.Errorf("the squatter was changed: owners %+v, spec %+v, deleted %v", got.OwnerReferences, got.Spec, got.DeletionTimestamp)
	}
}

// TestSuspendIsPassedOn: suspending a Stage suspends its VectorDeployments, and resuming it resumes them; its shard
// key is theirs too.
func TestSuspendIsPassedOn(t *testing.T) {
	ctx := context.Background()
	reg := ocmtest.NewRegistry(t)
	app := ocmtest.Artifact("acme.org/artifacts/app", "1.0.0", kustomizeType, true)
	reg.Push(t, "", app, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", app))
	v1 := reg.Ref("", "acme.org/vectors/shop", "1.0.0")
	startOperator(t)
	ns := newNamespace(t)
	playDeployer(t, ns)
	st := &konfidencev1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: konfidencev1.StageSpec{Vector: v1}}
	if err := env.Client.Create(ctx, st); err != nil {
		t.Fatal(err)
	}
	waitActive(t, st, v1)
	vd := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: st.Status.ActiveVectorDeployment}}
	for _, suspend := range []bool{true, false} {
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend))
		if err := env.Client.Patch(ctx, st, patch); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
				return err
			}
			if vd.Spec.Suspend != suspend {
				return fmt.Errorf("VectorDeployment %s suspend %v, want %v", vd.Name, vd.Spec.Suspend, suspend)
			}
			return nil
		})
	}
	// Moved to a shard, the Stage takes its VectorDeployment along.
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:"shard1"}}}`, konfidencev1.ShardKeyLabel))
	if err := env.Client.Patch(ctx, st, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil {
			return err
		}
		if vd.Labels[konfidencev1.ShardKeyLabel] != "shard1" {
			return fmt.Errorf("VectorDeployment %s labels %v, want the Stage's shard key", vd.Name, vd.Labels)
		}
		return nil
	})
	if err := env.Client.Delete(ctx, st); err != nil {
		t.Fatal(err)
	}
	// The garbage collector of a real cluster deletes its VectorDeployments; envtest runs none, so only the owner
	// reference that lets it is checked.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vd), vd); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(vd); ref == nil || ref.UID != st.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("VectorDeployment %s is not controlled by the Stage for garbage collection: %+v", vd.Name, vd.OwnerReferences)
	}
}
