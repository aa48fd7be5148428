package pipeline_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

// corpusBigtableJob re-keys the corpus's Bigtable test tables: the old
// row is N in two decimal digits, the new row N as a 4-byte big-endian number then
// "|n", and family cf becomes d.
const corpusBigtableJob = `source: {root: %s, name: %s}
target:
  table: %s
  create: true
  bigtable: {project: %s, instance: %s}
source_layout:
  row:
    - {field: n, type: decimal, width: 2}
target_layout:
  row:
    - {field: n, type: uint, width: 4}
    - {type: literal, bytes: "|n"}
entity: [n]
families: {cf: d}
sink: {type: bigtable}
`

// TestCorpusSnapshotsIntoBigtable re-keys into the emulator the snapshots
// Google's own HBase-to-Bigtable import is tested with (java-bigtable-hbase's
// EndToEndIT snapshot, written by HBase: test-snapshot uncompressed,
// test-snappy-snapshot with SNAPPY; the archive holds 20 regions and the
// manifests name 10). Expected: the content the corpus's SOURCES.txt lists
// for them (rows "00".."99", one cf:a cell "value<N>" at 1617828990 each),
// mapped by the rule written here, read back with Google's client.
func TestCorpusSnapshotsIntoBigtable(t *testing.T) {
	corpus := testenv.Corpus(t)
	bigtableEmulator(t)
	root := filepath.Join(testenv.ExtractArchive(t, filepath.Join(corpus, "bigtable", "EndToEndIT-snapshot.zip")), "data")
	var want []cell.Cell
	for n := 0; n < 100; n++ {
		row := binary.BigEndian.AppendUint32(nil, uint32(n))
		want = append(want, cell.Cell{Row: append(row, "|n"...), Family: []byte("d"), Qualifier: []byte("a"),
			Timestamp: 1617828990 * 1000, Type: cell.Put, Value: []byte(fmt.Sprintf("value%d", n))})
	}
	for _, name := range []string{"test-snapshot", "test-snappy-snapshot"} {
		t.Run(name, func(t *testing.T) {
			table := uniq(t, "corpus_bt")
			path := filepath.Join(t.TempDir(), "job.yaml")
			text := fmt.Sprintf(corpusBigtableJob, root, name, table, btProject, btInstance)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			j, err := job.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Workers: 2})
			if err != nil || !sum.Finished || sum.Problems() {
				t.Fatalf("run: %v %+v", err, sum)
			}
			if sum.Read != 100 || sum.Written != 100 {
				t.Errorf("read %d, wrote %d cells; want 100 and 100", sum.Read, sum.Written)
			}
			got := readBigtable(t, table)
			testenv.SortCells(got)
			testenv.SameCells(t, "Bigtable (Google's client) vs the rule over SOURCES.txt's content", got, want)
		})
	}
}
