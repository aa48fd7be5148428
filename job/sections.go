package job

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rekeyhq/rekey/transform"
)

// Scan is the source.scan section: which cells of the snapshot a run reads.
// The zero value reads what TableSnapshotScanner returns by default.
type Scan struct {
	// Versions caps the versions per column (0 = the family's VERSIONS).
	Versions int
	// From and To bound the cell timestamps read, [From, To) in ms since the
	// epoch; To 0 = no upper bound. A scheduled backfill copies only the
	// last day with them; a catch-up run copies what changed between two
	// snapshots.
	From, To int64
	// Raw reads delete markers too and carries them through the transform
	// into the target, so deletes reach the new table.
	Raw bool
	// Families restricts the read to these families (empty = all).
	Families []string
	// TTLAt is the time TTLs are measured from: zero = now (what
	// TableSnapshotScanner does); see TTLAtSnapshot.
	TTLAt time.Time
	// TTLAtSnapshot measures TTLs from the snapshot's creation time, so a
	// rerun next week reads the same cells.
	TTLAtSnapshot bool
}

// SinkKind names where a run writes.
type SinkKind string

// The sinks a run can use.
const (
	SinkPuts   SinkKind = "puts"    // batched puts through the HBase client
	SinkDryRun SinkKind = "dry-run" // read, map and count; write nothing
	SinkHFiles SinkKind = "hfiles"  // staged HFiles, then bulk load
	// SinkBigtable writes into a Cloud Bigtable table (target.bigtable)
	// with batched MutateRows calls.
	SinkBigtable SinkKind = "bigtable"
)

// SinkKinds are the sinks a job may name, in the order messages list
// them: a new sink adds its kind here, its package under sink/, which
// registers how it is built and what the run may ask of it (sink.Kind),
// and its import in pipeline/sinks.go, the one list of the sinks a build
// links.
var SinkKinds = []SinkKind{SinkPuts, SinkHFiles, SinkBigtable, SinkDryRun}

// Known reports whether k is one of SinkKinds.
func (k SinkKind) Known() bool {
	for _, s := range SinkKinds {
		if k == s {
			return true
		}
	}
	return false
}

// SinkKindList spells SinkKinds for a message: "puts, hfiles or dry-run".
func SinkKindList() string {
	out := ""
	for i, k := range SinkKinds {
		switch {
		case i == 0:
		case i == len(SinkKinds)-1:
			out += " or "
		default:
			out += ", "
		}
		out += string(k)
	}
	return out
}

// Sink is the sink section.
type Sink struct {
	// Kind is puts (the default), dry-run, hfiles or bigtable.
	Kind SinkKind
	// KindAt is where sink.type is written, for messages about it
	// (zero when the job does not name a sink).
	KindAt transform.Pos
	// BatchCells and BatchBytes bound one Multi call of the puts sink
	// (0 = the client's defaults, 5000 cells and 2 MiB).
	BatchCells int
	BatchBytes int64
	// Staging is the folder of the hfiles sink (local or hdfs://); empty =
	// beside the job's state.
	Staging string
	// NoLoad leaves staged HFiles unloaded and prints how to load them.
	NoLoad bool
	// Offline plans target regions from split keys instead of asking the
	// live table (hfiles sink with no cluster).
	Offline bool
	// MaxStagingBytes bounds what the hfiles sink puts in the staging
	// folder (0 = no bound): a run fails rather than fill a shared disk.
	MaxStagingBytes int64
	// SpillDir is where a one-process hfiles run spills its sorted runs:
	// a local folder, SpillStaging (the staging folder), or empty for the
	// default (SpillDirFor).
	SpillDir string
	// NoDirect sorts every split through the sort buffer and runs, even
	// one whose cells come in order, which the hfiles sink otherwise
	// writes straight into HFiles (sink.direct: false).
	NoDirect bool
}

// SpillStaging as sink.spill_dir keeps the runs in the staging folder.
const SpillStaging = "staging"

// Run is the run section: how a run spreads, throttles and records work.
// Flags of `rekey run` override every field.
type Run struct {
	// Workers is the number of splits read at once (0 = the number of CPUs).
	Workers int
	// SplitBytes cuts regions larger than this into pieces: 0 (not set) =
	// the snapshot's default cut (snapshot.Snapshot.DefaultSplitBytes),
	// SplitBytesOff (split_bytes: off) = one split per region.
	SplitBytes int64
	// Checkpoint is where the run records done splits (local or hdfs://);
	// empty = StateDir()/checkpoint.json.
	Checkpoint string
	// Memory is the run's memory budget in bytes (0 = 1 GiB).
	Memory int64
	// MaxCellsPerSec caps the cells written per second by the whole run
	// (0 = no cap).
	MaxCellsPerSec float64
	// MaxReadMBPerSec caps the MB per second read from the snapshot's file
	// system (0 = no cap).
	MaxReadMBPerSec float64
	// MaxCallsPerServer caps the write calls in flight to one region server
	// (0 = the client's default, 2).
	MaxCallsPerServer int
	// SetTimestamp, when non-zero, replaces every cell's timestamp. It
	// breaks idempotent reruns (a rerun adds versions), so runs warn.
	SetTimestamp int64
	// HeavyHitters and SampleEntities size the entity sketch stored beside
	// the checkpoint for verify (0 = 100 and 1000).
	HeavyHitters, SampleEntities int
	// ControlAddr serves pause, resume, limits and metrics over HTTP on a
	// loopback address ("" = off).
	ControlAddr string
	// ControlToken is the bearer token the control endpoint asks for (""
	// = a random one per run, written to a file beside the checkpoint).
	ControlToken string
	// MetricsAddr serves GET /metrics alone, read only and without a
	// token, on any host:port ("" = off): what a Prometheus scrapes on a
	// pod's IP, where the loopback control endpoint cannot be reached.
	MetricsAddr string
}

// Create is target.create: how to create a missing target table.
type Create struct {
	// Enabled creates the target when it does not exist.
	Enabled bool
	// SplitKeys pre-split the new table (given, or planned when empty).
	SplitKeys [][]byte
	// Regions asks the plan for this many regions when no SplitKeys are
	// given (0 = as many as the plan suggests).
	Regions int
	// Families overrides the attributes copied from the source family
	// (new family name -> attribute -> value, as the HBase shell writes
	// them: COMPRESSION, DATA_BLOCK_ENCODING, BLOOMFILTER, VERSIONS, TTL).
	Families map[string]map[string]string
}

// StateDir is the folder that holds the run's checkpoint and entity
// sketch when the job does not name a checkpoint: beside the job file,
// named after it ("jobs/daily.yaml" -> "jobs/daily.rekey").
func (j *Job) StateDir() string {
	if j.Run.Checkpoint != "" {
		return dirOf(j.Run.Checkpoint)
	}
	base := filepath.Base(j.Path)
	return filepath.Join(filepath.Dir(absOr(j.Path)), strings.TrimSuffix(base, filepath.Ext(base))+".rekey")
}

// SpillDirFor is the local folder a one-process hfiles run whose
// checkpoint is checkpoint spills its runs to, "" for the staging folder:
// sink.spill_dir when set, else, when the checkpoint is on a local disk
// and the staging folder is not, a folder beside the checkpoint
// (CHECKPOINT.spill, under the checkpoint's lease, so resuming the
// checkpoint finds its runs). A staging folder on a local disk keeps them:
// moving them would gain nothing. The HFiles always go to the staging
// folder.
func (j *Job) SpillDirFor(checkpoint string) string {
	switch d := j.Sink.SpillDir; {
	case d == SpillStaging:
		return ""
	case d != "":
		return absOr(strings.TrimPrefix(d, "file://"))
	case IsLocalPath(checkpoint) && !IsLocalPath(j.StagingPath()):
		return strings.TrimSuffix(strings.TrimPrefix(checkpoint, "file://"), ".json") + ".spill"
	}
	return ""
}

// CheckSpillDir refuses a spill folder (sink.spill_dir, --spill-dir) that
// is neither SpillStaging nor a local path: runs are read back by the one
// process that spilled them.
func CheckSpillDir(d string) error {
	if d != SpillStaging && !IsLocalPath(d) {
		return fmt.Errorf("%q is not a local folder: runs are spilled to a local disk, or to the staging folder with the value %q", d, SpillStaging)
	}
	return nil
}

// IsLocalPath reports whether p names a local path: no URL scheme, or
// file://.
func IsLocalPath(p string) bool {
	return !strings.Contains(p, "://") || strings.HasPrefix(p, "file://")
}

// StagingPath is the hfiles sink's staging folder: sink.staging, else
// StateDir()/staging.
func (j *Job) StagingPath() string {
	if j.Sink.Staging != "" {
		return j.Sink.Staging
	}
	return filepath.Join(j.StateDir(), "staging")
}

// CheckpointPath is where the run's checkpoint lives.
func (j *Job) CheckpointPath() string {
	if j.Run.Checkpoint != "" {
		return j.Run.Checkpoint
	}
	return filepath.Join(j.StateDir(), "checkpoint.json")
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 && strings.Contains(p, "://") {
		return p[:i]
	}
	return filepath.Dir(p)
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func (d *decoder) scan(n *yaml.Node, p string, s *Scan) {
	d.mapping(n, p, map[string]func(*yaml.Node, string){
		"versions": func(n *yaml.Node, p string) {
			v := d.integer(n, p)
			if v < 0 || v > math.MaxInt32 {
				d.errorf(n, p, "versions %s is not allowed (expected 0 for the family's VERSIONS, or a positive count)", n.Value)
			}
			s.Versions = int(v)
		},
		"from": func(n *yaml.Node, p string) { s.From = d.instant(n, p) },
		"to": func(n *yaml.Node, p string) {
			if s.To = d.instant(n, p); s.To == 0 && n.Kind == yaml.ScalarNode {
				if _, err := ParseInstant(n.Value); err == nil {
					d.errorf(n, p, "%v", ErrZeroUpperBound)
				}
			}
		},
		"raw": func(n *yaml.Node, p string) { s.Raw = d.boolean(n, p) },
		"families": func(n *yaml.Node, p string) {
			s.Families = d.strList(n, p)
		},
		"ttl_at": func(n *yaml.Node, p string) {
			v := d.str(n, p)
			switch v {
			case "now", "":
			case "snapshot":
				s.TTLAtSnapshot = true
			default:
				t, err := time.Parse(time.RFC3339, v)
				if err != nil {
					d.errorf(n, p, "%q is not allowed (expected now, snapshot or an RFC 3339 time)", v)
				}
				s.TTLAt = t
			}
		},
	})
	if s.To != 0 && s.From >= s.To {
		d.errorf(n, p, "empty time range: from %d is not before to %d", s.From, s.To)
	}
}

// instant reads a time as epoch milliseconds or RFC 3339 text.
func (d *decoder) instant(n *yaml.Node, p string) int64 {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, p, "expected a time (epoch millis or RFC 3339), got %s", kindName(n))
		return 0
	}
	ms, err := ParseInstant(n.Value)
	if err != nil {
		d.errorf(n, p, "%v", err)
	}
	return ms
}

// ErrZeroUpperBound refuses an upper time bound that is the instant 0:
// an unset bound is also 0, so "to: 0" would copy every cell where
// "to: 1" copies none.
var ErrZeroUpperBound = errors.New("an upper time bound of 0 (1970-01-01T00:00:00Z) would copy nothing, but 0 also means no bound; leave it out to copy every cell")

// ParseInstant reads a time written as epoch milliseconds or RFC 3339
// text, as job files and `rekey run` flags take it.
func ParseInstant(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("negative time %d", ms)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("expected a time (epoch millis or RFC 3339 such as 2026-11-29T00:00:00Z), got %q", s)
	}
	return t.UnixMilli(), nil
}

func (d *decoder) sink(n *yaml.Node, p string, s *Sink) {
	d.mapping(n, p, map[string]func(*yaml.Node, string){
		"type": func(n *yaml.Node, p string) {
			s.KindAt = pos(n)
			if k := SinkKind(d.str(n, p)); k.Known() {
				s.Kind = k
			} else {
				d.errorf(n, p, "sink %q is not allowed (expected %s)", n.Value, SinkKindList())
			}
		},
		"batch_cells": func(n *yaml.Node, p string) { s.BatchCells = int(d.positive(n, p, 1<<24)) },
		"batch_bytes": func(n *yaml.Node, p string) { s.BatchBytes = d.size(n, p) },
		"staging":     func(n *yaml.Node, p string) { s.Staging = d.nonEmpty(n, p, "a folder for staged HFiles") },
		"load":        func(n *yaml.Node, p string) { s.NoLoad = !d.boolean(n, p) },
		"offline":     func(n *yaml.Node, p string) { s.Offline = d.boolean(n, p) },
		"staging_max": func(n *yaml.Node, p string) { s.MaxStagingBytes = d.size(n, p) },
		"direct":      func(n *yaml.Node, p string) { s.NoDirect = !d.boolean(n, p) },
		"spill_dir": func(n *yaml.Node, p string) {
			s.SpillDir = d.nonEmpty(n, p, "a local folder for sorted runs, or staging")
			if err := CheckSpillDir(s.SpillDir); err != nil {
				d.errorf(n, p, "spill_dir %v", err)
			}
		},
	})
}

func (d *decoder) run(n *yaml.Node, p string, r *Run) {
	d.mapping(n, p, map[string]func(*yaml.Node, string){
		"workers":     func(n *yaml.Node, p string) { r.Workers = int(d.positive(n, p, 4096)) },
		"split_bytes": func(n *yaml.Node, p string) { r.SplitBytes = d.splitBytes(n, p) },
		"checkpoint":  func(n *yaml.Node, p string) { r.Checkpoint = d.nonEmpty(n, p, "a checkpoint file path") },
		"memory": func(n *yaml.Node, p string) {
			if r.Memory = d.size(n, p); r.Memory > 0 && r.Memory < MinMemory {
				d.errorf(n, p, "%v", ErrMemoryTooSmall)
			}
		},
		"max_cells_per_sec":    func(n *yaml.Node, p string) { r.MaxCellsPerSec = d.rate(n, p) },
		"max_read_mb_per_sec":  func(n *yaml.Node, p string) { r.MaxReadMBPerSec = d.rate(n, p) },
		"max_calls_per_server": func(n *yaml.Node, p string) { r.MaxCallsPerServer = int(d.positive(n, p, 1024)) },
		"set_timestamp":        func(n *yaml.Node, p string) { r.SetTimestamp = d.instant(n, p) },
		"heavy_hitters":        func(n *yaml.Node, p string) { r.HeavyHitters = int(d.positive(n, p, 1<<20)) },
		"sample_entities":      func(n *yaml.Node, p string) { r.SampleEntities = int(d.positive(n, p, 1<<24)) },
		"control_addr":         func(n *yaml.Node, p string) { r.ControlAddr = d.nonEmpty(n, p, "a loopback host:port") },
		"control_token":        func(n *yaml.Node, p string) { r.ControlToken = d.nonEmpty(n, p, "a bearer token") },
		"metrics_addr":         func(n *yaml.Node, p string) { r.MetricsAddr = d.nonEmpty(n, p, "a host:port") },
	})
}

func (d *decoder) create(n *yaml.Node, p string, c *Create) {
	if n.Kind == yaml.ScalarNode {
		c.Enabled = d.boolean(n, p)
		return
	}
	c.Enabled = true
	d.mapping(n, p, map[string]func(*yaml.Node, string){
		"split_keys": func(n *yaml.Node, p string) {
			for i, s := range d.strList(n, p) {
				b, err := parseKey(s)
				if err != nil {
					d.errorf(n, fmt.Sprintf("%s[%d]", p, i), "%v", err)
				}
				c.SplitKeys = append(c.SplitKeys, b)
			}
		},
		"regions": func(n *yaml.Node, p string) { c.Regions = int(d.positive(n, p, 1<<16)) },
		"families": func(n *yaml.Node, p string) {
			if n.Kind != yaml.MappingNode {
				d.errorf(n, p, "expected a mapping of family to attributes, e.g. {d: {COMPRESSION: SNAPPY}}")
				return
			}
			c.Families = map[string]map[string]string{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], deref(n.Content[i+1])
				fp := p + "." + k.Value
				if v.Kind != yaml.MappingNode {
					d.errorf(v, fp, "expected a mapping of attribute to value, e.g. {COMPRESSION: SNAPPY}")
					continue
				}
				attrs := map[string]string{}
				for j := 0; j+1 < len(v.Content); j += 2 {
					attrs[strings.ToUpper(v.Content[j].Value)] = d.str(v.Content[j+1], fp+"."+v.Content[j].Value)
				}
				c.Families[k.Value] = attrs
			}
		},
	})
}

// parseKey reads a split key written as hex ("0x0a1b") or as text.
func parseKey(s string) ([]byte, error) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		b, err := hex.DecodeString(s[2:])
		if err != nil {
			return nil, fmt.Errorf("split key %q: bad hex: %v", s, err)
		}
		return b, nil
	}
	if s == "" {
		return nil, fmt.Errorf("empty split key")
	}
	return []byte(s), nil
}

// positive reads an integer in [1, max].
func (d *decoder) positive(n *yaml.Node, p string, max int64) int64 {
	v := d.integer(n, p)
	if v < 1 || v > max {
		d.errorf(n, p, "%s is not allowed (expected 1 to %d)", n.Value, max)
	}
	return v
}

// rate reads a non-negative number (0 = no cap).
func (d *decoder) rate(n *yaml.Node, p string) float64 {
	v, err := strconv.ParseFloat(n.Value, 64)
	if n.Kind != yaml.ScalarNode || err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(n, p, "expected a rate of 0 (no cap) or more, got %s", kindName(n))
	}
	return v
}

// size reads a byte count: a number, or a number with a unit (KiB, MiB, GiB,
// KB, MB, GB).
func (d *decoder) size(n *yaml.Node, p string) int64 {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, p, "expected a size such as 64MiB, got %s", kindName(n))
		return 0
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.errorf(n, p, "%v", err)
	}
	return v
}

// SplitBytesOff is run.split_bytes written as "off": one split per
// region, nothing cut.
const SplitBytesOff = -1

// ParseSplitBytes reads run.split_bytes or --split-bytes: "off"
// (SplitBytesOff) or a size; 0 asks for the default cut like no value.
func ParseSplitBytes(s string) (int64, error) {
	if strings.TrimSpace(s) == "off" {
		return SplitBytesOff, nil
	}
	return ParseSize(s)
}

// splitBytes reads run.split_bytes (ParseSplitBytes).
func (d *decoder) splitBytes(n *yaml.Node, p string) int64 {
	if n.Kind == yaml.ScalarNode && strings.TrimSpace(n.Value) == "off" {
		return SplitBytesOff
	}
	return d.size(n, p)
}

// ParseSize reads a byte count written as a number or with a unit: KB, MB,
// GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size (expected bytes, or a number with KiB, MiB, GiB, KB, MB, GB)", s)
	}
	return int64(v * float64(mult)), nil
}
