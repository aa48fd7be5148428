package pipeline_test

import (
	"context"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
)

// TestRunFromS3Root seeds a source table in the mini cluster, snapshots it,
// exports the snapshot with HBase's own code (the oracle's export-snapshot)
// and copies the export byte for byte into the testenv S3 server. A run
// whose source root is the s3a:// URL (endpoint and keys from core-site.xml)
// writes, through puts, a target equal to the preset's rule applied to the
// cells HBase seeded.
func TestRunFromS3Root(t *testing.T) {
	st := testenv.Require(t)
	s3 := testenv.RequireS3(t)
	s3.UseS3Conf(t)
	fsys := s3test.Dial(t, s3)
	p := presets["wide_to_bucketed"]
	src := uniq(t, "s3_src")
	snap := src + "_snap"
	dst := uniq(t, "s3_dst")
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	source := seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(11))), 3)
	want := expect(p, source)

	local := filepath.Join(t.TempDir(), "export")
	testenv.Oracle(t, "export-snapshot", snap, local)
	prefix := s3test.Prefix(t, fsys, "run-root")
	if n := s3test.Upload(t, s3, fsys, local, prefix); n == 0 {
		t.Fatal("the export holds no files")
	}

	j := loadJob(t, p, st, snap, dst)
	j.Source.Root = "s3a://" + s3.Bucket + prefix
	sum, err := runPuts(t, context.Background(), j, p.newSplits, pipeline.Options{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !sum.Finished || sum.Read != int64(len(source)) || sum.Written != int64(len(want)) || sum.Problems() {
		t.Errorf("summary: finished %v, read %d (snapshot has %d), written %d (want %d)", sum.Finished, sum.Read, len(source), sum.Written, len(want))
	}
	sameCells(t, "target", dumpTable(t, dst, false), want)
}
