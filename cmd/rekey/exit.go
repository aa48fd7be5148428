package main

import (
	"errors"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/vfs/hdfs"
	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand. The rule: 2 when the user named
// something wrong or missing (a flag, an argument, a job file option, a
// path, root dir or snapshot that does not exist or is not what it must
// be), 1 when the input is damaged or the work found problems (a corrupt
// HFile or manifest, a missing store file, rejected keys, failed
// verification), 0 when done, 3 when rekey run stopped on a signal, 4 when
// the work stopped for a cause a retry may cure (a cluster, NameNode or KDC
// out of reach after every retry, the run's lease taken over).
const (
	exitOK       = 0 // done
	exitProblems = 1 // input damaged, or done with problems reported
	exitUsage    = 2 // the user named something wrong or missing; for verify, any error
	// exitInterrupted: the run stopped on a signal; the checkpoint is
	// written and --resume goes on.
	exitInterrupted = 3
	// exitRetry: the work stopped for a cause outside the input that a
	// later attempt may not meet. Schedulers (YARN, Kubernetes) retry it,
	// where 1 and 2 fail the task for good: a YARN attempt cut off from its
	// lease by the retry that replaced it must not fail the whole job.
	exitRetry = 4
)

// exitStatusHelp ends every subcommand's help: one table of the codes
// above, so that an operator reads in each what a scheduler acts on.
const exitStatusHelp = `
Exit status, the same for every subcommand:
  0  done (verify: every entity matches)
  1  damaged input, or the work ended with problems it reported (rejected
     keys, collisions, failed mutations, a verify mismatch)
  2  a wrong job file, flag, path or state folder; another task holds the
     state; or a phase task whose input is not ready (without --wait-ready)
  3  interrupted by a signal: the state is saved, --resume goes on
  4  retry: a cluster, ZooKeeper, NameNode or KDC out of reach after every
     retry (--timeout), a --wait-ready that ran out, or the lease taken over
     by another attempt`

// retryable reports whether err is one of the causes exitRetry names.
func retryable(err error) bool {
	for _, cause := range []error{pipeline.ErrLeaseLost, hdfs.ErrNameNodeUnavailable, rpc.ErrDial, rpc.ErrConnBroken, krb.ErrKDCUnreachable, hbase.ErrZooKeeperUnreachable, errNotReadyInTime} {
		if errors.Is(err, cause) {
			return true
		}
	}
	return false
}

// usageError marks an error as the caller's fault (bad flag, bad job file),
// which maps to exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// failed marks an error that ends verify with status 2 (the run could not
// decide), as opposed to 1 (it decided: mismatches).
type failed struct{ err error }

func (e failed) Error() string { return e.err.Error() }
func (e failed) Unwrap() error { return e.err }

// errProblems is returned by a subcommand that finished but found problems;
// it has already reported them.
var errProblems = errors.New("finished with problems")

// errInterrupted is returned by rekey run after a signal; it maps to exit 3.
var errInterrupted = errors.New("interrupted")

// exitCode maps the error a subcommand returned to the process's exit
// status.
func exitCode(err error) int {
	var ue usageError
	var fe failed
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errProblems):
		return exitProblems
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.As(err, &ue):
		return exitUsage
	case retryable(err):
		// Before failed: verify ends any error it cannot decide on with
		// 2, but a cluster out of reach is worth a retry there too.
		return exitRetry
	case errors.As(err, &fe):
		return exitUsage
	}
	return exitProblems
}

// reported says whether the subcommand has told the user about err itself
// (its problems, or the interrupt), so it is not printed again.
func reported(err error) bool {
	return err == nil || errors.Is(err, errProblems) || errors.Is(err, errInterrupted)
}

// typeCobraErrors makes the errors cobra finds itself while it parses
// args usage errors: a bad flag, and a wrong number of arguments for any
// command in the tree (cobra's own help and completion commands included).
// An unknown subcommand is unknownCommand's.
func typeCobraErrors(root *cobra.Command, args []string) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// cobra adds these when it executes; added now, their argument checks
	// are wrapped too, and unknownCommand finds them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args != nil {
			c.Args = usageArgs(c.Args)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// usageArgs returns check with its error marked as a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// unknownCommand returns a usage error when args name no command of the
// tree: the one error cobra's command lookup (Find) returns, with the
// message and suggestions cobra gives it, but untyped when Execute
// returns it. The root itself does not run, so cobra's help for it stays
// as it is. cobra adds its shell-completion request command only when it
// executes, so a completion request is left to it.
func unknownCommand(root *cobra.Command, args []string) error {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return nil
	}
	if _, _, err := root.Find(args); err != nil {
		return usageError{err}
	}
	return nil
}
