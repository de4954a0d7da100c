package fluxdeployer

import (
	"context"
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
	"github.com/fluxdeployer/fluxdeployer/pkg/suggest"
)

// Helm source modes: how an OCI Helm chart reaches helm-controller.
const (
	// HelmSourceHelmRepository: a HelmRepository of type oci and chart.spec; helm-controller creates a HelmChart.
	// It selects the chart by version (its tag), so an OCI chart with a digest goes the chartRef way in this mode
	// too (see buildHelm).
	HelmSourceHelmRepository = "helmRepository"
	// HelmSourceChartRef: an OCIRepository selecting the chart layer, referenced by spec.chartRef. Flux
	// recommends it for OCI charts; it pins a digest (ref.digest).
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
	serviceAccountNamesKey        = "serviceAccountNames"
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
	// their --default-service-account), as Flux's multi-tenancy lockdown has every tenant's objects run as an
	// account of the tenant's own namespace.
	serviceAccountName string
	// serviceAccountNames overrides serviceAccountName per namespace: the platform's choice, in the platform's
	// ConfigMap, never a tenant's.
	serviceAccountNames map[string]string
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

// serviceAccountFor is the account the Flux objects of an ArtifactDeployment in namespace run as; "" for the
// controllers' own.
func (c config) serviceAccountFor(namespace string) string {
	if name, ok := c.serviceAccountNames[namespace]; ok {
		return name
	}
	return c.serviceAccountName
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
// the error names every bad key and starts with the reason of the worst (see parseConfig).
func ValidateConfig(data map[string]string) error {
	if _, err := parseConfig(data); err != nil {
		return withReason(err)
	}
	return nil
}

// ConfigProblem is one bad key of the deployer's ConfigMap.
type ConfigProblem struct {
	Key string
	// Reason is InvalidConfiguration for a value that does not parse, UnknownConfigurationKey for a key the
	// deployer does not read.
	Reason string
	// Message says what is wrong: the parse error, or for an unknown key the known key it most likely meant.
	Message string
}

func (p ConfigProblem) String() string { return p.Key + ": " + p.Message }

// CheckConfig lists the problems of the ConfigMap's data, in key order, for `fluxdeployer check`.
func CheckConfig(data map[string]string) []ConfigProblem {
	_, problems := readConfig(data)
	return problems
}

// ConfigKeys are the keys the deployer reads, sorted.
func ConfigKeys() []string {
	_, _, known := readConfigKeys(nil)
	return known
}

// ServiceAccountFor is the ServiceAccount the data's configuration has the Flux objects of namespace run as ("" for
// none), or an error when the data does not parse.
func ServiceAccountFor(data map[string]string, namespace string) (string, error) {
	c, err := parseConfig(data)
	if err != nil {
		return "", withReason(err)
	}
	return c.serviceAccountFor(namespace), nil
}

// parseConfig reads the ConfigMap's data strictly, for what previews it (render): any problem is an error naming
// every bad key, InvalidConfiguration when a value does not parse, else UnknownConfigurationKey (a typo such as
// "intervall" would otherwise leave the setting it meant at its default, silently).
func parseConfig(data map[string]string) (config, error) {
	c, problems := readConfig(data)
	if len(problems) == 0 {
		return c, nil
	}
	return c, outcome.Stallingf(worstReason(problems), "%s", joinProblems(problems))
}

// invalid tells whether a value of the ConfigMap does not parse: its configuration cannot be used.
func invalid(problems []ConfigProblem) bool {
	return slices.ContainsFunc(problems, func(p ConfigProblem) bool { return p.Reason == konfidencev1.InvalidConfigurationReason })
}

func joinProblems(problems []ConfigProblem) string {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.String()
	}
	return strings.Join(msgs, "; ")
}

// readConfig reads the ConfigMap's data: the configuration of every key that parses, and the problems of those that
// do not or are unknown.
func readConfig(data map[string]string) (config, []ConfigProblem) {
	c, problems, _ := readConfigKeys(data)
	return c, problems
}

// readConfigKeys is readConfig, and also returns the keys it knows.
func readConfigKeys(data map[string]string) (config, []ConfigProblem, []string) {
	c := defaultConfig()
	var problems []ConfigProblem
	var known []string
	field := func(key string, parse func(string) error) {
		known = append(known, key)
		if v, ok := data[key]; ok {
			if err := parse(v); err != nil {
				problems = append(problems, ConfigProblem{Key: key, Reason: konfidencev1.InvalidConfigurationReason, Message: err.Error()})
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
	field(serviceAccountNameKey, func(v string) (err error) { c.serviceAccountName, err = serviceAccountName(v); return err })
	field(serviceAccountNamesKey, func(v string) error {
		if err := yaml.UnmarshalStrict([]byte(v), &c.serviceAccountNames); err != nil {
			return err
		}
		for _, ns := range slices.Sorted(maps.Keys(c.serviceAccountNames)) {
			if _, err := serviceAccountName(c.serviceAccountNames[ns]); err != nil {
				return fmt.Errorf("namespace %s: %w", ns, err)
			}
		}
		return nil
	})
	field(createNamespaceKey, func(v string) (err error) { c.createNamespace, err = strconv.ParseBool(v); return err })
	slices.Sort(known)
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if _, ok := slices.BinarySearch(known, key); ok {
			continue
		}
		msg := "unknown key"
		if meant, ok := suggest.Closest(key, known); ok {
			msg += "; did you mean " + meant + "?"
		}
		problems = append(problems, ConfigProblem{Key: key, Reason: konfidencev1.UnknownConfigurationKeyReason, Message: msg})
	}
	slices.SortStableFunc(problems, func(a, b ConfigProblem) int { return strings.Compare(a.Key, b.Key) })
	return c, problems, known
}

// serviceAccountName checks a ServiceAccount name.
func serviceAccountName(v string) (string, error) {
	if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
		return "", fmt.Errorf("%q is no ServiceAccount name: %s", v, strings.Join(msgs, "; "))
	}
	return v, nil
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
