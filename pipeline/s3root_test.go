package pipeline_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestS3RootSnapshotRunAndLoad runs against the cluster whose hbase.rootdir
// is on S3 (TESTENV_ROOTDIR=s3; WALs on an HDFS): HBase itself writes the
// seeded table's store files and its snapshot into the bucket. `rekey
// inspect snapshot` of that root prints the cells HBase's
// TableSnapshotScanner reads from it (the oracle's dump-snapshot); `rekey
// run` from that root, staging its HFiles under the same bucket, bulk
// loads them, and the target table, as HBase's client scans it, holds the
// preset's rule applied to those cells. Staging and root dir share a
// bucket, yet HBase 2.5 copies a bulk-loaded file unless both file systems
// report the same canonical service name, and S3A reports none without
// delegation tokens: the region servers copy every file (the load then
// removes each region's staged files itself, once the region is marked
// loaded), and the run says so before it stages anything.
func TestS3RootSnapshotRunAndLoad(t *testing.T) {
	st := testenv.RequireS3Root(t)
	s3 := testenv.RequireS3(t)
	fsys := s3test.Dial(t, s3)
	bin := rekeyBinary(t)
	src, dst := uniq(t, "s3root_src"), uniq(t, "s3root_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: p.families, SplitKeys: []string{"s010", "s020"}, Versions: 1}, bigWide(30, 100))
	if n := len(s3test.Files(t, fsys, strings.TrimPrefix(st.RootDir, "s3a://"+s3.Bucket)+"/.hbase-snapshot/"+snap)); n == 0 {
		t.Fatalf("no snapshot %s in the bucket under %s", snap, st.RootDir)
	}
	env := append(os.Environ(), "HADOOP_CONF_DIR="+s3.ConfDir, "AWS_EC2_METADATA_DISABLED=true")

	inspect := exec.Command(bin, "inspect", "snapshot", st.RootDir, snap, "--cells")
	inspect.Env = env
	var ierr bytes.Buffer
	inspect.Stderr = &ierr
	out, err := inspect.Output()
	if err != nil {
		t.Fatalf("inspect snapshot %s %s: exit %d: %s", st.RootDir, snap, exitCode(err), ierr.String())
	}
	cells, err := testenv.ParseDump(out)
	if err != nil {
		t.Fatal(err)
	}
	sameCells(t, "rekey inspect snapshot of the snapshot HBase wrote on S3", cells, source)

	want := expect(p, source)
	dir := t.TempDir()
	jobPath := writeJobFile(t, st, snap, dst, dir)
	site := filepath.Join(dir, "hbase-conf")
	os.MkdirAll(site, 0o755)
	if err := os.WriteFile(filepath.Join(site, "hbase-site.xml"), []byte("<configuration><property><name>hbase.rootdir</name><value>"+st.RootDir+"</value></property></configuration>"), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix := s3test.Prefix(t, fsys, "staging")
	staging := "s3a://" + s3.Bucket + prefix
	run := exec.Command(bin, "run", jobPath, "--sink", "hfiles", "--staging", staging, "--workers", "2", "--progress", "none", "--json")
	run.Env = append(env, "HBASE_CONF_DIR="+site)
	var rerr bytes.Buffer
	run.Stderr = &rerr
	out, err = run.Output()
	t.Logf("run: %s", rerr.String())
	if err != nil {
		t.Fatalf("run: exit %d", exitCode(err))
	}
	var sum struct {
		Finished bool  `json:"finished"`
		Written  int64 `json:"cells_written"`
	}
	if err := json.Unmarshal(out, &sum); err != nil || !sum.Finished {
		t.Fatalf("run did not finish (%v): %s", err, out)
	}
	log := rerr.String()
	w, h := strings.Index(log, "is in the bucket of the cluster's hbase.rootdir"), strings.Index(log, "hfiles:")
	if w < 0 || h < 0 || h < w || !strings.Contains(log, "will copy every staged HFile at load time") {
		t.Errorf("the run should say (at %d), before the sink reports (at %d), that the region servers will copy within the bucket", w, h)
	}
	if !strings.Contains(log, "hfiles: loaded region") {
		t.Errorf("the run loaded no region")
	}
	// The region servers copy from S3, so the load removes each region's
	// staged files itself once the region's Loaded mark is saved (copy
	// mode, issue 49): none is left, and none is loaded twice on a
	// resume (TestCopyLoadKilledBetweenRegions).
	if left := filesUnder(t, fsys, prefix, "hfiles"); len(left) != 0 {
		t.Errorf("%d staged HFiles left after the load (%v): copy-mode staging removes each region's once it is loaded", len(left), left)
	}
	sameCells(t, "target table loaded by rename within S3", dumpTable(t, dst, false), want)
}
