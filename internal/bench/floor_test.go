package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

// floorWorkers is the number of client workers of the floor: 8, as docs/performance.md reports it.
const floorWorkers = 8

// floor creates, with a tight loop of floorWorkers client workers, what the operator creates for the landscape:
// per artifact one ArtifactDeployment and its HelmRepository and HelmRelease (owned by it, as the operator
// owns them), with the names, labels, annotations and specs the operator gives them. The time until a watch
// has seen all of them is the API server's floor for the landscape: no registry read, no status, no decision.
func floor(ctx context.Context, c client.Client, namespace string, l landscape, vectors []vector) error {
	return createLandscape(ctx, c, namespace, l, vectors, true)
}

// createLandscape creates the ArtifactDeployments of the landscape with floorWorkers workers, and their Flux
// objects when withFlux is set.
func createLandscape(ctx context.Context, c client.Client, namespace string, l landscape, vectors []vector, withFlux bool) error {
	type job struct {
		vd int
		a  ocmtest.ComponentVersion
	}
	var jobs []job
	for i := range l.vectorDeployments {
		for _, a := range vectorOf(vectors, i).artifacts {
			jobs = append(jobs, job{vd: i, a: a})
		}
	}
	return inParallel(len(jobs), func(i int) error {
		uid := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", jobs[i].vd))
		return createArtifact(ctx, c, namespace, uid, jobs[i].a, withFlux)
	})
}

// createArtifact creates the ArtifactDeployment of artifact a for the VectorDeployment of uid, then, withFlux,
// its Flux objects.
func createArtifact(ctx context.Context, c client.Client, namespace string, uid types.UID, a ocmtest.ComponentVersion, withFlux bool) error {
	name, hash, err := naming.ArtifactDeploymentName(a.Name, a.Version, string(uid), 0)
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]string{"type": "ociArtifact", "imageReference": chartRef})
	if err != nil {
		return err
	}
	ad := &konfidencev1.ArtifactDeployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{konfidencev1.ArtifactIdentityLabel: naming.IdentityHash(a.Name, a.Version, string(uid))},
			Annotations: map[string]string{
				konfidencev1.ArtifactComponentAnnotation:   a.Name,
				konfidencev1.ArtifactVersionAnnotation:     a.Version,
				konfidencev1.ArtifactHashAnnotation:        hash,
				konfidencev1.AllowReuseAnnotation:          strconv.FormatBool(false),
				konfidencev1.VectorDeploymentUIDAnnotation: string(uid),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: konfidencev1.GroupVersion.String(), Kind: "VectorDeployment", Name: "floor", UID: uid,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: konfidencev1.ArtifactDeploymentSpec{
			Manifest: konfidencev1.ArtifactManifest{Type: helmType},
			Component: konfidencev1.Component{Name: a.Name, Version: a.Version, Resources: []konfidencev1.Resource{
				{Name: "chart", Type: "helmChart", Content: &apiextensionsv1.JSON{Raw: manifest}},
			}},
		},
	}
	if err := c.Create(ctx, ad); err != nil {
		return fmt.Errorf("creating ArtifactDeployment %s: %w", name, err)
	}
	if !withFlux {
		return nil
	}
	for _, obj := range fluxObjects(ad) {
		if err := controllerutil.SetControllerReference(ad, obj, c.Scheme()); err != nil {
			return err
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, name, err)
		}
	}
	return nil
}

// fluxObjects are the HelmRepository and HelmRelease the Flux deployer builds for ad with its default
// configuration.
func fluxObjects(ad *konfidencev1.ArtifactDeployment) []client.Object {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: ad.Name, Namespace: ad.Namespace,
			Labels:      map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name},
			Annotations: map[string]string{"fluxdeployer.konfidence.cloud/applied-digest": "000000000000000000000000"}}
	}
	interval := metav1.Duration{Duration: 10 * time.Minute}
	timeout := &metav1.Duration{Duration: 5 * time.Minute}
	return []client.Object{
		&sourcev1.HelmRepository{ObjectMeta: meta(), Spec: sourcev1.HelmRepositorySpec{
			URL: "oci://ghcr.io/stefanprodan/charts", Type: sourcev1.HelmRepositoryTypeOCI, Interval: interval,
		}},
		&helmv2.HelmRelease{ObjectMeta: meta(), Spec: helmv2.HelmReleaseSpec{
			Interval: interval, ReleaseName: ad.Name, TargetNamespace: ad.Namespace, StorageNamespace: ad.Namespace,
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart: "podinfo", Version: "6.9.1",
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: ad.Name},
			}},
			CommonMetadata: &helmv2.CommonMetadata{Labels: map[string]string{konfidencev1.ArtifactDeploymentLabel: ad.Name}},
			DriftDetection: &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled},
			Install:        &helmv2.Install{Timeout: timeout, CreateNamespace: true, Remediation: &helmv2.InstallRemediation{Retries: 3}},
			Upgrade: &helmv2.Upgrade{Timeout: timeout, Remediation: &helmv2.UpgradeRemediation{
				Retries: 3, RemediateLastFailure: ptr.To(true), Strategy: ptr.To(helmv2.RollbackRemediationStrategy)}},
		}},
	}
}
