package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
)

// TestUnwritableRejectFileFailsFirst: a reject file whose folder is a
// file, or cannot be created under one, stops Prepare with ErrInvalid
// naming the path, before a cell is read: the reject file is only written at the
// end, so without the check the run would do all its work first. The
// store files are behind a file system that fails every read, so a cell
// read before the check would surface as that error instead.
func TestUnwritableRejectFileFailsFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		filepath.Join(file, "rejects.tsv"),
		filepath.Join(file, "sub", "rejects.tsv"),
	} {
		j := demoJob(t)
		j.BadKeys.File = bad
		fsys := vfs.NewFaulty(vfs.Local{}, vfs.Fault{PathContains: "/data/", Op: "read"})
		_, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Open: snapshot.OpenOptions{FS: fsys}})
		if !errors.Is(err, pipeline.ErrInvalid) || !errors.Is(err, vfs.ErrCannotCreate) || !strings.Contains(err.Error(), bad) {
			t.Errorf("reject file %s: Prepare said %v; want ErrInvalid and ErrCannotCreate naming the path", bad, err)
		}
	}
}
