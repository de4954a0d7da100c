package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// The labels helm-controller puts on the HelmChart it creates for a HelmRelease.
const (
	helmNameLabel      = "helm.toolkit.fluxcd.io/name"
	helmNamespaceLabel = "helm.toolkit.fluxcd.io/namespace"
)

// playFlux does, for every HelmRelease in namespace, what Flux's controllers do once they reconcile it, as far as
// the objects go: helm-controller creates the HelmChart of its chart (<namespace>-<name> in the source's
// namespace), source-controller pulls it and writes the HelmChart's status with its artifact, and helm-controller
// installs the release and writes the HelmRelease's status with its history and inventory. An OCI HelmRepository
// keeps no status (source-controller does not reconcile it). The statuses go through the status subresource with
// the conditions, digests and timestamps the controllers write, so that the operator's informers receive what a
// real cluster's would.
func playFlux(ctx context.Context, c client.Client, namespace string) error {
	releases := &helmv2.HelmReleaseList{}
	if err := c.List(ctx, releases, client.InNamespace(namespace)); err != nil {
		return err
	}
	return inParallel(len(releases.Items), func(i int) error {
		hr := &releases.Items[i]
		chart, err := createHelmChart(ctx, c, hr)
		if err != nil {
			return err
		}
		return installRelease(ctx, c, hr, chart)
	})
}

// createHelmChart creates hr's HelmChart as helm-controller does and writes its status as source-controller does
// after pulling the chart.
func createHelmChart(ctx context.Context, c client.Client, hr *helmv2.HelmRelease) (*sourcev1.HelmChart, error) {
	tmpl := hr.Spec.Chart.Spec
	chart := &sourcev1.HelmChart{
		ObjectMeta: metav1.ObjectMeta{Namespace: hr.Namespace, Name: hr.Namespace + "-" + hr.Name,
			Labels: chartLabels(hr)},
		Spec: sourcev1.HelmChartSpec{
			Chart: tmpl.Chart, Version: tmpl.Version, Interval: hr.Spec.Interval, ReconcileStrategy: sourcev1.ReconcileStrategyChartVersion,
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: tmpl.SourceRef.Kind, Name: tmpl.SourceRef.Name},
		},
	}
	if err := c.Create(ctx, chart); err != nil {
		return nil, fmt.Errorf("creating HelmChart %s: %w", chart.Name, err)
	}
	revision := tmpl.Version
	pulled := fmt.Sprintf("pulled '%s' chart with version '%s'", tmpl.Chart, revision)
	err := writeStatus(ctx, c, chart, func() {
		chart.Status.ObservedSourceArtifactRevision = "sha256:" + digestOf(chart.Name+"source")
		chart.Status.ObservedChartName = tmpl.Chart
		chart.Status.URL = fmt.Sprintf("http://source-controller.flux-system.svc.cluster.local./helmchart/%s/%s/latest.tar.gz", chart.Namespace, chart.Name)
		chart.Status.Artifact = &meta.Artifact{
			Path:           fmt.Sprintf("helmchart/%s/%s/%s-%s.tgz", chart.Namespace, chart.Name, tmpl.Chart, revision),
			URL:            fmt.Sprintf("http://source-controller.flux-system.svc.cluster.local./helmchart/%s/%s/%s-%s.tgz", chart.Namespace, chart.Name, tmpl.Chart, revision),
			Revision:       revision,
			Digest:         "sha256:" + digestOf(chart.Name),
			LastUpdateTime: metav1.Now(),
			Size:           ptr.To[int64](14_906),
		}
	}, cond(meta.ReadyCondition, sourcev1.ChartPullSucceededReason, pulled),
		cond(sourcev1.ArtifactInStorageCondition, sourcev1.ChartPullSucceededReason, pulled))
	return chart, err
}

// chartLabels are the labels helm-controller puts on hr's HelmChart: those of its chart template, and its own
// that name the HelmRelease.
func chartLabels(hr *helmv2.HelmRelease) map[string]string {
	labels := map[string]string{helmNameLabel: hr.Name, helmNamespaceLabel: hr.Namespace}
	if tmpl := hr.Spec.Chart.ObjectMeta; tmpl != nil {
		maps.Copy(labels, tmpl.Labels)
	}
	return labels
}

// installRelease writes hr's status as helm-controller does after installing the release from chart.
func installRelease(ctx context.Context, c client.Client, hr *helmv2.HelmRelease, chart *sourcev1.HelmChart) error {
	tmpl := hr.Spec.Chart.Spec
	succeeded := fmt.Sprintf("Helm install succeeded for release %s/%s.v1 with chart %s@%s", hr.Spec.TargetNamespace, hr.Spec.ReleaseName, tmpl.Chart, tmpl.Version)
	config := "sha256:" + digestOf(hr.Name+"config")
	return writeStatus(ctx, c, hr, func() {
		now := metav1.Now()
		hr.Status.HelmChart = chart.Namespace + "/" + chart.Name
		hr.Status.StorageNamespace = hr.Spec.StorageNamespace
		hr.Status.History = helmv2.Snapshots{{
			Name: hr.Spec.ReleaseName, Namespace: hr.Spec.TargetNamespace, Version: 1, Status: "deployed",
			ChartName: tmpl.Chart, ChartVersion: tmpl.Version, AppVersion: tmpl.Version,
			Digest: "sha256:" + digestOf(hr.Name+"release"), ConfigDigest: config, FirstDeployed: now, LastDeployed: now,
		}}
		hr.Status.Inventory = &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{
			{ID: fmt.Sprintf("%s_%s__Service", hr.Spec.TargetNamespace, hr.Spec.ReleaseName), Version: "v1"},
			{ID: fmt.Sprintf("%s_%s_apps_Deployment", hr.Spec.TargetNamespace, hr.Spec.ReleaseName), Version: "v1"},
		}}
		hr.Status.LastAttemptedGeneration = hr.Generation
		hr.Status.LastAttemptedReleaseAction = helmv2.ReleaseActionInstall
		hr.Status.LastAttemptedReleaseActionDuration = &metav1.Duration{Duration: 3 * time.Second}
		hr.Status.LastAttemptedRevision = tmpl.Version
		hr.Status.LastAttemptedConfigDigest = config
	}, cond(meta.ReadyCondition, helmv2.InstallSucceededReason, succeeded),
		cond(helmv2.ReleasedCondition, helmv2.InstallSucceededReason, succeeded))
}

// writeStatus writes obj's status once through testenv.UpdateFluxStatus, again on a conflict.
func writeStatus(ctx context.Context, c client.Client, obj testenv.FluxObject, record func(), conds ...metav1.Condition) error {
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return testenv.UpdateFluxStatus(ctx, c, obj, record, conds...)
	}); err != nil {
		return fmt.Errorf("writing the status of %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// cond is a True condition as Flux's controllers write it.
func cond(t, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: message}
}

// digestOf is a sha256 digest in hex, distinct per seed, as Flux's digests are per object.
func digestOf(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])
}
