package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release's version, set by `make release` with
// -ldflags '-X main.version=...'; a build from a checkout says "dev" and
// is told apart by its commit.
var version = "dev"

// buildInfo says which rekey produced an output, so that a summary or a
// report kept for months can be traced to the build that wrote it.
type buildInfo struct {
	Version string `json:"version"`
	// Commit and CommitTime are the checkout's, as go build records them
	// (empty for a build outside a git checkout); Modified says the
	// checkout had changes that no commit holds.
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// currentBuild reads this binary's build information.
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `rekey version` prints.
func (b buildInfo) String() string {
	s := "rekey " + b.Version
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if b.Modified {
			c += " with uncommitted changes"
		}
		s += fmt.Sprintf(" (commit %s, %s)", c, b.CommitTime)
	}
	return s + fmt.Sprintf(", %s, %s", b.Go, b.Platform)
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print rekey's version, commit, Go version and platform",
		Long: `Print rekey's version, commit and its time, Go version and platform, as
every --json summary and verify report records them.
` + exitStatusHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := currentBuild()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(b)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), b)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as JSON")
	return cmd
}

// withBuild is what a --json summary prints: the summary's own fields, in
// their order, and after them "rekey": the build that wrote it.
func withBuild(sum any) any {
	b, err := json.Marshal(sum)
	if err != nil || len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return sum // not an object: printed as it is
	}
	build, err := json.Marshal(currentBuild())
	if err != nil {
		return sum
	}
	sep := ","
	if len(b) == 2 {
		sep = ""
	}
	out := append(b[:len(b)-1:len(b)-1], sep+`"rekey":`...)
	out = append(out, build...)
	return json.RawMessage(append(out, '}'))
}
