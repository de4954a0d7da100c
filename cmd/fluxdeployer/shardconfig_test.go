package main

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
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
