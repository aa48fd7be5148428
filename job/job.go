// Package job reads rekey job files: YAML that names the source snapshot,
// the target table, the old and new key layouts, the entity fields, the
// family mapping and what to do with keys that do not parse.
//
// Validation reports every problem at once, each with the file, line,
// column and option it concerns and what was expected; unknown options are
// errors, because a misspelt option silently ignored would re-key a table the
// wrong way.
//
//	source:
//	  root: ../testdata/snapshots/demo_events   # relative to this file, or hdfs://nn:8020/hbase
//	  name: events_snap
//	target:
//	  table: events_by_day
//	source_layout:
//	  row:       [{field: user, type: string}]
//	  qualifier: [{field: ts, type: int, width: 8}]
//	target_layout:
//	  row:
//	    - {field: user, type: fixed, width: 6}
//	    - {field: day, type: time_bucket, of: ts, unit: day}
//	  qualifier:
//	    - {type: offset, of: ts, bucket: day}
//	entity: [user]
//	families: {e: e}
//	bad_keys: {action: reject, file: rejects.tsv}
//
// The sections other packages own (source.scan, sink, run, verify) are kept
// as raw YAML nodes for them to decode.
package job

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rekeyhq/rekey/transform"
)

// Action is what a job does with a cell whose key does not fit the layout.
type Action uint8

// Actions for keys that do not parse.
const (
	// Fail stops the job: the default, so that no cell is left behind
	// unless the job file says so.
	Fail Action = iota
	// Reject writes the cell to the reject file (if one is named), counts
	// it and goes on; the run then ends with status 1.
	Reject
)

// String returns the name used in job files.
func (a Action) String() string {
	if a == Reject {
		return "reject"
	}
	return "fail"
}

// Job is a loaded and validated job file.
type Job struct {
	// Path is the file the job came from.
	Path   string
	Source Source
	Target Target
	// Spec is the re-key spec as written; Program is its compiled form.
	Spec    transform.Spec
	Program *transform.Program
	BadKeys BadKeys
	// Sink and Run are the sink: and run: sections (zero when absent).
	Sink Sink
	Run  Run
	// Verify is the verify: section, decoded and validated (zero when
	// absent).
	Verify Verify
	// Security is the security: section (zero when absent).
	Security Security
}

// Security is how to log in to Kerberos when HDFS or HBase requires it:
// a keytab and the principal whose key it holds, and the krb5.conf to use.
// Without a keytab the login uses the ticket cache (KRB5CCNAME). The
// command line's --keytab, --principal and --krb5-conf take precedence.
type Security struct {
	// Keytab is the keytab file (resolved like Source.Root).
	Keytab string
	// Principal is name@REALM; required with Keytab.
	Principal string
	// Krb5Conf is the krb5.conf file (resolved like Source.Root); empty
	// means KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Conf string
}

// Errorf returns an *Error about node n of this job file (field is the
// option's dotted path), for packages that decode the raw sections.
func (j *Job) Errorf(n *yaml.Node, field, format string, args ...any) *Error {
	return &Error{File: j.Path, Problems: []Problem{{Line: n.Line, Col: n.Column, Field: field, Msg: fmt.Sprintf(format, args...)}}}
}

// Source names the snapshot to read.
type Source struct {
	// Root is the HBase root directory holding the snapshot: a local path
	// (made absolute, relative paths taken from the job file's directory) or
	// an hdfs:// URL.
	Root string
	// Name is the snapshot name.
	Name string
	// Scan is the scan: section (versions, time range, raw mode).
	Scan Scan
}

// Target names the table to write.
type Target struct {
	Table string
	// ZKQuorum and ZNodeParent reach the target cluster; empty = from
	// $HBASE_CONF_DIR/hbase-site.xml, as HBase's own tools do.
	ZKQuorum, ZNodeParent string
	// Create says whether and how to create a missing target.
	Create Create
	// Timeout bounds one operation on the target cluster with all its
	// retries (hbase.Config.OperationTimeout; 0: the client's default,
	// 2 minutes). The bigtable sink bounds each MutateRows batch with it,
	// retries included.
	Timeout time.Duration
	// Bigtable is target.bigtable: the table is a Cloud Bigtable table
	// in this instance, written by the bigtable sink (nil: an HBase
	// table).
	Bigtable *Bigtable
}

// BadKeys says what to do with keys that do not parse.
type BadKeys struct {
	Action Action
	// File receives rejected cells (resolved like Source.Root); empty means
	// rejects are only counted.
	File string
}

// Problem is one validation error.
type Problem struct {
	Line, Col int
	Field     string
	Msg       string
}

// Error is every problem found in one job file.
type Error struct {
	File     string
	Problems []Problem
}

// Error lists the problems as "file:line:col: field: message", one per line.
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, p.Line, p.Col)
		if p.Field != "" {
			b.WriteString(p.Field + ": ")
		}
		b.WriteString(p.Msg)
	}
	return b.String()
}

// Load reads and validates a job file.
func Load(path string) (*Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	return Parse(path, data)
}

// Parse validates a job file's content; path names it in errors and anchors
// relative paths.
func Parse(path string, data []byte) (*Job, error) {
	d := &decoder{file: path}
	j := &Job{Path: path}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, &Error{File: path, Problems: []Problem{yamlProblem(err)}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &Error{File: path, Problems: []Problem{{Line: 1, Col: 1, Msg: "empty job file (expected a mapping with source, target, source_layout, target_layout, entity)"}}}
	}
	// A job file is one document: a second one would be ignored, and with
	// it whatever its author meant to change.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}
		return nil, &Error{File: path, Problems: []Problem{{Line: line, Col: 1, Msg: "a second YAML document (after ---): a job file holds one"}}}
	} else if err != io.EOF {
		return nil, &Error{File: path, Problems: []Problem{yamlProblem(err)}}
	}
	if p := unknownTags(&doc); len(p) > 0 {
		return nil, &Error{File: path, Problems: p}
	}
	top := doc.Content[0]
	have := 0 // of source_layout, target_layout and entity
	d.mapping(top, "", map[string]func(*yaml.Node, string){
		"source": func(n *yaml.Node, p string) {
			d.mapping(n, p, map[string]func(*yaml.Node, string){
				"root": func(n *yaml.Node, p string) {
					j.Source.Root = d.nonEmpty(n, p, "the HBase root directory: a path or hdfs://namenode:8020/hbase")
				},
				"name": func(n *yaml.Node, p string) { j.Source.Name = d.nonEmpty(n, p, "the snapshot name") },
				"scan": func(n *yaml.Node, p string) { d.scan(n, p, &j.Source.Scan) },
			}, "root", "name")
		},
		"target": func(n *yaml.Node, p string) {
			d.mapping(n, p, map[string]func(*yaml.Node, string){
				"table": func(n *yaml.Node, p string) {
					j.Target.Table = d.str(n, p)
					if j.Target.Table != "" && !tableName.MatchString(j.Target.Table) {
						d.errorf(n, p, "%q is not a table name (expected [namespace:]name of letters, digits, _ . -)", j.Target.Table)
					}
				},
				"zookeeper":    func(n *yaml.Node, p string) { j.Target.ZKQuorum = d.nonEmpty(n, p, "host:port[,host:port...]") },
				"timeout":      func(n *yaml.Node, p string) { j.Target.Timeout = d.duration(n, p) },
				"znode_parent": func(n *yaml.Node, p string) { j.Target.ZNodeParent = d.nonEmpty(n, p, "a znode path such as /hbase") },
				"create":       func(n *yaml.Node, p string) { d.create(n, p, &j.Target.Create) },
				"bigtable":     func(n *yaml.Node, p string) { j.Target.Bigtable = d.bigtable(n, p) },
			}, "table")
		},
		"source_layout": func(n *yaml.Node, p string) { j.Spec.Source = d.layout(n, p); have++ },
		"target_layout": func(n *yaml.Node, p string) { j.Spec.Target = d.layout(n, p); have++ },
		"entity": func(n *yaml.Node, p string) {
			have++
			j.Spec.Entity = d.strList(n, p)
			j.Spec.EntityPos = pos(n)
		},
		"families": func(n *yaml.Node, p string) {
			j.Spec.FamiliesAt = pos(n)
			if n.Kind != yaml.MappingNode {
				d.errorf(n, p, "expected a mapping of old family to new family, e.g. {e: d}")
				return
			}
			j.Spec.Families = map[string]string{}
			j.Spec.FamilyPos = map[string]transform.Pos{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				old, nw := d.str(k, p), d.str(v, p+"."+k.Value)
				if _, dup := j.Spec.Families[old]; dup {
					d.errorf(k, p+"."+old, "family %q is mapped twice", old)
				}
				j.Spec.Families[old] = nw
				j.Spec.FamilyPos[old] = pos(k)
			}
		},
		"bad_keys": func(n *yaml.Node, p string) {
			d.mapping(n, p, map[string]func(*yaml.Node, string){
				"action": func(n *yaml.Node, p string) {
					switch s := d.str(n, p); s {
					case "reject":
						j.BadKeys.Action = Reject
					case "fail":
						j.BadKeys.Action = Fail
					default:
						d.errorf(n, p, "action %q is not allowed (expected reject or fail)", s)
					}
				},
				"file": func(n *yaml.Node, p string) { j.BadKeys.File = d.str(n, p) },
			})
		},
		"sink":   func(n *yaml.Node, p string) { d.sink(n, p, &j.Sink) },
		"run":    func(n *yaml.Node, p string) { d.run(n, p, &j.Run) },
		"verify": func(n *yaml.Node, p string) { d.decodeVerify(n, p, &j.Verify) },
		"security": func(n *yaml.Node, p string) {
			d.mapping(n, p, map[string]func(*yaml.Node, string){
				"keytab":    func(n *yaml.Node, p string) { j.Security.Keytab = d.nonEmpty(n, p, "a keytab file") },
				"principal": func(n *yaml.Node, p string) { j.Security.Principal = d.nonEmpty(n, p, "name@REALM") },
				"krb5_conf": func(n *yaml.Node, p string) { j.Security.Krb5Conf = d.nonEmpty(n, p, "a krb5.conf file") },
			})
			if j.Security.Keytab != "" && j.Security.Principal == "" {
				d.errorf(n, p, "keytab needs principal: the principal whose key it holds, name@REALM")
			}
		},
	}, "source", "target", "source_layout", "target_layout", "entity")
	d.checkBigtable(j)

	// Compile even when the file's shape is wrong, so all mistakes show at
	// once; drop compile errors that only echo a shape error (the same
	// option, or another option of a component that had one).
	shape := d.problems
	if have < 3 {
		// Without the layouts and the entity there is nothing to compile;
		// its errors would only restate the missing sections, at no line.
		sortProblems(d.problems)
		return nil, &Error{File: path, Problems: d.problems}
	}
	prog, err := transform.Compile(j.Spec)
	var se transform.SpecErrors
	switch {
	case errors.As(err, &se):
		for _, e := range se {
			if !echoes(shape, e.Field) {
				d.problems = append(d.problems, Problem{Line: e.Pos.Line, Col: e.Pos.Col, Field: e.Field, Msg: e.Msg})
			}
		}
	case err != nil:
		d.problems = append(d.problems, Problem{Line: 1, Col: 1, Msg: err.Error()})
	}
	j.Program = prog
	if len(d.problems) > 0 {
		sortProblems(d.problems)
		return nil, &Error{File: path, Problems: d.problems}
	}
	dir := filepath.Dir(path)
	j.Source.Root = resolve(dir, j.Source.Root)
	if j.BadKeys.File != "" {
		j.BadKeys.File = resolve(dir, j.BadKeys.File)
	}
	if j.Run.Checkpoint != "" {
		j.Run.Checkpoint = resolve(dir, j.Run.Checkpoint)
	}
	if j.Sink.Staging != "" {
		j.Sink.Staging = resolve(dir, j.Sink.Staging)
	}
	if j.Sink.SpillDir != "" && j.Sink.SpillDir != SpillStaging {
		j.Sink.SpillDir = resolve(dir, j.Sink.SpillDir)
	}
	if bt := j.Target.Bigtable; bt != nil && bt.CredentialsFile != "" {
		bt.CredentialsFile = resolve(dir, bt.CredentialsFile)
	}
	for _, f := range []*string{&j.Security.Keytab, &j.Security.Krb5Conf} {
		if *f != "" {
			*f = resolve(dir, *f)
		}
	}
	return j, nil
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(a, b int) bool {
		pa, pb := ps[a], ps[b]
		return pa.Line < pb.Line || pa.Line == pb.Line && pa.Col < pb.Col
	})
}

// unknownTags refuses YAML tags other than the standard scalar and
// collection ones: a custom tag (!env, !include) would be read as plain
// text, which is not what its author meant.
func unknownTags(n *yaml.Node) []Problem {
	var out []Problem
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Tag {
		case "", "!!str", "!!int", "!!bool", "!!null", "!!float", "!!map", "!!seq":
		default:
			if n.Kind != yaml.DocumentNode && n.Kind != yaml.AliasNode {
				out = append(out, Problem{Line: n.Line, Col: n.Column, Msg: fmt.Sprintf("YAML tag %s is not supported in job files (write the value plainly)", n.Tag)})
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

// echoes reports whether a compile error about field repeats a shape
// problem.
func echoes(shape []Problem, field string) bool {
	for _, p := range shape {
		if p.Field == field {
			return true
		}
		if i := strings.LastIndexByte(p.Field, '.'); i > 0 && strings.HasSuffix(p.Field[:i], "]") && strings.HasPrefix(field, p.Field[:i+1]) {
			return true
		}
	}
	return false
}

var tableName = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.-]*:)?[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// resolve makes a local path absolute against dir; URLs pass unchanged.
func resolve(dir, p string) string {
	if p == "" || strings.Contains(p, "://") || filepath.IsAbs(p) {
		return p
	}
	abs, err := filepath.Abs(filepath.Join(dir, p))
	if err != nil {
		return filepath.Join(dir, p)
	}
	return abs
}

func yamlProblem(err error) Problem {
	// yaml.v3 reports "yaml: line N: message".
	msg := err.Error()
	line := 1
	if m := regexp.MustCompile(`line (\d+):\s*(.*)`).FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	return Problem{Line: line, Col: 1, Msg: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

func pos(n *yaml.Node) transform.Pos { return transform.Pos{Line: n.Line, Col: n.Column} }

// decoder walks yaml nodes and collects problems.
type decoder struct {
	file     string
	problems []Problem
	// keys and values are the nodes of every option decoded, by dotted
	// path, for the checks that relate one section to another.
	keys, values map[string]*yaml.Node
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	d.problems = append(d.problems, Problem{Line: n.Line, Col: n.Column, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping decodes a mapping whose keys must all be in fields; required keys
// that are missing are reported at the mapping.
func (d *decoder) mapping(n *yaml.Node, path string, fields map[string]func(*yaml.Node, string), required ...string) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping (key: value lines), got %s", kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		fn, ok := fields[k.Value]
		switch {
		case !ok:
			d.errorf(k, p, "unknown option %q (expected one of: %s)", k.Value, strings.Join(keys(fields), ", "))
		case seen[k.Value]:
			d.errorf(k, p, "option %q is given twice", k.Value)
		default:
			seen[k.Value] = true
			if d.keys == nil {
				d.keys, d.values = map[string]*yaml.Node{}, map[string]*yaml.Node{}
			}
			d.keys[p], d.values[p] = k, deref(v)
			fn(deref(v), p)
		}
	}
	for _, r := range required {
		if !seen[r] {
			d.errorf(n, join(path, r), "missing required option %q", r)
		}
	}
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func keys(m map[string]func(*yaml.Node, string)) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

func (d *decoder) str(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.errorf(n, path, "expected a string, got %s", kindName(n))
		return ""
	}
	return n.Value
}

// nonEmpty reads a string that must not be empty; what says what belongs
// there.
func (d *decoder) nonEmpty(n *yaml.Node, path, what string) string {
	v := d.str(n, path)
	if v == "" && n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		d.errorf(n, path, "empty (expected %s)", what)
	}
	return v
}

func (d *decoder) integer(n *yaml.Node, path string) int64 {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected an integer, got %s", kindName(n))
		return 0
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil {
		d.errorf(n, path, "expected an integer, got %q", n.Value)
	}
	return v
}

func (d *decoder) boolean(n *yaml.Node, path string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		d.errorf(n, path, "expected true or false, got %s", kindName(n))
	}
	return b
}

// strList accepts a list of strings or a single string.
func (d *decoder) strList(n *yaml.Node, path string) []string {
	if n.Kind == yaml.ScalarNode {
		return []string{d.str(n, path)}
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list of field names, got %s", kindName(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, e := range n.Content {
		out = append(out, d.str(deref(e), fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

// byteOpt reads a one-byte option: a one-character string, an integer 0-255
// or hex text such as 0x7c.
func (d *decoder) byteOpt(n *yaml.Node, path string) byte {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected one byte, got %s", kindName(n))
		return 0
	}
	if n.Tag == "!!int" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil || v < 0 || v > 255 {
			d.errorf(n, path, "expected a byte value 0 to 255, got %s", n.Value)
		}
		return byte(v)
	}
	switch {
	case len(n.Value) == 1:
		return n.Value[0]
	case len(n.Value) == 4 && (strings.HasPrefix(n.Value, "0x") || strings.HasPrefix(n.Value, "0X")):
		if b, err := hex.DecodeString(n.Value[2:]); err == nil {
			return b[0]
		}
	}
	d.errorf(n, path, "expected one byte (a single character such as \"|\", a number, or hex such as 0x00), got %q", n.Value)
	return 0
}

func (d *decoder) layout(n *yaml.Node, path string) transform.LayoutSpec {
	var l transform.LayoutSpec
	d.mapping(n, path, map[string]func(*yaml.Node, string){
		"row": func(n *yaml.Node, p string) {
			l.Row = d.components(n, p)
			l.RowPos = pos(n)
		},
		"qualifier": func(n *yaml.Node, p string) {
			l.Qualifier = d.components(n, p)
			l.QualPos = pos(n)
			if l.Qualifier == nil {
				l.Qualifier = []transform.ComponentSpec{}
			}
		},
	}, "row")
	return l
}

func (d *decoder) components(n *yaml.Node, path string) []transform.ComponentSpec {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list of components, got %s", kindName(n))
		return nil
	}
	out := make([]transform.ComponentSpec, 0, len(n.Content))
	for i, e := range n.Content {
		out = append(out, d.component(deref(e), fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

func (d *decoder) component(n *yaml.Node, path string) transform.ComponentSpec {
	c := transform.ComponentSpec{Pos: pos(n), FieldPos: map[string]transform.Pos{}}
	at := func(name string, fn func(*yaml.Node, string)) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) {
			c.FieldPos[name] = pos(n)
			fn(n, p)
		}
	}
	d.mapping(n, path, map[string]func(*yaml.Node, string){
		"type":  at("type", func(n *yaml.Node, p string) { c.Type = d.str(n, p) }),
		"field": at("field", func(n *yaml.Node, p string) { c.Field = d.str(n, p) }),
		"width": at("width", func(n *yaml.Node, p string) { c.Width = d.smallInt(n, p, "width") }),
		"pad":   at("pad", func(n *yaml.Node, p string) { c.Pad = d.byteOpt(n, p) }),
		"sep": at("sep", func(n *yaml.Node, p string) {
			c.Sep = d.byteOpt(n, p)
			c.HasSep = true
		}),
		"escape": at("escape", func(n *yaml.Node, p string) { c.Escape = d.boolean(n, p) }),
		"bytes":  at("bytes", func(n *yaml.Node, p string) { c.Bytes = []byte(d.str(n, p)) }),
		"hex": at("hex", func(n *yaml.Node, p string) {
			b, err := hex.DecodeString(d.str(n, p))
			if err != nil {
				d.errorf(n, p, "expected hex digits such as 00ff, got %q", n.Value)
			}
			c.Bytes = b
		}),
		"of":      at("of", func(n *yaml.Node, p string) { c.Of = d.strList(n, p) }),
		"buckets": at("buckets", func(n *yaml.Node, p string) { c.Buckets = d.smallInt(n, p, "buckets") }),
		"unit":    at("unit", func(n *yaml.Node, p string) { c.Unit = d.str(n, p) }),
		"seconds": at("seconds", func(n *yaml.Node, p string) { c.Seconds = d.integer(n, p) }),
		"format":  at("format", func(n *yaml.Node, p string) { c.Format = d.str(n, p) }),
		"bucket":  at("bucket", func(n *yaml.Node, p string) { c.Bucket = d.str(n, p) }),
	}, "type")
	if _, ok := c.FieldPos["bytes"]; ok {
		if _, ok := c.FieldPos["hex"]; ok {
			d.errorf(n, path, "give a literal as bytes or as hex, not both")
		}
	}
	return c
}

// smallInt reads an integer option that must fit an int32; a larger one
// is reported with the value as written (not a clamped or wrapped one).
func (d *decoder) smallInt(n *yaml.Node, path, what string) int {
	before := len(d.problems)
	v := d.integer(n, path)
	if len(d.problems) > before {
		return 0
	}
	if v > math.MaxInt32 || v < math.MinInt32 {
		d.errorf(n, path, "%s %s is out of range", what, n.Value)
		return 0
	}
	return int(v)
}
