// Command fluxdeployer runs the fluxdeployer operator and its helper commands.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit code: 0 on success, 1 when the command failed, 2 when
// the command line itself is wrong. Every error is printed as "error: …", a usage error with where to read the
// usage. An error repeats text from a registry or a status, so each of its lines is printed printable
// (sanitize.Printable): no escape sequence of a hostile registry or tenant reaches the terminal.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	code := exitCode(err)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "error:", printableLines(err.Error()))
		if code == exitUsage {
			_, _ = fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return code
}

// printableLines is s with each line made printable, its line breaks kept.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = sanitize.Printable(l)
	}
	return strings.Join(lines, "\n")
}
