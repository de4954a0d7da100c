package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"text/tabwriter"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

func newGetCommand() *cobra.Command {
	var flags clusterFlags
	var output *outputFormat
	var watchChanges bool
	cmd := &cobra.Command{
		Use:   "get vd|ad|st [NAME] [-n NAMESPACE | -A] [--watch] [-o json|yaml]",
		Short: "List VectorDeployments, ArtifactDeployments or Stages with their revision and Ready state, like `flux get`",
		Long: "Prints a table of the VectorDeployments (vd), ArtifactDeployments (ad) or Stages (st) of the namespace (-A: of every\n" +
			"namespace, NAMESPACE first), or of the one named NAME: NAME, REVISION, SUSPENDED, READY and MESSAGE, as\n" +
			"`flux get` does for Flux's kinds. A VectorDeployment's REVISION is the digest of the vector its last reconcile\n" +
			"read (status.vectorDigest); an ArtifactDeployment's is the revision its Flux object last handled (a\n" +
			"HelmRelease's last attempted chart version, a Kustomization's last applied revision), empty until Flux reports\n" +
			"one; a Stage's is the vector it last moved to (status.lastAppliedVector). READY is the Ready condition's status (Unknown without one), MESSAGE its message. --watch prints the table,\n" +
			"then a row each time one of the objects changes, until interrupted. -o json or yaml prints the rows as objects.",
		Args: func(_ *cobra.Command, args []string) error {
			_, err := getKind(args)
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			k, _ := getKind(args)
			name := ""
			if len(args) == 2 {
				name = args[1]
				if err := flags.oneNamespace(); err != nil {
					return err
				}
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			p := &rowPrinter{out: cmd.OutOrStdout(), format: output.value, namespaced: flags.allNamespaces}
			if !watchChanges {
				rows, err := c.getRows(cmd.Context(), k, name)
				if err != nil {
					return err
				}
				if len(rows) == 0 && !output.structured() {
					// As kubectl's "No resources found": on stderr, so that the output stays empty.
					_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No %ss found.\n", k.kind)
					return err
				}
				return p.print(rows, name == "")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return c.watchRows(ctx, k, name, p)
		},
	}
	flags.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&watchChanges, "watch", "w", false, "after the table, print a row each time an object changes, until interrupted")
	output = bindOutput(cmd.Flags(), "", "output format: json or yaml (default: a table)", outputJSON, outputYAML)
	return cmd
}

// getKind checks get's arguments, KIND [NAME], and returns the kind: a VectorDeployment or an ArtifactDeployment.
func getKind(args []string) (objectKind, error) {
	if len(args) == 0 || len(args) > 2 {
		return objectKind{}, usageErrorf("want vd [NAME], ad [NAME] or st [NAME]")
	}
	k, err := parseKind(args[0])
	if err != nil {
		return k, err
	}
	if k.kind != vectorDeploymentKind.kind && k.kind != artifactDeploymentKind.kind && k.kind != stageKind.kind {
		return k, usageErrorf("get lists VectorDeployments (vd), ArtifactDeployments (ad) or Stages (st), not %q", args[0])
	}
	return k, nil
}

// getRow is one line of get's table.
type getRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Revision  string `json:"revision"`
	Suspended bool   `json:"suspended"`
	Ready     string `json:"ready"`
	Message   string `json:"message"`
}

// rowOf is obj's row, with revision as its REVISION.
func rowOf(obj client.Object, revision string) getRow {
	r := getRow{Namespace: obj.GetNamespace(), Name: obj.GetName(), Revision: revision, Suspended: stateOf(obj).suspended,
		Ready: string(metav1.ConditionUnknown)}
	if ready := conditions.Get(obj.(conditions.Getter), konfidencev1.ReadyCondition); ready != nil {
		r.Ready, r.Message = string(ready.Status), sanitize.Printable(ready.Message)
	}
	return r
}

// getRows reads the object of kind k named name, or every one of the chosen namespace when name is empty, as
// rows.
func (c *cluster) getRows(ctx context.Context, k objectKind, name string) ([]getRow, error) {
	var objs []client.Object
	if name != "" {
		obj, err := c.get(ctx, k, name)
		if err != nil {
			return nil, err
		}
		objs = []client.Object{obj}
	} else {
		var err error
		if objs, err = c.list(ctx, k); err != nil {
			return nil, err
		}
	}
	revisions, err := c.revisions(ctx, k, c.namespace, "")
	if err != nil {
		return nil, err
	}
	rows := make([]getRow, len(objs))
	for i, obj := range objs {
		rows[i] = rowOf(obj, revisionOf(obj, revisions))
	}
	return rows, nil
}

// revisionOf is an object's REVISION: a VectorDeployment's vector digest, an ArtifactDeployment's Flux object's
// revision out of revisions (by namespace/name of the ArtifactDeployment), the vector a Stage last moved to.
func revisionOf(obj client.Object, revisions map[client.ObjectKey]string) string {
	switch o := obj.(type) {
	case *konfidencev1.VectorDeployment:
		return o.Status.VectorDigest
	case *konfidencev1.Stage:
		return o.Status.LastAppliedVector
	case *konfidencev1.ArtifactDeployment:
		return revisions[client.ObjectKeyFromObject(o)]
	}
	return ""
}

// revisions reads, for ArtifactDeployments (of kind k; nothing for the other kinds), the revision each one's
// HelmRelease or Kustomization last handled, as tree shows it: one list of each Flux kind for the namespace (every
// namespace when empty), or for the ArtifactDeployment adName alone. A Flux kind the user may not list, or whose CRD
// is not installed, leaves its revisions empty rather than failing the table.
func (c *cluster) revisions(ctx context.Context, k objectKind, namespace, adName string) (map[client.ObjectKey]string, error) {
	revisions := map[client.ObjectKey]string{}
	if k.kind != artifactDeploymentKind.kind {
		return revisions, nil
	}
	selector := client.HasLabels{konfidencev1.ArtifactDeploymentLabel}
	opts := []client.ListOption{client.InNamespace(namespace), selector}
	if adName != "" {
		opts = []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{konfidencev1.ArtifactDeploymentLabel: adName}}
	}
	skippable := func(err error) bool {
		return apierrors.IsForbidden(err) || apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err)
	}
	releases := &helmv2.HelmReleaseList{}
	if err := c.client.List(ctx, releases, opts...); err != nil && !skippable(err) {
		return nil, c.explain(err)
	}
	for _, hr := range releases.Items {
		revisions[client.ObjectKey{Namespace: hr.Namespace, Name: hr.Labels[konfidencev1.ArtifactDeploymentLabel]}] = hr.Status.LastAttemptedRevision
	}
	kustomizations := &kustomizev1.KustomizationList{}
	if err := c.client.List(ctx, kustomizations, opts...); err != nil && !skippable(err) {
		return nil, c.explain(err)
	}
	for _, ks := range kustomizations.Items {
		revisions[client.ObjectKey{Namespace: ks.Namespace, Name: ks.Labels[konfidencev1.ArtifactDeploymentLabel]}] = ks.Status.LastAppliedRevision
	}
	return revisions, nil
}

// watchRows prints the rows of get, then a row for every change of one of the objects (one added, changed or
// deleted), until ctx ends: the watch starts at the list's resourceVersion, so no change in between is missed, and
// a watch the API server closes is opened again from the last change seen.
func (c *cluster) watchRows(ctx context.Context, k objectKind, name string, p *rowPrinter) error {
	wc, err := c.withWatch()
	if err != nil {
		return err
	}
	opts := []client.ListOption{client.InNamespace(c.namespace)}
	if name != "" {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	}
	list := k.newList()
	if err := wc.List(ctx, list, opts...); err != nil {
		return c.explain(err)
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	if name != "" && len(items) == 0 {
		return fmt.Errorf("%s %s/%s not found", k.kind, c.namespace, name)
	}
	revisions, err := c.revisions(ctx, k, c.namespace, "")
	if err != nil {
		return err
	}
	rows := make([]getRow, len(items))
	for i, item := range items {
		obj := item.(client.Object)
		rows[i] = rowOf(obj, revisionOf(obj, revisions))
	}
	if p.format == "" {
		err = p.print(rows, true)
	} else {
		for _, r := range rows {
			if err = p.printRow(r); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	rv, err := apimeta.NewAccessor().ResourceVersion(list)
	if err != nil {
		return err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return wc.Watch(ctx, k.newList(), append(opts, &client.ListOptions{Raw: &options})...)
		},
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Done():
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("the watch ended")
		case e, ok := <-w.ResultChan():
			if !ok {
				continue // Done follows
			}
			switch e.Type {
			case watch.Error:
				return c.explain(apierrors.FromObject(e.Object))
			case watch.Added, watch.Modified, watch.Deleted:
				obj, ok := e.Object.(client.Object)
				if !ok {
					continue
				}
				revisions, err := c.revisions(ctx, k, obj.GetNamespace(), obj.GetName())
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if err := p.printRow(rowOf(obj, revisionOf(obj, revisions))); err != nil {
					return err
				}
			}
		}
	}
}

// withWatch is a client of the same API server and user that can also watch.
func (c *cluster) withWatch() (client.WithWatch, error) {
	return client.NewWithWatch(c.config, client.Options{Scheme: c.client.Scheme(), Mapper: c.client.RESTMapper()})
}

// rowPrinter writes get's rows: a table, NAMESPACE first when namespaced, or each row as JSON or YAML.
type rowPrinter struct {
	out        io.Writer
	format     string
	namespaced bool
	// headed tells whether the table's header is written; it is written once, its columns as wide as the first
	// rows need, and later rows are aligned as they come.
	headed bool
	widths []int
}

// print writes rows: a table, or with -o the rows (a list when list, else the one row).
func (p *rowPrinter) print(rows []getRow, list bool) error {
	if p.format == outputJSON || p.format == outputYAML {
		if !list && len(rows) == 1 {
			return printStructured(p.out, p.format, rows[0])
		}
		return printStructured(p.out, p.format, rows)
	}
	w := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, p.tabbed(p.header()))
	for _, r := range rows {
		_, _ = fmt.Fprintln(w, p.tabbed(p.cells(r)))
	}
	p.headed = true
	return w.Flush()
}

// printRow writes one more row: a line of the table, or with -o one object (YAML documents separated by ---).
func (p *rowPrinter) printRow(r getRow) error {
	switch p.format {
	case outputJSON:
		return printStructured(p.out, p.format, r)
	case outputYAML:
		if _, err := io.WriteString(p.out, "---\n"); err != nil {
			return err
		}
		return printStructured(p.out, p.format, r)
	}
	w := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
	if !p.headed {
		_, _ = fmt.Fprintln(w, p.tabbed(p.header()))
		p.headed = true
	}
	_, _ = fmt.Fprintln(w, p.tabbed(p.cells(r)))
	return w.Flush()
}

func (p *rowPrinter) header() []string {
	h := []string{"NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"}
	if p.namespaced {
		h = append([]string{"NAMESPACE"}, h...)
	}
	return h
}

func (p *rowPrinter) cells(r getRow) []string {
	suspended := "False"
	if r.Suspended {
		suspended = "True"
	}
	cells := []string{r.Name, sanitize.Printable(r.Revision), suspended, r.Ready, r.Message}
	if p.namespaced {
		cells = append([]string{r.Namespace}, cells...)
	}
	return cells
}

// tabbed joins cells with tabs, as tabwriter takes them, and remembers the widest of each column so that rows
// printed one at a time (--watch) line up with the table above them.
func (p *rowPrinter) tabbed(cells []string) string {
	for len(p.widths) < len(cells) {
		p.widths = append(p.widths, 0)
	}
	s := ""
	for i, cell := range cells {
		p.widths[i] = max(p.widths[i], len(cell))
		if i < len(cells)-1 {
			s += fmt.Sprintf("%-*s\t", p.widths[i], cell)
		} else {
			s += cell
		}
	}
	return s
}
