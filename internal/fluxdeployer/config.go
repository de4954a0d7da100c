package fluxdeployer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// Helm source modes: how an OCI Helm chart reaches helm-controller.
const (
	// HelmSourceHelmRepository: a HelmRepository of type oci and chart.spec; helm-controller creates a HelmChart.
	HelmSourceHelmRepository = "helmRepository"
	// HelmSourceChartRef: an OCIRepository selecting the chart layer, referenced by spec.chartRef. Flux
	// recommends it for OCI charts; it can also pin a digest.
	HelmSourceChartRef = "chartRef"
)

// Keys of the configuration ConfigMap. Maps and references are YAML in one key each.
const (
	authenticationSecretRefsKey   = "authenticationSecretRefs"
	insecureCredentialsHostsKey   = "insecureRegistryCredentialsHosts"
	deploymentTargetsKey          = "deploymentTargets"
	deploymentTargetSecretNameKey = "deploymentTargetSecretName"
	intervalKey                   = "interval"
	targetNamespaceKey            = "targetNamespace"
	waitKey                       = "wait"
	timeoutKey                    = "timeout"
	retriesKey                    = "retries"
	driftDetectionKey             = "driftDetection"
	helmSourceKey                 = "helmSource"
	serviceAccountNameKey         = "serviceAccountName"
	createNamespaceKey            = "createNamespace"
	teardownTimeoutKey            = "teardownTimeout"
)

// config is the Flux deployer's configuration, read from its ConfigMap on every reconcile.
type config struct {
	// authenticationSecretRefs maps a registry host[:port] to the Secret Flux pulls from it with.
	authenticationSecretRefs map[string]string
	// insecureCredentialsHosts are the registry hosts Flux may send a pull Secret's credentials to over plain
	// HTTP; to any other host they go over TLS only.
	insecureCredentialsHosts []string
	// deploymentTargets maps an ArtifactDeployment namespace to the kubeconfig of the cluster it deploys to.
	deploymentTargets map[string]meta.KubeConfigReference
	// deploymentTargetSecretName is a kubeconfig Secret that, where it exists in an ArtifactDeployment's
	// namespace without an entry in deploymentTargets, makes that namespace deploy to the remote cluster.
	deploymentTargetSecretName string
	interval                   time.Duration
	targetNamespace            string // empty: the ArtifactDeployment's namespace
	wait                       bool
	timeout                    time.Duration
	retries                    int
	driftDetection             helmv2.DriftDetectionMode
	helmSource                 string
	// serviceAccountName is the account, in each ArtifactDeployment's namespace, that helm-controller and
	// kustomize-controller impersonate to apply its chart or bundle (empty: the controllers' own rights, or
	// their --default-service-account).
	serviceAccountName string
	// createNamespace lets helm-controller create a missing target namespace on install.
	createNamespace bool
	// teardownTimeout bounds how long a deleted ArtifactDeployment waits for its Flux objects to be gone.
	teardownTimeout time.Duration
	// version is the ConfigMap's resourceVersion, "" without one: a reconcile that finds it changed decides the
	// Flux objects again (see statusOnly).
	version string
}

func defaultConfig() config {
	return config{
		deploymentTargetSecretName: "deployment-target-kubeconfig",
		interval:                   10 * time.Minute,
		wait:                       true,
		timeout:                    5 * time.Minute,
		retries:                    3,
		driftDetection:             helmv2.DriftDetectionEnabled,
		helmSource:                 HelmSourceHelmRepository,
		teardownTimeout:            10 * time.Minute,
	}
}

// loadConfig reads the ConfigMap. Without one the defaults apply, so a fresh installation deploys; a ConfigMap
// that cannot be read is an error on every ArtifactDeployment rather than a silent fallback.
func loadConfig(ctx context.Context, r client.Reader, key types.NamespacedName) (config, error) {
	cm, err := readConfigMap(ctx, r, key)
	switch {
	case err != nil:
		return config{}, err
	case cm == nil:
		return defaultConfig(), nil
	}
	c, err := parseConfig(cm.Data)
	if err != nil {
		return config{}, outcome.Stallingf(outcome.As(err, konfidencev1.InvalidConfigurationReason).Reason, "ConfigMap %s: %v", key, err)
	}
	c.version = cm.ResourceVersion
	return c, nil
}

// readConfigMap returns the ConfigMap, or nil when there is none.
func readConfigMap(ctx context.Context, r client.Reader, key types.NamespacedName) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading ConfigMap %s: %w", key, err)
	}
	return cm, nil
}

// ValidateConfig checks the data of the deployer's ConfigMap as every reconcile does, for `fluxdeployer render`:
// the error names every bad key and starts with the reason the ArtifactDeployments would carry.
func ValidateConfig(data map[string]string) error {
	if _, err := parseConfig(data); err != nil {
		return withReason(err)
	}
	return nil
}

// parseConfig reads the ConfigMap's data. A failure is terminal, naming every bad key: InvalidConfiguration for a
// value that does not parse, else UnknownConfigurationKey for a key the deployer does not read (a typo such as
// "intervall" would otherwise leave the setting it meant at its default, silently).
func parseConfig(data map[string]string) (config, error) {
	c := defaultConfig()
	var errs []error
	known := map[string]bool{}
	field := func(key string, parse func(string) error) {
		known[key] = true
		if v, ok := data[key]; ok {
			if err := parse(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
			}
		}
	}
	field(authenticationSecretRefsKey, func(v string) error { return yaml.UnmarshalStrict([]byte(v), &c.authenticationSecretRefs) })
	field(insecureCredentialsHostsKey, func(v string) error { return yaml.UnmarshalStrict([]byte(v), &c.insecureCredentialsHosts) })
	field(deploymentTargetsKey, func(v string) error {
		if err := yaml.UnmarshalStrict([]byte(v), &c.deploymentTargets); err != nil {
			return err
		}
		for ns, ref := range c.deploymentTargets {
			if (ref.SecretRef == nil) == (ref.ConfigMapRef == nil) {
				return fmt.Errorf("namespace %s: exactly one of secretRef and configMapRef", ns)
			}
		}
		return nil
	})
	field(deploymentTargetSecretNameKey, func(v string) error { c.deploymentTargetSecretName = v; return nil })
	field(intervalKey, func(v string) (err error) { c.interval, err = positiveDuration(v); return err })
	field(timeoutKey, func(v string) (err error) { c.timeout, err = positiveDuration(v); return err })
	field(teardownTimeoutKey, func(v string) (err error) { c.teardownTimeout, err = positiveDuration(v); return err })
	field(targetNamespaceKey, func(v string) error { c.targetNamespace = v; return nil })
	field(waitKey, func(v string) (err error) { c.wait, err = strconv.ParseBool(v); return err })
	field(retriesKey, func(v string) (err error) { c.retries, err = strconv.Atoi(v); return err })
	field(driftDetectionKey, func(v string) error {
		switch m := helmv2.DriftDetectionMode(v); m {
		case helmv2.DriftDetectionEnabled, helmv2.DriftDetectionWarn, helmv2.DriftDetectionDisabled:
			c.driftDetection = m
			return nil
		}
		return fmt.Errorf("%q is none of enabled, warn, disabled", v)
	})
	field(helmSourceKey, func(v string) error {
		if v != HelmSourceHelmRepository && v != HelmSourceChartRef {
			return fmt.Errorf("%q is neither %s nor %s", v, HelmSourceHelmRepository, HelmSourceChartRef)
		}
		c.helmSource = v
		return nil
	})
	field(serviceAccountNameKey, func(v string) error {
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			return fmt.Errorf("%q is no ServiceAccount name: %s", v, strings.Join(msgs, "; "))
		}
		c.serviceAccountName = v
		return nil
	})
	field(createNamespaceKey, func(v string) (err error) { c.createNamespace, err = strconv.ParseBool(v); return err })
	if len(errs) > 0 {
		errs = append(errs, unknownKeys(data, known)...)
		return c, outcome.Stallingf(konfidencev1.InvalidConfigurationReason, "%w", errors.Join(errs...))
	}
	if unknown := unknownKeys(data, known); len(unknown) > 0 {
		return c, outcome.Stallingf(konfidencev1.UnknownConfigurationKeyReason, "%w", errors.Join(unknown...))
	}
	return c, nil
}

// unknownKeys names each key of data the deployer does not read, in order, with the keys it does read.
func unknownKeys(data map[string]string, known map[string]bool) []error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if !known[key] {
			errs = append(errs, fmt.Errorf("%s: unknown key (known: %s)", key, strings.Join(slices.Sorted(maps.Keys(known)), ", ")))
		}
	}
	return errs
}

// positiveDuration parses a duration of at least a second: Flux's duration fields accept no smaller unit than ms,
// and anything shorter than a second would hammer the registries.
func positiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d < time.Second {
		err = fmt.Errorf("%s is shorter than 1s", v)
	}
	return d.Round(time.Second), err
}
