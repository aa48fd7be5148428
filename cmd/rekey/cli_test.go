package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runRekey runs the CLI in-process as a user would from a fresh shell and
// returns its exit code, stdout and stderr. Every run builds its own
// command tree, so no flag value carries over from an earlier run.
func runRekey(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out bytes.Buffer
	// run reports errors on os.Stderr itself, so capture the real thing.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = pw
	errc := make(chan string)
	go func() { b, _ := io.ReadAll(pr); errc <- string(b) }()
	code = runWith(args, &out)
	os.Stderr = saved
	pw.Close()
	return code, out.String(), <-errc
}

// TestNoFlagCarriesOver: a flag given in one run is not set in the next.
func TestNoFlagCarriesOver(t *testing.T) {
	job := demoJob(t)
	if code, _, errOut := runRekey(t, "run", job, "--sink", "dry-run", "--progress", "none", "--json"); code != 0 {
		t.Fatalf("first run: exit %d %s", code, errOut)
	}
	// Without --resume this run must refuse the checkpoint the first made;
	// --json from the first run must not carry over either.
	code, out, _ := runRekey(t, "run", job, "--sink", "dry-run", "--progress", "none")
	if code != 2 || bytes.Contains([]byte(out), []byte("{")) {
		t.Errorf("second run: exit %d, output %q; flags of the first run carried over", code, out)
	}
}

// TestCPUProfile: --cpuprofile writes a profile go tool pprof can read (a
// gzipped protobuf) for a command that succeeds, and a path that cannot be
// created is the user's mistake (exit 2), not a run without the profile.
func TestCPUProfile(t *testing.T) {
	job := demoJob(t)
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	if code, _, errOut := runRekey(t, "run", job, "--sink", "dry-run", "--progress", "none", "--fresh", "--cpuprofile", prof); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile is %d bytes, not gzip", len(b))
	}
	code, _, errOut := runRekey(t, "plan", job, "--sample", "0", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"))
	if code != 2 || !strings.Contains(errOut, "--cpuprofile") {
		t.Fatalf("unwritable profile path: exit %d, %q; want 2 naming --cpuprofile", code, errOut)
	}
}
