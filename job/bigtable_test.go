package job

import (
	"errors"
	"strings"
	"testing"
)

const bigtableBase = `
source:
  root: snaps
  name: s1
target:
  table: t2
  create: true
  bigtable: {project: my-project, instance: my-instance, app_profile: batch, credentials_file: keys/sa.json, atomic_rows: true, allow_large_rows: true, tags: fail}
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
  row: [{field: user, type: string, sep: "|"}, {field: day, type: time_bucket, of: ts, unit: day}]
  qualifier: [{type: offset, of: ts, bucket: day}]
entity: [user]
families: {e: d}
sink: {type: bigtable}
`

// TestBigtableDecode reads every target.bigtable option.
func TestBigtableDecode(t *testing.T) {
	j, err := Parse("/jobs/daily.yaml", []byte(bigtableBase))
	if err != nil {
		t.Fatal(err)
	}
	b := j.Target.Bigtable
	if b == nil || b.Project != "my-project" || b.Instance != "my-instance" || b.AppProfile != "batch" || b.CredentialsFile != "/jobs/keys/sa.json" ||
		!b.AtomicRows || !b.AllowLargeRows || !b.FailOnTags || b.At.Line != 8 {
		t.Errorf("target.bigtable = %+v", b)
	}
	if j.Sink.Kind != SinkBigtable || j.CheckSinkTarget() != nil {
		t.Errorf("sink %q: %v", j.Sink.Kind, j.CheckSinkTarget())
	}
	// The defaults: tags written with a warning, rows not required atomic.
	j, err = Parse("/jobs/daily.yaml", []byte(strings.Replace(bigtableBase, ", app_profile: batch, credentials_file: keys/sa.json, atomic_rows: true, allow_large_rows: true, tags: fail", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if b := j.Target.Bigtable; b.AtomicRows || b.AllowLargeRows || b.FailOnTags || b.AppProfile != "" || b.CredentialsFile != "" || b.ApplyDeletes {
		t.Errorf("defaults: %+v", b)
	}
	// deletes: apply, the one way a raw read may write into Bigtable.
	j, err = Parse("/jobs/daily.yaml", []byte(strings.NewReplacer("tags: fail", "tags: fail, deletes: apply", "  name: s1\n", "  name: s1\n  scan: {raw: true}\n").Replace(bigtableBase)))
	if err != nil {
		t.Fatal(err)
	}
	if !j.Target.Bigtable.ApplyDeletes || !j.Source.Scan.Raw {
		t.Errorf("deletes: apply with raw: %+v, raw %v", j.Target.Bigtable, j.Source.Scan.Raw)
	}
}

// TestBigtableErrors: each mistake is named at its line and column, as
// every job file error is.
func TestBigtableErrors(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"sink without the target", "  bigtable: {project: my-project, instance: my-instance, app_profile: batch, credentials_file: keys/sa.json, atomic_rows: true, allow_large_rows: true, tags: fail}\n", "",
			"/jobs/daily.yaml:16:8: sink.type: sink bigtable needs target.bigtable: {project, instance}"},
		{"target without the sink", "sink: {type: bigtable}", "sink: {type: puts}",
			"/jobs/daily.yaml:8:3: target.bigtable: a Bigtable target needs sink.type: bigtable (the puts sink writes to HBase)"},
		{"target without a sink section", "sink: {type: bigtable}", "",
			"/jobs/daily.yaml:8:3: target.bigtable: a Bigtable target needs sink.type: bigtable (the puts sink writes to HBase)"},
		{"zookeeper", "  create: true\n", "  create: true\n  zookeeper: zk1:2181\n",
			"/jobs/daily.yaml:8:3: target.zookeeper: not allowed with target.bigtable"},
		{"znode_parent", "  create: true\n", "  create: true\n  znode_parent: /hbase\n",
			"/jobs/daily.yaml:8:3: target.znode_parent: not allowed with target.bigtable"},
		{"raw", "  name: s1\n", "  name: s1\n  scan: {raw: true}\n",
			"/jobs/daily.yaml:5:10: source.scan.raw: raw mode carries delete markers into the target, and Bigtable keeps no tombstones"},
		{"raw names the option", "  name: s1\n", "  name: s1\n  scan: {raw: true}\n",
			"or set target.bigtable.deletes: apply to apply the markers to the table after the run's puts"},
		{"deletes", "tags: fail", "tags: fail, deletes: carry",
			`target.bigtable.deletes: deletes "carry" is not allowed (expected refuse`},
		{"a family Bigtable refuses", "families: {e: d}", "families: {e: \"d:x\"}",
			`/jobs/daily.yaml:16:12: families.e: job: not a Bigtable family name: "d:x"`},
		{"a family starting with a dot", "families: {e: d}", "families: {e: .d}",
			`families.e: job: not a Bigtable family name: ".d"`},
		{"a created family Bigtable refuses", "  create: true\n", "  create: {families: {\"d x\": {VERSIONS: 3}}}\n",
			`target.create.families.d x: job: not a Bigtable family name: "d x"`},
		{"no instance", "instance: my-instance, ", "",
			`/jobs/daily.yaml:8:13: target.bigtable.instance: missing required option "instance"`},
		{"tags", "tags: fail", "tags: drop",
			`target.bigtable.tags: tags "drop" is not allowed`},
		{"unknown option", "tags: fail", "tag: fail",
			`target.bigtable.tag: unknown option "tag"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(bigtableBase, tc.from, tc.to, 1)
			if src == bigtableBase {
				t.Fatalf("edit %q not found", tc.from)
			}
			_, err := Parse("/jobs/daily.yaml", []byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestCheckSinkTarget: a --sink flag that changes the sink after the
// file was read is held to the target the same way.
func TestCheckSinkTarget(t *testing.T) {
	j, err := Parse("/jobs/daily.yaml", []byte(bigtableBase))
	if err != nil {
		t.Fatal(err)
	}
	j.Sink.Kind = SinkHFiles
	if err := j.CheckSinkTarget(); !errors.Is(err, ErrSinkTarget) || !strings.Contains(err.Error(), "not hfiles") {
		t.Errorf("hfiles into a Bigtable target: %v", err)
	}
	j.Sink.Kind, j.Target.Bigtable = SinkBigtable, nil
	if err := j.CheckSinkTarget(); !errors.Is(err, ErrSinkTarget) {
		t.Errorf("bigtable without a target: %v", err)
	}
	for _, ok := range []string{"d", "_d", "0", "a-b.c_d"} {
		if err := CheckBigtableFamily(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-d", ".d", "d:x", "é", "d x"} {
		if err := CheckBigtableFamily(bad); !errors.Is(err, ErrBigtableFamily) {
			t.Errorf("%q accepted", bad)
		}
	}
}
