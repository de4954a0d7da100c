package fluxdeployer

import (
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// DesiredObjects returns the Flux objects the deployer applies for ad, as it applies them (the fields it owns and
// the applied-digest annotation), without a cluster: configData is the data of the deployer's ConfigMap (nil for
// the defaults) and secretExists tells which Secrets exist in ad's namespace. The owner references carry ad's UID,
// which the caller sets. A failure names the reason the ArtifactDeployment's Ready condition would carry. An
// ArtifactDeployment of a manifest type another deployer handles has no Flux objects.
func DesiredObjects(ad *konfidencev1.ArtifactDeployment, configData map[string]string, secretExists func(name string) bool) ([]*unstructured.Unstructured, error) {
	if !handled(ad) {
		return nil, nil
	}
	cfg, err := parseConfig(configData)
	if err != nil {
		return nil, withReason(err)
	}
	// A fresh namespace: no HelmRelease yet, whose release name a taken-over Konfidence name would keep.
	objects, _, err := desiredObjects(ad, cfg, observed{
		secretExists: func(name string) (bool, error) { return secretExists(name), nil },
		helmRelease:  func() (*helmv2.HelmRelease, error) { return nil, nil },
	})
	if err != nil {
		return nil, withReason(err)
	}
	out := make([]*unstructured.Unstructured, len(objects))
	for i, obj := range objects {
		if out[i], err = applyConfiguration(obj); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// withReason puts a step error's reason in front of its message, for a reader without the status conditions.
func withReason(err error) error {
	return fmt.Errorf("%s: %w", outcome.As(err, konfidencev1.ApplyFailedReason).Reason, err)
}
