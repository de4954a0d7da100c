package node

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditPolicy records, at level Metadata (who, from where, when, which object, the response's code; no bodies), the
// writes to what the operator writes: its own objects, the Flux objects it applies and the Leases of leader
// election, so that a test can attribute every write to the client that sent it. Of service accounts, it also
// records the writes to Deployments and Services (not their status) and the lists of Services: what Flux applies
// of the workloads and what the deployer reads of them, so that a test can tell whose credentials they used (a
// remote target's kubeconfig, or the controller's own account). The kubelet's Node Leases, renewed every ten
// seconds, and everything else are left out, which keeps the log small. Stage ResponseComplete only: one event per
// request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    namespaces: [kube-node-lease]
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - group: konfidence.cloud
      - group: source.toolkit.fluxcd.io
      - group: helm.toolkit.fluxcd.io
      - group: kustomize.toolkit.fluxcd.io
      - group: coordination.k8s.io
        resources: [leases]
  - level: Metadata
    userGroups: [system:serviceaccounts]
    verbs: [create, update, patch, delete]
    resources:
      - group: apps
        resources: [deployments]
      - group: ""
        resources: [services]
  - level: Metadata
    userGroups: [system:serviceaccounts]
    verbs: [list]
    resources:
      - group: ""
        resources: [services]
  - level: None
`

// AuditEvent is what the API server's audit log says of one request, as far as the tests read it.
type AuditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	// SourceIPs are the client's address first: a pod's own, since nothing between the pods and the API server
	// masquerades.
	SourceIPs []string `json:"sourceIPs"`
	UserAgent string   `json:"userAgent"`
	// RequestURI is the request's path and query (a dry run's says dryRun=All).
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int32 `json:"code"`
	} `json:"responseStatus"`
	// RequestReceivedTimestamp is when the API server received the request.
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// Write tells whether the request was a write, not a read (a list).
func (e AuditEvent) Write() bool { return e.Verb != "list" && e.Verb != "get" && e.Verb != "watch" }

// DryRun tells whether the request was a dry run, which the API server checks and answers without storing anything.
func (e AuditEvent) DryRun() bool { return strings.Contains(e.RequestURI, "dryRun=") }

// Succeeded tells whether the request was carried out (a 2xx answer).
func (e AuditEvent) Succeeded() bool {
	return e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

// Object names the object written: resource[/subresource] namespace/name.
func (e AuditEvent) Object() string {
	if e.ObjectRef == nil {
		return "?"
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.APIGroup != "" {
		r += "." + e.ObjectRef.APIGroup
	}
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return r + " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
}

// auditLog is where the API server writes its audit log (JSON, one event a line).
func (c *Cluster) auditLog() string { return c.path("logs/audit.log") }

// AuditEvents reads the requests the API server has recorded since it started (auditPolicy: writes, and the lists
// of Services by service accounts), in the order it recorded them.
func (c *Cluster) AuditEvents() ([]AuditEvent, error) {
	f, err := os.Open(c.auditLog())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var events []AuditEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			// The API server may be writing the last line.
			if len(scanner.Bytes()) > 0 && scanner.Bytes()[len(scanner.Bytes())-1] != '}' {
				break
			}
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
		events = append(events, e)
	}
	return events, scanner.Err()
}
