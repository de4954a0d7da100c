package fluxdeployer

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// presenceTTL is how long an answer of objectPresence is shared. Secrets and ServiceAccounts are not watched (see
// resolveReferences and checkServiceAccount): one created or deleted is noticed at the next interval anyway, so
// sharing an answer for a few seconds changes nothing a user can rely on, while the ArtifactDeployments of a
// namespace that converge together then ask once instead of once each (one GET per artifact).
const presenceTTL = 10 * time.Second

// objectPresence remembers for presenceTTL whether objects of one kind (Secrets, ServiceAccounts) exist, read from
// the API server by metadata.
type objectPresence struct {
	reader client.Reader
	kind   string
	now    func() time.Time

	mu      sync.Mutex
	answers map[types.NamespacedName]answer
}

type answer struct {
	exists bool
	at     time.Time
}

func newPresence(reader client.Reader, kind string) *objectPresence {
	return &objectPresence{reader: reader, kind: kind, now: time.Now, answers: map[types.NamespacedName]answer{}}
}

// lookup returns the secretLookup of one namespace; fresh reads the API server in any case (a reconcile a user
// requested, typically right after creating a Secret) and remembers the answer for the others.
func (s *objectPresence) lookup(ctx context.Context, namespace string, fresh bool) secretLookup {
	return func(name string) (bool, error) {
		key := types.NamespacedName{Namespace: namespace, Name: name}
		now := s.now()
		s.mu.Lock()
		p, ok := s.answers[key]
		s.mu.Unlock()
		if ok && !fresh && now.Sub(p.at) < presenceTTL {
			return p.exists, nil
		}
		exists, err := objectExists(ctx, s.reader, s.kind, namespace, name)
		if err != nil {
			return false, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.answers[key] = answer{exists: exists, at: now}
		s.forgetExpired(now)
		return exists, nil
	}
}

// forgetExpired keeps the memory to the objects asked for lately: one entry per namespace and configured name at
// most, and only for namespaces with ArtifactDeployments reconciled in the last presenceTTL.
func (s *objectPresence) forgetExpired(now time.Time) {
	for key, p := range s.answers {
		if now.Sub(p.at) >= presenceTTL {
			delete(s.answers, key)
		}
	}
}
