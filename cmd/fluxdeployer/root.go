package main

import (
	"errors"
	"fmt"

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
	root.AddCommand(newRunCommand(), newNameCommand(), newVectorCommand(), newVersionCommand(), newTreeCommand(), newRenderCommand(),
		newReconcileCommand(), newSuspendCommand(), newResumeCommand(), newWaitCommand(), newDiffCommand(),
		newHistoryCommand(), newRollbackCommand(), newUICommand(), newCheckCommand(), newGetCommand(), newEventsCommand(),
		newTraceCommand())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	classifyErrors(root)
	return root
}

// Exit codes, as kubectl and Go's flag package use them: a script can tell a wrong command line, which no retry
// fixes, from a command that failed.
const (
	exitSuccess = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a command line the binary cannot act on: an unknown command or flag, a missing or extra
// argument, a value a flag does not take.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// failure is an error of a command that ran: what it was asked to do could not be done.
type failure struct{ err error }

func (e failure) Error() string { return e.err.Error() }
func (e failure) Unwrap() error { return e.err }

// classifyErrors marks the errors of every command below c: argument checks fail as usage errors, and what a
// command returns as failures unless it is a usage error itself. What cobra refuses before running a command
// (an unknown command, a required flag missing) is neither, and so a usage error too. Flag warnings (a deprecated
// flag) reach stderr, where pflag would write them if cobra did not collect its output.
func classifyErrors(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, a []string) error {
			err := run(cmd, a)
			if err == nil || errors.As(err, new(usageError)) {
				return err
			}
			return failure{err}
		}
	}
	c.Flags().SetOutput(stderrOf{c})
	for _, sub := range c.Commands() {
		classifyErrors(sub)
	}
}

// exitCode is the exit code for what Execute returned.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitSuccess
	case errors.As(err, new(usageError)):
		return exitUsage
	case errors.As(err, new(failure)):
		return exitFailure
	}
	return exitUsage
}

// stderrOf writes to the command's stderr as it is when written to, so that tests' SetErr applies.
type stderrOf struct{ cmd *cobra.Command }

func (w stderrOf) Write(p []byte) (int, error) { return w.cmd.ErrOrStderr().Write(p) }
