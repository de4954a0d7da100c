package ui

import (
	"cmp"
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

// maxEvents is how many events a page shows, newest first.
const maxEvents = 50

type eventRow struct {
	Type, Reason, Object, Href, Message, Ago string
	Count                                    int32
	Warning                                  bool
}

// events are the recent Events of every object of the tree (the page's object, its children and their Flux
// objects) in one timeline, newest first. A viewer who may not read Events gets none, and a note says so.
func (s *Server) events(ctx context.Context, namespace string, root *tree.Node) ([]eventRow, error) {
	list := &corev1.EventList{}
	if err := s.reader.List(ctx, list, client.InNamespace(namespace)); apierrors.IsForbidden(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	involved := map[string]bool{}
	var walk func(n *tree.Node, depth int)
	walk = func(n *tree.Node, depth int) {
		involved[n.Kind+"/"+n.Name] = true
		if depth < 2 {
			for _, c := range n.Children {
				walk(c, depth+1)
			}
		}
	}
	walk(root, 0)
	var events []*corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if involved[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] {
			events = append(events, e)
		}
	}
	slices.SortFunc(events, func(a, b *corev1.Event) int {
		return cmp.Compare(tree.LastSeen(b).UnixNano(), tree.LastSeen(a).UnixNano())
	})
	rows := make([]eventRow, 0, min(len(events), maxEvents))
	for _, e := range events[:min(len(events), maxEvents)] {
		o := e.InvolvedObject
		rows = append(rows, eventRow{Type: e.Type, Reason: e.Reason, Object: o.Kind + "/" + o.Name, Href: href(o.Kind, o.Namespace, o.Name),
			Message: e.Message, Ago: s.ago(tree.LastSeen(e)), Count: max(e.Count, 1), Warning: e.Type == corev1.EventTypeWarning})
	}
	return rows, nil
}
