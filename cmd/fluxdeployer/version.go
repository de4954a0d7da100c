package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxdeployer/fluxdeployer/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o json]",
		Short: "Print the version, commit and Go version of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			case "json":
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			case "":
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "version: %s\ncommit: %s\ngo: %s\n", info.Version, info.Commit, info.GoVersion)
				return err
			}
			return fmt.Errorf("unknown output format %q (want json)", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}
