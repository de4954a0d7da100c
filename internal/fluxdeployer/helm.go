package fluxdeployer

import (
	"path"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// helmChartLayerMediaType selects the chart layer of an OCI Helm chart for an OCIRepository.
const helmChartLayerMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

// buildHelm returns the Helm source and the HelmRelease of a helm artifact. An OCI chart goes through an
// OCIRepository and spec.chartRef in chartRef mode, and whenever it has a digest, whatever the mode: a digest is
// the ArtifactDeployment's promise that exactly that content is deployed (the digest a vector's signature
// covers), and only an OCIRepository can pin one (ref.digest). A HelmRepository and the HelmChart helm-controller
// makes from chart.spec select a chart by version, i.e. by tag, which whoever can push to the repository moves to
// other content after verification.
func buildHelm(ad *konfidencev1.ArtifactDeployment, a artifact, refs references, cfg config, releaseName string) []client.Object {
	hr := helmRelease(ad, refs, cfg, releaseName)
	if a.isOCI() && (cfg.helmSource == HelmSourceChartRef || a.digest != "") {
		repo := ociRepository(ad, a, refs, cfg)
		repo.Spec.LayerSelector = &sourcev1.OCILayerSelector{MediaType: helmChartLayerMediaType, Operation: sourcev1.OCILayerCopy}
		hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: repo.Name}
		return []client.Object{repo, hr}
	}
	repo, chart, version := helmRepository(ad, a, refs, cfg)
	hr.Spec.Chart = &helmv2.HelmChartTemplate{
		// helm-controller puts these labels on the HelmChart it creates from the template: the operator's cache
		// holds only the HelmCharts of its own HelmReleases, and of its shard (see fluxMeta).
		ObjectMeta: &helmv2.HelmChartTemplateObjectMeta{Labels: fluxMeta(ad).Labels},
		Spec: helmv2.HelmChartTemplateSpec{
			Chart:     chart,
			Version:   version,
			SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: repo.Name},
		},
	}
	return []client.Object{repo, hr}
}

// helmRepository returns the HelmRepository and the chart name and version in it. An OCI chart lives at
// <repository>/<chart>:<version>, so the repository URL is its parent path; it comes here with a tag and no
// digest (see buildHelm).
func helmRepository(ad *konfidencev1.ArtifactDeployment, a artifact, refs references, cfg config) (*sourcev1.HelmRepository, string, string) {
	repo := &sourcev1.HelmRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.HelmRepositoryKind},
		ObjectMeta: fluxMeta(ad),
		Spec: sourcev1.HelmRepositorySpec{
			Interval:  metav1.Duration{Duration: cfg.interval},
			SecretRef: refs.pullSecret,
		},
	}
	if !a.isOCI() {
		repo.Spec.URL = a.helmRepositoryURL
		repo.Spec.Type = sourcev1.HelmRepositoryTypeDefault
		if strings.HasPrefix(a.helmRepositoryURL, sourcev1.OCIRepositoryPrefix) {
			repo.Spec.Type = sourcev1.HelmRepositoryTypeOCI
		}
		return repo, a.chart, a.version
	}
	repo.Spec.Type = sourcev1.HelmRepositoryTypeOCI
	repo.Spec.Insecure = a.insecure
	repo.Spec.URL = "oci://" + a.host
	if dir := path.Dir(a.repository); dir != "." {
		repo.Spec.URL += "/" + dir
	}
	// Helm pushes version 1.2.3+build as tag 1.2.3_build, since OCI tags cannot hold '+'.
	return repo, path.Base(a.repository), strings.ReplaceAll(a.tag, "_", "+")
}

// helmRelease returns the HelmRelease without its chart source. The release name is the ArtifactDeployment's
// name (see releaseName), so charts that derive names from .Release.Name give every instance its own objects.
func helmRelease(ad *konfidencev1.ArtifactDeployment, refs references, cfg config, releaseName string) *helmv2.HelmRelease {
	timeout := &metav1.Duration{Duration: cfg.timeout}
	return &helmv2.HelmRelease{
		TypeMeta:   metav1.TypeMeta{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: fluxMeta(ad),
		Spec: helmv2.HelmReleaseSpec{
			Interval:           metav1.Duration{Duration: cfg.interval},
			ReleaseName:        releaseName,
			TargetNamespace:    refs.target.namespace,
			StorageNamespace:   refs.target.namespace,
			KubeConfig:         refs.target.kubeConfig,
			ServiceAccountName: cfg.serviceAccountFor(ad.Namespace),
			CommonMetadata:     &helmv2.CommonMetadata{Labels: workloadLabels(ad)},
			DriftDetection:     &helmv2.DriftDetection{Mode: cfg.driftDetection},
			Install: &helmv2.Install{
				Timeout:         timeout,
				DisableWait:     !cfg.wait,
				CreateNamespace: cfg.createNamespace,
				Remediation:     &helmv2.InstallRemediation{Retries: cfg.retries},
			},
			Upgrade: &helmv2.Upgrade{
				Timeout:     timeout,
				DisableWait: !cfg.wait,
				Remediation: &helmv2.UpgradeRemediation{
					Retries:              cfg.retries,
					RemediateLastFailure: ptr.To(cfg.retries != 0),
					Strategy:             ptr.To(helmv2.RollbackRemediationStrategy),
				},
			},
		},
	}
}

// ociRepository returns the OCIRepository of an OCI artifact; a digest pins it, otherwise the tag does.
func ociRepository(ad *konfidencev1.ArtifactDeployment, a artifact, refs references, cfg config) *sourcev1.OCIRepository {
	ref := &sourcev1.OCIRepositoryRef{Digest: a.digest}
	if a.digest == "" {
		ref.Tag = a.tag
	}
	return &sourcev1.OCIRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.OCIRepositoryKind},
		ObjectMeta: fluxMeta(ad),
		Spec: sourcev1.OCIRepositorySpec{
			URL:       a.ociURL(),
			Reference: ref,
			Insecure:  a.insecure,
			SecretRef: refs.pullSecret,
			Interval:  metav1.Duration{Duration: cfg.interval},
		},
	}
}
