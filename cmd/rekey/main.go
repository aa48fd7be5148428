// Command rekey re-keys HBase tables from snapshots: plan, run, verify and
// inspect. See the README for the whole CLI.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand. The rule: 2 when the user named
// something wrong or missing (a flag, an argument, a job file option, a
// path, root dir or snapshot that does not exist or is not what it must
// be), 1 when the input is damaged or the work found problems (a corrupt
// HFile or manifest, a missing store file, rejected keys, failed
// verification), 0 when done.
const (
	exitOK       = 0 // done
	exitProblems = 1 // input damaged, or done with problems reported
	exitUsage    = 2 // the user named something wrong or missing; for verify, any error
	// exitInterrupted (3, in run.go): stopped by a signal, resumable.
)

// usageError marks an error as the caller's fault (bad flag, bad job file),
// which maps to exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errProblems is returned by a subcommand that finished but found problems;
// it has already reported them.
var errProblems = errors.New("finished with problems")

// newRootCmd builds the command tree afresh: each subcommand file has a
// constructor whose flags live in the command it returns, so no flag value
// outlives one run (tests run the CLI many times in one process).
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "rekey",
		Short:         "Re-key HBase tables from snapshots, without Spark",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newPlanCmd(), newRunCmd(), newVerifyCmd(), newInspectCmd())
	return root
}

// addProfileFlag gives every subcommand --cpuprofile FILE: a Go CPU profile
// of the whole command (go tool pprof FILE), for a job slower than it
// should be. scripts/pgo.sh uses it to refresh cmd/rekey/default.pgo,
// the profile the compiler optimises the rekey binary for. It returns the
// function that ends the profile, a no-op when none was asked for.
func addProfileFlag(root *cobra.Command) (stop func() error) {
	var path string
	var f *os.File
	root.PersistentFlags().StringVar(&path, "cpuprofile", "", "write a CPU profile of the command to `FILE`")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if path == "" {
			return nil
		}
		var err error
		if f, err = os.Create(path); err != nil {
			return usageError{fmt.Errorf("--cpuprofile: %w", err)}
		}
		return pprof.StartCPUProfile(f)
	}
	return func() error {
		if f == nil {
			return nil
		}
		pprof.StopCPUProfile()
		return f.Close()
	}
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int { return runWith(args, os.Stdout) }

// runWith runs the CLI with stdout going to out.
func runWith(args []string, out io.Writer) int {
	root := newRootCmd()
	stopProfile := addProfileFlag(root)
	root.SetArgs(args)
	root.SetOut(out)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	err := root.Execute()
	if perr := stopProfile(); perr != nil && err == nil {
		err = fmt.Errorf("--cpuprofile: %w", perr)
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errProblems):
		return exitProblems
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	}
	fmt.Fprintln(os.Stderr, "rekey:", err)
	var ue usageError
	var fe failed
	if errors.As(err, &ue) || errors.As(err, &fe) || isCobraUsage(err) {
		return exitUsage
	}
	return exitProblems
}

// isCobraUsage recognises cobra's own argument errors, which it does not type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires exactly", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
