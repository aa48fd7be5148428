package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runRekey runs the CLI in-process as a user would from a fresh shell and
// returns its exit code, stdout and stderr. Cobra keeps flag values between
// runs in one process, so every flag of every subcommand is first put back
// to its default.
func runRekey(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	resetFlags(rootCmd)
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	defer rootCmd.SetOut(nil)
	// run reports errors on os.Stderr itself, so capture the real thing.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = pw
	errc := make(chan string)
	go func() { b, _ := io.ReadAll(pr); errc <- string(b) }()
	code = run(args)
	os.Stderr = saved
	pw.Close()
	return code, out.String(), <-errc
}

// resetFlags puts every flag of c and its subcommands back to its default.
func resetFlags(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			// A slice flag's Set appends, and its DefValue is "[a,b]".
			var def []string
			if d := strings.Trim(f.DefValue, "[]"); d != "" {
				def = strings.Split(d, ",")
			}
			_ = sv.Replace(def)
		} else {
			_ = f.Value.Set(f.DefValue)
		}
		f.Changed = false
	})
	for _, sub := range c.Commands() {
		resetFlags(sub)
	}
}
