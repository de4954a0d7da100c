package controlplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// AuditLog is the audit log of an API server started with StartAuditedAPIServer: one event per request of the
// audited user, written by the API server itself. It tells what the API server made of each request (the verb
// and resource it authorized, its answer) without the client's view of it.
type AuditLog struct {
	path string
}

// AuditEvent is what this package reads of an audit.k8s.io/v1 Event.
type AuditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	// RequestURI is the request's path and query.
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// RequestObject is the request's body, for creates, updates and patches.
	RequestObject json.RawMessage `json:"requestObject"`
}

// auditPolicy records every request of one user at level Request (with the request's body) once it has been
// answered (a watch: once it started), and nothing of anyone else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  users: [%q]
- level: None
`

// auditFlags writes the audit policy for user into dir and returns the log and kube-apiserver's flags for both.
func auditFlags(dir, user string) (*AuditLog, map[string]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, fmt.Appendf(nil, auditPolicy, user), 0o600); err != nil {
		return nil, nil, err
	}
	log := &AuditLog{path: filepath.Join(dir, "audit.log")}
	return log, map[string]string{"audit-policy-file": policy, "audit-log-path": log.path, "audit-log-format": "json",
		"audit-log-mode": "blocking"}, nil
}

// Events reads the events logged so far, one per request: a request's ResponseComplete event, or for a watch
// that has not ended its ResponseStarted event.
func (l *AuditLog) Events() ([]AuditEvent, error) {
	f, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	var events []AuditEvent
	seen := map[string]int{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for scanner.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", l.path, err)
		}
		if i, ok := seen[e.AuditID]; ok {
			events[i] = e // the later stage of the same request
			continue
		}
		seen[e.AuditID] = len(events)
		events = append(events, e)
	}
	return events, scanner.Err()
}
