package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "fluxdeployer",
		Short: "Deploys OCM vectors through Flux",
		Long: "fluxdeployer turns VectorDeployments (sets of versioned artifacts published as OCM component versions)\n" +
			"into ArtifactDeployments, and ArtifactDeployments into Flux objects.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCommand(), newNameCommand(), newVectorCommand(), newVersionCommand(), newTreeCommand(), newRenderCommand())
	return root
}
