package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// runInspectSnapshotCLI runs `rekey inspect snapshot ARGS`.
func runInspectSnapshotCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runRekey(t, append([]string{"inspect", "snapshot"}, args...)...)
}

func fixtureDir(t *testing.T, name string) string {
	t.Helper()
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	if _, err := os.Stat(filepath.Join(dir, name+".cells")); err != nil {
		t.Fatalf("fixture %s missing", name)
	}
	return dir
}

func TestInspectSnapshotCellsMatchOracle(t *testing.T) {
	dir := fixtureDir(t, "split_refs")
	inspectMatchesOracle(t, filepath.Join(dir, "split_refs"), dir)
}

// inspectMatchesOracle checks that `rekey inspect snapshot ROOT split_refs
// --cells` (and --raw) prints the oracle's dumps in dir byte for byte.
func inspectMatchesOracle(t *testing.T, root, dir string) {
	t.Helper()
	for _, mode := range []struct {
		file string
		args []string
	}{
		{"split_refs.cells", nil},
		{"split_refs.raw.cells", []string{"--raw"}},
	} {
		want, err := os.ReadFile(filepath.Join(dir, mode.file))
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runInspectSnapshotCLI(t, append([]string{root, "split_refs", "--cells"}, mode.args...)...)
		if code != 0 || out != string(want) {
			t.Errorf("%s: exit %d, %d bytes (want %d identical to the oracle's dump); stderr %s", mode.file, code, len(out), len(want), errOut)
		}
	}
}

func TestInspectSnapshotDescribe(t *testing.T) {
	dir := fixtureDir(t, "split_refs")
	root := filepath.Join(dir, "split_refs")
	code, out, errOut := runInspectSnapshotCLI(t, root, "split_refs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"table     default:split_refs", "VERSIONS=", "DATA_BLOCK_ENCODING=", "regions   2", "top of split at row", "bottom of split at row"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runInspectSnapshotCLI(t, root, "split_refs", "--json")
	if code != 0 {
		t.Fatalf("--json exit %d: %s", code, errOut)
	}
	var j snapshotJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("--json output does not parse: %v", err)
	}
	if j.Table != "default:split_refs" || len(j.Regions) != 2 || len(j.Families) != 1 || j.TotalBytes <= 0 {
		t.Errorf("--json: %+v", j)
	}
}

func TestInspectSnapshotErrors(t *testing.T) {
	dir := fixtureDir(t, "split_refs")
	root := filepath.Join(dir, "split_refs")

	code, _, errOut := runInspectSnapshotCLI(t, root, "nope")
	if code != exitUsage || !strings.Contains(errOut, "split_refs") {
		t.Errorf("unknown snapshot: exit %d, stderr %q; want 2 and the existing snapshot listed", code, errOut)
	}
	code, _, _ = runInspectSnapshotCLI(t, root, "split_refs", "--raw")
	if code != exitUsage {
		t.Errorf("--raw without --cells: exit %d, want 2", code)
	}

	// A copy with one store file gone: the dump fails, naming the file,
	// its region and family, and where it looked.
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	var victim string
	filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && victim == "" && len(d.Name()) == 32 && !strings.Contains(p, ".hbase-snapshot") {
			victim = p
		}
		return nil
	})
	if victim == "" {
		t.Fatal("no store file found in the fixture copy")
	}
	os.Remove(victim)
	code, _, errOut = runInspectSnapshotCLI(t, tmp, "split_refs", "--cells")
	if code == 0 || !strings.Contains(errOut, filepath.Base(victim)) || !strings.Contains(errOut, "looked in") || !strings.Contains(errOut, "family f") {
		t.Errorf("missing store file: exit %d, stderr %q", code, errOut)
	}
}

func TestInspectSnapshotCorruptBlockFailsLoudly(t *testing.T) {
	dir := fixtureDir(t, "split_refs")
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(filepath.Join(dir, "split_refs"))); err != nil {
		t.Fatal(err)
	}
	// Flip bytes inside the first data block of the parent's big file:
	// the dump must stop with a non-zero exit and say where.
	p := filepath.Join(tmp, "data", "default", "split_refs", "a9ce7dda58a5943fa05b3a7c92d22669", "f", "1f80e8b1358648d2afd519ad870ce825")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("fixture layout changed: %v", err)
	}
	for i := 200; i < 260; i++ {
		b[i] ^= 0x5a
	}
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runInspectSnapshotCLI(t, tmp, "split_refs", "--cells")
	if code == 0 || !strings.Contains(errOut, "incomplete") || !strings.Contains(errOut, "1f80e8b1358648d2afd519ad870ce825") {
		t.Errorf("corrupt block: exit %d, stderr %q", code, errOut)
	}
}
