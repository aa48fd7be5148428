package hbase

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/cell"
)

// TestBulkLoadUnansweredAsksLanded: a BulkLoadHFile call times out on the
// client (testFirstBulkLoadTimeout) while the region server goes on and
// loads the file, copied from the local file system (another file system
// than the root dir's, so the file stays where it was and a second call
// would load it again). Before sending again, BulkLoadWith asks
// BulkLoadOptions.Landed, which finds the file among the region's store
// files (StoreFiles, GetStoreFile): the load ends there. The region holds
// one store file, and HBase's raw scan every cell once.
func TestBulkLoadUnansweredAsksLanded(t *testing.T) {
	c, st := testClient(t)
	ctx := context.Background()
	u, err := url.Parse(st.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{st.NameNode}, User: c.cfg.User})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()

	// HBase writes the HFile: fill a table, flush it, copy its store file
	// to a local folder.
	src := tempTable(t, c, "unanssrc", nil)
	w := c.NewWriter([]byte(src), WriterConfig{})
	const n = 2000
	var cells []cell.Cell
	for i := 0; i < n; i++ {
		cells = append(cells, put(fmt.Sprintf("u%05d", i), "q", int64(1000+i), fmt.Sprintf("value-%d", i)))
	}
	if err := w.Write(ctx, cells...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx, src); err != nil {
		t.Fatal(err)
	}
	files := storeFiles(t, fs, u.Path, c, src)
	if len(files) != 1 {
		t.Fatalf("store files %v", files)
	}
	local := filepath.Join(t.TempDir(), "f", "hfile")
	os.MkdirAll(filepath.Dir(local), 0o755)
	in, err := fs.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(local)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := rd.Stat()
	bf := bulkFileOf(t, "file://"+local, rd, fi.Size())
	rd.Close()

	dst := tempTable(t, c, "unansdst", nil)
	testFirstBulkLoadTimeout = 5 * time.Millisecond
	defer func() { testFirstBulkLoadTimeout = 0 }()
	asked := 0
	landed := func(ctx context.Context, sent []BulkFile) (bool, error) {
		asked++
		// The region server may still be copying: wait for the file.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			_, paths, err := c.StoreFiles(ctx, dst, sent[0].FirstRow, sent[0].Family)
			if err != nil {
				return false, err
			}
			if len(paths) > 0 {
				return true, nil
			}
		}
		return false, nil
	}
	if err := c.BulkLoadWith(ctx, dst, []BulkFile{bf}, BulkLoadOptions{Landed: landed}); err != nil {
		t.Fatal(err)
	}
	if asked != 1 {
		t.Fatalf("Landed asked %d times, want once (the first call should time out)", asked)
	}
	time.Sleep(2 * time.Second) // a second load, had one been sent, lands meanwhile
	if got := storeFiles(t, fs, u.Path, c, dst); len(got) != 1 {
		t.Errorf("the region holds %d store files after the load, want 1: %v", len(got), got)
	}
	checkFaultCellsOf(t, c, dst, cells)
}

// checkFaultCellsOf scans table raw, all versions, and checks it holds
// want, each cell once.
func checkFaultCellsOf(t *testing.T, c *Client, table string, want []cell.Cell) {
	t.Helper()
	sc := c.Scan(context.Background(), []byte(table), &Scan{Raw: true, MaxVersions: 1 << 20, Caching: 5000})
	defer sc.Close()
	seen := map[string]int{}
	for sc.Next() {
		seen[string(cell.AppendDump(nil, sc.Cell()))]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		k := string(cell.AppendDump(nil, &want[i]))
		if seen[k] != 1 {
			t.Fatalf("cell %s appears %d times", k, seen[k])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d distinct cells, want %d", len(seen), len(want))
	}
}
