package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/node"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// specChange is a change of a Flux object's spec that an upgrade from a release makes on purpose: the objects of
// kind whose spec field path (dotted, as specChanges names it) changes, or, with path "", objects of kind that
// appear or go. why is the CHANGELOG's line that tells users.
type specChange struct {
	kind, path, why string
}

// upgradeSpecChanges lists, by the previous release's version, every change of a Flux object's spec that upgrading
// from it to this tree makes to TestNodeUpgrade's landscape. The list is exact: a change not listed fails the
// test, and so does one listed that did not happen. A new release starts with no entry: what the next one changes
// is listed here, and in the CHANGELOG's "Upgrading" section, as the test finds it.
var upgradeSpecChanges = map[string][]specChange{
	"0.1.0": {
		{"HelmRelease", "chart.metadata", "HelmReleases label their chart template (spec.chart.metadata.labels) with " +
			"their ArtifactDeployment, so the HelmCharts helm-controller creates carry it and the operator's cache holds " +
			"only its own HelmCharts, of its shard (CHANGELOG, Upgrading)"},
	},
}

// TestNodeUpgrade upgrades an installation of the previous release to this tree as docs/release.md tells users to,
// and downgrades it back. The previous release is found in git (node.PreviousRelease: the commit that first added
// the newest CHANGELOG entry before HEAD); its tree is extracted, its image built by its own hack/image and
// installed from the install.yaml its own `make build-installer` writes, in place of the operator the suite
// installed. Both releases run with remote targets on (--allowed-target-hosts, added to every apply of either
// install.yaml as a user's overlay adds it). With it, a landscape of real workloads: two VectorDeployments sharing
// a Helm and a Kustomize ArtifactDeployment, one of whose artifacts takes a collision-salted name (a suspended
// ArtifactDeployment of another identity holds its name), and a deployed ArtifactDeployment suspended afterwards;
// and, in a second namespace, a VectorDeployment (two Helm artifacts and a Kustomize one) deploying to a remote
// target through the namespace's kubeconfig Secret. The remote target is the node's own API server reached as pods
// reach it (the kubernetes Service's ClusterIP), with the token of a ServiceAccount that may deploy into that
// namespace only; its HelmReleases and Kustomizations must name the Secret (spec.kubeConfig), and the API server's
// audit log must attribute every write to its Deployments and Services to that account, helm-controller's and
// kustomize-controller's, and show the leading operator listing its Services as that account (the deployment
// results), so that a deployment gone local fails. Then this tree's install.yaml is applied (server-side, as
// `kubectl apply --server-side -f install.yaml`), and after the rollout, in both namespaces:
//   - every ArtifactDeployment and Flux object keeps its name and UID;
//   - no Flux object's spec changes but as upgradeSpecChanges lists, and the remote namespace's still name the
//     kubeconfig Secret;
//   - no pod of the landscape restarts or is replaced, every workload stays ready, and no Helm release gets a
//     revision;
//   - the suspended ArtifactDeployment and its HelmRelease stay suspended;
//   - the new operator's writes settle to none for a while, within a minute of its taking the lead;
//   - the remote namespace's workloads are written only with the kubeconfig's credentials, and the new operator
//     lists its Services with them.
//
// Then the previous release's install.yaml is applied again, and the same holds, its spec changes undone.
// The chart (`helm upgrade`) is not covered: the previous release had no chart.
func TestNodeUpgrade(t *testing.T) {
	requireNode(t)
	realNode, ok := realCluster.(*node.Cluster)
	if !ok {
		t.Skip("builds another commit's operator and installs it in place of the installed one: the real node only (make e2e-upgrade)")
	}
	ctx := context.Background()
	root := controlplane.RepoRoot()
	rel, err := node.PreviousRelease(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	src := filepath.Join(t.TempDir(), "v"+rel.Version)
	if err := node.ExtractTree(ctx, root, rel.Commit, src); err != nil {
		t.Fatal(err)
	}
	t.Logf("previous release %s (commit %s): tree extracted and its modules downloaded in %s", rel.Version, rel.Commit, time.Since(begin).Round(100*time.Millisecond))
	current, err := node.OperatorImage()
	if err != nil {
		t.Fatal(err)
	}
	// Tagged with its commit too: this tree may still carry the previous release's VERSION (the next version is set
	// when the release is made), and containerd holds one image per name.
	previous := fmt.Sprintf("ghcr.io/fluxdeployer/fluxdeployer:v%s-%.7s", rel.Version, rel.Commit)
	begin = time.Now()
	if err := realNode.BuildReleaseImage(ctx, src, rel, previous); err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s built by the release's hack/image and imported in %s", previous, time.Since(begin).Round(100*time.Millisecond))

	// The previous release as a user installed it: this tree's installation goes first, CRDs and namespace included.
	t.Cleanup(func() {
		// The suite's other tests share the installed operator: this tree's again, whatever happened.
		deleteNamespaces(t)
		if err := realNode.ApplyInstaller(ctx, current); err != nil {
			t.Error(err)
		} else if err := realNode.WaitAvailable(ctx, 2*time.Minute, operatorNamespace(), "fluxdeployer"); err != nil {
			t.Error(err)
		}
	})
	// Remote targets are on in both releases, as an installation that deploys remotely has them: its overlay of
	// install.yaml adds the flag to every apply, the previous release's and this tree's.
	targetHost := remoteTargetHost(t)
	managerArgs := []string{"--allowed-target-hosts=" + targetHost}
	begin = time.Now()
	uninstall(t, realNode, current)
	installRelease(t, realNode, src, previous, managerArgs...)
	t.Logf("this tree's operator uninstalled, release %s installed with %v and leading in %s", rel.Version, managerArgs, time.Since(begin).Round(100*time.Millisecond))
	startFluxdeployer(t, map[string]string{"timeout": "30s", "wait": "true"})

	reg := newRegistry(t)
	ns := newNamespace(t, "upgrade")
	workloadVector(t, reg, "acme.org/vectors/upgrade", "1.0.0", "1.0.0", "")
	shop := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/upgrade", "1.0.0"))
	t.Logf("release %s: VectorDeployment shop Ready %s after creation", rel.Version, waitReady(t, 4*time.Minute, shop).Round(100*time.Millisecond))
	// The second vector shares web (Helm) and api (Kustomize) with the first; its worker's name is held by an
	// ArtifactDeployment of another identity, so the release salts it.
	worker := workloadVector(t, reg, "acme.org/vectors/upgrade", "1.1.0", "1.0.1", "")
	squatter := squat(t, ns, adName(t, worker, nil))
	next := createVectorDeployment(t, ns, "shop-next", reg.Ref("", "acme.org/vectors/upgrade", "1.1.0"))
	t.Logf("release %s: VectorDeployment shop-next Ready %s after creation", rel.Version, waitReady(t, 4*time.Minute, next).Round(100*time.Millisecond))
	salted := saltedName(t, ns, worker.Name, worker.Version)
	if salted == squatter {
		t.Fatalf("the worker %s took the name %s another identity holds", worker.Version, squatter)
	}
	assertWorkloadsReady(t, ns, 4)

	// A namespace that deploys to the remote target: the first vector again (web and worker Helm, api
	// Kustomize), its workloads applied, waited for and its Services read through the kubeconfig Secret.
	remote := newNamespace(t, "upgrade-remote")
	remoteSince := time.Now()
	remoteTarget(t, realNode, remote, targetHost)
	remoteShop := createVectorDeployment(t, remote, "shop", reg.Ref("", "acme.org/vectors/upgrade", "1.0.0"))
	t.Cleanup(func() { teardownRemote(t, remote) })
	t.Logf("release %s: VectorDeployment shop of the remote namespace Ready %s after creation", rel.Version, waitReady(t, 4*time.Minute, remoteShop).Round(100*time.Millisecond))
	assertWorkloadsReady(t, remote, 3)
	land := []landscapeNamespace{{name: ns, workloads: 4}, {name: remote, workloads: 3, remote: true}}
	if err := fluxTargets(t, land); err != nil {
		t.Fatal(err)
	}
	assertThroughKubeconfig(t, realNode, "release "+rel.Version, remote, remoteSince, objectNames(t, remote, &appsv1.DeploymentList{})...)

	// shop's worker, deployed, is suspended.
	suspended := suspendWorker(t, ns, "1.0.0")
	landscape := snapshotLandscape(t, land)
	t.Logf("release %s: %d ArtifactDeployments (%s salted for %s, %s suspended), %d Flux objects, %d pods; Helm releases %v",
		rel.Version, len(landscape.ads), salted, squatter, suspended, len(landscape.flux), len(landscape.pods), landscape.releases)
	logRemote(t, "release "+rel.Version, remote, landscape)

	upgraded := transition(t, realNode, land, "upgrade to this tree", root, current, landscape, managerArgs...)
	assertSpecChanges(t, "upgrade", landscape.flux, upgraded.flux, upgradeSpecChanges[rel.Version])
	assertSuspended(t, ns, suspended)

	downgraded := transition(t, realNode, land, "downgrade to "+rel.Version, src, previous, upgraded, managerArgs...)
	if d := specDiff(landscape.flux, downgraded.flux); len(d) > 0 {
		t.Errorf("after the downgrade, Flux specs differ from the release's own (object: fields): %v", d)
	}
	assertSuspended(t, ns, suspended)
}

// remoteTargetSecret is the kubeconfig Secret that makes a namespace deploy remotely, by the default of
// deploymentTargetSecretName in both releases (docs/configuration.md).
const remoteTargetSecret = "deployment-target-kubeconfig"

// remoteDeployer is the ServiceAccount of the remote target whose token the kubeconfig carries.
const remoteDeployer = "remote-deployer"

// remoteTargetHost is the address of the test's remote target: the node's own API server, by the address its
// pods reach it at, the kubernetes Service's ClusterIP and port (kube-proxy forwards it to the API server). The
// node offers one cluster; what makes a target remote to the operator and Flux is the kubeconfig they reach it
// through, not which API server answers.
func remoteTargetHost(t *testing.T) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, svc); err != nil {
		t.Fatal(err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "https" {
			return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port)))
		}
	}
	t.Fatalf("the kubernetes Service has no port https: %+v", svc.Spec.Ports)
	return ""
}

// remoteTarget makes the namespace deploy to the remote target at host, as a tenant does: a ServiceAccount of the
// target that may deploy into the namespace, and a kubeconfig Secret named remoteTargetSecret holding the
// target's address, its CA and a token of that account (TokenRequest). The account's rights are those Flux and
// the deployer use there, in that namespace only: helm-controller and kustomize-controller apply the workloads'
// Deployments and Services and read the ReplicaSets and pods of their health checks, helm-controller keeps the
// release in Secrets of the namespace, and the deployer lists Services for the deployment results. Before the
// operator sees the Secret, the kubeconfig is tried as a pod would use it, from the node's network: the API server's
// certificate must name the ClusterIP (internal/node's pki gives it that SAN) and the account list Services there.
func remoteTarget(t *testing.T, c *node.Cluster, namespace, host string) {
	t.Helper()
	ctx := context.Background()
	readWrite := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	read := []string{"get", "list", "watch"}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: remoteDeployer}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: remoteDeployer}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: readWrite},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: readWrite},
			{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: remoteDeployer},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: remoteDeployer},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: remoteDeployer}}},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Longer than the test; the namespace's deletion revokes it with the account.
	expiry := int64(2 * time.Hour / time.Second)
	token := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	if err := env.Client.SubResource("token").Create(ctx, objs[0], token); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["target"] = &clientcmdapi.Cluster{Server: "https://" + host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[remoteDeployer] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: remoteDeployer, Namespace: namespace}
	cfg.CurrentContext = "target"
	kubeconfig, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	tryKubeconfig(t, c, namespace, kubeconfig)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: remoteTargetSecret}, Data: map[string][]byte{"value": kubeconfig}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
}

// tryKubeconfig lists the namespace's Services with the kubeconfig from the node's network, as a pod reaches the
// ClusterIP, verifying the API server's certificate against the kubeconfig's CA for that address.
func tryKubeconfig(t *testing.T, c *node.Cluster, namespace string, kubeconfig []byte) {
	t.Helper()
	dialer, err := c.NetnsDialer()
	if err != nil {
		t.Fatal(err)
	}
	defer dialer.Close()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = dialer.DialContext
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		_, err := cs.CoreV1().Services(namespace).List(context.Background(), metav1.ListOptions{})
		return err
	})
}

// teardownRemote deletes the remote namespace's VectorDeployments and waits (bounded) until their
// ArtifactDeployments are gone, uninstalled through the kubeconfig: deleting the namespace at once would delete
// the kubeconfig's account, and with it its token, while Flux still needs it to uninstall.
func teardownRemote(t *testing.T, namespace string) {
	ctx := context.Background()
	if err := env.Client.DeleteAllOf(ctx, &konfidencev1.VectorDeployment{}, client.InNamespace(namespace)); err != nil {
		t.Logf("deleting the remote namespace's VectorDeployments: %v", err)
		return
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		list := &konfidencev1.ArtifactDeploymentList{}
		if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil || len(list.Items) == 0 {
			return
		}
	}
	t.Logf("ArtifactDeployments of the remote namespace %s still there after 2m", namespace)
}

// assertThroughKubeconfig reads the API server's audit log since since: every write to a Deployment or a Service
// of the remote namespace by a service account, as far as it succeeded, must be the kubeconfig's (remoteDeployer's),
// at least one to each of the deployments named (Flux applied them through it), and the leading operator must have
// listed the namespace's Services with it (the deployment results, read through the kubeconfig).
func assertThroughKubeconfig(t *testing.T, c *node.Cluster, what, namespace string, since time.Time, deployments ...string) {
	t.Helper()
	user := "system:serviceaccount:" + namespace + ":" + remoteDeployer
	leader := leaderPod(t, leaseName, "the operator", func(*corev1.Pod) bool { return true })
	var writes, dryRuns, lists int
	agents := map[string]bool{}
	testenv.Eventually(t, time.Minute, func() error {
		events, err := c.AuditEvents()
		if err != nil {
			return err
		}
		writes, dryRuns, lists = 0, 0, 0
		clear(agents)
		written := map[string]bool{}
		var others []string
		for _, e := range events {
			if e.ObjectRef == nil || e.ObjectRef.Namespace != namespace || e.RequestReceivedTimestamp.Before(&metav1.MicroTime{Time: since}) ||
				!e.Succeeded() || (e.ObjectRef.Resource != "deployments" && e.ObjectRef.Resource != "services") {
				continue
			}
			switch {
			case !e.Write():
				if e.User.Username == user && len(e.SourceIPs) > 0 && e.SourceIPs[0] == leader.Status.PodIP {
					lists++
				}
			case e.User.Username != user:
				others = append(others, fmt.Sprintf("%s %s by %s", e.Verb, e.Object(), e.User.Username))
			default:
				writes++
				if e.DryRun() {
					dryRuns++
				}
				agent, _, _ := strings.Cut(e.UserAgent, " ")
				agents[agent] = true
				if e.ObjectRef.Resource == "deployments" {
					written[e.ObjectRef.Name] = true
				}
			}
		}
		if len(others) > 0 {
			t.Fatalf("%s: workloads of the remote namespace %s written with other credentials than the kubeconfig's: %v", what, namespace, others)
		}
		for _, d := range deployments {
			if !written[d] {
				return fmt.Errorf("%s: Deployment %s/%s not written by %s; written: %v", what, namespace, d, user, written)
			}
		}
		if lists == 0 {
			return fmt.Errorf("%s: the leading operator (pod %s, %s) has not listed the Services of %s as %s", what, leader.Name, leader.Status.PodIP, namespace, user)
		}
		return nil
	})
	t.Logf("%s: audit log: %d writes to the remote namespace's Deployments and Services (%d of them dry runs), all by %s (%v), "+
		"and %d lists of its Services by the leading operator (pod %s) as that account",
		what, writes, dryRuns, user, slices.Sorted(maps.Keys(agents)), lists, leader.Name)
}

// fluxTargets says how the landscape's HelmReleases and Kustomizations do not deploy where their namespace should:
// through remoteTargetSecret (spec.kubeConfig) in a remote namespace, to the local cluster (none) elsewhere. A
// remote namespace whose workloads went to the local cluster would otherwise pass for one.
func fluxTargets(t *testing.T, namespaces []landscapeNamespace) error {
	t.Helper()
	var wrong []string
	for _, n := range namespaces {
		for _, obj := range listObjects(t, n.name, &helmv2.HelmReleaseList{}, &kustomizev1.KustomizationList{}) {
			var ref *meta.KubeConfigReference
			switch o := obj.(type) {
			case *helmv2.HelmRelease:
				ref = o.Spec.KubeConfig
			case *kustomizev1.Kustomization:
				ref = o.Spec.KubeConfig
			}
			remote := ref != nil && ref.SecretRef != nil && ref.SecretRef.Name == remoteTargetSecret
			if remote != n.remote || (ref != nil && !remote) {
				wrong = append(wrong, fmt.Sprintf("%s %s/%s kubeConfig %+v", reflect.TypeOf(obj).Elem().Name(), n.name, obj.GetName(), ref))
			}
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("Flux objects that do not deploy where their namespace does (a remote namespace's through Secret %s): %v", remoteTargetSecret, wrong)
	}
	return nil
}

// logRemote logs the remote namespace's share of the landscape.
func logRemote(t *testing.T, what, namespace string, s landscapeState) {
	t.Helper()
	prefix := namespace + "/"
	count := func(keys []string) int {
		return len(slices.DeleteFunc(keys, func(k string) bool { return !strings.Contains(k, prefix) }))
	}
	releases := map[string][]string{}
	for k, v := range s.releases {
		if strings.HasPrefix(k, prefix) {
			releases[strings.TrimPrefix(k, prefix)] = v
		}
	}
	t.Logf("%s: remote namespace %s: %d ArtifactDeployments, %d Flux objects (its HelmReleases and Kustomizations "+
		"with spec.kubeConfig %s), %d pods; Helm releases %v", what, namespace, count(slices.Clone(s.ads)),
		count(slices.Collect(maps.Keys(s.flux))), remoteTargetSecret, count(slices.Collect(maps.Keys(s.pods))), releases)
}

// installRelease applies the installer of the source tree src for the image ref, with managerArgs added to the
// operator's command line, and waits until a pod of that image leads.
func installRelease(t *testing.T, c *node.Cluster, src, ref string, managerArgs ...string) {
	t.Helper()
	ctx := context.Background()
	if err := c.ApplyInstallerFrom(ctx, src, ref, managerArgs...); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAvailable(ctx, 2*time.Minute, operatorNamespace(), "fluxdeployer"); err != nil {
		t.Fatal(err)
	}
	leaderPod(t, leaseName, "a pod of "+ref, func(p *corev1.Pod) bool { return p.Spec.Containers[0].Image == ref })
}

// uninstall deletes every object of this tree's installer for ref (CRDs, namespace, RBAC, Deployment) and waits
// until they are gone, as `kubectl delete -f install.yaml --wait` does.
func uninstall(t *testing.T, c *node.Cluster, ref string) {
	t.Helper()
	ctx := context.Background()
	manifest, err := node.Render(ctx, ref, "config/default")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := controlplane.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := env.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		for _, u := range objs {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy()); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s %s/%s still there (%v)", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		}
		return nil
	})
}

// squat creates, under name, an ArtifactDeployment of another identity (a component no vector has), suspended so
// nothing deploys it, as a name taken before the vector's artifact comes; it returns the name.
func squat(t *testing.T, namespace, name string) string {
	t.Helper()
	var template *konfidencev1.ArtifactDeployment
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil || len(list.Items) == 0 {
		t.Fatalf("an ArtifactDeployment to copy the spec of: %v %v", list.Items, err)
	}
	template = &list.Items[0]
	ad := &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{
			konfidencev1.ArtifactComponentAnnotation: "acme.org/artifacts/squatter",
			konfidencev1.ArtifactVersionAnnotation:   "1.0.0",
			konfidencev1.AllowReuseAnnotation:        "true",
		}},
		Spec: *template.Spec.DeepCopy(),
	}
	ad.Spec.Suspend = true
	if err := env.Client.Create(context.Background(), ad); err != nil {
		t.Fatal(err)
	}
	return name
}

// saltedName returns the name of the namespace's ArtifactDeployment of the component's version, which must carry a
// collision count of 1.
func saltedName(t *testing.T, namespace, component, version string) string {
	t.Helper()
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, ad := range list.Items {
		a := ad.Annotations
		if a[konfidencev1.ArtifactComponentAnnotation] == component && a[konfidencev1.ArtifactVersionAnnotation] == version {
			if a[konfidencev1.CollisionCountAnnotation] != "1" {
				t.Fatalf("ArtifactDeployment %s of %s:%s has collision count %q, want 1", ad.Name, component, version, a[konfidencev1.CollisionCountAnnotation])
			}
			return ad.Name
		}
	}
	t.Fatalf("no ArtifactDeployment of %s:%s in %s", component, version, namespace)
	return ""
}

// suspendWorker suspends the ArtifactDeployment of the worker's version, as `fluxdeployer suspend ad` does, waits
// until its HelmRelease is suspended, and returns its name.
func suspendWorker(t *testing.T, namespace, version string) string {
	t.Helper()
	ctx := context.Background()
	list := &konfidencev1.ArtifactDeploymentList{}
	if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, ad := range list.Items {
		if ad.Annotations[konfidencev1.ArtifactComponentAnnotation] != "acme.org/artifacts/worker" || ad.Annotations[konfidencev1.ArtifactVersionAnnotation] != version {
			continue
		}
		if err := env.Client.Patch(ctx, &ad, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`))); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, time.Minute, func() error { return suspendedState(ctx, namespace, ad.Name) })
		return ad.Name
	}
	t.Fatalf("no ArtifactDeployment of the worker %s in %s", version, namespace)
	return ""
}

// suspendedState says how the ArtifactDeployment or its HelmRelease is not suspended, or nil.
func suspendedState(ctx context.Context, namespace, name string) error {
	ad, hr := &konfidencev1.ArtifactDeployment{}, &helmv2.HelmRelease{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if err := env.Client.Get(ctx, key, ad); err != nil {
		return err
	}
	if err := env.Client.Get(ctx, key, hr); err != nil {
		return err
	}
	if !ad.Spec.Suspend || !hr.Spec.Suspend {
		return fmt.Errorf("ArtifactDeployment %s suspended: %t, its HelmRelease: %t", name, ad.Spec.Suspend, hr.Spec.Suspend)
	}
	return nil
}

func assertSuspended(t *testing.T, namespace, name string) {
	t.Helper()
	if err := suspendedState(context.Background(), namespace, name); err != nil {
		t.Error(err)
	}
}

// landscapeNamespace is a namespace of the landscape: how many Deployments its workloads run, and whether it
// deploys to the remote target.
type landscapeNamespace struct {
	name      string
	workloads int
	remote    bool
}

// landscapeState is what an upgrade must keep: the ArtifactDeployments' names, each Flux object's UID and spec,
// the pods, and the revisions of the Helm releases (a spec change that made Helm upgrade would add one). Each is
// named with its namespace (a Flux object as kind/namespace/name).
type landscapeState struct {
	ads      []string
	flux     map[string]fluxObject
	pods     map[string]string
	releases map[string][]string
}

type fluxObject struct {
	kind string
	uid  string
	spec map[string]any
}

func snapshotLandscape(t *testing.T, namespaces []landscapeNamespace) landscapeState {
	t.Helper()
	s := landscapeState{flux: map[string]fluxObject{}, pods: map[string]string{}, releases: map[string][]string{}}
	for _, n := range namespaces {
		prefix := n.name + "/"
		for _, ad := range artifactDeploymentNames(t, n.name) {
			s.ads = append(s.ads, prefix+ad)
		}
		for pod, fingerprint := range podFingerprints(t, n.name, nil) {
			s.pods[prefix+pod] = fingerprint
		}
		for release, revisions := range releases(t, n.name) {
			s.releases[prefix+release] = revisions
		}
		for _, obj := range listObjects(t, n.name,
			&sourcev1.HelmRepositoryList{}, &sourcev1.OCIRepositoryList{}, &helmv2.HelmReleaseList{}, &kustomizev1.KustomizationList{}) {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			spec, _ := u["spec"].(map[string]any)
			kind := reflect.TypeOf(obj).Elem().Name()
			s.flux[kind+"/"+prefix+obj.GetName()] = fluxObject{kind: kind, uid: string(obj.GetUID()), spec: spec}
		}
	}
	if err := fluxTargets(t, namespaces); err != nil {
		t.Error(err)
	}
	return s
}

// transition applies the installer of the source tree src for the image ref over the running installation, with
// managerArgs added to the operator's command line, waits until a pod of ref leads and its writes settle, and
// checks what every transition keeps: the ArtifactDeployments' names, the Flux objects' names and UIDs, the pods,
// the workloads' readiness and the Helm revisions. It returns the landscape after it.
func transition(t *testing.T, c *node.Cluster, namespaces []landscapeNamespace, what, src, ref string, before landscapeState, managerArgs ...string) landscapeState {
	t.Helper()
	begin := time.Now()
	installRelease(t, c, src, ref, managerArgs...)
	leading := time.Since(begin)
	names := make([]string, len(namespaces))
	for i, n := range namespaces {
		names[i] = n.name
	}
	quiet, writes := settle(t, time.Minute, 15*time.Second, names...)
	t.Logf("%s: %s leads %s after the apply; its writes settled %s later, after %d object writes, and stayed 0 for 15s",
		what, ref, leading.Round(100*time.Millisecond), quiet.Round(100*time.Millisecond), writes)
	after := snapshotLandscape(t, namespaces)
	if !slices.Equal(before.ads, after.ads) {
		t.Errorf("%s: ArtifactDeployments %v, before %v", what, after.ads, before.ads)
	}
	for id, o := range before.flux {
		if a, ok := after.flux[id]; !ok || a.uid != o.uid {
			t.Errorf("%s: Flux object %s (UID %s) is gone or replaced (%+v)", what, id, o.uid, a.uid)
		}
	}
	for id := range after.flux {
		if _, ok := before.flux[id]; !ok {
			t.Errorf("%s: Flux object %s is new", what, id)
		}
	}
	assertPodsUnchanged(t, what+": pods of the landscape", before.pods, after.pods)
	for _, n := range namespaces {
		if err := workloadsReady(context.Background(), n.name, n.workloads); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if n.remote {
			logRemote(t, what, n.name, after)
			assertThroughKubeconfig(t, c, what, n.name, begin)
		}
	}
	if !reflect.DeepEqual(before.releases, after.releases) {
		t.Errorf("%s: Helm releases (namespace/name: revisions) %v, before %v", what, after.releases, before.releases)
	}
	return after
}

// settle waits until what the operator writes in the namespaces (written) has not changed for quiet, which must
// begin within bound, and returns when the last write was seen and how many object writes it saw until then. It
// polls every half second: a write is one object's fingerprint changing between polls.
func settle(t *testing.T, bound, quiet time.Duration, namespaces ...string) (time.Duration, int) {
	t.Helper()
	writtenAll := func() map[string]string {
		all := map[string]string{}
		for _, n := range namespaces {
			for id, fingerprint := range written(t, n) {
				all[n+" "+id] = fingerprint
			}
		}
		return all
	}
	begin := time.Now()
	last, lastChange, writes := writtenAll(), begin, 0
	for time.Since(lastChange) < quiet {
		if since := lastChange.Sub(begin); since > bound {
			t.Fatalf("the operator still wrote %s after the wait began (bound %s), %d object writes", since.Round(time.Second), bound, writes)
		}
		time.Sleep(500 * time.Millisecond) // the polling interval; the condition is the loop's
		if now := writtenAll(); !maps.Equal(last, now) {
			changed := diff(last, now)
			t.Logf("writes seen %s into the wait:%s", time.Since(begin).Round(100*time.Millisecond), changed)
			writes += strings.Count(changed, "\n")
			last, lastChange = now, time.Now()
		}
	}
	return lastChange.Sub(begin), writes
}

// specDiff lists, by Flux object, the spec fields that differ (specChanges), and objects only one side has
// (field "").
func specDiff(before, after map[string]fluxObject) map[string][]string {
	out := map[string][]string{}
	for id, b := range before {
		a, ok := after[id]
		if !ok {
			out[id] = []string{""}
			continue
		}
		if changes := specChanges("", b.spec, a.spec); len(changes) > 0 {
			out[id] = changes
		}
	}
	for id := range after {
		if _, ok := before[id]; !ok {
			out[id] = []string{""}
		}
	}
	return out
}

// specChanges lists the dotted paths where a and b differ: a map's keys are followed, anything else compared whole.
func specChanges(prefix string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{prefix}
	}
	keys := maps.Clone(am)
	maps.Copy(keys, bm)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		out = append(out, specChanges(path, am[k], bm[k])...)
	}
	return out
}

// assertSpecChanges checks that the Flux specs changed exactly as expected lists: every change is one listed (the
// kind, and the path or a field under it), and every entry listed happened; it logs each with its reason.
func assertSpecChanges(t *testing.T, what string, before, after map[string]fluxObject, expected []specChange) {
	t.Helper()
	happened := make([]bool, len(expected))
	changes := specDiff(before, after)
	for _, id := range slices.Sorted(maps.Keys(changes)) {
		kind, _, _ := strings.Cut(id, "/")
		for _, path := range changes[id] {
			i := slices.IndexFunc(expected, func(c specChange) bool {
				return c.kind == kind && (path == c.path || strings.HasPrefix(path, c.path+"."))
			})
			if i < 0 {
				b, _ := json.Marshal(before[id].spec)
				a, _ := json.Marshal(after[id].spec)
				t.Errorf("%s changed spec.%s of %s, which upgradeSpecChanges does not list:\n before %s\n after  %s", what, path, id, b, a)
				continue
			}
			happened[i] = true
			t.Logf("%s changed spec.%s of %s, as expected: %s", what, path, id, expected[i].why)
		}
	}
	for i, c := range expected {
		if !happened[i] {
			t.Errorf("%s: upgradeSpecChanges lists spec.%s of the %ss, which did not change: remove it", what, c.path, c.kind)
		}
	}
}
