package job

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const good = `source:
  root: snaps
  name: s1
target:
  table: ns:new_t
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
  row:
    - {field: user, type: fixed, width: 6}
    - {field: day, type: time_bucket, of: ts, unit: day}
  qualifier:
    - {type: offset, of: ts, bucket: day}
entity: [user]
families: {e: d}
bad_keys: {action: fail, file: rej.tsv}
sink: {type: puts, batch_cells: 1000}
`

func TestParseGood(t *testing.T) {
	j, err := Parse("/jobs/a.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if j.Source.Root != "/jobs/snaps" || j.Source.Name != "s1" || j.Target.Table != "ns:new_t" {
		t.Errorf("source/target = %+v %+v", j.Source, j.Target)
	}
	if j.BadKeys.Action != Fail || j.BadKeys.File != "/jobs/rej.tsv" {
		t.Errorf("bad keys = %+v", j.BadKeys)
	}
	if j.Sink.Kind != SinkPuts || j.Sink.BatchCells != 1000 {
		t.Errorf("sink = %+v", j.Sink)
	}
	if j.Program == nil || strings.Join(j.Program.Entity(), ",") != "user" {
		t.Errorf("program not compiled")
	}
}

// TestParseErrors checks that each mistake is reported with its line,
// column and option, and says what was expected.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, edit, with string
		want             []string // each "line:col: text"
	}{
		{"unknown top option", "families: {e: d}", "famlies: {e: d}", []string{`a.yaml:16:1: famlies: unknown option "famlies" (expected one of: bad_keys, entity, families,`}},
		{"unknown component option", "{field: ts, type: int, width: 8}", "{field: ts, type: int, widht: 8}", []string{`a.yaml:8:38: source_layout.qualifier[0].widht: unknown option "widht"`}},
		{"bad width", "type: int, width: 8", "type: int, width: 3", []string{`a.yaml:8:45: source_layout.qualifier[0].width: width 3 is not allowed (expected 1, 2, 4 or 8)`}},
		{"unknown field", "{type: offset, of: ts, bucket: day}", "{type: offset, of: ts, bucket: dya}", []string{`a.yaml:14:38: target_layout.qualifier[0].bucket: no time_bucket with field "dya"`}},
		{"missing required", "entity: [user]\n", "", []string{`a.yaml:1:1: entity: missing required option "entity"`}},
		{"bad action", "action: fail", "action: drop", []string{`a.yaml:17:20: bad_keys.action: action "drop" is not allowed (expected reject or fail)`}},
		{"bad table", "table: ns:new_t", "table: new t", []string{`target.table: "new t" is not a table name`}},
		{"not a list", "row: [{field: user, type: string}]", "row: user", []string{`a.yaml:7:8: source_layout.row: expected a list of components, got "user"`}},
		{"bad yaml", "entity: [user]", "entity: [user", []string{`not valid YAML`}},
		{"bad sep", "{field: user, type: fixed, width: 6}", "{field: user, type: string, sep: ab}", []string{`target_layout.row[0].sep: expected one byte`}},
		{"option of other type", "{field: user, type: fixed, width: 6}", "{field: user, type: fixed, width: 6, sep: 0}", []string{`a.yaml:11:49: target_layout.row[0].sep: option "sep" does not apply to type fixed`}},
		{"empty root", "root: snaps", "root: \"\"", []string{`a.yaml:2:9: source.root: empty (expected the HBase root directory`}},
		{"null name", "name: s1", "name:", []string{`source.name: expected a string, got`}},
		{"entity unknown", "entity: [user]", "entity: [usr]", []string{`a.yaml:15:9: entity[0]: field "usr" is not read from the old key`}},
		{"width out of range", "{field: user, type: fixed, width: 6}", "{field: user, type: fixed, width: 99999999999}", []string{`a.yaml:11:41: target_layout.row[0].width: width 99999999999 is out of range`}},
		{"width over the row key limit", "{field: user, type: fixed, width: 6}", "{field: user, type: fixed, width: 65536}", []string{`target_layout.row[0].width: width 65536 is above HBase's row key limit of 32767 bytes`}},
		{"fixed widths add up over the limit", "{field: user, type: fixed, width: 6}", "{field: user, type: fixed, width: 32767}", []string{`target_layout.row: the fixed-width components add up to 32775 bytes, above HBase's row key limit of 32767 bytes`}},
		{"literal over the limit", "{field: user, type: fixed, width: 6}", "{field: user, type: fixed, width: 6}\n    - {type: literal, hex: \"" + strings.Repeat("ab", 32768) + "\"}", []string{`a 32768-byte literal is above HBase's row key limit`}},
		{"buckets out of range", "{field: user, type: fixed, width: 6}", "{type: salt, of: user, buckets: 99999999999}\n    - {field: user, type: fixed, width: 6}", []string{`buckets 99999999999 is out of range`}},
		{"second document", "sink: {type: puts, batch_cells: 1000}\n", "sink: {type: puts, batch_cells: 1000}\n---\nentity: [other]\n", []string{`a.yaml:20:1: a second YAML document (after ---): a job file holds one`}},
		{"custom tag", "name: s1", "name: !env SNAP", []string{`a.yaml:3:9: YAML tag !env is not supported`}},
		{"binary tag", "table: ns:new_t", "table: !!binary bnM6bmV3X3Q=", []string{`YAML tag !!binary is not supported`}},
		{"two errors at once", "  qualifier: [{field: ts, type: int, width: 8}]\n", "  qualifier: [{field: ts, type: int, width: 9}]\n  extra: 1\n", []string{"width 9 is not allowed", `unknown option "extra"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(good, tc.edit, tc.with, 1)
			if src == good {
				t.Fatalf("edit %q did not apply", tc.edit)
			}
			_, err := Parse("a.yaml", []byte(src))
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("Parse = %v, want *job.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%s\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

// TestWholeFileMistakes: files that are not a job at all are reported by
// what is wrong with them at their line, not by the layouts they lack.
func TestWholeFileMistakes(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"top-level list", "- source\n- target\n", "a.yaml:1:1: expected a mapping (key: value lines), got a list"},
		{"misspelled section", strings.Replace(good, "source:", "sourse:", 1), `a.yaml:1:1: sourse: unknown option "sourse"`},
		{"only unknown keys", "foo: 1\nbar: 2\n", `a.yaml:1:1: foo: unknown option "foo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("a.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), ":0:0:") || strings.Contains(err.Error(), "no components") {
				t.Fatalf("error %v reports the missing layouts instead of the mistake", err)
			}
		})
	}
}

// TestConfigs loads every job file shipped in configs/.
func TestConfigs(t *testing.T) {
	files, err := filepath.Glob("../configs/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("configs: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := Load(f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzParse: no job file, however malformed, panics the loader; a file that
// loads has a program.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	files, _ := filepath.Glob("../configs/*.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: &x [*x]"))
	f.Add([]byte("source_layout: {row: [{type: salt, of: [k, k], buckets: 99999999999}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Parse("f.yaml", data)
		if err == nil && j.Program == nil {
			t.Fatal("loaded without a program")
		}
	})
}

func TestBadKeysDefaultsToFail(t *testing.T) {
	src := strings.Replace(good, "bad_keys: {action: fail, file: rej.tsv}\n", "", 1)
	j, err := Parse("a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if j.BadKeys.Action != Fail || j.BadKeys.File != "" {
		t.Fatalf("bad keys default %+v, want fail", j.BadKeys)
	}
}
