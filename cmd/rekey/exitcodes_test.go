package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestExitCodes holds every subcommand to one rule: 2 when the user named
// something wrong or missing, 1 when the input is damaged, 0 when done.
func TestExitCodes(t *testing.T) {
	const snap = "../../testdata/snapshots/enc_none"
	const hf = snap + "/data/default/enc_none/01e7d08b7344c3fb4c74b9ddc35d630e/a/619ecc521c714b9cbdbad653d05fb486"
	dir := t.TempDir()
	// A damaged copy of the HFile: the trailer claims an empty file.
	b, err := os.ReadFile(hf)
	if err != nil {
		t.Fatal(err)
	}
	b[23544] = 0x29
	damaged := filepath.Join(dir, "damaged.hfile")
	os.WriteFile(damaged, b, 0o644)
	// A damaged snapshot: one region boundary moved.
	r4 := filepath.Join(dir, "r4")
	if err := os.CopyFS(r4, os.DirFS(snap)); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(r4, ".hbase-snapshot/enc_none/data.manifest")
	m, _ := os.ReadFile(mp)
	m[1288] = '0'
	os.WriteFile(mp, m, 0o644)

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"inspect", "nosuch"}, exitUsage, `unknown subcommand "nosuch"`},
		{[]string{"inspect"}, exitUsage, "name what to inspect"},
		{[]string{"inspect", "hfile", filepath.Join(dir, "nosuch")}, exitUsage, "no such file"},
		{[]string{"inspect", "hfile", dir}, exitUsage, "is a directory"},
		{[]string{"inspect", "hfile", "/dev/null"}, exitUsage, "not a regular file"},
		{[]string{"inspect", "hfile", "ftp://bucket/x"}, exitUsage, `scheme "ftp"`},
		{[]string{"inspect", "hfile", "file://tmp/x"}, exitUsage, "host must be empty or localhost"},
		{[]string{"inspect", "hfile", "--cells", "--cells-only", hf}, exitUsage, "exclude each other"},
		{[]string{"inspect", "hfile", "--cells-only", damaged}, exitProblems, "corrupt"},
		{[]string{"inspect", "snapshot", filepath.Join(dir, "nosuch"), "enc_none"}, exitUsage, "does not exist"},
		{[]string{"inspect", "snapshot", hf, "enc_none"}, exitUsage, "is not a directory"},
		{[]string{"inspect", "snapshot", snap, "a/b"}, exitUsage, "snapshot name"},
		{[]string{"inspect", "snapshot", snap, "nosuch"}, exitUsage, "existing snapshots: enc_none"},
		{[]string{"inspect", "snapshot", "--cells", "--family", "", snap, "enc_none"}, exitUsage, "family name cannot be empty"},
		{[]string{"inspect", "snapshot", "--cells", r4, "enc_none"}, exitProblems, "region 01e7d08b7344c3fb4c74b9ddc35d630e"},
		{[]string{"inspect", "table", "t", "--zk", "127.0.0.1:1", "--cells", "--family", ""}, exitUsage, "family name cannot be empty"},
		{[]string{"plan", "--regions", "-3", "../../configs/demo.yaml"}, exitUsage, "--regions -3"},
		{[]string{"run", "--sink", "dry-run", "--to", "0", "../../configs/demo.yaml"}, exitUsage, "--to 0: an upper time bound of 0"},
		{[]string{"run", "--sink", "dry-run", "--workers", "0", "../../configs/demo.yaml"}, exitUsage, "--workers 0: expected 1 or more"},
		{[]string{"run", "--sink", "dry-run", "--memory", "1KiB", "../../configs/demo.yaml"}, exitUsage, "1 MiB is the least rekey runs with"},
		{[]string{"run", "--offline", "../../configs/demo.yaml"}, exitUsage, "it needs --sink hfiles"},
		{[]string{"run", "--sink", "dry-run", "--since", "a", "--assume-at", "b", "../../configs/demo.yaml"}, exitUsage, "name different snapshots"},
		{[]string{"run", "--sink", "dry-run", "--to", "1970-01-01T00:00:00Z", "../../configs/demo.yaml"}, exitUsage, "would copy nothing"},
		// A folder path through a file: a wrong path, named by its flag,
		// not a failed job (mkdir's "not a directory" was exit 1).
		{[]string{"run", "--sink", "hfiles", "--offline", "--staging", hf, "../../configs/demo.yaml"}, exitUsage, "--staging " + hf + ": " + hf + " is a file, not a folder"},
		{[]string{"run", "--sink", "hfiles", "--offline", "--staging", hf + "/x", "../../configs/demo.yaml"}, exitUsage, "--staging " + hf + "/x: " + hf + " is a file"},
		{[]string{"run", "--sink", "dry-run", "--checkpoint", hf + "/c.json", "../../configs/demo.yaml"}, exitUsage, "--checkpoint " + hf + "/c.json: " + hf + " is a file"},
		{[]string{"run", "--sink", "hfiles", "--offline", "--checkpoint", hf + "/c.json", "../../configs/demo.yaml"}, exitUsage, "--checkpoint " + hf + "/c.json: " + hf + " is a file"},
		// What cobra itself finds: an unknown subcommand or flag, a wrong
		// number of arguments; and no subcommand at all prints the help.
		{[]string{"nosuch"}, exitUsage, `unknown command "nosuch" for "rekey"`},
		{[]string{"verif", "job.yaml"}, exitUsage, "Did you mean this?\n\tverify"},
		{[]string{"completion", "bash", "extra"}, exitUsage, `unknown command "extra"`},
		{[]string{"--nosuch"}, exitUsage, "unknown flag: --nosuch"},
		{[]string{"verify", "--nosuch", "job.yaml"}, exitUsage, "unknown flag: --nosuch"},
		{[]string{"verify"}, exitUsage, "accepts 1 arg(s), received 0"},
		{[]string{"run", "a.yaml", "b.yaml"}, exitUsage, "accepts 1 arg(s), received 2"},
		{[]string{"inspect", "snapshot", snap}, exitUsage, "accepts 2 arg(s), received 1"},
		{[]string{}, exitOK, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runRekey(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.msg)
			}
			if tc.code == exitProblems && out != "" {
				t.Fatalf("damaged input printed %d bytes of cells", len(out))
			}
		})
	}
}

// TestEveryHelpHasExitStatus: every subcommand's --help ends with the one
// table of exit codes, so that an operator writing a scheduler's retry
// rule finds it wherever they look; the tree is walked, so a new
// subcommand without it fails here.
func TestEveryHelpHasExitStatus(t *testing.T) {
	var walk func(c *cobra.Command, path []string)
	var paths [][]string
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue // cobra's own
			}
			p := append(append([]string(nil), path...), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(newRootCmd(), nil)
	if len(paths) < 10 {
		t.Fatalf("only %d subcommands found: %v", len(paths), paths)
	}
	for _, p := range paths {
		code, out, errOut := runRekey(t, append(p, "--help")...)
		if code != exitOK || !strings.Contains(out, strings.TrimSpace(exitStatusHelp)) {
			t.Errorf("rekey %s --help: exit %d, no exit status table\n%s%s", strings.Join(p, " "), code, out, errOut)
		}
	}
	// --only's argument is the report it reads (a backquoted word in a
	// flag's usage becomes its argument's name).
	if _, out, _ := runRekey(t, "run", "--help"); !regexp.MustCompile(`(?m)^\s+--only REPORT\s`).MatchString(out) {
		t.Errorf("rekey run --help does not show --only REPORT:\n%s", out)
	}
}
