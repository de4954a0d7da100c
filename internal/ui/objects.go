package ui

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

const (
	factVector      = "Vector"
	columnComponent = "Component"
	columnKind      = "Kind"
	columnName      = "Name"
	columnReason    = "Reason"
	columnMessage   = "Message"
	columnReady     = "Ready"
)

// vectorDeploymentPage: the VectorDeployment's conditions, its ArtifactDeployments with their steps and Flux
// objects, the shared ones with their other owners, the deployment results, and the events of all of them.
func (s *Server) vectorDeploymentPage(ctx context.Context, namespace, name string) (*objectPage, error) {
	vd := &konfidencev1.VectorDeployment{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vd); err != nil {
		return nil, err
	}
	root, err := tree.Build(ctx, s.reader, namespace, name)
	if err != nil {
		return nil, err
	}
	p := &objectPage{Kind: kindVectorDeployment, Namespace: namespace, Name: name, State: stateOf(vd), Conditions: s.conditionRows(vd.Status.Conditions)}
	p.Facts = []fact{{Name: factVector, Value: vd.Spec.Vector}, {Name: "Digest", Value: vd.Status.VectorDigest},
		{Name: "Artifacts ready", Value: fmt.Sprintf("%d/%d", vd.Status.Ready, vd.Status.Artifacts)}}
	if st := controllerStage(vd); st != "" {
		p.Facts = append(p.Facts, fact{Name: kindStage, Value: st, Href: href(kindStage, namespace, st)})
	}
	p.Facts = append(p.Facts, suspendedFact(vd.Spec.Suspend)...)
	ads := table{Title: "ArtifactDeployments", Empty: "none yet",
		Head: []string{columnComponent, kindArtifactDeployment, columnKind, "Version", "Fetched", "Deployed", "Healthy", columnReason, columnMessage, "Flux objects", "Shared with"}}
	results := resultsTable()
	for _, component := range slices.Sorted(maps.Keys(vd.Status.ResultingArtifactDeployments)) {
		adName := vd.Status.ResultingArtifactDeployments[component].Name
		ad := &konfidencev1.ArtifactDeployment{}
		if err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: adName}, ad); err != nil {
			ads.Rows = append(ads.Rows, []cell{{Text: component}, {Text: adName}, {Text: ""}, {Text: ""}, {}, {}, {}, {Text: "NotFound", State: stateUnknown}, {}, {}, {}})
			continue
		}
		ads.Rows = append(ads.Rows, s.artifactRow(component, ad, vd, nodeOf(root, kindArtifactDeployment, adName)))
	}
	for _, component := range slices.Sorted(maps.Keys(vd.Status.DeploymentResults)) {
		for _, r := range vd.Status.DeploymentResults[component] {
			results.Rows = append(results.Rows, resultRow(component, r))
		}
	}
	p.Tables = []table{ads, results}
	return s.withTree(ctx, p, root)
}

// artifactRow is an ArtifactDeployment as a row of its VectorDeployment's table.
func (s *Server) artifactRow(component string, ad *konfidencev1.ArtifactDeployment, vd *konfidencev1.VectorDeployment, n *tree.Node) []cell {
	step := func(condition string) cell {
		c := conditions.Get(ad, condition)
		if c == nil {
			return cell{Text: "", State: stateUnknown}
		}
		return cell{Text: string(c.Status), Title: c.Reason + ": " + c.Message, State: stateOfReady(string(c.Status))}
	}
	reason, message := "", ""
	if c := conditions.Get(ad, konfidencev1.ReadyCondition); c != nil {
		reason, message = c.Reason, c.Message
	}
	var flux []string
	if n != nil {
		for _, f := range n.Children {
			flux = append(flux, f.Kind+"/"+f.Name+" "+readyText(f.Ready))
		}
	}
	var others []string
	for _, ref := range ad.OwnerReferences {
		if ref.Kind == kindVectorDeployment && ref.UID != vd.UID {
			others = append(others, ref.Name)
		}
	}
	kindName := ad.Status.FluxKind
	switch kindName {
	case "HelmRelease":
		kindName = "Helm"
	case "Kustomization":
		kindName = "Kustomize"
	case "":
		kindName = ad.Spec.Manifest.Type
	}
	st := stateOf(ad)
	return []cell{{Text: component}, {Text: ad.Name, Href: href(kindArtifactDeployment, ad.Namespace, ad.Name), State: st, Mono: true},
		{Text: kindName}, {Text: ad.Spec.Component.Version}, step(konfidencev1.ArtifactFetchedCondition), step(konfidencev1.ArtifactDeployedCondition),
		step(konfidencev1.AppHealthyCondition), {Text: reason, State: st}, {Text: message}, {Text: strings.Join(flux, ", ")}, {Text: strings.Join(others, ", ")}}
}

func readyText(ready string) string {
	if ready == "" {
		return "(no status)"
	}
	return "Ready=" + ready
}

func resultsTable() table {
	return table{Title: "Deployment results", Empty: "none", Head: []string{columnComponent, columnName, "Type", "Spec"}}
}

func resultRow(component string, r konfidencev1.DeploymentResult) []cell {
	spec := ""
	if r.Spec != nil {
		spec = string(r.Spec.Raw)
	}
	return []cell{{Text: component}, {Text: r.Name}, {Text: r.Type}, {Text: spec, Mono: true}}
}

func suspendedFact(suspended bool) []fact {
	if !suspended {
		return nil
	}
	return []fact{{Name: "Suspended", Value: "yes: not reconciled until resumed"}}
}

// artifactDeploymentPage: the ArtifactDeployment's conditions, its Flux objects with their revision and the last
// reconcile request they handled, the workloads Flux applied with their status and failing pods, and the events.
func (s *Server) artifactDeploymentPage(ctx context.Context, namespace, name string) (*objectPage, error) {
	ad := &konfidencev1.ArtifactDeployment{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ad); err != nil {
		return nil, err
	}
	root, err := tree.BuildArtifactDeployment(ctx, s.reader, namespace, name)
	if err != nil {
		return nil, err
	}
	p := &objectPage{Kind: kindArtifactDeployment, Namespace: namespace, Name: name, State: stateOf(ad), Conditions: s.conditionRows(ad.Status.Conditions)}
	p.Facts = []fact{{Name: columnComponent, Value: ad.Spec.Component.Name + ":" + ad.Spec.Component.Version}, {Name: "Type", Value: ad.Spec.Manifest.Type},
		{Name: "Flux kind", Value: ad.Status.FluxKind}}
	if ad.Status.ReleaseName != "" {
		p.Facts = append(p.Facts, fact{Name: "Helm release", Value: ad.Status.ReleaseName})
	}
	if ad.Status.NameSuffix != "" {
		p.Facts = append(p.Facts, fact{Name: "Name suffix", Value: ad.Status.NameSuffix})
	}
	for _, ref := range ad.OwnerReferences {
		if ref.Kind == kindVectorDeployment {
			p.Facts = append(p.Facts, fact{Name: kindVectorDeployment, Value: ref.Name, Href: href(kindVectorDeployment, namespace, ref.Name)})
		}
	}
	p.Facts = append(p.Facts, suspendedFact(ad.Spec.Suspend)...)
	flux := table{Title: "Flux objects", Empty: "none yet", Head: []string{columnKind, columnName, columnReady, columnReason, columnMessage, "Revision", "Last handled reconcile", "Suspended"}}
	workloads := table{Title: "Workloads", Empty: "none applied yet", Head: []string{"Applied by", columnKind, "Namespace", columnName, "Status", "Replicas", "Pods"}}
	for _, f := range root.Children {
		flux.Rows = append(flux.Rows, []cell{{Text: f.Kind}, {Text: f.Name, Mono: true, State: stateOfReady(f.Ready)}, {Text: f.Ready, State: stateOfReady(f.Ready)},
			{Text: f.Reason}, {Text: f.Message}, {Text: f.Revision, Mono: true}, {Text: f.LastHandledReconcile}, {Text: yes(f.Suspended)}})
		for _, w := range f.Children {
			workloads.Rows = append(workloads.Rows, workloadRow(f, w))
		}
	}
	results := resultsTable()
	for _, r := range ad.Status.DeploymentResult {
		results.Rows = append(results.Rows, resultRow(ad.Spec.Component.Name, r))
	}
	p.Tables = []table{flux, workloads, results}
	return s.withTree(ctx, p, root)
}

func workloadRow(by, w *tree.Node) []cell {
	st := workloadState(w.Status)
	pods := make([]string, 0, len(w.Children))
	for _, pod := range w.Children {
		text := pod.Name + " Ready=" + pod.Ready
		if pod.Ready != "True" && pod.Reason != "" {
			text += " " + pod.Reason
			if pod.Message != "" {
				text += ": " + pod.Message
			}
		}
		pods = append(pods, text)
	}
	return []cell{{Text: by.Kind + "/" + by.Name}, {Text: w.Kind}, {Text: w.Namespace}, {Text: w.Name, Mono: true, State: st}, {Text: w.Status, State: st},
		{Text: w.Replicas}, {Text: strings.Join(pods, "; ")}}
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// stagePage: the Stage's vector, its active and candidate VectorDeployments, its history of moves, and the
// events of the Stage and its VectorDeployments.
func (s *Server) stagePage(ctx context.Context, namespace, name string) (*objectPage, error) {
	st := &konfidencev1.Stage{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, st); err != nil {
		return nil, err
	}
	root, err := tree.BuildStage(ctx, s.reader, namespace, name)
	if err != nil {
		return nil, err
	}
	p := &objectPage{Kind: kindStage, Namespace: namespace, Name: name, State: stateOf(st), Conditions: s.conditionRows(st.Status.Conditions)}
	p.Facts = []fact{{Name: factVector, Value: st.Spec.Vector}}
	if st.Spec.Semver != "" {
		p.Facts = append(p.Facts, fact{Name: "Semver", Value: st.Spec.Semver})
	}
	p.Facts = append(p.Facts, fact{Name: "Last applied vector", Value: st.Status.LastAppliedVector})
	for _, f := range []struct{ name, vd string }{{"Active", st.Status.ActiveVectorDeployment}, {"Candidate", st.Status.CandidateVectorDeployment}} {
		if f.vd != "" {
			p.Facts = append(p.Facts, fact{Name: f.name, Value: f.vd, Href: href(kindVectorDeployment, namespace, f.vd)})
		}
	}
	p.Facts = append(p.Facts, suspendedFact(st.Spec.Suspend)...)
	vds := table{Title: "VectorDeployments", Empty: "none", Head: []string{"Role", kindVectorDeployment, columnReady, columnReason, columnMessage}}
	for _, n := range root.Children {
		vds.Rows = append(vds.Rows, []cell{{Text: n.Role}, {Text: n.Name, Href: href(n.Kind, n.Namespace, n.Name), Mono: true, State: stateOfReady(n.Ready)},
			{Text: n.Ready, State: stateOfReady(n.Ready)}, {Text: n.Reason}, {Text: n.Message}})
	}
	history := table{Title: "History", Empty: "no moves yet", Head: []string{factVector, "Digest", kindVectorDeployment, "Started", "Ended", "Outcome", columnMessage}}
	for _, h := range st.Status.History {
		ended := ""
		if h.Ended != nil {
			ended = s.ago(h.Ended.Time) + " ago"
		}
		outcome := map[string]state{"Promoted": stateReady, "Failed": stateFailed, "Progressing": stateProgressing, "Superseded": stateUnknown}[h.Outcome]
		history.Rows = append(history.Rows, []cell{{Text: h.Vector}, {Text: h.Digest, Mono: true},
			{Text: h.VectorDeployment, Href: href(kindVectorDeployment, namespace, h.VectorDeployment), Mono: true},
			{Text: s.ago(h.Started.Time) + " ago"}, {Text: ended}, {Text: h.Outcome, State: outcome}, {Text: h.Message}})
	}
	p.Tables = []table{vds, history}
	return s.withTree(ctx, p, root)
}

// withTree completes a page with what every object page has: the graph of the object's tree, the events of the
// objects in it, and what the viewer may not read.
func (s *Server) withTree(ctx context.Context, p *objectPage, root *tree.Node) (*objectPage, error) {
	p.Graph = layoutGraph(root)
	p.Notes = s.notes(p.Namespace)
	var err error
	p.Events, err = s.events(ctx, p.Namespace, root)
	return p, err
}

// nodeOf finds the child of root of the kind and name.
func nodeOf(root *tree.Node, kindName, name string) *tree.Node {
	for _, n := range root.Children {
		if n.Kind == kindName && n.Name == name {
			return n
		}
	}
	return nil
}

// notes say what the page leaves out because the viewer may not read it.
func (s *Server) notes(namespace string) []string {
	notes := make([]string, 0, len(s.denied))
	for _, k := range slices.Sorted(maps.Keys(s.denied)) {
		notes = append(notes, fmt.Sprintf("%ss are not shown: your credentials may not list and watch them in %s.", k, where(s.opts.Namespace, namespace)))
	}
	return notes
}

func where(viewNamespace, namespace string) string {
	if viewNamespace == "" {
		return "every namespace"
	}
	return "namespace " + namespace
}
