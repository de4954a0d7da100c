package fluxdeployer

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretPresenceTTL is how long an answer of secretPresence is shared. Secrets are not watched (see
// resolveReferences): a Secret created or deleted is noticed at the next interval anyway, so sharing an answer for
// a few seconds changes nothing a user can rely on, while the ArtifactDeployments of a namespace that converge
// together then ask once instead of once each (one GET per artifact).
const secretPresenceTTL = 10 * time.Second

// secretPresence remembers for secretPresenceTTL whether Secrets exist, read from the API server by metadata.
type secretPresence struct {
	reader client.Reader
	now    func() time.Time

	mu      sync.Mutex
	answers map[types.NamespacedName]presence
}

type presence struct {
	exists bool
	at     time.Time
}

func newSecretPresence(reader client.Reader) *secretPresence {
	return &secretPresence{reader: reader, now: time.Now, answers: map[types.NamespacedName]presence{}}
}

// lookup returns the secretLookup of one namespace; fresh reads the API server in any case (a reconcile a user
// requested, typically right after creating a Secret) and remembers the answer for the others.
func (s *secretPresence) lookup(ctx context.Context, namespace string, fresh bool) secretLookup {
	return func(name string) (bool, error) {
		key := types.NamespacedName{Namespace: namespace, Name: name}
		now := s.now()
		s.mu.Lock()
		p, ok := s.answers[key]
		s.mu.Unlock()
		if ok && !fresh && now.Sub(p.at) < secretPresenceTTL {
			return p.exists, nil
		}
		exists, err := secretExists(ctx, s.reader, namespace, name)
		if err != nil {
			return false, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.answers[key] = presence{exists: exists, at: now}
		s.forgetExpired(now)
		return exists, nil
	}
}

// forgetExpired keeps the memory to the Secrets asked for lately: one entry per namespace and configured Secret
// name at most, and only for namespaces with ArtifactDeployments reconciled in the last secretPresenceTTL.
func (s *secretPresence) forgetExpired(now time.Time) {
	for key, p := range s.answers {
		if now.Sub(p.at) >= secretPresenceTTL {
			delete(s.answers, key)
		}
	}
}
