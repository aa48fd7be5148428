package verify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/vfs"
)

// TestUnwritableReportFailsFirst: a report file (--out, --html) under a
// plain file, where no folder can be, stops Prepare with vfs.ErrCannotCreate naming it,
// before anything is opened or read: the job's source here does not even
// exist, so anything Prepare did first would fail on that instead. The
// report is written only after the whole check, which it would otherwise
// have wasted.
func TestUnwritableReportFailsFirst(t *testing.T) {
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j.Source.Root = filepath.Join(t.TempDir(), "no-snapshot-here")
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "report.json")
	_, err = Prepare(context.Background(), j, Options{Reports: []string{filepath.Join(t.TempDir(), "ok.html"), bad}})
	if !errors.Is(err, vfs.ErrCannotCreate) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Prepare with report %s: %v; want vfs.ErrCannotCreate naming it", bad, err)
	}
}
