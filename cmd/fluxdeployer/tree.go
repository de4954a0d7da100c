package main

import (
	"github.com/spf13/cobra"

	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

func newTreeCommand() *cobra.Command {
	var flags clusterFlags
	var output *outputFormat
	cmd := &cobra.Command{
		Use:   "tree [NAME] [-n NAMESPACE | -A] [-o json|yaml]",
		Short: "Show what a VectorDeployment became, down to the workloads Flux applied",
		Long: "Reads the cluster of the kubeconfig (--kubeconfig, else KUBECONFIG, else ~/.kube/config; --context) and prints\n" +
			"the VectorDeployment NAME, its ArtifactDeployments, each one's Flux objects and the objects Flux applied for them\n" +
			"(from the HelmRelease's and the Kustomization's inventory), each with its Ready state and reason, like `flux tree`\n" +
			"across the vector. Without NAME, the tree of every VectorDeployment in the namespace (-A: in every namespace);\n" +
			"-o json or yaml prints a NAME's tree as one object, and a list of trees without NAME.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if err := flags.oneNamespace(); err != nil {
					return err
				}
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			roots, err := c.trees(cmd, args)
			if err != nil {
				return err
			}
			if output.structured() {
				if len(args) == 1 {
					return printStructured(cmd.OutOrStdout(), output.value, roots[0])
				}
				return printStructured(cmd.OutOrStdout(), output.value, roots)
			}
			for _, root := range roots {
				if err := tree.Print(cmd.OutOrStdout(), root); err != nil {
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

// trees builds the tree of the VectorDeployment named in args, or of every one listed.
func (c *cluster) trees(cmd *cobra.Command, args []string) ([]*tree.Node, error) {
	if len(args) == 1 {
		root, err := tree.Build(cmd.Context(), c.client, c.namespace, args[0])
		if err != nil {
			return nil, c.explain(err)
		}
		return []*tree.Node{root}, nil
	}
	vds, err := c.list(cmd.Context(), vectorDeploymentKind)
	if err != nil {
		return nil, err
	}
	roots := make([]*tree.Node, 0, len(vds))
	for _, vd := range vds {
		root, err := tree.Build(cmd.Context(), c.client, vd.GetNamespace(), vd.GetName())
		if err != nil {
			return nil, c.explain(err)
		}
		roots = append(roots, root)
	}
	return roots, nil
}
