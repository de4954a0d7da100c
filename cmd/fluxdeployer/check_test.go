package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestCheck runs `check --pre` and `check` against a real API server as a platform engineer would before and after
// an install, each check failing first for the reason it exists and passing once that is fixed. The Deployments'
// status, which a real cluster's controllers write, is written by the test.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	tenant := newTestNamespace(t, env.Client, "check-tenant")
	kubeconfig := kubeconfigWithContexts(t, env.Kubeconfig, tenant)
	cli, must := envtestCLI(t, kubeconfig)
	for _, ns := range []string{"flux-system", "fluxdeployer-system"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(args []string, code int, lines ...string) {
		t.Helper()
		stdout, stderr, got := cli(args...)
		if got != code {
			t.Errorf("%v: exit %d, want %d\n%s%s", args, got, code, stdout, stderr)
		}
		for _, line := range lines {
			if !strings.Contains(stdout, line) {
				t.Errorf("%v: no %q in\n%s", args, line, stdout)
			}
		}
	}

	// The embedded control plane reports its real version, as a released kube-apiserver does.
	expect([]string{"check", "--pre"}, exitFailure,
		"✔ Kubernetes v1.36.4 (1.29.0 or later)",
		"✗ source-controller: no Deployment flux-system/source-controller",
		"✗ helm-controller: no Deployment flux-system/helm-controller",
		"✔ helmreleases.helm.toolkit.fluxcd.io serves v2")
	for _, name := range []string{"source-controller", "kustomize-controller", "helm-controller"} {
		availableDeployment(t, env.Client, "flux-system", name)
	}
	if out := must("check", "--pre"); !strings.Contains(out, "✔ all checks passed") || strings.Contains(out, "operator") {
		t.Errorf("check --pre with Flux running:\n%s", out)
	}

	expect([]string{"check"}, exitFailure,
		"✗ fluxdeployer: no Deployment fluxdeployer-system/fluxdeployer",
		"✔ vectordeployments.konfidence.cloud serves v1alpha1 with every field this binary knows",
		"✗ no leader election Lease fluxdeployer-system/fluxdeployer.konfidence.cloud",
		"✔ no admission webhook intercepts konfidence.cloud",
		"✔ no ConfigMap fluxdeployer-system/flux-deployer-configuration: the defaults apply")
	availableDeployment(t, env.Client, "fluxdeployer-system", "fluxdeployer")
	holder := "fluxdeployer-7d9c-abcde"
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fluxdeployer-system", Name: "fluxdeployer.konfidence.cloud"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: time.Now().Add(-time.Minute)}},
	}
	create(t, env.Client, lease)
	expect([]string{"check"}, exitFailure, "✗ the leader election Lease fluxdeployer-system/fluxdeployer.konfidence.cloud: "+holder+" last renewed it 1m0s ago")
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := env.Client.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "fluxdeployer-system", Name: "flux-deployer-configuration"},
		Data: map[string]string{"intervall": "5m", "wait": "sometimes"}}
	create(t, env.Client, cm)
	expect([]string{"check"}, exitFailure,
		"✔ the leader election Lease is held",
		"✗ ConfigMap fluxdeployer-system/flux-deployer-configuration: UnknownConfigurationKey: intervall: unknown key; did you mean interval?",
		"✗ ConfigMap fluxdeployer-system/flux-deployer-configuration: InvalidConfiguration: wait: ",
		"  the keys the deployer reads: authenticationSecretRefs, ")

	cm.Data = map[string]string{"interval": "5m", "serviceAccountName": "flux-applier"}
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.CreateVectorDeployment(t, env.Client, tenant, "shop", "registry.example.com//acme.org/vectors/shop:1.0.0")
	expect([]string{"check"}, exitFailure,
		"✔ ConfigMap fluxdeployer-system/flux-deployer-configuration: 2 keys, every one read and valid",
		"✗ ServiceAccount "+tenant+"/flux-applier does not exist: the namespace's ArtifactDeployments are ServiceAccountNotFound")
	create(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "flux-applier"}})
	if out := must("check"); !strings.Contains(out, "✔ the ServiceAccounts the Flux objects run as exist in the 1 namespaces with VectorDeployments") ||
		!strings.Contains(out, "✔ all checks passed") {
		t.Errorf("check with everything in place:\n%s", out)
	}

	// A webhook left behind for the group (by another controller of it) is named.
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "konfidence-leftover"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vectordeployments.konfidence.cloud", AdmissionReviewVersions: []string{"v1"},
			SideEffects:   ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
			ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"konfidence.cloud"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}},
		}},
	}
	create(t, env.Client, webhook)
	expect([]string{"check"}, exitFailure, "✗ admission webhooks intercept konfidence.cloud, which the operator does not serve: ValidatingWebhookConfiguration konfidence-leftover")
	expect([]string{"check", "extra"}, exitUsage)
}

// availableDeployment creates a Deployment of one container and writes the status its controller would once its
// pods are ready.
func availableDeployment(t *testing.T, c client.Client, namespace, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "example.com/" + name + ":v1"}}},
			},
		},
	}
	create(t, c, d)
	d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
	}}
	if err := c.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}
