package hfiles

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// TestStageOnS3WritesFinalNames stages into versitygw's bucket through a
// proxy that counts server-side copies: a split spills runs and dies
// (no Commit), the folder is reopened, the split is redone, Finish writes
// the HFiles. On an object store every run, record and HFile is written
// once under its final name (its PUT or multipart upload completes at
// Close, so it appears whole or not at all) and recorded only after that
// Close: the proxy sees no copy at all, no temporary name (.tmp, _NAME) is
// left in the bucket, the dead split's runs (final names no record names)
// are gone after reopening, and the HFiles, read from versitygw's own
// folder (the server's account of the bytes), hold exactly the cells
// written. (That last check is Go reading what Go wrote; HBase's reading
// of staged files on S3 is TestObjectStagingKillNineThenResume's.)
func TestStageOnS3WritesFinalNames(t *testing.T) {
	st := testenv.RequireS3(t)
	p := s3test.StartFaultProxy(t, st.Endpoint, s3test.S3Protocol)
	conf := t.TempDir()
	site := fmt.Sprintf(`<?xml version="1.0"?>
<configuration>
  <property><name>fs.s3a.endpoint</name><value>%s</value></property>
  <property><name>fs.s3a.path.style.access</name><value>true</value></property>
  <property><name>fs.s3a.access.key</name><value>%s</value></property>
  <property><name>fs.s3a.secret.key</name><value>%s</value></property>
</configuration>
`, p.Endpoint(st.Endpoint), st.AccessKey, st.SecretKey)
	if err := os.WriteFile(filepath.Join(conf, "core-site.xml"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	st.UseS3Conf(t)
	t.Setenv("HADOOP_CONF_DIR", conf)
	direct := s3test.Dial(t, st)
	prefix := s3test.Prefix(t, direct, "stage-final-names")

	ctx := context.Background()
	o := Options{Staging: "s3a://" + st.Bucket + prefix, Table: "t", SplitKeys: [][]byte{[]byte("m")},
		Memory: 128 << 10, BatchBytes: 1 << 10, HFileSize: 64 << 10, MaxFiles: 64}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !s.whole {
		t.Fatal("the S3 staging folder is not written as whole objects")
	}
	cells := genCells(5, 3000)
	a, b := cells[:1500], cells[1500:]
	writeSplit(t, s, "a", a)
	w, err := s.Begin(ctx, sink.SplitInfo{ID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range b[:1000] {
		if err := w.Write(ctx, &b[i]); err != nil {
			t.Fatal(err)
		}
	}
	dead := w.(*splitSink).runs
	if len(dead) == 0 {
		t.Fatal("split b spilled nothing before it died")
	}
	for _, r := range dead {
		if _, err := direct.Stat(path.Join(prefix, r.Name)); err != nil {
			t.Fatalf("the dead split's run %s is not under its final name: %v", r.Name, err)
		}
	}
	s.Close()

	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range dead {
		if _, err := direct.Stat(path.Join(prefix, r.Name)); err == nil {
			t.Errorf("the dead split's run %s, named by no record, is still there after reopening", r.Name)
		}
	}
	writeSplit(t, s, "b", b)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if n := p.Copies(); n != 0 {
		t.Errorf("staging on S3 asked for %d server-side copies (renames), want none", n)
	}
	for _, f := range s3test.Files(t, direct, prefix) {
		if base := path.Base(f); strings.HasPrefix(base, "_") || strings.Contains(base, ".tmp") {
			t.Errorf("temporary name %s left in the bucket", f)
		}
	}
	local := filepath.Join(filepath.Dir(st.ConfDir), "data", st.Bucket, filepath.FromSlash(strings.TrimPrefix(prefix, "/")))
	got := checkStaged(t, s.RegionMap(), readStaged(t, local), o.MaxFiles)
	equalDumps(t, got, sorted(cells))

	// Nothing writes through a wrapper that hides the store: the mark is
	// the S3 backend's own.
	if vfs.WritesWhole(vfs.Local{}) {
		t.Error("a local disk claims whole-object writes")
	}
}
