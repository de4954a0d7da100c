package node

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
)

// TestAppendManagerArgs adds flags to the operator's container of the installer this tree renders, as a user's
// overlay does, and to nothing else; an installer without that container is refused rather than applied without
// them.
func TestAppendManagerArgs(t *testing.T) {
	manifest, err := Render(context.Background(), "ghcr.io/fluxdeployer/fluxdeployer:test", "config/default")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	before, err := controlplane.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := appendManagerArgs(objs, nil); err != nil {
		t.Fatal(err)
	}
	if err := appendManagerArgs(objs, []string{"--allowed-target-hosts=10.96.0.1:443"}); err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i, u := range objs {
		if reflect.DeepEqual(u.Object, before[i].Object) {
			continue
		}
		changed++
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		want, _, _ := unstructured.NestedSlice(before[i].Object, "spec", "template", "spec", "containers")
		wantArgs, _, _ := unstructured.NestedStringSlice(want[0].(map[string]any), "args")
		wantArgs = append(wantArgs, "--allowed-target-hosts=10.96.0.1:443")
		if u.GetKind() != "Deployment" || u.GetName() != operatorDeployment || !reflect.DeepEqual(args, wantArgs) {
			t.Errorf("%s %s changed, args %v; want only the operator's Deployment, args %v", u.GetKind(), u.GetName(), args, wantArgs)
		}
	}
	if changed != 1 {
		t.Errorf("%d objects changed, want 1", changed)
	}
	var others []*unstructured.Unstructured
	for _, u := range before {
		if u.GetKind() != "Deployment" {
			others = append(others, u)
		}
	}
	if err := appendManagerArgs(others, []string{"--x"}); err == nil {
		t.Error("args for an installer without the operator's Deployment: no error")
	}
}
