package job

import (
	"strings"
	"testing"
	"time"
)

const sectionsBase = `
source:
  root: snaps
  name: s1
  scan: {versions: 3, from: 1700000000000, to: "2026-11-30T00:00:00Z", raw: true, families: [e], ttl_at: snapshot}
target:
  table: t2
  zookeeper: zk1:2181
  create: {regions: 8, split_keys: ["0x0a", m], families: {d: {compression: ZSTD}}}
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
  row: [{field: user, type: string, sep: "|"}, {field: day, type: time_bucket, of: ts, unit: day}]
  qualifier: [{type: offset, of: ts, bucket: day}]
entity: [user]
families: {e: d}
sink: {type: hfiles, staging: stage, load: false}
run: {workers: 3, split_bytes: 64MiB, memory: 1GiB, max_cells_per_sec: 5000, max_read_mb_per_sec: 2.5, max_calls_per_server: 1, heavy_hitters: 10, sample_entities: 50, control_addr: "127.0.0.1:0", metrics_addr: ":9090", checkpoint: ck/c.json}
`

func TestSectionsDecode(t *testing.T) {
	j, err := Parse("/jobs/daily.yaml", []byte(sectionsBase))
	if err != nil {
		t.Fatal(err)
	}
	s := j.Source.Scan
	if s.Versions != 3 || s.From != 1700000000000 || s.To != time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli() || !s.Raw || !s.TTLAtSnapshot || len(s.Families) != 1 {
		t.Errorf("scan = %+v", s)
	}
	c := j.Target.Create
	if !c.Enabled || c.Regions != 8 || len(c.SplitKeys) != 2 || c.SplitKeys[0][0] != 0x0a || string(c.SplitKeys[1]) != "m" || c.Families["d"]["COMPRESSION"] != "ZSTD" {
		t.Errorf("create = %+v", c)
	}
	if j.Target.ZKQuorum != "zk1:2181" {
		t.Errorf("zookeeper = %q", j.Target.ZKQuorum)
	}
	if j.Sink.Kind != SinkHFiles || j.Sink.Staging != "/jobs/stage" || !j.Sink.NoLoad {
		t.Errorf("sink = %+v", j.Sink)
	}
	r := j.Run
	if r.Workers != 3 || r.SplitBytes != 64<<20 || r.Memory != 1<<30 || r.MaxCellsPerSec != 5000 || r.MaxReadMBPerSec != 2.5 || r.MaxCallsPerServer != 1 || r.HeavyHitters != 10 || r.SampleEntities != 50 ||
		r.ControlAddr != "127.0.0.1:0" || r.MetricsAddr != ":9090" {
		t.Errorf("run = %+v", r)
	}
	if j.CheckpointPath() != "/jobs/ck/c.json" || j.StateDir() != "/jobs/ck" {
		t.Errorf("checkpoint %s, state dir %s", j.CheckpointPath(), j.StateDir())
	}
}

func TestStateDirDefault(t *testing.T) {
	j, err := Parse("/jobs/daily.yaml", []byte(strings.Replace(sectionsBase, " checkpoint: ck/c.json", " workers: 1", 1)))
	if err == nil {
		t.Fatalf("duplicate workers option accepted")
	}
	j, err = Parse("/jobs/daily.yaml", []byte(strings.Replace(sectionsBase, ", checkpoint: ck/c.json", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if j.StateDir() != "/jobs/daily.rekey" || j.CheckpointPath() != "/jobs/daily.rekey/checkpoint.json" {
		t.Errorf("state dir %s, checkpoint %s", j.StateDir(), j.CheckpointPath())
	}
}

func TestSectionsErrors(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"versions: 3,", "versions: -1,", "source.scan.versions: versions -1 is not allowed"},
		{"raw: true,", "raww: true,", `source.scan.raww: unknown option "raww"`},
		{`to: "2026-11-30T00:00:00Z"`, `to: 1600000000000`, "source.scan: empty time range"},
		{`to: "2026-11-30T00:00:00Z"`, `to: yesterday`, "source.scan.to: expected a time"},
		{`to: "2026-11-30T00:00:00Z"`, `to: 0`, "source.scan.to: an upper time bound of 0"},
		{`to: "2026-11-30T00:00:00Z"`, `to: "1970-01-01T00:00:00Z"`, "source.scan.to: an upper time bound of 0"},
		{"ttl_at: snapshot", "ttl_at: later", `source.scan.ttl_at: "later" is not allowed`},
		{"type: hfiles", "type: s3", `sink.type: sink "s3" is not allowed`},
		{"workers: 3", "workers: 0", "run.workers: 0 is not allowed (expected 1 to 4096)"},
		{"memory: 1GiB", "memory: lots", `run.memory: "lots" is not a size`},
		{"memory: 1GiB", "memory: 1KiB", "run.memory: a memory budget under 1048576 bytes"},
		{"max_cells_per_sec: 5000", "max_cells_per_sec: -5", "run.max_cells_per_sec: expected a rate"},
		{"regions: 8", "region: 8", `target.create.region: unknown option "region"`},
		{`"0x0a"`, `"0xzz"`, "target.create.split_keys[0]: split key"},
		{"zookeeper: zk1:2181", "zookeeper: \"\"", "target.zookeeper: empty"},
	} {
		src := strings.Replace(sectionsBase, tc.from, tc.to, 1)
		if src == sectionsBase {
			t.Fatalf("edit %q not found", tc.from)
		}
		_, err := Parse("/jobs/daily.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: got %v, want %q", tc.from, tc.to, err, tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "64MiB": 64 << 20, "1 GiB": 1 << 30, "2MB": 2e6, "0.5KiB": 512} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1PB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// TestSplitBytesOff checks run.split_bytes: off (one split per region) and
// that --split-bytes' parser reads the same word, sizes and 0.
func TestSplitBytesOff(t *testing.T) {
	j, err := Parse("/jobs/daily.yaml", []byte(strings.Replace(sectionsBase, "split_bytes: 64MiB", "split_bytes: off", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if j.Run.SplitBytes != SplitBytesOff {
		t.Errorf("split_bytes: off read as %d, want %d", j.Run.SplitBytes, SplitBytesOff)
	}
	for in, want := range map[string]int64{"off": SplitBytesOff, "0": 0, "32MiB": 32 << 20} {
		if got, err := ParseSplitBytes(in); err != nil || got != want {
			t.Errorf("ParseSplitBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseSplitBytes("of"); err == nil {
		t.Error(`ParseSplitBytes("of") gave no error`)
	}
}

// TestSpillDirFor: the runs of a one-process hfiles run go beside a local
// checkpoint when the staging folder is not local, to sink.spill_dir when
// it is set (relative to the job file), and stay in the staging folder
// with spill_dir: staging; a spill_dir that is not a local path is refused.
func TestSpillDirFor(t *testing.T) {
	parse := func(sinkLine string) (*Job, error) {
		return Parse("/jobs/daily.yaml", []byte(strings.Replace(sectionsBase, "sink: {type: hfiles, staging: stage, load: false}", sinkLine, 1)))
	}
	for _, tc := range []struct {
		sink, checkpoint, want string
	}{
		{"sink: {type: hfiles, staging: hdfs://nn/tmp/s}", "/state/ck.json", "/state/ck.spill"},
		{"sink: {type: hfiles, staging: hdfs://nn/tmp/s}", "file:///state/ck.json", "/state/ck.spill"},
		{"sink: {type: hfiles, staging: hdfs://nn/tmp/s}", "hdfs://nn/state/ck.json", ""},
		{"sink: {type: hfiles, staging: stage}", "/state/ck.json", ""},
		{"sink: {type: hfiles, staging: hdfs://nn/tmp/s, spill_dir: staging}", "/state/ck.json", ""},
		{"sink: {type: hfiles, staging: hdfs://nn/tmp/s, spill_dir: scratch}", "hdfs://nn/state/ck.json", "/jobs/scratch"},
		{"sink: {type: hfiles, staging: stage, spill_dir: /mnt/ssd}", "/state/ck.json", "/mnt/ssd"},
	} {
		j, err := parse(tc.sink)
		if err != nil {
			t.Fatalf("%s: %v", tc.sink, err)
		}
		if got := j.SpillDirFor(tc.checkpoint); got != tc.want {
			t.Errorf("%s, checkpoint %s: spill folder %q, want %q", tc.sink, tc.checkpoint, got, tc.want)
		}
	}
	_, err := parse("sink: {type: hfiles, spill_dir: hdfs://nn/tmp/runs}")
	if err == nil || !strings.Contains(err.Error(), "not a local folder") {
		t.Errorf("spill_dir on HDFS: %v, want it refused as not a local folder", err)
	}
}

// TestSinkDirect: sink.direct is on unless the job says false.
func TestSinkDirect(t *testing.T) {
	for _, tc := range []struct {
		line     string
		noDirect bool
	}{
		{"sink: {type: hfiles, staging: stage}", false},
		{"sink: {type: hfiles, staging: stage, direct: true}", false},
		{"sink: {type: hfiles, staging: stage, direct: false}", true},
	} {
		j, err := Parse("/jobs/daily.yaml", []byte(strings.Replace(sectionsBase, "sink: {type: hfiles, staging: stage, load: false}", tc.line, 1)))
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if j.Sink.NoDirect != tc.noDirect {
			t.Errorf("%s: NoDirect %v, want %v", tc.line, j.Sink.NoDirect, tc.noDirect)
		}
	}
	if _, err := Parse("/jobs/daily.yaml", []byte(strings.Replace(sectionsBase, "sink: {type: hfiles, staging: stage, load: false}", "sink: {type: hfiles, direct: maybe}", 1))); err == nil {
		t.Error("direct: maybe was accepted")
	}
}
