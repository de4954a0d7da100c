package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

func newEventsCommand() *cobra.Command {
	var flags clusterFlags
	var forObject string
	cmd := &cobra.Command{
		Use:   "events [--for vd/NAME | ad/NAME | st/NAME] [-n NAMESPACE | -A]",
		Short: "Show the events of a VectorDeployment and of what it became, like `flux events --for`",
		Long: "Prints the Events (core/v1, which also holds those recorded through events.k8s.io) of the namespace's\n" +
			"VectorDeployments, ArtifactDeployments and Stages (-A: of every namespace, NAMESPACE first), oldest first:\n" +
			"LAST SEEN, TYPE, REASON, OBJECT (Kind/name) and MESSAGE. --for vd/NAME narrows them to the VectorDeployment\n" +
			"NAME, its ArtifactDeployments and their Flux objects (HelmRepository, OCIRepository, HelmRelease, the\n" +
			"HelmChart helm-controller makes for it, Kustomization), as tree finds them; --for ad/NAME to the\n" +
			"ArtifactDeployment and its Flux objects; --for st/NAME to the Stage and the VectorDeployments below it, with\n" +
			"theirs. The objects Flux applied (Deployments, Pods) are left out: `kubectl events` shows theirs.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("events takes no arguments; name an object with --for KIND/NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			var k objectKind
			var name string
			if forObject != "" {
				var err error
				if k, name, err = parseFor(forObject); err != nil {
					return err
				}
				if err := flags.oneNamespace(); err != nil {
					return err
				}
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			events, err := c.events(cmd.Context(), k, name)
			if err != nil {
				return err
			}
			return printEvents(cmd.OutOrStdout(), cmd.ErrOrStderr(), events, flags.allNamespaces, time.Now())
		},
	}
	flags.bind(cmd.Flags())
	cmd.Flags().StringVar(&forObject, "for", "", "the object whose events to show, and those of what it became: vd/NAME, ad/NAME or st/NAME")
	return cmd
}

// parseFor reads --for's KIND/NAME.
func parseFor(arg string) (objectKind, string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" {
		return objectKind{}, "", usageErrorf("--for %q: want KIND/NAME, as vd/shop", arg)
	}
	k, err := parseKind(kind)
	return k, name, err
}

// involved is an object events may be about: its kind and name.
type involved struct{ kind, name string }

// eventKinds are the kinds of a tree whose events events shows: this project's and Flux's, not the workloads.
var eventKinds = []string{
	stageKind.kind, vectorDeploymentKind.kind, artifactDeploymentKind.kind,
	sourcev1.HelmRepositoryKind, sourcev1.OCIRepositoryKind, sourcev1.HelmChartKind, helmv2.HelmReleaseKind, kustomizev1.KustomizationKind,
}

// events reads the chosen namespace's Events, oldest first: with a kind and name, those of the object and what
// tree finds below it; else those of every object of this project's kinds.
func (c *cluster) events(ctx context.Context, k objectKind, name string) ([]corev1.Event, error) {
	var keep func(e *corev1.Event) bool
	if name == "" {
		keep = func(e *corev1.Event) bool {
			gv, err := schema.ParseGroupVersion(e.InvolvedObject.APIVersion)
			return err == nil && gv.Group == konfidencev1.GroupVersion.Group
		}
	} else {
		objects, err := c.involvedObjects(ctx, k, name)
		if err != nil {
			return nil, err
		}
		keep = func(e *corev1.Event) bool { return objects[involved{e.InvolvedObject.Kind, e.InvolvedObject.Name}] }
	}
	list := &corev1.EventList{}
	if err := c.client.List(ctx, list, client.InNamespace(c.namespace)); err != nil {
		return nil, c.explain(err)
	}
	var events []corev1.Event
	for i := range list.Items {
		if keep(&list.Items[i]) {
			events = append(events, list.Items[i])
		}
	}
	slices.SortStableFunc(events, func(a, b corev1.Event) int {
		return cmp.Compare(tree.LastSeen(&a).UnixNano(), tree.LastSeen(&b).UnixNano())
	})
	return events, nil
}

// involvedObjects are the object of kind k named name and the objects of eventKinds tree finds below it, with the
// HelmChart helm-controller creates for each HelmRelease (named <namespace>-<name>, in the namespace of the
// HelmRepository the deployer creates beside the HelmRelease), which tree does not list.
func (c *cluster) involvedObjects(ctx context.Context, k objectKind, name string) (map[involved]bool, error) {
	build := tree.Build
	switch k.kind {
	case artifactDeploymentKind.kind:
		build = tree.BuildArtifactDeployment
	case stageKind.kind:
		build = tree.BuildStage
	}
	root, err := build(ctx, c.client, c.namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s not found", k.kind, c.namespace, name)
	} else if err != nil {
		return nil, c.explain(err)
	}
	objects := map[involved]bool{}
	var walk func(n *tree.Node)
	walk = func(n *tree.Node) {
		if !slices.Contains(eventKinds, n.Kind) {
			return
		}
		objects[involved{n.Kind, n.Name}] = true
		if n.Kind == helmv2.HelmReleaseKind {
			objects[involved{sourcev1.HelmChartKind, n.Namespace + "-" + n.Name}] = true
		}
		for _, child := range n.Children {
			walk(child)
		}
	}
	walk(root)
	return objects, nil
}

// printEvents writes the events as a table, LAST SEEN as how long before now, NAMESPACE first when namespaced;
// no events, a note on errOut (as kubectl's "No resources found"), so that the output stays empty.
func printEvents(out, errOut io.Writer, events []corev1.Event, namespaced bool, now time.Time) error {
	if len(events) == 0 {
		_, err := fmt.Fprintln(errOut, "No events found.")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE"
	if namespaced {
		header = "NAMESPACE\t" + header
	}
	_, _ = fmt.Fprintln(w, header)
	for i := range events {
		e := &events[i]
		line := fmt.Sprintf("%s\t%s\t%s\t%s/%s\t%s", duration.HumanDuration(now.Sub(tree.LastSeen(e))), sanitize.Printable(e.Type),
			sanitize.Printable(e.Reason), e.InvolvedObject.Kind, e.InvolvedObject.Name, sanitize.Printable(e.Message))
		if namespaced {
			line = e.Namespace + "\t" + line
		}
		_, _ = fmt.Fprintln(w, line)
	}
	return w.Flush()
}
