package hfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// seedOneStoreFile has a region server write one store file of a new table
// (family b, compression codec, 200 rows of 2 cells) and returns its
// hdfs:// URL, the number of cells in it, and the file open on HDFS.
// The table is dropped when the test ends.
func seedOneStoreFile(t *testing.T, st *testenv.State, prefix, codec string) (string, int, *hdfs.FileReader) {
	t.Helper()
	table := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() { testenv.Drop(nil, []string{table}) })
	const rows = 200
	spec := map[string]any{
		"table":    table,
		"families": []map[string]any{{"name": "b", "compression": codec}},
		"steps":    []map[string]any{{"op": "rows", "rows": rows, "qualifiers": 2}, {"op": "flush"}},
	}
	b, _ := json.Marshal(spec)
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	oracle(t, "seed", specPath)
	files := strings.Fields(string(oracle(t, "files", table)))
	if len(files) != 2 { // one store file: its URL and size
		t.Fatalf("oracle files %s: %q, want one store file", table, files)
	}
	u, err := url.Parse(files[0])
	if err != nil {
		t.Fatal(err)
	}
	client, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{st.NameNode}, User: hdfsUser()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	fr, err := client.Open(u.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fr.Close() })
	return files[0], rows * 2, fr
}

// TestBrotliRefusedOnHBaseFile has a region server write a BROTLI store
// file (HBase's hbase-compression-brotli codec on the mini cluster's
// classpath), checks that HBase's own reader reads it (the oracle's dump
// has every cell), and that Open refuses it with ErrUnsupported naming the
// codec and the file, rather than misreading its blocks.
//
// LZMA has no such test: Maven Central here does not serve HBase's
// hbase-compression-xz module, so no region server here can write it.
// Nor can one write BZIP2 (reading it is not refused): without Hadoop's
// native library the master refuses a BZIP2 family (its compression
// sanity check meets UnsupportedOperationException).
func TestBrotliRefusedOnHBaseFile(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	fileURL, cells, fr := seedOneStoreFile(t, st, "brotli", "BROTLI")
	if n := bytes.Count(oracle(t, "dump-hfile", fileURL), []byte("\n")); n != cells {
		t.Fatalf("HBase's reader read %d cells of %s, want %d", n, fileURL, cells)
	}
	r, err := Open(fr, fr.Stat().Size(), fileURL)
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "compression codec BROTLI") || !strings.Contains(err.Error(), fileURL) {
		t.Fatalf("opening HBase's BROTLI store file: %v; want ErrUnsupported naming BROTLI and the file", err)
	}
	t.Log(err)
}
