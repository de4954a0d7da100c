package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
)

// shardInstance is one operator instance of a sharded installation, run in this process, and the requests its
// client sent.
type shardInstance struct {
	name     string
	requests *testenv.RequestRecorder
}

// Flux's sharding guide's selectors: the main instance takes what no shard's key names.
var shardSelectors = map[string]string{
	"main":   "!" + konfidencev1.ShardKeyLabel,
	"shard1": konfidencev1.ShardKeyLabel + " in (shard1)",
	"shard2": konfidencev1.ShardKeyLabel + " in (shard2)",
}

// startShards runs one manager per named instance of shardSelectors, each with leader election on (a Lease in
// leaseNamespace) and its requests recorded, as config/sharding runs them.
func startShards(t *testing.T, env *testenv.Env, leaseNamespace string, names []string, args ...string) map[string]*shardInstance {
	t.Helper()
	t.Setenv("RUNTIME_NAMESPACE", leaseNamespace)
	instances := map[string]*shardInstance{}
	for _, name := range names {
		in := &shardInstance{name: name, requests: &testenv.RequestRecorder{}}
		o := parseRunOptions(t, append([]string{"--metrics-addr=0", "--health-addr=0", "--enable-leader-election",
			"--leader-election-retry-period=1s", "--watch-label-selector=" + shardSelectors[name]}, args...)...)
		o.reuseControllerNames = true
		mgr, err := newManager(in.requests.Wrap(env.Config), o)
		if err != nil {
			t.Fatal(err)
		}
		testenv.RunManager(t, mgr)
		instances[name] = in
	}
	return instances
}

// writtenNamespaces counts the writes among requests per namespace they went to ("" for a cluster-scoped one).
func writtenNamespaces(requests []string) map[string]int {
	written := map[string]int{}
	for _, req := range requests {
		if strings.HasPrefix(req, "GET ") {
			continue
		}
		ns := ""
		if _, rest, ok := strings.Cut(req, "/namespaces/"); ok {
			ns, _, _ = strings.Cut(rest, "/")
		}
		written[ns]++
	}
	return written
}

// assertWritesOnlyTo fails unless every write the instance sent since the last look went to one of namespaces.
func (in *shardInstance) assertWritesOnlyTo(t *testing.T, namespaces ...string) map[string]int {
	t.Helper()
	written := writtenNamespaces(in.requests.Take())
	for ns, n := range written {
		if !slices.Contains(namespaces, ns) {
			t.Errorf("%s wrote %d times in namespace %q, which is not its shard's (%v)", in.name, n, ns, namespaces)
		}
	}
	return written
}

func shardLabels(key string) map[string]string {
	if key == "" {
		return nil
	}
	return map[string]string{konfidencev1.ShardKeyLabel: key}
}

// TestShardsWriteOnlyTheirOwnObjects runs a main instance and two shards against one API server, with a
// VectorDeployment of a reusable Helm chart and a Kustomize bundle in a namespace of each: the shard key reaches
// every ArtifactDeployment and Flux object, every VectorDeployment converges, and each instance writes only in
// its own shard's namespace (and its Lease). A VectorDeployment moved to another shard by relabelling is taken
// over there, its ArtifactDeployments and Flux objects relabelled, none created again or deleted, and the old
// shard no longer writes them. A VectorDeployment whose key is not its namespace's gets ShardKeyConflict.
func TestShardsWriteOnlyTheirOwnObjects(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	c := env.Client
	flux := &operatorScenario{env: env}
	leases := namespace(t, c)
	instances := startShards(t, env, leases, []string{"main", "shard1", "shard2"})

	reg := ocmtest.NewRegistry(t)
	chart := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	bundle := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", "cloud.konfidence.flux.kustomize", false)
	bundle.Resources[1] = ocmtest.BundleResource("0.4.0", "registry.example.com/bundles/config:0.4.0")
	reg.Push(t, "", chart, bundle, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", chart, bundle))
	vector := reg.Ref("", "acme.org/vectors/shop", "1.0.0")

	namespaces := map[string]string{} // instance -> the namespace of its VectorDeployment
	for name := range instances {
		namespaces[name] = namespace(t, c)
	}
	// In shard1's namespace, Konfidence deployed the chart under a name of its own, which the VectorDeployment
	// adopts: after the move, shard2 finds it by the name the status records, not by the name it would compute.
	konfidence := createKonfidenceStyle(t, c, vector, namespaces["shard1"], "frontend-konfidence", shardLabels("shard1"))
	vds := map[string]*konfidencev1.VectorDeployment{}
	for name, ns := range namespaces {
		vd := &konfidencev1.VectorDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop", Labels: shardLabels(strings.TrimPrefix(name, "main"))},
			Spec:       konfidencev1.VectorDeploymentSpec{Vector: vector},
		}
		create(t, c, vd)
		vds[name] = vd
	}
	for name, vd := range vds {
		ads := waitForArtifactDeployments(t, c, vd, 2)
		for _, ad := range ads {
			flux.playFlux(t, ad)
		}
		waitReady(t, c, vd)
		assertShardKey(t, c, ads, strings.TrimPrefix(name, "main"))
	}
	for name, in := range instances {
		if written := in.assertWritesOnlyTo(t, namespaces[name], leases); written[namespaces[name]] == 0 {
			t.Errorf("%s wrote nothing in %s, its VectorDeployment's namespace", name, namespaces[name])
		}
	}

	if got := vds["shard1"].Status.ResultingArtifactDeployments[chart.Name].Name; got != konfidence.Name {
		t.Fatalf("shard1's VectorDeployment serves %s with %s, not with Konfidence's %s", chart.Name, got, konfidence.Name)
	}

	// A VectorDeployment of shard1 next to the main instance's, older one: refused, nothing created for it. Its
	// name sorts after shop's: creation times have a resolution of a second, and a tie goes to the smaller name,
	// so a landscape that converged within the second of its creation must not make the intruder the oldest.
	intruder := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespaces["main"], Name: "the-intruder", Labels: shardLabels("shard1")},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: vector},
	}
	create(t, c, intruder)
	waitFor(t, c, intruder, func() error {
		if r := conditions.GetReason(intruder, meta.ReadyCondition); r != konfidencev1.ShardKeyConflictReason || !conditions.IsStalled(intruder) {
			return fmt.Errorf("Ready reason %q (%s), want %s and Stalled", r, conditions.GetMessage(intruder, meta.ReadyCondition), konfidencev1.ShardKeyConflictReason)
		}
		return nil
	})
	assertWarning(t, c, intruder, konfidencev1.ShardKeyConflictReason)
	if owned, err := ownedArtifactDeployments(ctx, c, intruder); err != nil || len(owned) > 0 {
		t.Errorf("ArtifactDeployments of the refused VectorDeployment: %d (%v)", len(owned), err)
	}
	if err := c.Delete(ctx, intruder); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(intruder), intruder); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the refused VectorDeployment is not gone yet: %v", err)
		}
		return nil
	})

	// shard1's VectorDeployment moves to shard2.
	moved := vds["shard1"]
	before := liveObjects(t, c, moved)
	if err := c.Patch(ctx, moved, client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:"shard2"}}}`, konfidencev1.ShardKeyLabel))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		for key, obj := range liveObjects(t, c, moved) {
			if before[key].uid != obj.uid {
				return fmt.Errorf("%s is another object than before the move, or new", key)
			}
			if obj.shard != "shard2" {
				return fmt.Errorf("%s has shard key %q, want shard2", key, obj.shard)
			}
		}
		return nil
	})
	if after := liveObjects(t, c, moved); len(after) != len(before) {
		t.Errorf("%d objects after the move, %d before", len(after), len(before))
	}
	// Flux's controllers reconcile the relabelled objects: helm-controller gives the HelmChart the new labels of
	// the HelmRelease's chart template, which lets shard2 see it.
	for _, ad := range waitForArtifactDeployments(t, c, moved, 2) {
		flux.replayFlux(t, ad)
	}
	waitReady(t, c, moved)
	// What shard1 wrote while its cache had not seen the move yet is past; from now on it writes nothing there,
	// while shard2 handles a reconcile request of the VectorDeployment and of each of its ArtifactDeployments.
	instances["shard1"].requests.Take()
	requestReconcile(t, c, moved, "after-the-move")
	ads := waitForArtifactDeployments(t, c, moved, 2)
	for _, ad := range ads {
		requestReconcile(t, c, ad, "after-the-move")
	}
	waitFor(t, c, moved, func() error {
		if moved.Status.LastHandledReconcileAt != "after-the-move" {
			return fmt.Errorf("reconcile request not handled: %q", moved.Status.LastHandledReconcileAt)
		}
		return nil
	})
	for _, ad := range ads {
		waitFor(t, c, ad, func() error {
			if ad.Status.LastHandledReconcileAt != "after-the-move" {
				return fmt.Errorf("%s: reconcile request not handled: %q", ad.Name, ad.Status.LastHandledReconcileAt)
			}
			return nil
		})
	}
	instances["shard1"].assertWritesOnlyTo(t, leases)
	if written := instances["shard2"].assertWritesOnlyTo(t, namespaces["shard1"], namespaces["shard2"], leases); written[namespaces["shard1"]] == 0 {
		t.Errorf("shard2 did not handle the reconcile requests in %s", namespaces["shard1"])
	}
}

// TestShardsClaimAcrossShards: with a targetNamespace shared by every namespace, two ArtifactDeployments in two
// shards that would deploy under one workload name are told apart by the claim, which each shard reads from
// every shard: the younger one gets TargetNameConflict and no Kustomization.
func TestShardsClaimAcrossShards(t *testing.T) {
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	c := env.Client
	system := namespace(t, c)
	create(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "flux-deployer-configuration"},
		Data: map[string]string{"targetNamespace": "shared"}})
	startShards(t, env, system, []string{"shard1", "shard2"}, "--flux-deployer-config-namespace="+system)

	older := kustomizeArtifactDeployment(namespace(t, c), "backend-1-2-3-e1mvwibzp5", "shard1")
	create(t, c, older)
	waitFor(t, c, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: older.Namespace, Name: older.Name}}, func() error { return nil })
	// Creation timestamps have seconds: the younger one is created in a later second than the older one.
	time.Sleep(time.Until(older.CreationTimestamp.Add(time.Second)))
	younger := kustomizeArtifactDeployment(namespace(t, c), "frontend-1-2-3-e1mvwibzp5", "shard2")
	create(t, c, younger)
	waitForReason(t, c, younger, konfidencev1.TargetNameConflictReason)
	err := c.Get(context.Background(), client.ObjectKeyFromObject(younger), &kustomizev1.Kustomization{})
	if err == nil {
		t.Errorf("the younger claimant %s/%s has a Kustomization", younger.Namespace, younger.Name)
	}
}

// createKonfidenceStyle creates the ArtifactDeployment of the vector's reusable Helm artifact as Konfidence
// would: the spec and annotations this operator gives it, under another name, without identity label and owner.
func createKonfidenceStyle(t *testing.T, c client.Client, vector, namespace, name string, labels map[string]string) *konfidencev1.ArtifactDeployment {
	t.Helper()
	v, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), vector, ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	owner := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "shop"}}
	for _, ra := range vectordeployment.ArtifactsOf(v) {
		if ra.Artifact.Manifest.Type != "cloud.konfidence.flux.helm" {
			continue
		}
		ad, err := vectordeployment.DesiredArtifactDeployment(c.Scheme(), owner, ra.Artifact, 0)
		if err != nil {
			t.Fatal(err)
		}
		ad.Name, ad.Labels, ad.OwnerReferences = name, labels, nil
		create(t, c, ad)
		return ad
	}
	t.Fatal("the vector has no Helm artifact")
	return nil
}

func kustomizeArtifactDeployment(namespace, name, shard string) *konfidencev1.ArtifactDeployment {
	component := "acme.org/artifacts/" + strings.SplitN(name, "-", 2)[0]
	return &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: shardLabels(shard)},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest: konfidencev1.ArtifactManifest{Type: fluxdeployer.KustomizeManifestType},
			Component: konfidencev1.Component{Name: component, Version: "1.2.3", Resources: []konfidencev1.Resource{{
				Name: "bundle", Type: "kustomize",
				Content: &apiextensionsv1.JSON{Raw: []byte(`{"type":"ociArtifact","imageReference":"registry.example.com/bundles/` + name + `:1.2.3"}`)},
			}}},
		},
	}
}

func waitForArtifactDeployments(t *testing.T, c client.Client, vd *konfidencev1.VectorDeployment, n int) []*konfidencev1.ArtifactDeployment {
	t.Helper()
	var ads []*konfidencev1.ArtifactDeployment
	testenv.Eventually(t, time.Minute, func() error {
		var err error
		ads, err = ownedArtifactDeployments(context.Background(), c, vd)
		if err == nil && len(ads) != n {
			err = fmt.Errorf("%d ArtifactDeployments of %s/%s, want %d", len(ads), vd.Namespace, vd.Name, n)
		}
		return err
	})
	return ads
}

func waitReady(t *testing.T, c client.Client, vd *konfidencev1.VectorDeployment) {
	t.Helper()
	waitFor(t, c, vd, func() error {
		if !conditions.IsReady(vd) {
			return fmt.Errorf("%s/%s not Ready: %+v", vd.Namespace, vd.Name, vd.Status.Conditions)
		}
		return nil
	})
}

// assertShardKey checks that the ArtifactDeployments and their Flux objects carry the shard key (none for "").
func assertShardKey(t *testing.T, c client.Client, ads []*konfidencev1.ArtifactDeployment, key string) {
	t.Helper()
	for _, ad := range ads {
		for _, obj := range append([]client.Object{ad}, fluxObjectsOf(ad)...) {
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: ad.Namespace, Name: ad.Name}, obj); err != nil {
				t.Fatal(err)
			}
			if got := obj.GetLabels()[konfidencev1.ShardKeyLabel]; got != key {
				t.Errorf("%T %s/%s has shard key %q, want %q", obj, ad.Namespace, ad.Name, got, key)
			}
		}
	}
}

// fluxObjectsOf are empty objects of the Flux kinds the deployer applies for ad, named like it.
func fluxObjectsOf(ad *konfidencev1.ArtifactDeployment) []client.Object {
	if ad.Spec.Manifest.Type == fluxdeployer.KustomizeManifestType {
		return []client.Object{&sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}}
	}
	return []client.Object{&sourcev1.HelmRepository{}, &helmv2.HelmRelease{}}
}

type liveObject struct {
	uid   types.UID
	shard string
}

// liveObjects are vd's ArtifactDeployments and their Flux objects, by kind and name.
func liveObjects(t *testing.T, c client.Client, vd *konfidencev1.VectorDeployment) map[string]liveObject {
	t.Helper()
	ctx := context.Background()
	ads, err := ownedArtifactDeployments(ctx, c, vd)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]liveObject{}
	for _, ad := range ads {
		for _, obj := range append([]client.Object{ad}, fluxObjectsOf(ad)...) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ad.Namespace, Name: ad.Name}, obj); err != nil {
				t.Fatal(err)
			}
			live[fmt.Sprintf("%T %s", obj, ad.Name)] = liveObject{uid: obj.GetUID(), shard: obj.GetLabels()[konfidencev1.ShardKeyLabel]}
		}
	}
	return live
}

func requestReconcile(t *testing.T, c client.Client, obj client.Object, at string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, at)
	if err := c.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}
