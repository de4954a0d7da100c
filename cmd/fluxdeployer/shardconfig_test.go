package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestShardingConfigRunsDistinctShards builds config/sharding with the real kustomize and reads each Deployment's
// arguments with the run command's flags: a main instance and two shards, with distinct names and Leases, each
// shard's pods selected by its Deployment alone, whose --watch-label-selector give every object of a known shard key
// (or of none) to exactly one instance.
func TestShardingConfigRunsDistinctShards(t *testing.T) {
	objs, err := controlplane.Kustomize("config/sharding")
	if err != nil {
		t.Fatal(err)
	}
	type instance struct {
		deployment *appsv1.Deployment
		shard      labels.Selector
		lease      string
	}
	var instances []instance
	deployments, err := controlplane.Deployments(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments {
		args := d.Spec.Template.Spec.Containers[0].Args
		if len(args) == 0 || args[0] != "run" {
			t.Fatalf("Deployment %s runs %v", d.Name, args)
		}
		if n := countPrefixed(args, "--watch-label-selector"); n != 1 {
			t.Errorf("Deployment %s passes --watch-label-selector %d times: %v", d.Name, n, args)
		}
		o := parseRunOptions(t, args[1:]...)
		shard, err := o.shard()
		if err != nil || shard == nil {
			t.Fatalf("Deployment %s: selector %q: %v", d.Name, o.watch.LabelSelector, err)
		}
		instances = append(instances, instance{deployment: d, shard: shard, lease: o.leaderElectionID()})
	}
	if len(instances) != 3 {
		t.Fatalf("config/sharding runs %d instances, want a main one and two shards", len(instances))
	}
	names, leases := map[string]bool{}, map[string]bool{}
	for _, in := range instances {
		names[in.deployment.Name], leases[in.lease] = true, true
		if in.deployment.Namespace != controlplane.OperatorNamespace {
			t.Errorf("Deployment %s in namespace %q", in.deployment.Name, in.deployment.Namespace)
		}
		selector, err := metav1.LabelSelectorAsSelector(in.deployment.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !selector.Matches(labels.Set(in.deployment.Spec.Template.Labels)) {
			t.Errorf("Deployment %s does not select its own pods", in.deployment.Name)
		}
		// The main Deployment keeps config/default's selector, which is immutable, so that an installation moves
		// to shards without recreating it; it matches the shards' pods too, which their ReplicaSets' owner
		// references keep apart, as in Flux's sharded installation. A shard's selects its own pods only.
		for _, other := range instances {
			if in.deployment.Name != "fluxdeployer" && other.deployment != in.deployment &&
				selector.Matches(labels.Set(other.deployment.Spec.Template.Labels)) {
				t.Errorf("Deployment %s selects the pods of %s", in.deployment.Name, other.deployment.Name)
			}
		}
	}
	if len(names) != 3 || len(leases) != 3 {
		t.Errorf("names %v, Leases %v: want three distinct of each", names, leases)
	}
	for _, key := range []*string{nil, new("shard1"), new("shard2")} {
		set := labels.Set{}
		if key != nil {
			set[konfidencev1.ShardKeyLabel] = *key
		}
		var owners []string
		for _, in := range instances {
			if in.shard.Matches(set) {
				owners = append(owners, in.deployment.Name)
			}
		}
		if len(owners) != 1 {
			t.Errorf("objects labelled %v are reconciled by %v, want exactly one instance", set, owners)
		}
	}
}

func countPrefixed(args []string, flag string) int {
	n := 0
	for _, arg := range args {
		if arg == flag || strings.HasPrefix(arg, flag+"=") {
			n++
		}
	}
	return n
}

// TestShardKeyIsTheNamespaces applies config/sharding's admission policy to a real API server: a Stage,
// VectorDeployment or ArtifactDeployment is created with, or relabelled to, its Namespace's shard key only, so a
// tenant who may write them cannot choose another team's shard, or none; other updates of an object whose key
// the platform has since moved pass, so the operator keeps writing it while a namespace moves.
func TestShardKeyIsTheNamespaces(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	objs, err := controlplane.Kustomize("config/sharding")
	if err != nil {
		t.Fatal(err)
	}
	policy := slices.DeleteFunc(objs, func(u *unstructured.Unstructured) bool {
		return u.GetAPIVersion() != "admissionregistration.k8s.io/v1"
	})
	if len(policy) != 2 {
		t.Fatalf("config/sharding holds %d admission objects, want the policy and its binding", len(policy))
	}
	if err := controlplane.Apply(ctx, env.Client, policy); err != nil {
		t.Fatal(err)
	}
	namespace := func(key string) string {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shard-key-"}}
		if key != "" {
			ns.Labels = map[string]string{konfidencev1.ShardKeyLabel: key}
		}
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		return ns.Name
	}
	shard1, main := namespace("shard1"), namespace("")
	vd := func(ns, name, key string) *konfidencev1.VectorDeployment {
		vd := &konfidencev1.VectorDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       konfidencev1.VectorDeploymentSpec{Vector: "registry.example//acme.org/vectors/shop:1.0.0"},
		}
		if key != "" {
			vd.Labels = map[string]string{konfidencev1.ShardKeyLabel: key}
		}
		return vd
	}
	// The policy takes effect once the API server has compiled it: until then a refused object would be created.
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := env.Client.Create(ctx, vd(shard1, "probe", "shard2"), client.DryRunAll); err == nil {
			return errors.New("a VectorDeployment of shard2 is admitted in a namespace of shard1")
		}
		return nil
	})

	for _, tc := range []struct {
		name      string
		obj       client.Object
		forbidden bool
	}{
		{"the namespace's key", vd(shard1, "same", "shard1"), false},
		{"another shard's key", vd(shard1, "other", "shard2"), true},
		{"no key in a sharded namespace", vd(shard1, "none", ""), true},
		{"no key in the main instance's namespace", vd(main, "none", ""), false},
		{"a key in the main instance's namespace", vd(main, "keyed", "shard1"), true},
		{"a Stage of another shard", &konfidencev1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: shard1, Name: "stage", Labels: map[string]string{konfidencev1.ShardKeyLabel: "shard2"}},
			Spec:       konfidencev1.StageSpec{Vector: "registry.example//acme.org/vectors/shop:1.0.0"},
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, tc.obj)
			switch {
			case tc.forbidden && !apierrors.IsForbidden(err):
				t.Fatalf("created: %v, want it refused", err)
			case tc.forbidden && !strings.Contains(err.Error(), "must be"):
				t.Errorf("refused as %q, want the policy's message", err)
			case !tc.forbidden && err != nil:
				t.Fatalf("refused: %v", err)
			}
		})
	}

	// A namespace moved to shard2: its object keeps shard1 until relabelled, and may be written meanwhile; the only
	// key it may be given is shard2.
	moved := vd(shard1, "moving", "shard1")
	if err := env.Client.Create(ctx, moved); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: shard1}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels[konfidencev1.ShardKeyLabel] = "shard2"
	if err := env.Client.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	label := func(key string) error {
		return env.Client.Patch(ctx, moved, client.RawPatch(types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, konfidencev1.ShardKeyLabel, key)))
	}
	testenv.Eventually(t, 30*time.Second, func() error { // the namespace's new label reaches the policy's informer
		if err := label("shard3"); !apierrors.IsForbidden(err) {
			return fmt.Errorf("relabelled to shard3: %v", err)
		}
		return nil
	})
	if err := env.Client.Patch(ctx, moved, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/kept"]}}`))); err != nil {
		t.Errorf("a finalizer on the not yet relabelled object: %v", err)
	}
	if err := label("shard2"); err != nil {
		t.Errorf("relabelled to the namespace's new key: %v", err)
	}
}
