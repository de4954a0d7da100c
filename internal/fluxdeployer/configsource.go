package fluxdeployer

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kuberecorder "k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

var configProblems = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "fluxdeployer_configuration_problems",
	Help: "Bad keys of the Flux deployer's ConfigMap, by reason: InvalidConfiguration (a value that does not parse) or " +
		"UnknownConfigurationKey (a key the deployer does not read); while any is above 0 the last good configuration " +
		"stays in use.",
}, []string{"reason"})

func init() {
	metrics.Registry.MustRegister(configProblems)
}

// configSource reads the deployer's configuration from its ConfigMap on every full reconcile. A ConfigMap is the
// platform's, edited by hand, and one edit must not stop every ArtifactDeployment of the cluster: a ConfigMap with
// a value that does not parse, or a key the deployer does not read, keeps the last good configuration in use. Its
// problems are reported once per version of the ConfigMap, where the platform looks (a Warning event on the
// ConfigMap, the fluxdeployer_configuration_problems metric, `fluxdeployer check`), not in every
// ArtifactDeployment's status. An unknown key is not simply ignored: a misspelt serviceAccountNam would otherwise
// run every tenant's objects with the Flux controllers' own rights.
type configSource struct {
	reader   client.Reader // holds only the configuration ConfigMap
	key      types.NamespacedName
	recorder kuberecorder.EventRecorder

	mu sync.Mutex
	// lastGood is the configuration of the last ConfigMap without problems; nil until one was read.
	lastGood *config
	// reported is the resourceVersion of the ConfigMap whose problems were last reported.
	reported string
}

// load returns the configuration to deploy with. Only a ConfigMap with problems read before any good one (after a
// start) fails, with a short message: deploying with the defaults instead could widen what a tenant may do.
func (s *configSource) load(ctx context.Context) (config, error) {
	cm, err := readConfigMap(ctx, s.reader, s.key)
	if err != nil {
		return config{}, err
	}
	c, problems := defaultConfig(), []ConfigProblem(nil)
	if cm != nil {
		c, problems = readConfig(cm.Data)
		c.version = cm.ResourceVersion
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report(cm, problems)
	switch {
	case len(problems) == 0:
		s.lastGood = &c
		return c, nil
	case s.lastGood != nil:
		// Under the version read, so that statusOnly takes this version for the one deployed with.
		good := *s.lastGood
		good.version = c.version
		return good, nil
	}
	return config{}, outcome.Stallingf(worstReason(problems),
		"ConfigMap %s: %s: nothing is deployed until it is fixed (fluxdeployer check names the problem)", s.key, briefKeys(problems))
}

// version is the resourceVersion of the ConfigMap as the cache holds it, "" without one.
func (s *configSource) version(ctx context.Context) (string, error) {
	cm, err := readConfigMap(ctx, s.reader, s.key)
	if err != nil || cm == nil {
		return "", err
	}
	return cm.ResourceVersion, nil
}

// report records the ConfigMap's problems once per version: the metric always, an event for a version not reported
// before.
func (s *configSource) report(cm *corev1.ConfigMap, problems []ConfigProblem) {
	counts := map[string]int{konfidencev1.InvalidConfigurationReason: 0, konfidencev1.UnknownConfigurationKeyReason: 0}
	for _, p := range problems {
		counts[p.Reason]++
	}
	for reason, n := range counts {
		configProblems.WithLabelValues(reason).Set(float64(n))
	}
	if cm == nil || len(problems) == 0 || cm.ResourceVersion == s.reported {
		return
	}
	s.reported = cm.ResourceVersion
	consequence := "the last good configuration stays in use"
	if s.lastGood == nil {
		consequence = "nothing is deployed until it is fixed"
	}
	s.recorder.Eventf(cm, corev1.EventTypeWarning, worstReason(problems), "%s (%s)", joinProblems(problems), consequence)
}

// worstReason is InvalidConfiguration when a value does not parse, else UnknownConfigurationKey.
func worstReason(problems []ConfigProblem) string {
	if invalid(problems) {
		return konfidencev1.InvalidConfigurationReason
	}
	return konfidencev1.UnknownConfigurationKeyReason
}

// briefKeys names the bad keys, "invalid a, b; unknown c and 2 more", as many of each kind as fit in a few words
// and a count of the rest, so that a message stays short (under 256 characters with its ConfigMap) however many
// and however long they are.
func briefKeys(problems []ConfigProblem) string {
	const budget, longest = 40, 40 // characters of key names per kind, of one key name
	var parts []string
	for _, kind := range []struct{ reason, word string }{
		{konfidencev1.InvalidConfigurationReason, "invalid"},
		{konfidencev1.UnknownConfigurationKeyReason, "unknown"},
	} {
		var keys []string
		for _, p := range problems {
			if p.Reason == kind.reason {
				keys = append(keys, p.Key)
			}
		}
		if len(keys) == 0 {
			continue
		}
		var shown []string
		used := 0
		for _, key := range keys {
			if r := []rune(key); len(r) > longest {
				key = string(r[:longest-1]) + "…"
			}
			if len(shown) > 0 && used+len(key) > budget {
				break
			}
			shown, used = append(shown, key), used+len(key)
		}
		part := kind.word + " " + strings.Join(shown, ", ")
		if rest := len(keys) - len(shown); rest > 0 {
			part += fmt.Sprintf(" and %d more", rest)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
