package pipeline_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// filesUnder lists the objects under prefix whose key has a folder named
// folder in it ("hfiles": the staged HFiles; "runs": spilled runs), but
// not the stage's JSON records, dot files or temporaries (".tmp": not yet
// committed).
func filesUnder(t *testing.T, fsys vfs.FS, prefix, folder string) []string {
	t.Helper()
	var out []string
	for _, p := range s3test.Files(t, fsys, prefix) {
		name := path.Base(p)
		if strings.Contains(p, "/"+folder+"/") && !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".tmp") {
			out = append(out, p)
		}
	}
	return out
}

// stagingStore is an object store TestObjectStagingKillNineThenResume
// stages on: open starts it (or finds testenv's) and returns the store
// opened directly (to list and read what the run staged), the URL of its
// bucket or container ("s3a://bucket"), and the environment that points a
// rekey process at it the way its users point their tools. load says
// whether the mini cluster's region servers can read it, so the run ends
// with a real bulk load (S3 only: they have S3A, when state.json says so).
type stagingStore struct {
	name string
	load bool
	open func(t *testing.T) (fsys vfs.WriteFS, root string, env []string)
}

// stagingStores are S3 (testenv's versitygw), GCS (fake-gcs-server in
// this process: the rekey process reaches it through
// STORAGE_EMULATOR_HOST) and Azure (Azurite, through
// AZURE_STORAGE_CONNECTION_STRING).
var stagingStores = []stagingStore{
	{"S3", true, func(t *testing.T) (vfs.WriteFS, string, []string) {
		s3 := testenv.RequireS3(t)
		return s3test.Dial(t, s3), "s3a://" + s3.Bucket, []string{"HADOOP_CONF_DIR=" + s3.ConfDir, "AWS_EC2_METADATA_DISABLED=true"}
	}},
	{"GCS", false, func(t *testing.T) (vfs.WriteFS, string, []string) {
		g := s3test.StartGCS(t)
		return g.Dial(t), "gs://" + g.Bucket, []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(g.URL, "http://"), "HADOOP_CONF_DIR=" + t.TempDir()}
	}},
	{"Azure", false, func(t *testing.T) (vfs.WriteFS, string, []string) {
		az := s3test.StartAzurite(t)
		return az.Dial(t), strings.TrimSuffix(az.URL("/"), "/"), []string{"AZURE_STORAGE_CONNECTION_STRING=" + az.ConnectionString(), "HADOOP_CONF_DIR=" + t.TempDir()}
	}},
}

// TestObjectStagingKillNineThenResume stages a run's HFiles on each object
// store (S3, GCS, Azure; one seeded table and snapshot for all three): the
// run is killed with SIGKILL twice mid-spill and resumed with --resume
// each time, and the final resume finishes. On S3 it ends with a bulk load
// by the mini cluster's region servers (their S3A client reads the files;
// the root dir is on the cluster's HDFS, so each region server copies every
// file into it, and the run removes each region's staged files once it is
// marked loaded), and the target
// table, as HBase's client scans it, holds exactly the preset's rule
// applied to the seeded cells; on GCS and Azure (no client in the region
// servers) with --no-load, and there the staged HFiles, copied out of the
// store and read by HBase's own HFile reader (the oracle's dump-hfile),
// hold the same, each once. Every run says, before it stages anything, that the
// staging is not on the file system of the cluster's hbase.rootdir (named
// by the hbase-site.xml in HBASE_CONF_DIR) and the region servers will copy.
func TestObjectStagingKillNineThenResume(t *testing.T) {
	st := testenv.Require(t)
	bin := rekeyBinary(t)
	start := time.Now()
	src, dst := uniq(t, "objkill_src"), uniq(t, "objkill_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	// Ten source regions, so splits commit (and their runs stay in the
	// store) between the kills.
	var keys []string
	for s := 3; s <= 27; s += 3 {
		keys = append(keys, fmt.Sprintf("s%03d", s))
	}
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: p.families, SplitKeys: keys, Versions: 1}, bigWide(30, 800))
	want := expect(p, source)
	site := filepath.Join(t.TempDir(), "hbase-conf")
	os.MkdirAll(site, 0o755)
	if err := os.WriteFile(filepath.Join(site, "hbase-site.xml"), []byte("<configuration><property><name>hbase.rootdir</name><value>"+st.RootDir+"</value></property></configuration>"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d cells in %v", len(source), time.Since(start).Round(time.Millisecond))
	for _, s := range stagingStores {
		t.Run(s.name, func(t *testing.T) {
			start := time.Now()
			fsys, root, env := s.open(t)
			dir := t.TempDir() // the job file, and beside it the checkpoint: one per store
			jobPath := writeJobFile(t, st, snap, dst, dir)
			load := s.load && st.S3AClient
			if s.load && !load {
				t.Logf("no bulk load: the region servers have no S3A client (HBase %s: testenv/pom.xml gives one to the default version only)", st.HBaseVersion)
			}
			stageKillResume(t, bin, jobPath, fsys, root, append(append(os.Environ(), "HBASE_CONF_DIR="+site), env...), want, load, dst)
			t.Logf("%s: %v", s.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// stageKillResume runs jobPath with its staging under a fresh prefix of
// fsys (at root), kills it twice mid-spill, resumes it to the end (with a
// bulk load into table when load, else --no-load), and checks the staged
// HFiles with HBase's reader against want, and when loaded the table.
func stageKillResume(t *testing.T, bin, jobPath string, fsys vfs.WriteFS, root string, env []string, want []cell.Cell, load bool, table string) {
	t.Helper()
	prefix := s3test.Prefix(t, fsys, "staging")
	staging := root + prefix
	// A budget far below the cells, so the splits spill runs into the
	// store: splits that fit in memory are kept there until Finish. The
	// runs go to the store, not beside the local checkpoint, with
	// --spill-dir staging: what a job in phases does, and what this test
	// is for.
	args := []string{"run", jobPath, "--sink", "hfiles", "--staging", staging, "--resume", "--force-takeover", "--workers", "2", "--progress", "none", "--memory", "1MiB", "--spill-dir", "staging"}
	if !load {
		args = append(args, "--no-load")
	}
	const warning = "the region servers will copy every staged HFile at load time"
	for k, d := range []time.Duration{3 * time.Second, 2500 * time.Millisecond} {
		cmd := exec.Command(bin, append(args, "--max-cells-per-sec", "4000")...)
		cmd.Env = env
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The kill comes d after the run has warned, and so has started
		// its work: on a loaded machine its start (the cluster, the
		// manifest) alone can take longer than d.
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(stderr.String(), warning) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(d)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		t.Logf("kill %d after %v: exit %d", k, d, exitCode(err))
		if exitCode(err) >= 0 {
			t.Fatalf("run %d ended before the kill (exit %d): nothing was tested; stderr %s", k, exitCode(err), stderr.String())
		}
		if k == 0 {
			t.Logf("stderr: %s", stderr.String())
		}
		if !strings.Contains(stderr.String(), warning) {
			t.Errorf("run %d said nothing of the staging's file system; stderr %s", k, stderr.String())
		}
	}
	if n := len(filesUnder(t, fsys, prefix, "hfiles")); n != 0 {
		t.Fatalf("%d HFiles were staged before the last kill: the kills came after the spill", n)
	}
	if len(filesUnder(t, fsys, prefix, "runs")) == 0 {
		t.Fatal("no spilled run in the store after the kills: they came before the spill")
	}
	cmd := exec.Command(bin, append(args, "--json")...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("final resume: exit %d: %s", exitCode(err), stderr.String())
	}
	var sum struct {
		Finished bool  `json:"finished"`
		Written  int64 `json:"cells_written"`
	}
	json.Unmarshal(out, &sum)
	if !sum.Finished {
		t.Fatalf("final resume did not finish: %s", out)
	}
	if load {
		// The warning comes before the sink says anything of what it
		// merged or loaded.
		log := stderr.String()
		w, h := strings.Index(log, warning), strings.Index(log, "hfiles:")
		if w < 0 || h < 0 || h < w {
			t.Errorf("the final resume should warn (at %d) before the sink reports (at %d); stderr %s", w, h, log)
		}
		if !strings.Contains(log, "hfiles: loaded region") {
			t.Errorf("the final resume loaded no region; stderr %s", log)
		}
		sameCells(t, "target table loaded by the region servers from HFiles staged on "+staging, dumpTable(t, table, false), want)
	}

	files := filesUnder(t, fsys, prefix, "hfiles")
	if load {
		// A load from another file system copies the files; each region's
		// are removed once its Loaded mark is saved, so that a resumed
		// load cannot load them again.
		if len(files) != 0 {
			t.Errorf("%d staged HFiles left under %s after the load (first %s)", len(files), staging, files[0])
		}
		return
	}
	if len(files) == 0 {
		t.Fatalf("no staged HFiles under %s", staging)
	}
	local := t.TempDir()
	var dumps [][]string
	for i, f := range files {
		b, err := vfs.ReadFile(fsys, f)
		if err != nil {
			t.Fatal(err)
		}
		lp := filepath.Join(local, strings.ReplaceAll(strings.TrimPrefix(f, prefix+"/"), "/", "_")+"-"+string(rune('a'+i%26)))
		if err := os.WriteFile(lp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		dumps = append(dumps, []string{"dump-hfile", lp})
	}
	var got []cell.Cell
	for _, d := range testenv.OracleDumps(t, dumps) {
		cells, err := testenv.ParseDump(d)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, cells...)
	}
	testenv.SortCells(got)
	sameCells(t, "staged HFiles on "+staging+" after kills and resume, read by HBase", got, want)
}

// lockedBuffer is a bytes.Buffer a child's output goes into while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
