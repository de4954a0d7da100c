package fluxdeployer

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/util/validation"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// Manifest types the Flux deployer handles; ArtifactDeployments of any other type belong to another deployer.
const (
	HelmManifestType      = "cloud.konfidence.flux.helm"
	KustomizeManifestType = "cloud.konfidence.flux.kustomize"
)

// maxReleaseNameLength is Helm's limit on release names; the ArtifactDeployment's name is the release name.
// Names this project builds stay within it; a Konfidence install taken over has names of up to 63 characters.
const maxReleaseNameLength = 53

// deployer is one way of deploying: the component resource type it deploys and the reason for ambiguous input.
type deployer struct {
	resourceType   string
	multipleReason string
}

var deployers = map[string]deployer{
	HelmManifestType:      {resourceType: "helmChart", multipleReason: konfidencev1.MultipleHelmChartResourcesReason},
	KustomizeManifestType: {resourceType: "kustomize", multipleReason: konfidencev1.MultipleKustomizeResourcesReason},
}

// TeardownFinalizers maps each manifest type the Flux deployer handles to the finalizer it tears the Flux objects
// of such an ArtifactDeployment down under. The binary hands it to the VectorDeployment reconciler, which then
// creates those ArtifactDeployments with the finalizer in place: one write less per artifact than the deployer
// adding it, and an ArtifactDeployment of a type no deployer of the process handles never gets it, so nothing
// waits for a teardown that would not come. The deployer still adds it to one created without it.
func TeardownFinalizers() map[string]string {
	finalizers := make(map[string]string, len(deployers))
	for manifestType := range deployers {
		finalizers[manifestType] = konfidencev1.TeardownFinalizer
	}
	return finalizers
}

// handled reports whether the Flux deployer owns the ArtifactDeployment.
func handled(ad *konfidencev1.ArtifactDeployment) bool {
	_, ok := deployers[ad.Spec.Manifest.Type]
	return ok
}

// selectResource returns the one component resource the manifest deploys. Picking one of several would deploy
// something the author did not choose, so more than one is an error like none.
func selectResource(ad *konfidencev1.ArtifactDeployment) (*konfidencev1.Resource, error) {
	d := deployers[ad.Spec.Manifest.Type]
	var found []*konfidencev1.Resource
	for i := range ad.Spec.Component.Resources {
		if r := &ad.Spec.Component.Resources[i]; r.Type == d.resourceType {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, outcome.Stallingf(konfidencev1.NoDeployableResourceReason,
			"component %s:%s has no resource of type %s", ad.Spec.Component.Name, ad.Spec.Component.Version, d.resourceType)
	default:
		names := make([]string, len(found))
		for i, r := range found {
			names[i] = r.Name
		}
		return nil, outcome.Stallingf(d.multipleReason,
			"component %s:%s has %d resources of type %s (%v); exactly one is deployed",
			ad.Spec.Component.Name, ad.Spec.Component.Version, len(found), d.resourceType, names)
	}
}

// checkName refuses a name that cannot be used verbatim for every Flux object. The name is built upstream;
// renaming here would break the one-to-one mapping the naming scheme guarantees. Whether it can also name the Helm
// release is releaseName's decision.
func checkName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return outcome.Stallingf(konfidencev1.InvalidNameReason, "name %q is not a DNS-1123 label: %v", name, errs)
	}
	return nil
}

// releaseName is the Helm release of ad: its name. A name longer than Helm allows comes from a Konfidence install
// taken over (its names reach 63 characters), whose HelmRelease could not carry it: the release that HelmRelease
// installed keeps its name, as the HelmRelease says it (empty: helm-controller's default, shortened to 53), since a
// renamed release is a reinstall. Without such a HelmRelease the name cannot be deployed with Helm.
func releaseName(ad *konfidencev1.ArtifactDeployment, live *helmv2.HelmRelease) (string, error) {
	switch {
	case len(ad.Name) <= maxReleaseNameLength:
		return ad.Name, nil
	case live != nil:
		return live.Spec.ReleaseName, nil
	default:
		return "", outcome.Stallingf(konfidencev1.InvalidNameReason,
			"name %q has %d characters; a Helm release name has at most %d", ad.Name, len(ad.Name), maxReleaseNameLength)
	}
}
