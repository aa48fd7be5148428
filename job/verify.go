package job

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rekeyhq/rekey/transform"
)

// Verify is the verify: section: which entities `rekey verify` checks,
// against what, and how patiently. Flags of `rekey verify` override it.
//
//	verify:
//	  heaviest: 100            # the K heaviest entities by cells and by bytes
//	  sample: 1000             # a uniform sample of N entities
//	  seed: 1                  # the sample's seed (with find_worst)
//	  entities: ["device=dev-7"]
//	  find_worst: false        # count every entity in one pass over the snapshot
//	  all: false               # every entity
//	  against:                 # the new side; default the target table
//	    snapshot: {root: hdfs://nn:8020/hbase, name: new_snap}
//	    # or staging: /data/stage   (a run's staging folder: STAGING/hfiles/REGION/FAMILY/*)
//	  target_ttl: {d: 30d}     # TTL of new families, to tell expired cells
//	  retries: 3               # re-reads of a live table before a mismatch
//	  backoff: 1s
//	  workers: 4               # default: the run's (run.workers, else DefaultWorkers)
//	  method: inverse          # inverse, forward or both; default inverse when
//	                           # the new key keeps every old field, else forward
type Verify struct {
	// Heaviest and Sample are K and N; zero takes the command's defaults.
	Heaviest, Sample int
	Seed             uint64
	// Entities are entities named as Program.ParseEntity reads them;
	// EntityPos says where each was written, for errors.
	Entities  []string
	EntityPos []transform.Pos
	FindWorst bool
	All       bool
	// Against is the new side; zero means the job's target table.
	Against Against
	// TargetTTL maps new family names to their TTL.
	TargetTTL map[string]time.Duration
	// Retries is how often a live table is re-read before a mismatch is
	// declared; nil when not given (0 means no re-reads).
	Retries *int
	Backoff time.Duration
	Workers int
	// Method is how old and new cells are compared: "inverse", "forward"
	// or "both"; empty chooses (package verify).
	Method string
}

// Against names the new side of a verification: a live table (Table), a
// snapshot of the target (Root and Name) or a staging folder of HFiles not
// yet bulk-loaded (Staging). At most one is set.
type Against struct {
	Table      string
	Root, Name string
	Staging    string
}

// decodeVerify reads the verify: section into v.
func (d *decoder) decodeVerify(n *yaml.Node, path string, v *Verify) {
	count := func(n *yaml.Node, p string) int {
		x := d.integer(n, p)
		if x < 0 || x > 10_000_000 {
			d.errorf(n, p, "%d is out of range (expected 0 to 10000000)", x)
			return 0
		}
		return int(x)
	}
	d.mapping(n, path, map[string]func(*yaml.Node, string){
		"heaviest": func(n *yaml.Node, p string) { v.Heaviest = count(n, p) },
		"sample":   func(n *yaml.Node, p string) { v.Sample = count(n, p) },
		"seed": func(n *yaml.Node, p string) {
			if n.Kind != yaml.ScalarNode {
				d.errorf(n, p, "expected an integer, got %s", kindName(n))
				return
			}
			s, err := strconv.ParseUint(n.Value, 0, 64)
			if err != nil {
				d.errorf(n, p, "expected an integer 0 to 2^64-1, got %q", n.Value)
			}
			v.Seed = s
		},
		"entities": func(n *yaml.Node, p string) {
			v.Entities = d.strList(n, p)
			if n.Kind == yaml.SequenceNode {
				for _, e := range n.Content {
					v.EntityPos = append(v.EntityPos, pos(e))
				}
			} else {
				v.EntityPos = append(v.EntityPos, pos(n))
			}
		},
		"find_worst": func(n *yaml.Node, p string) { v.FindWorst = d.boolean(n, p) },
		"all":        func(n *yaml.Node, p string) { v.All = d.boolean(n, p) },
		"against": func(n *yaml.Node, p string) {
			d.mapping(n, p, map[string]func(*yaml.Node, string){
				"table": func(n *yaml.Node, p string) {
					v.Against.Table = d.str(n, p)
					if v.Against.Table != "" && !tableName.MatchString(v.Against.Table) {
						d.errorf(n, p, "%q is not a table name (expected [namespace:]name of letters, digits, _ . -)", v.Against.Table)
					}
				},
				"staging": func(n *yaml.Node, p string) {
					v.Against.Staging = resolve(filepath.Dir(d.file), d.nonEmpty(n, p, "the run's staging folder"))
				},
				"snapshot": func(n *yaml.Node, p string) {
					d.mapping(n, p, map[string]func(*yaml.Node, string){
						"root": func(n *yaml.Node, p string) {
							// Relative to the job file, like source.root.
							v.Against.Root = resolve(filepath.Dir(d.file), d.nonEmpty(n, p, "the HBase root directory holding the target's snapshot"))
						},
						"name": func(n *yaml.Node, p string) { v.Against.Name = d.nonEmpty(n, p, "the snapshot name") },
					}, "root", "name")
				},
			})
			set := 0
			for _, x := range []string{v.Against.Table, v.Against.Name, v.Against.Staging} {
				if x != "" {
					set++
				}
			}
			if set > 1 {
				d.errorf(n, p, "give one of table, snapshot and staging")
			}
		},
		"target_ttl": func(n *yaml.Node, p string) {
			if n.Kind != yaml.MappingNode {
				d.errorf(n, p, "expected a mapping of new family to TTL, e.g. {d: 30d}")
				return
			}
			v.TargetTTL = map[string]time.Duration{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, val := n.Content[i], n.Content[i+1]
				v.TargetTTL[k.Value] = d.duration(val, p+"."+k.Value)
			}
		},
		"retries": func(n *yaml.Node, p string) {
			r := count(n, p)
			v.Retries = &r
		},
		"backoff": func(n *yaml.Node, p string) { v.Backoff = d.duration(n, p) },
		"method": func(n *yaml.Node, p string) {
			switch v.Method = d.str(n, p); v.Method {
			case "inverse", "forward", "both":
			default:
				d.errorf(n, p, "method %q is not one of inverse, forward, both", v.Method)
			}
		},
		"workers": func(n *yaml.Node, p string) {
			v.Workers = count(n, p)
			if v.Workers > 256 {
				d.errorf(n, p, "%d workers is too many (expected 1 to 256)", v.Workers)
			}
		},
	})
}

// duration reads a Go duration ("90s", "1h30m") or a number of days ("30d").
func (d *decoder) duration(n *yaml.Node, path string) time.Duration {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected a duration such as 30s, 2h or 7d, got %s", kindName(n))
		return 0
	}
	dur, err := ParseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
	}
	return dur
}

// ParseDuration reads a Go duration or a whole number of days ("7d"); it
// refuses negative values.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > 100_000 {
			return 0, fmt.Errorf("%q is not a duration (expected e.g. 30s, 2h or 7d)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur < 0 {
		return 0, fmt.Errorf("%q is not a duration (expected e.g. 30s, 2h or 7d)", s)
	}
	return dur, nil
}
