package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

func newTreeCommand() *cobra.Command {
	var flags clusterFlags
	var output *outputFormat
	cmd := &cobra.Command{
		Use:   "tree [NAME | st/NAME] [-n NAMESPACE | -A] [-o json|yaml]",
		Short: "Show what a VectorDeployment or a Stage became, down to the workloads Flux applied",
		Long: "Reads the cluster of the kubeconfig (--kubeconfig, else KUBECONFIG, else ~/.kube/config; --context) and prints\n" +
			"the VectorDeployment NAME, its ArtifactDeployments, each one's Flux objects and the objects Flux applied for them\n" +
			"(from the HelmRelease's and the Kustomization's inventory), each with its Ready state and reason, like `flux tree`\n" +
			"across the vector. st/NAME (or stage/NAME, or st NAME) starts at the Stage NAME: its VectorDeployments, the\n" +
			"active one first and marked (active), the candidate of a move under way (candidate), then the tree of each;\n" +
			"vd/NAME is NAME. Without NAME, the tree of every VectorDeployment in the namespace (-A: in every namespace);\n" +
			"-o json or yaml prints a NAME's tree as one object, and a list of trees without NAME.",
		Args: func(_ *cobra.Command, args []string) error {
			_, _, err := treeRoot(args)
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if err := flags.oneNamespace(); err != nil {
					return err
				}
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			roots, err := c.trees(cmd.Context(), args)
			if err != nil {
				return err
			}
			if output.structured() {
				if len(args) > 0 {
					return printStructured(cmd.OutOrStdout(), output.value, roots[0])
				}
				return printStructured(cmd.OutOrStdout(), output.value, roots)
			}
			printOne := tree.Print
			if flags.allNamespaces && len(args) == 0 {
				printOne = tree.PrintNamespaced // the same name may be taken in several namespaces
			}
			for _, root := range roots {
				if err := printOne(cmd.OutOrStdout(), root); err != nil {
					return err
				}
			}
			return nil
		},
	}
	flags.bind(cmd.Flags())
	output = bindOutput(cmd.Flags(), "", "output format: json or yaml (default: a tree)", outputJSON, outputYAML)
	return cmd
}

// treeRoot reads the object a tree starts at: NAME is a VectorDeployment, as it always was, and KIND/NAME or KIND
// NAME, as kubectl takes them, name a VectorDeployment or a Stage. No argument is every VectorDeployment (an empty
// name).
func treeRoot(args []string) (objectKind, string, error) {
	kind, name := "vd", ""
	switch len(args) {
	case 0:
		return vectorDeploymentKind, "", nil
	case 1:
		name = args[0]
		if k, n, ok := strings.Cut(args[0], "/"); ok {
			kind, name = k, n
		}
	case 2:
		kind, name = args[0], args[1]
	default:
		return objectKind{}, "", usageErrorf("want NAME, KIND/NAME or KIND NAME")
	}
	k, err := parseKind(kind)
	if err != nil {
		return k, "", err
	}
	if k.kind != vectorDeploymentKind.kind && k.kind != stageKind.kind {
		return k, "", usageErrorf("a tree starts at a VectorDeployment (vd) or a Stage (st), not %q", kind)
	}
	if name == "" {
		return k, "", usageErrorf("%s names no %s", args[0], k.kind)
	}
	return k, name, nil
}

// trees builds the tree of the VectorDeployment or Stage named in args, or of every VectorDeployment listed.
func (c *cluster) trees(ctx context.Context, args []string) ([]*tree.Node, error) {
	k, name, err := treeRoot(args)
	if err != nil {
		return nil, err
	}
	if name != "" {
		build := tree.Build
		if k.kind == stageKind.kind {
			build = tree.BuildStage
		}
		root, err := build(ctx, c.client, c.namespace, name)
		if err != nil {
			return nil, c.explain(err)
		}
		return []*tree.Node{root}, nil
	}
	vds, err := c.list(ctx, vectorDeploymentKind)
	if err != nil {
		return nil, err
	}
	roots := make([]*tree.Node, 0, len(vds))
	for _, vd := range vds {
		root, err := tree.Build(ctx, c.client, vd.GetNamespace(), vd.GetName())
		if err != nil {
			return nil, c.explain(err)
		}
		roots = append(roots, root)
	}
	return roots, nil
}
