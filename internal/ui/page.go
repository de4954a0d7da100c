package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// kind is one kind the view has a page for. Every object page has one design (facts, conditions, tables, a graph,
// events); a kind says what goes in them.
type kind struct {
	path string
	name string
	// build reads the object namespace/name and what belongs on its page.
	build func(s *Server, ctx context.Context, namespace, name string) (*objectPage, error)
}

// The kinds with a page.
const (
	kindVectorDeployment   = "VectorDeployment"
	kindArtifactDeployment = "ArtifactDeployment"
	kindStage              = "Stage"
)

var kinds []kind

func init() {
	// Assigned here, not in the declaration: the builders render links through kinds.
	kinds = []kind{
		{"st", kindStage, (*Server).stagePage},
		{"vd", kindVectorDeployment, (*Server).vectorDeploymentPage},
		{"ad", kindArtifactDeployment, (*Server).artifactDeploymentPage},
	}
}

// href is the stable URL of an object's page, /KIND/NAMESPACE/NAME, or empty for a kind without a page.
func href(kindName, namespace, name string) string {
	for _, k := range kinds {
		if k.name == kindName {
			return "/" + k.path + "/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
		}
	}
	return ""
}

// objectPage is what an object page shows.
type objectPage struct {
	Kind, Namespace, Name string
	State                 state
	Facts                 []fact
	Notes                 []string
	Conditions            []conditionRow
	Tables                []table
	Graph                 *graph
	Events                []eventRow
	// Actions are the gestures the page offers (with --actions), and CSRF the token their forms carry.
	Actions []string
	CSRF    string
	Path    string
}

type fact struct {
	Name, Value, Href string
}

type conditionRow struct {
	Type, Status, Reason, Message, Since string
	State                                state
}

// table is a titled table of cells.
type table struct {
	Title string
	Head  []string
	Rows  [][]cell
	// Empty is what the table says when it has no rows.
	Empty string
}

// cell is one table cell: text, a link when Href is set, coloured by State when set.
type cell struct {
	Text, Href, Title string
	State             state
	Mono              bool
}

// state is how the view colours an object: by its kstatus summary.
type state string

const (
	stateReady       state = "ready"
	stateFailed      state = "failed"
	stateProgressing state = "progressing"
	stateUnknown     state = "unknown"
	// stateStatic is an object without a Ready condition (an OCI HelmRepository, a ConfigMap).
	stateStatic state = "static"
)

// stateOf reads the summary of an object's conditions: Ready; failing when Stalled or when Ready=False gives a
// failure as its reason, also while Flux or the operator retries it on its own (a person on call must see it
// red, not as progress); in progress while Ready is Unknown or False for a reason of work under way (waiting for
// what the object depends on).
func stateOf(obj conditions.Getter) state {
	ready := conditions.Get(obj, konfidencev1.ReadyCondition)
	switch {
	case ready == nil:
		return stateUnknown
	case ready.Status == metav1.ConditionTrue:
		return stateReady
	case conditions.IsTrue(obj, konfidencev1.StalledCondition):
		return stateFailed
	case ready.Status == metav1.ConditionUnknown, slices.Contains(progressReasons, ready.Reason):
		return stateProgressing
	}
	return stateFailed
}

// progressReasons are the reasons of a Ready=False that reports work under way rather than a failure.
var progressReasons = []string{meta.ProgressingReason, meta.ProgressingWithRetryReason, meta.DependencyNotReadyReason}

// workloadState colours a workload by its kstatus (a Deployment's); other workloads have none.
func workloadState(kstatus string) state {
	switch kstatus {
	case status.CurrentStatus.String():
		return stateReady
	case status.InProgressStatus.String():
		return stateProgressing
	case status.FailedStatus.String():
		return stateFailed
	}
	return stateStatic
}

// stateOfReady reads a Ready status as the tree reports it ("True", "False", "Unknown", or empty for an object
// without one).
func stateOfReady(ready string) state {
	switch ready {
	case "":
		return stateStatic
	case string(metav1.ConditionTrue):
		return stateReady
	case string(metav1.ConditionFalse):
		return stateFailed
	}
	return stateProgressing
}

// ago is how long ago t was, as kubectl writes ages; empty for no time.
func (s *Server) ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return duration.HumanDuration(s.now().Sub(t))
}

func (s *Server) conditionRows(conds []metav1.Condition) []conditionRow {
	rows := make([]conditionRow, 0, len(conds))
	for _, c := range conds {
		st := stateFailed
		switch {
		case c.Status == metav1.ConditionTrue && (c.Type == konfidencev1.ReconcilingCondition || c.Type == konfidencev1.StalledCondition):
			st = map[string]state{konfidencev1.ReconcilingCondition: stateProgressing, konfidencev1.StalledCondition: stateFailed}[c.Type]
		case c.Status == metav1.ConditionTrue:
			st = stateReady
		case c.Status == metav1.ConditionUnknown:
			st = stateProgressing
		}
		rows = append(rows, conditionRow{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: s.ago(c.LastTransitionTime.Time), State: st})
	}
	return rows
}

var errNotFound = errors.New("not found")

// content renders the main part of the page at u, the part the live stream replaces, and the page's title.
func (s *Server) content(ctx context.Context, u *url.URL) ([]byte, string, error) {
	var b bytes.Buffer
	if u.Path == "/" {
		o, err := s.overview(ctx, u.Query().Get("q"))
		if err != nil {
			return nil, "", err
		}
		err = templates.ExecuteTemplate(&b, "overview", o)
		return b.Bytes(), "Overview", err
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) == 3 {
		for _, k := range kinds {
			if k.path != parts[0] {
				continue
			}
			p, err := k.build(s, ctx, parts[1], parts[2])
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return nil, "", fmt.Errorf("%s %s/%s: %w (or not readable with your credentials)", k.name, parts[1], parts[2], errNotFound)
			}
			if err != nil {
				return nil, "", err
			}
			p.Path = u.Path
			if s.opts.Actions {
				p.Actions, p.CSRF = []string{"reconcile", "suspend", "resume"}, s.csrf
			}
			err = templates.ExecuteTemplate(&b, "object", p)
			return b.Bytes(), k.name + " " + parts[1] + "/" + parts[2], err
		}
	}
	return nil, "", fmt.Errorf("page %s: %w", u.Path, errNotFound)
}

// layout is the whole HTML document around a page's content.
type layout struct {
	Title      string
	Content    template.HTML
	Query      string
	Overview   bool
	Connection string
	Error      string
}

// page serves a whole page: the layout with the content rendered now; the script then keeps the content live.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	content, title, err := s.content(r.Context(), r.URL)
	l := layout{Title: title, Query: r.URL.Query().Get("q"), Overview: r.URL.Path == "/", Connection: s.hub.connection(),
		Content: template.HTML(content)} // #nosec G203 -- rendered by html/template
	code := http.StatusOK
	if err != nil {
		code, l.Title, l.Error = http.StatusInternalServerError, "Error", err.Error()
		if errors.Is(err, errNotFound) {
			code, l.Title = http.StatusNotFound, "Not found"
		}
	}
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, "layout", l); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}
