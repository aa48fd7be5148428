package hbase

import (
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// oracleTableArgs are the oracle's dump-table flags for s: the same scan
// asked of HBase's own client. The oracle reads every version unless told
// otherwise, and a Scan's 0 means 1, so the version count is always given.
func oracleTableArgs(s *Scan) []string {
	a := []string{"--max-versions", strconv.Itoa(max(s.MaxVersions, 1))}
	if s.Raw {
		a = append(a, "--raw")
	}
	if s.MinTime != 0 || s.MaxTime != 0 {
		a = append(a, "--from", strconv.FormatInt(s.MinTime, 10), "--to", strconv.FormatInt(s.MaxTime, 10))
	}
	for _, f := range s.Families {
		a = append(a, "--family", string(f))
	}
	for _, c := range s.Columns {
		a = append(a, "--column", string(c.Family)+":"+hex.EncodeToString(c.Qualifier))
	}
	if len(s.Start) > 0 {
		a = append(a, "--start", hex.EncodeToString(s.Start))
	}
	if len(s.Stop) > 0 {
		a = append(a, "--stop", hex.EncodeToString(s.Stop))
	}
	return a
}

// TestScanAgainstOracle: a table HBase wrote (two families, versions,
// delete markers of every kind, three regions) scanned by rekey's client
// with each scan option, alone and combined, and by HBase's own client
// with the same Scan (the oracle's dump-table): the cells must be the same,
// in the same order.
func TestScanAgainstOracle(t *testing.T) {
	c, _ := testClient(t)
	table := os.Getenv("REKEY_TEST_PREFIX") + "hbase_scan_oracle"
	testenv.DropAfter(t, table, "")
	base := int64(1767225600000)
	testenv.Oracle(t, "seed", seedSpec(t, map[string]any{
		"table": table, "split_keys": []string{"r00020", "r00040"},
		"families": []map[string]any{{"name": "f", "versions": 4}, {"name": "g", "versions": 2, "encoding": "FAST_DIFF"}},
		"steps": []map[string]any{
			{"op": "rows", "rows": 60, "qualifiers": 3, "versions": 4, "deletes": 3, "flush_before_deletes": true},
			{"op": "flush"},
		},
	}))
	col := func(f, q string) Column { return Column{Family: []byte(f), Qualifier: []byte(q)} }
	scans := map[string]*Scan{
		"all versions":                   {MaxVersions: 10},
		"newest version":                 {},
		"two versions":                   {MaxVersions: 2},
		"raw":                            {Raw: true, MaxVersions: 10},
		"time range":                     {MinTime: base + 1000, MaxTime: base + 3000, MaxVersions: 10},
		"from, no upper bound":           {MinTime: base + 2000, MaxVersions: 10},
		"raw time range":                 {Raw: true, MinTime: base + 1000, MaxTime: base + 3000, MaxVersions: 10},
		"family":                         {Families: [][]byte{[]byte("g")}, MaxVersions: 10},
		"columns":                        {Columns: []Column{col("f", "q1"), col("g", "q0")}, MaxVersions: 10},
		"family and a column of another": {Families: [][]byte{[]byte("g")}, Columns: []Column{col("f", "q2")}, MaxVersions: 10},
		"start and stop across regions":  {Start: []byte("r00015"), Stop: []byte("r00045"), MaxVersions: 10},
		"stop only":                      {Stop: []byte("r00005")},
		"everything at once": {Start: []byte("r00010"), Stop: []byte("r00050"), MinTime: base, MaxTime: base + 3000,
			Columns: []Column{col("f", "q0"), col("f", "q2")}, MaxVersions: 2},
	}
	var labels []string
	var dumps [][]string
	for label, s := range scans {
		labels = append(labels, label)
		dumps = append(dumps, append([]string{"dump-table", table}, oracleTableArgs(s)...))
	}
	outs := testenv.OracleDumps(t, dumps)
	for i, label := range labels {
		t.Run(label, func(t *testing.T) {
			if len(outs[i]) == 0 {
				t.Fatal("HBase returned no cells")
			}
			if label != "all versions" && label != "raw" && string(outs[i]) == string(outs[slices.Index(labels, "all versions")]) {
				t.Error("HBase returned the unrestricted scan; the option did not reach the oracle")
			}
			diffLines(t, "oracle "+strings.Join(dumps[i][2:], " "), goDump(t, c, table, scans[label]), dumpLines(string(outs[i])))
		})
	}
}
