package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite cmd/rekey/testdata/inspect_hfile golden files")

// runInspectHFileCLI runs `rekey inspect hfile ARGS`.
func runInspectHFileCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runRekey(t, append([]string{"inspect", "hfile"}, args...)...)
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "inspect_hfile", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/rekey -run InspectHFile -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update to accept):\n%s", path, got)
	}
}

func TestInspectHFileGolden(t *testing.T) {
	corpus := testenv.Corpus(t)
	for _, tc := range []struct {
		golden string
		file   string
		args   []string
	}{
		{"hudi_deep_index.golden", "hudi/hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile", nil},
		{"demo1_snappy_cells.golden", "bigtable/src-test-integration-test-data-2022/archive/data/default/demo-1/a2e677e20068512effafcd5b8ac06c5d/cf/44f36bce77074ffeaa4e656a15fc7fbe", []string{"--cells"}},
		{"test2021_cells_only.golden", "bigtable/src-test-data-2021/archive/data/default/test/1a1358ba82be4a98feff54032986bbf2/cf/8aff180e3a244dcc807e4de8b6fce0a7", []string{"--cells-only"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			path := filepath.Join(corpus, tc.file)
			code, out, errOut := runInspectHFileCLI(t, append(tc.args, path)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			checkGolden(t, tc.golden, strings.ReplaceAll(out, corpus, "$CORPUS"))
		})
	}
}

func TestInspectHFileCorrupt(t *testing.T) {
	corpus := testenv.Corpus(t)
	raw, err := os.ReadFile(filepath.Join(corpus, "hbase", "TestCompaction_HFileWithCorruptBlock.master.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "corrupt.hfile")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(corpus, "hudi", "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.hfile")
	if err := os.WriteFile(truncated, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"summary of a file with a corrupt data block is fine", []string{bad}, exitOK, nil},
		{"cells of a corrupt data block", []string{"--cells", bad}, exitProblems, []string{"corrupt.hfile", "DATABLK* block at offset 0", "checksum mismatch"}},
		{"truncated file", []string{truncated}, exitProblems, []string{"truncated.hfile", "corrupt"}},
		{"missing file (named wrong: exit 2)", []string{filepath.Join(dir, "nope")}, exitUsage, []string{"nope", "no such file"}},
		{"no argument", nil, exitUsage, []string{"accepts 1 arg"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runInspectHFileCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}
