// Command rekey re-keys HBase tables from snapshots: plan, run, verify and
// inspect. See the README for the whole CLI.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	// Every storage backend: the command reads and writes whatever a job
	// names (hdfs://, s3a://, gs://, abfs://).
	_ "github.com/rekeyhq/rekey/vfs/all"
)

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
	root.AddCommand(newPlanCmd(), newRunCmd(), newLoadCmd(), newStatusCmd(), newVerifyCmd(), newInspectCmd(), newVersionCmd())
	addKerberosFlags(root)
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
	krbPreRun := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if krbPreRun != nil {
			if err := krbPreRun(cmd, args); err != nil {
				return err
			}
		}
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

// runWith runs the CLI with stdout going to out, and returns its exit
// status.
func runWith(args []string, out io.Writer) int {
	root := newRootCmd()
	stopProfile := addProfileFlag(root)
	typeCobraErrors(root, args)
	root.SetArgs(args)
	root.SetOut(out)
	err := unknownCommand(root, args)
	if err == nil {
		err = root.Execute()
	}
	if perr := stopProfile(); perr != nil && err == nil {
		err = fmt.Errorf("--cpuprofile: %w", perr)
	}
	if !reported(err) {
		fmt.Fprintln(os.Stderr, "rekey:", err)
	}
	return exitCode(err)
}
