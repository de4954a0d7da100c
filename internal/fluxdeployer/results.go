package fluxdeployer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/inventory"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// ServiceResultType is the type of the deployment result a Service yields.
const ServiceResultType = "http-k8s-service"

// serviceResultSpec is the spec of a ServiceResultType result.
type serviceResultSpec struct {
	Namespace string        `json:"namespace"`
	K8sName   string        `json:"k8sName"`
	Ports     []servicePort `json:"ports"`
}

type servicePort struct {
	Name     string `json:"name,omitempty"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
}

// collectResults records one result per Service of the deployment that carries the deployment-result annotation
// (its value names the result; empty means the Service's name). Services are found by the label Flux stamps on
// everything it renders for this ArtifactDeployment, and count only when the deployment Flux object's inventory
// lists them: in a target namespace other tenants deploy into too, anyone may put the label on a Service.
func (r *Reconciler) collectResults(ctx context.Context, ad *konfidencev1.ArtifactDeployment, t target, deployment fluxObject) error {
	deployed := map[types.NamespacedName]bool{}
	for _, ref := range inventory.Of(deployment) {
		if ref.IsService() && ref.Namespace == t.namespace {
			deployed[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}] = true
		}
	}
	services, err := r.labelledServices(ctx, ad, t, deployed)
	if err != nil {
		return err
	}
	claimedBy := map[string]string{}
	var results []konfidencev1.DeploymentResult
	for _, svc := range services {
		name, ok := svc.Annotations[konfidencev1.DeploymentResultLabel]
		if !ok || !deployed[client.ObjectKeyFromObject(&svc)] {
			continue
		}
		if name == "" {
			name = svc.Name
		}
		if other, dup := claimedBy[name]; dup {
			return outcome.Stallingf(konfidencev1.DuplicateDeploymentResultReason,
				"Services %s and %s in %s both claim deployment result %q", other, svc.Name, t.namespace, name)
		}
		claimedBy[name] = svc.Name
		spec := serviceResultSpec{Namespace: svc.Namespace, K8sName: svc.Name, Ports: []servicePort{}}
		for _, p := range svc.Spec.Ports {
			spec.Ports = append(spec.Ports, servicePort{Name: p.Name, Port: p.Port, Protocol: string(p.Protocol)})
		}
		raw, err := json.Marshal(spec)
		if err != nil {
			return err
		}
		results = append(results, konfidencev1.DeploymentResult{Name: name, Type: ServiceResultType, Spec: &apiextensionsv1.JSON{Raw: raw}})
	}
	slices.SortFunc(results, func(a, b konfidencev1.DeploymentResult) int { return strings.Compare(a.Name, b.Name) })
	ad.Status.DeploymentResult = results
	conditions.MarkTrue(ad, konfidencev1.DeploymentResultCreatedCondition, meta.SucceededReason,
		"%d deployment results from Services in %s", len(results), t.namespace)
	return nil
}

// labelledServices lists the Services in the target namespace that carry the deployment's label. The local
// cluster's are read from the cache, which may not have seen a Service Flux has just applied when the Flux object
// already reports it deployed; when a Service of the inventory is missing there, they are listed again from the API
// server, so that an ArtifactDeployment never turns Ready with a result missing.
func (r *Reconciler) labelledServices(ctx context.Context, ad *konfidencev1.ArtifactDeployment, t target, deployed map[types.NamespacedName]bool) ([]corev1.Service, error) {
	reader, err := r.targetReader(ctx, ad.Namespace, t)
	if err != nil {
		return nil, err
	}
	list := func(reader client.Reader) ([]corev1.Service, error) {
		services := &corev1.ServiceList{}
		if err := reader.List(ctx, services, client.InNamespace(t.namespace),
			client.MatchingLabels{konfidencev1.ArtifactDeploymentLabel: ad.Name}); err != nil {
			return nil, listFailed(t, err)
		}
		return services.Items, nil
	}
	services, err := list(reader)
	if err != nil || t.kubeConfig != nil {
		return services, err
	}
	seen := 0
	for _, svc := range services {
		if deployed[client.ObjectKeyFromObject(&svc)] {
			seen++
		}
	}
	if seen == len(deployed) {
		return services, nil
	}
	return list(r.apiReader)
}

// listFailed classifies a failed Service list: a remote target that did not answer in time has a reason of its
// own, since it is the tenant's to fix; what a remote target answered is not repeated (see remoteFailure).
func listFailed(t target, err error) error {
	if t.kubeConfig != nil {
		err = remoteFailure(err)
	}
	err = fmt.Errorf("listing Services in %s: %w", t.namespace, err)
	if t.kubeConfig != nil && isTimeout(err) {
		return outcome.Retrying(konfidencev1.RemoteTargetTimeoutReason, err)
	}
	return outcome.Retrying(konfidencev1.DeploymentResultFailedReason, err)
}

// targetReader reads the target cluster: through the cache for the local one, through the target's kubeconfig
// otherwise, as Flux does.
func (r *Reconciler) targetReader(ctx context.Context, namespace string, t target) (client.Reader, error) {
	if t.kubeConfig == nil {
		return r.serviceReader, nil
	}
	ref := t.kubeConfig.SecretRef
	if ref == nil {
		return nil, outcome.Stallingf(konfidencev1.DeploymentResultFailedReason,
			"the target of namespace %s is given by ConfigMap %s (cloud identity); results are read only through a kubeconfig Secret",
			namespace, t.kubeConfig.ConfigMapRef.Name)
	}
	data, source, err := r.kubeConfig(ctx, namespace, ref)
	if err != nil {
		return nil, err
	}
	return r.remote.remoteReader(ctx, data, source, r.scheme)
}

// results collects the deployment results of the deployment Flux object once Flux reports the artifact deployed;
// until then the previous ones stand, since a rollout in progress leaves the old Services serving.
func (r *Reconciler) results(ctx context.Context, ad *konfidencev1.ArtifactDeployment, t target, deployment fluxObject) error {
	if !conditions.IsTrue(ad, konfidencev1.ArtifactDeployedCondition) {
		conditions.MarkUnknown(ad, konfidencev1.DeploymentResultCreatedCondition, meta.ProgressingReason, "waiting for the deployment")
		return nil
	}
	err := r.collectResults(ctx, ad, t, deployment)
	if err != nil {
		e := outcome.As(err, konfidencev1.DeploymentResultFailedReason)
		conditions.MarkFalse(ad, konfidencev1.DeploymentResultCreatedCondition, e.Reason, "%s", e.Err)
	}
	return err
}
