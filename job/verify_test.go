package job

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/transform"
)

func TestParseVerify(t *testing.T) {
	src := good + `verify:
  heaviest: 50
  sample: 2000
  seed: 7
  entities: ["user=u00001", "user=u00002"]
  find_worst: true
  against: {snapshot: {root: snaps2, name: new_snap}}
  target_ttl: {d: 30d, e: 90m}
  retries: 2
  backoff: 250ms
  workers: 8
`
	j, err := Parse("/jobs/a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	v := j.Verify
	if v.Heaviest != 50 || v.Sample != 2000 || v.Seed != 7 || !v.FindWorst || v.All || v.Retries == nil || *v.Retries != 2 || v.Backoff != 250*time.Millisecond || v.Workers != 8 {
		t.Errorf("verify = %+v", v)
	}
	if strings.Join(v.Entities, ";") != "user=u00001;user=u00002" || len(v.EntityPos) != 2 || v.EntityPos[1] != (transform.Pos{Line: 23, Col: 29}) {
		t.Errorf("entities %q at %v", v.Entities, v.EntityPos)
	}
	if j2, err := Parse("/jobs/b.yaml", []byte(good+"verify: {against: {staging: stage}}\n")); err != nil || j2.Verify.Against.Staging != "/jobs/stage" {
		t.Errorf("staging: %v", err)
	}
	if v.Against.Root != "/jobs/snaps2" || v.Against.Name != "new_snap" || v.Against.Table != "" {
		t.Errorf("against = %+v", v.Against)
	}
	if v.TargetTTL["d"] != 30*24*time.Hour || v.TargetTTL["e"] != 90*time.Minute {
		t.Errorf("target_ttl = %v", v.TargetTTL)
	}
}

func TestParseVerifyErrors(t *testing.T) {
	for _, tc := range []struct{ name, section, want string }{
		{"unknown key", "verify: {heavyest: 5}", `a.yaml:19:10: verify.heavyest: unknown option "heavyest" (expected one of: against, all, backoff,`},
		{"negative", "verify: {sample: -1}", `a.yaml:19:18: verify.sample: -1 is out of range`},
		{"bad duration", "verify: {backoff: soon}", `a.yaml:19:19: verify.backoff: "soon" is not a duration`},
		{"bad ttl", "verify: {target_ttl: {d: -3d}}", `a.yaml:19:26: verify.target_ttl.d: "-3d" is not a duration`},
		{"both sides", "verify: {against: {table: t, snapshot: {root: r, name: n}}}", `verify.against: give one of table, snapshot and staging`},
		{"table and staging", "verify: {against: {table: t, staging: s}}", `verify.against: give one of table, snapshot and staging`},
		{"snapshot without name", "verify: {against: {snapshot: {root: r}}}", `verify.against.snapshot.name: missing required option "name"`},
		{"unknown against", "verify: {against: {tabel: t}}", `verify.against.tabel: unknown option "tabel"`},
		{"bad bool", "verify: {all: maybe}", `verify.all: expected true or false`},
		{"unknown method", "verify: {method: sideways}", `a.yaml:19:18: verify.method: method "sideways" is not one of inverse, forward, both`},
		{"not a mapping", "verify: 5", `verify: expected a mapping`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("a.yaml", []byte(good+tc.section+"\n"))
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("Parse = %v, want *job.Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n%s\ndoes not contain\n%s", err, tc.want)
			}
		})
	}
}

// Every shipped job can be verified: its new layout gives each entity one
// key range (read by range), and its old layout too, except the re-key
// preset's, whose old row starts with the time (that side is read whole).
func TestConfigsEntityRanges(t *testing.T) {
	files, err := filepath.Glob("../configs/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("configs: %v %v", files, err)
	}
	for _, f := range files {
		j, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, name := range j.Program.Entity() {
			parts = append(parts, name+"=42")
		}
		key, err := j.Program.ParseEntity(strings.Join(parts, ","))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := j.Program.TargetRange(key); err != nil {
			t.Errorf("%s: new side: %v", f, err)
		}
		_, err = j.Program.SourceRange(key)
		if filepath.Base(f) == "rekey.yaml" {
			if !errors.Is(err, transform.ErrNoEntityRange) {
				t.Errorf("%s: old side: %v, want ErrNoEntityRange", f, err)
			}
		} else if err != nil {
			t.Errorf("%s: old side: %v", f, err)
		}
	}
}
