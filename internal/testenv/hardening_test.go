package testenv

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// selectorLabels are the labels the Deployment, the metrics Service and the NetworkPolicy select the manager's
// pods by. A Deployment's selector is immutable: changing them breaks the upgrade of every installation.
var selectorLabels = map[string]string{"app.kubernetes.io/name": "fluxdeployer"}

// defaultObjects renders config/default and returns its objects, and the ones of each kind the tests look into.
type defaultObjects struct {
	all           []*unstructured.Unstructured
	namespace     *corev1.Namespace
	deployment    *appsv1.Deployment
	service       *corev1.Service
	networkPolicy *networkingv1.NetworkPolicy
	priorityClass *schedulingv1.PriorityClass
}

func renderDefault(t *testing.T) defaultObjects {
	t.Helper()
	d := defaultObjects{
		all: kustomizeBuild(t, "config/default"), namespace: &corev1.Namespace{}, deployment: &appsv1.Deployment{},
		service: &corev1.Service{}, networkPolicy: &networkingv1.NetworkPolicy{}, priorityClass: &schedulingv1.PriorityClass{},
	}
	into := map[string]any{"Namespace": d.namespace, "Deployment": d.deployment, "Service": d.service,
		"NetworkPolicy": d.networkPolicy, "PriorityClass": d.priorityClass}
	found := map[string]bool{}
	for _, u := range d.all {
		if obj, ok := into[u.GetKind()]; ok {
			fromUnstructured(t, u, obj)
			found[u.GetKind()] = true
		}
	}
	if len(found) != len(into) {
		t.Fatalf("config/default renders only %v of the kinds %v", found, slices.Sorted(maps.Keys(into)))
	}
	return d
}

// TestConfigDefaultLabelsEveryObject: every object of config/default, CRDs included, carries the recommended
// app.kubernetes.io labels, its version the VERSION file's; the selectors stay app.kubernetes.io/name alone.
func TestConfigDefaultLabelsEveryObject(t *testing.T) {
	version, err := os.ReadFile(filepath.Join(RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"app.kubernetes.io/name":       "fluxdeployer",
		"app.kubernetes.io/instance":   "fluxdeployer",
		"app.kubernetes.io/version":    strings.TrimSpace(string(version)),
		"app.kubernetes.io/part-of":    "fluxdeployer",
		"app.kubernetes.io/managed-by": "kustomize",
	}
	d := renderDefault(t)
	check := func(what string, got map[string]string) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: label %s=%q, want %q", what, k, got[k], v)
			}
		}
		if got["app.kubernetes.io/component"] == "" {
			t.Errorf("%s: no app.kubernetes.io/component label", what)
		}
	}
	for _, u := range d.all {
		check(u.GetKind()+" "+u.GetName(), u.GetLabels())
	}
	check("the manager's pod template", d.deployment.Spec.Template.Labels)
	if got := d.service.Labels["app.kubernetes.io/component"]; got != "metrics" {
		t.Errorf("metrics Service: app.kubernetes.io/component=%q, want metrics", got)
	}

	for what, got := range map[string]map[string]string{
		"Deployment selector":       d.deployment.Spec.Selector.MatchLabels,
		"Service selector":          d.service.Spec.Selector,
		"NetworkPolicy podSelector": d.networkPolicy.Spec.PodSelector.MatchLabels,
	} {
		if !labels.Equals(got, selectorLabels) {
			t.Errorf("%s %v, want %v", what, got, selectorLabels)
		}
	}
}

// highestUserDefinablePriority is the highest value the API server accepts for a PriorityClass not named system-*:
// the system classes are above it.
const highestUserDefinablePriority = 1_000_000_000

// TestOperatorPodIsAdmittedUnderRestrictedPodSecurity: the API server's PodSecurity admission, in a namespace
// labelled as config/default labels the operator's, admits the manager's pod (a server-side dry run of its
// template as a Pod) and refuses one that breaks the restricted profile. The Priority admission resolves the
// pod's PriorityClass to its value, below the system classes.
func TestOperatorPodIsAdmittedUnderRestrictedPodSecurity(t *testing.T) {
	ctx := context.Background()
	d := renderDefault(t)
	if d.namespace.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("Namespace %s labels %v: want pod-security.kubernetes.io/enforce=restricted", d.namespace.Name, d.namespace.Labels)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted-" + d.namespace.Name, Labels: d.namespace.Labels}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })
	pc := d.priorityClass.DeepCopy()
	if err := env.Client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pc) })

	podOf := func(spec corev1.PodSpec) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "manager", Labels: d.deployment.Spec.Template.Labels}, Spec: spec}
	}
	pod := podOf(*d.deployment.Spec.Template.Spec.DeepCopy())
	if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the manager's pod is refused in a namespace labelled %v: %v", ns.Labels, err)
	}
	if pod.Spec.PriorityClassName != pc.Name || pod.Spec.Priority == nil || *pod.Spec.Priority != pc.Value ||
		pc.Value <= 0 || pc.Value > highestUserDefinablePriority {
		t.Errorf("admitted pod: priority class %q, priority %v; want %s's value %d, above 0 and below the system classes",
			pod.Spec.PriorityClassName, pod.Spec.Priority, pc.Name, pc.Value)
	}

	for name, breakIt := range map[string]func(*corev1.PodSpec){
		"privilege escalation": func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.AllowPrivilegeEscalation = new(true) },
		"no seccomp profile":   func(s *corev1.PodSpec) { s.SecurityContext.SeccompProfile = nil },
		"runs as root": func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot, s.SecurityContext.RunAsUser = nil, new(int64(0))
		},
	} {
		spec := d.deployment.Spec.Template.Spec.DeepCopy()
		breakIt(spec)
		err := env.Client.Create(ctx, podOf(*spec), client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
			t.Errorf("a pod with %s: %v, want it refused by PodSecurity restricted", name, err)
		}
	}
}

// TestNetworkPolicyAdmitsOnlyMetricsAndProbes checks config/default's NetworkPolicy against the Deployment and
// the metrics Service: it selects the manager's pods, admits exactly their metrics and probe ports (which the
// Service targets and the flags bind), and lets them out to DNS and TCP on any port, cloud metadata excepted.
// Whether it is enforced is up to the cluster's network plugin; the API server only validates it.
func TestNetworkPolicyAdmitsOnlyMetricsAndProbes(t *testing.T) {
	d := renderDefault(t)
	np, manager := d.networkPolicy, d.deployment.Spec.Template.Spec.Containers[0]
	if np.Namespace != d.deployment.Namespace || !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(labels.Set(d.deployment.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy %s/%s selects %v; the manager's pods in %s are labelled %v", np.Namespace, np.Name,
			np.Spec.PodSelector.MatchLabels, d.deployment.Namespace, d.deployment.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}

	// Ingress: one rule from anywhere, to the container's ports by name, which are the ports the flags bind.
	var containerPorts, admitted []string
	for _, p := range manager.Ports {
		containerPorts = append(containerPorts, p.Name)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 0 {
		t.Fatalf("ingress %+v, want one rule from any source", np.Spec.Ingress)
	}
	for _, p := range np.Spec.Ingress[0].Ports {
		if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.Port.Type != intstr.String {
			t.Errorf("ingress port %+v, want a TCP port named as the container's", p)
			continue
		}
		admitted = append(admitted, p.Port.StrVal)
	}
	slices.Sort(containerPorts)
	slices.Sort(admitted)
	if !slices.Equal(admitted, containerPorts) || !slices.Contains(admitted, d.service.Spec.Ports[0].TargetPort.StrVal) {
		t.Errorf("ingress admits %v; the container's ports are %v and the metrics Service targets %s", admitted,
			containerPorts, d.service.Spec.Ports[0].TargetPort.String())
	}
	for _, p := range manager.Ports {
		if flag := map[string]string{"http-metrics": "--metrics-addr", "healthz": "--health-addr"}[p.Name]; flag == "" ||
			!slices.Contains(manager.Args, fmt.Sprintf("%s=:%d", flag, p.ContainerPort)) {
			t.Errorf("container port %s %d is not the one %q binds (args %v)", p.Name, p.ContainerPort, flag, manager.Args)
		}
	}

	// Egress: DNS over UDP and TCP; TCP to every port of every address but the cloud metadata services, and to every
	// pod.
	if len(np.Spec.Egress) != 2 {
		t.Fatalf("egress %+v, want a DNS rule and a TCP rule", np.Spec.Egress)
	}
	dns, tcp := np.Spec.Egress[0], np.Spec.Egress[1]
	var dnsPorts []string
	for _, p := range dns.Ports {
		dnsPorts = append(dnsPorts, string(*p.Protocol)+"/"+p.Port.String())
	}
	if !slices.Equal(dnsPorts, []string{"UDP/53", "TCP/53"}) || len(dns.To) != 0 {
		t.Errorf("DNS egress to %+v on %v, want UDP and TCP 53 to anywhere", dns.To, dnsPorts)
	}
	if len(tcp.Ports) != 1 || tcp.Ports[0].Port != nil || *tcp.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("egress ports %+v, want TCP on every port (registries listen on any)", tcp.Ports)
	}
	var excepted []string
	allPods := false
	for _, peer := range tcp.To {
		switch {
		case peer.IPBlock != nil:
			excepted = append(excepted, peer.IPBlock.CIDR+" except "+strings.Join(peer.IPBlock.Except, ","))
		case peer.NamespaceSelector != nil && len(peer.NamespaceSelector.MatchLabels)+len(peer.NamespaceSelector.MatchExpressions) == 0 && peer.PodSelector == nil:
			allPods = true
		}
	}
	if want := []string{"0.0.0.0/0 except 169.254.0.0/16,100.100.100.200/32", "::/0 except fe80::/10,fd00:ec2::254/128"}; !slices.Equal(excepted, want) || !allPods {
		t.Errorf("TCP egress to %v and every pod: %t; want %v and every pod", excepted, allPods, want)
	}
}
