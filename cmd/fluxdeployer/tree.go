package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

func newTreeCommand() *cobra.Command {
	var namespace, output string
	cmd := &cobra.Command{
		Use:   "tree NAME [-n NAMESPACE] [-o json]",
		Short: "Show what a VectorDeployment became, down to the workloads Flux applied",
		Long: "Reads the cluster of the current kubeconfig (KUBECONFIG or ~/.kube/config) and prints the VectorDeployment\n" +
			"NAME, its ArtifactDeployments, each one's Flux objects and the objects Flux applied for them (from the\n" +
			"HelmRelease's and the Kustomization's inventory), each with its Ready state and reason, like `flux tree`\n" +
			"across the vector.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != outputJSON {
				return fmt.Errorf("unknown output format %q (want json)", output)
			}
			loaded := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
			cfg, err := loaded.ClientConfig()
			if err != nil {
				return err
			}
			if namespace == "" {
				if namespace, _, err = loaded.Namespace(); err != nil {
					return err
				}
			}
			scheme, err := newScheme()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			root, err := tree.Build(cmd.Context(), c, namespace, args[0])
			if err != nil {
				return err
			}
			if output == outputJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(root)
			}
			return tree.Print(cmd.OutOrStdout(), root)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the VectorDeployment (default: the kubeconfig context's)")
	f.StringVarP(&output, "output", "o", "", "output format: json (default: a tree)")
	return cmd
}
