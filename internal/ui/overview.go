package ui

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// overviewPage lists every VectorDeployment and Stage the viewer may read, by namespace, those not Ready first.
type overviewPage struct {
	Query      string
	Namespaces []namespaceGroup
	// Shown and Total count the rows the filter kept and all of them.
	Shown, Total int
}

type namespaceGroup struct {
	Namespace string
	Rows      []overviewRow
	NotReady  int
}

type overviewRow struct {
	Kind, Href, Name, Vector, Artifacts, Reason, Message, Since string
	Ready                                                       string
	State                                                       state
	Suspended                                                   bool
	// Related links a VectorDeployment to the Stage that controls it, a Stage to its active VectorDeployment.
	Related, RelatedHref string
}

// overview reads the rows and keeps those matching the filter q: every word of it is found, case-insensitively,
// in the row's namespace, name, kind, reason or vector.
func (s *Server) overview(ctx context.Context, q string) (*overviewPage, error) {
	var rows []namespacedRow
	stages := &konfidencev1.StageList{}
	if err := s.reader.List(ctx, stages, client.InNamespace(s.opts.Namespace)); err != nil && !s.denied[kindStage] {
		return nil, err
	}
	for i := range stages.Items {
		st := &stages.Items[i]
		r := s.row(kindStage, st, st.Spec.Vector, st.Spec.Suspend)
		if st.Spec.Semver != "" {
			r.Vector += " (" + st.Spec.Semver + ")"
		}
		if active := st.Status.ActiveVectorDeployment; active != "" {
			r.Related, r.RelatedHref = "active: "+active, href(kindVectorDeployment, st.Namespace, active)
		}
		rows = append(rows, namespacedRow{st.Namespace, r})
	}
	vds := &konfidencev1.VectorDeploymentList{}
	if err := s.reader.List(ctx, vds, client.InNamespace(s.opts.Namespace)); err != nil {
		return nil, err
	}
	for i := range vds.Items {
		vd := &vds.Items[i]
		r := s.row(kindVectorDeployment, vd, vd.Spec.Vector, vd.Spec.Suspend)
		r.Artifacts = fmt.Sprintf("%d/%d", vd.Status.Ready, vd.Status.Artifacts)
		if ref := controllerStage(vd); ref != "" {
			r.Related, r.RelatedHref = kindStage+" "+ref, href(kindStage, vd.Namespace, ref)
		}
		rows = append(rows, namespacedRow{vd.Namespace, r})
	}
	page := &overviewPage{Query: q, Total: len(rows)}
	words := strings.Fields(strings.ToLower(q))
	groups := map[string]*namespaceGroup{}
	for _, r := range rows {
		if !matches(words, r.namespace, r.row) {
			continue
		}
		g := groups[r.namespace]
		if g == nil {
			g = &namespaceGroup{Namespace: r.namespace}
			groups[r.namespace] = g
		}
		g.Rows = append(g.Rows, r.row)
		if r.row.State != stateReady {
			g.NotReady++
		}
		page.Shown++
	}
	for _, g := range groups {
		slices.SortFunc(g.Rows, func(a, b overviewRow) int {
			return cmp.Or(cmp.Compare(rank(a.State), rank(b.State)), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
		})
		page.Namespaces = append(page.Namespaces, *g)
	}
	slices.SortFunc(page.Namespaces, func(a, b namespaceGroup) int {
		return cmp.Or(cmp.Compare(min(b.NotReady, 1), min(a.NotReady, 1)), strings.Compare(a.Namespace, b.Namespace))
	})
	return page, nil
}

type namespacedRow struct {
	namespace string
	row       overviewRow
}

func (s *Server) row(kindName string, obj interface {
	client.Object
	conditions.Getter
}, vector string, suspended bool) overviewRow {
	r := overviewRow{Kind: kindName, Href: href(kindName, obj.GetNamespace(), obj.GetName()), Name: obj.GetName(), Vector: vector,
		State: stateOf(obj), Suspended: suspended, Ready: "Unknown"}
	if c := conditions.Get(obj, konfidencev1.ReadyCondition); c != nil {
		r.Ready, r.Reason, r.Message, r.Since = string(c.Status), c.Reason, c.Message, s.ago(c.LastTransitionTime.Time)
	}
	return r
}

// rank orders states for a person on call: failures first, then what is still moving, then the rest.
func rank(st state) int {
	return map[state]int{stateFailed: 0, stateProgressing: 1, stateUnknown: 2, stateReady: 3}[st]
}

func matches(words []string, namespace string, r overviewRow) bool {
	text := strings.ToLower(strings.Join([]string{namespace, r.Kind, r.Name, r.Reason, r.Vector}, " "))
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// controllerStage is the name of the Stage that controls vd, if one does.
func controllerStage(obj client.Object) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == kindStage && ref.APIVersion == konfidencev1.GroupVersion.String() {
			return ref.Name
		}
	}
	return ""
}
