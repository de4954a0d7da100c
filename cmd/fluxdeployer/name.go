package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

func newNameCommand() *cobra.Command {
	var (
		component, version, uid string
		collisionCount          int32
		output                  *outputFormat
	)
	cmd := &cobra.Command{
		Use:   "name --component C --version V [--uid U] [--collision-count N] [-o json|yaml]",
		Short: "Print the ArtifactDeployment name an artifact gets",
		Long: "Prints the ArtifactDeployment name an artifact gets. Pass --uid (the VectorDeployment's UID) for an artifact\n" +
			"whose manifest disables reuse, and --collision-count for a slot whose counter was bumped.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, hash, err := naming.ArtifactDeploymentName(component, version, uid, collisionCount)
			if err != nil {
				return err
			}
			if output.structured() {
				return printStructured(cmd.OutOrStdout(), output.value, struct {
					Name string `json:"name"`
					Hash string `json:"hash"`
				}{name, hash})
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), name)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&component, "component", "", "OCM component name, e.g. acme.org/artifacts/frontend")
	f.StringVar(&version, "version", "", "OCM component version")
	f.StringVar(&uid, "uid", "", "VectorDeployment UID, for artifacts that disable reuse")
	f.Int32Var(&collisionCount, "collision-count", 0, "collision counter of the slot")
	output = bindOutput(f, "", "output format: json or yaml (default: the name)", outputJSON, outputYAML)
	_ = cmd.MarkFlagRequired("component")
	_ = cmd.MarkFlagRequired("version")
	return cmd
}
