package job

import (
	"errors"
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"

	"github.com/rekeyhq/rekey/transform"
)

// Bigtable is target.bigtable: the Cloud Bigtable instance the bigtable
// sink writes target.table into, and what it does with rows and cells
// Bigtable cannot hold as HBase does.
//
//	target:
//	  table: events_by_day
//	  bigtable: {project: my-project, instance: my-instance, app_profile: batch}
//	sink: {type: bigtable}
//
// BIGTABLE_EMULATOR_HOST, when set, sends every call to that emulator,
// as it does for Google's own clients.
type Bigtable struct {
	// Project and Instance name the instance.
	Project, Instance string
	// AppProfile routes the calls ("" = the instance's default profile).
	AppProfile string
	// CredentialsFile is a service account key file (resolved like
	// Source.Root); "" = application default credentials.
	CredentialsFile string
	// AtomicRows makes a row that needs more than one MutateRows entry
	// (over 100,000 cells, or too large for one request) a bad key
	// instead of writing it in pieces that Bigtable applies one by one.
	AtomicRows bool
	// AllowLargeRows writes rows over 256 MiB, which Bigtable cannot
	// return whole in one read, instead of failing the run.
	AllowLargeRows bool
	// FailOnTags fails the run at a cell with tags (per-cell TTL,
	// visibility labels), which Bigtable has no place for, instead of
	// writing the cell without them and counting it (tags: fail).
	FailOnTags bool
	// ApplyDeletes (deletes: apply) lets a raw run (source.scan.raw,
	// --raw) apply the snapshot's delete markers to the table, mapped to
	// Bigtable's range deletes where HBase's meaning maps exactly, after
	// every put of the run (docs/bigtable.md, Deletes). Without it a raw
	// run is refused: Bigtable keeps no tombstones to carry them as. A
	// catch-up (--since) needs none of it: its removed cells always map
	// exactly, and it always applies them.
	ApplyDeletes bool
	// At is where the section is written, for messages.
	At transform.Pos
}

// RawRefused says why a raw run into Bigtable is refused without
// target.bigtable.deletes: apply, and how to ask for it.
const RawRefused = "raw mode carries delete markers into the target, and Bigtable keeps no tombstones: a Bigtable delete removes what is there and does not mask a later write; leave raw out, so the read applies the snapshot's deletes, or set target.bigtable.deletes: apply to apply the markers to the table after the run's puts, where they map exactly (docs/bigtable.md)"

// bigtableFamily is what Bigtable takes as a column family id.
var bigtableFamily = regexp.MustCompile(`^[_a-zA-Z0-9][-_.a-zA-Z0-9]*$`)

// ErrBigtableFamily refuses a family name Bigtable would not create.
var ErrBigtableFamily = errors.New("job: not a Bigtable family name")

// CheckBigtableFamily refuses a family name Bigtable does not allow:
// it must match [_a-zA-Z0-9][-_.a-zA-Z0-9]*, where HBase takes any
// printable name (a family "d:x" or "é" is fine in HBase).
func CheckBigtableFamily(name string) error {
	if !bigtableFamily.MatchString(name) {
		return fmt.Errorf("%w: %q (Bigtable family names are letters, digits, _ . and -, not starting with . or -; rename it with families:)", ErrBigtableFamily, name)
	}
	return nil
}

// ErrSinkTarget refuses a sink that cannot write the job's target: the
// bigtable sink without target.bigtable, or another sink with it.
var ErrSinkTarget = errors.New("job: the sink does not match the target")

// CheckSinkTarget holds the sink (as the job or a --sink flag sets it)
// to the target: sink.type bigtable and target.bigtable each require the
// other. Parse checks the file the same way, with lines and columns.
func (j *Job) CheckSinkTarget() error {
	isBT := j.Sink.Kind == SinkBigtable
	switch {
	case isBT && j.Target.Bigtable == nil:
		return fmt.Errorf("%w: sink bigtable needs target.bigtable: {project, instance} in %s", ErrSinkTarget, j.Path)
	case !isBT && j.Target.Bigtable != nil:
		return fmt.Errorf("%w: %s has a Bigtable target (target.bigtable), which only sink bigtable writes, not %s", ErrSinkTarget, j.Path, j.Sink.kindName())
	}
	return nil
}

// kindName is the sink's kind as a message names it: puts when unset.
func (s Sink) kindName() string {
	if s.Kind == "" {
		return string(SinkPuts)
	}
	return string(s.Kind)
}

func (d *decoder) bigtable(n *yaml.Node, p string) *Bigtable {
	b := &Bigtable{At: pos(n)}
	d.mapping(n, p, map[string]func(*yaml.Node, string){
		"project":          func(n *yaml.Node, p string) { b.Project = d.nonEmpty(n, p, "a Google Cloud project id") },
		"instance":         func(n *yaml.Node, p string) { b.Instance = d.nonEmpty(n, p, "a Bigtable instance id") },
		"app_profile":      func(n *yaml.Node, p string) { b.AppProfile = d.nonEmpty(n, p, "an app profile id") },
		"credentials_file": func(n *yaml.Node, p string) { b.CredentialsFile = d.nonEmpty(n, p, "a service account key file") },
		"atomic_rows":      func(n *yaml.Node, p string) { b.AtomicRows = d.boolean(n, p) },
		"allow_large_rows": func(n *yaml.Node, p string) { b.AllowLargeRows = d.boolean(n, p) },
		"deletes": func(n *yaml.Node, p string) {
			b.ApplyDeletes = d.either(n, p, "deletes", "refuse", "apply", "refuse: a raw run is refused, or apply: a raw run applies the snapshot's delete markers to the table after its puts")
		},
		"tags": func(n *yaml.Node, p string) {
			b.FailOnTags = d.either(n, p, "tags", "warn", "fail", "warn: write the cell without its tags and count it, or fail")
		},
	}, "project", "instance")
	return b
}

// either reads a value that is one of two words: false for off, true for
// on; anything else is an error naming the option and what each word does
// (expected).
func (d *decoder) either(n *yaml.Node, p, name, off, on, expected string) bool {
	switch v := d.str(n, p); v {
	case off:
	case on:
		return true
	default:
		d.errorf(n, p, "%s %q is not allowed (expected %s)", name, v, expected)
	}
	return false
}

// checkBigtable relates a Bigtable target to the rest of the job: the
// sink that writes it, the options that only reach HBase, the families'
// names and raw mode.
func (d *decoder) checkBigtable(j *Job) {
	bt := j.Target.Bigtable
	isBT := j.Sink.Kind == SinkBigtable
	if isBT && bt == nil {
		d.errorf(d.keys["sink.type"], "sink.type", "sink bigtable needs target.bigtable: {project, instance}, the instance it writes to")
	}
	if bt == nil {
		return
	}
	if !isBT {
		d.errorf(d.keys["target.bigtable"], "target.bigtable", "a Bigtable target needs sink.type: bigtable (the %s sink writes to HBase)", j.Sink.kindName())
	}
	for _, k := range []string{"target.zookeeper", "target.znode_parent"} {
		if n := d.keys[k]; n != nil {
			d.errorf(n, k, "not allowed with target.bigtable: the target is a Bigtable instance, reached by project and instance, not through ZooKeeper")
		}
	}
	if n := d.keys["source.scan.raw"]; n != nil && j.Source.Scan.Raw && !bt.ApplyDeletes {
		d.errorf(n, "source.scan.raw", "%s", RawRefused)
	}
	for old, nw := range j.Spec.Families {
		if err := CheckBigtableFamily(nw); err != nil {
			at := j.Spec.FamilyPos[old]
			d.problems = append(d.problems, Problem{Line: at.Line, Col: at.Col, Field: "families." + old, Msg: err.Error()})
		}
	}
	for nf := range j.Target.Create.Families {
		if err := CheckBigtableFamily(nf); err != nil {
			d.errorf(d.values["target.create.families"], "target.create.families."+nf, "%v", err)
		}
	}
}
