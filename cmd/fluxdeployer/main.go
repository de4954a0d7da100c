// Command fluxdeployer runs the fluxdeployer operator and its helper commands.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit code: 0 on success, 1 when the command failed, 2 when
// the command line itself is wrong. Every error is printed as "error: …", a usage error with where to read the
// usage.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	code := exitCode(err)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "error:", err)
		if code == exitUsage {
			_, _ = fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return code
}
