package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxdeployer/fluxdeployer/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output *outputFormat
	cmd := &cobra.Command{
		Use:   "version [-o json|yaml]",
		Short: "Print the version, commit and Go version of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			if output.structured() {
				return printStructured(cmd.OutOrStdout(), output.value, info)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "version: %s\ncommit: %s\ngo: %s\n", info.Version, info.Commit, info.GoVersion)
			return err
		},
	}
	output = bindOutput(cmd.Flags(), "", "output format: json or yaml (default: one field a line)", outputJSON, outputYAML)
	return cmd
}
