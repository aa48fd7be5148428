package hbase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/hfile"
)

// bulkFileOf describes an HFile for BulkLoad, its bounds read back with
// the hfile package: the rows of its first key and of its LASTKEY.
func bulkFileOf(t *testing.T, p string, r io.ReaderAt, size int64) BulkFile {
	t.Helper()
	rd, err := hfile.Open(r, size, p)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	fk, ok1 := rd.FirstKey()
	lk, ok2 := rd.LastKey()
	if !ok1 || !ok2 {
		t.Fatalf("%s: empty HFile", p)
	}
	var first, last cell.Cell
	if err := cell.ParseKey(fk, &first); err != nil {
		t.Fatal(err)
	}
	if err := cell.ParseKey(lk, &last); err != nil {
		t.Fatal(err)
	}
	return BulkFile{Path: p, Family: bytes.Clone(first.Family), FirstRow: bytes.Clone(first.Row), LastRow: bytes.Clone(last.Row)}
}

func TestClusterAdmin(t *testing.T) {
	c, _ := testClient(t)
	ctx := context.Background()
	fams := []Family{{Name: "f", Attributes: map[string]string{
		"VERSIONS": "3", "DATA_BLOCK_ENCODING": "FAST_DIFF", "COMPRESSION": "GZ", "BLOOMFILTER": "ROWCOL", "TTL": "2147483647",
	}}}
	table := tempTable(t, c, "admin", fams)
	if err := c.CreateTable(ctx, TableSpec{Name: table, Families: fams}); !errors.Is(err, rpc.ErrTableExists) {
		t.Fatalf("creating an existing table: got %v, want TableExistsException", err)
	}
	if err := c.Put(ctx, []byte(table), []byte("r"), []cell.Cell{put("r", "q", 1, "v")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx, table); err != nil {
		t.Fatal(err)
	}
	snap := fmt.Sprintf("%s_snap", table)
	if err := c.Snapshot(ctx, snap, table); err != nil {
		t.Fatal(err)
	}
	list, err := c.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list {
		found = found || (s.Name == snap && s.Table == table && !s.Created.IsZero())
	}
	if !found {
		t.Fatalf("snapshot %s not listed in %+v", snap, list)
	}
	if err := c.DeleteSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	list, _ = c.Snapshots(ctx)
	for _, s := range list {
		if s.Name == snap {
			t.Fatalf("snapshot %s still listed after delete", snap)
		}
	}
	if err := c.DisableTable(ctx, table); err != nil {
		t.Fatal(err)
	}
	if on, err := c.TableEnabled(ctx, table); err != nil || on {
		t.Fatalf("TableEnabled after disable = %v, %v", on, err)
	}
	// Reads of a disabled table fail at once, not after the retry budget.
	start := time.Now()
	if _, err := c.Get(ctx, []byte(table), []byte("r"), nil); !errors.Is(err, rpc.ErrTableNotEnabled) || time.Since(start) > 10*time.Second {
		t.Fatalf("Get from a disabled table: %v after %v", err, time.Since(start))
	}
	if err := c.EnableTable(ctx, table); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, []byte(table), []byte("r"), nil); err != nil || len(got) != 1 {
		t.Fatalf("Get after re-enable: %v %v", got, err)
	}
	if _, err := c.Regions(ctx, "no_such_table_here"); !errors.Is(err, rpc.ErrTableNotFound) {
		t.Fatalf("Regions of a missing table: %v", err)
	}
}

// storeFiles lists the HFiles of table's family f on HDFS.
func storeFiles(t *testing.T, fs *hdfs.Client, rootDir string, c *Client, table string) []string {
	regions, err := c.Regions(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range regions {
		name := strings.TrimSuffix(string(r.Name), ".")
		enc := name[strings.LastIndexByte(name, '.')+1:]
		dir := path.Join(rootDir, "data", "default", table, enc, "f")
		infos, err := fs.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, fi := range infos {
			out = append(out, path.Join(dir, fi.Name()))
		}
	}
	return out
}

func TestClusterBulkLoad(t *testing.T) {
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

	// HBase writes the HFile: fill a table, flush it, take its store file.
	src := tempTable(t, c, "bulksrc", nil)
	w := c.NewWriter([]byte(src), WriterConfig{})
	var cells []cell.Cell
	for i := 0; i < 500; i++ {
		cells = append(cells, put(fmt.Sprintf("b%03d", i), "q", int64(1000+i), fmt.Sprintf("v%d", i)))
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
	staging := fmt.Sprintf("/user/%s/rekey-bulk-%d/f", c.cfg.User, time.Now().UnixNano())
	if err := fs.MkdirAll(staging, 0o777); err != nil {
		t.Fatal(err)
	}
	defer fs.RemoveAll(path.Dir(staging))
	copyTo := func(name string) BulkFile {
		in, err := fs.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		dst := path.Join(staging, name)
		out, err := fs.Create(dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		// The HDFS client reports a close before the last block is
		// replicated as an error to retry.
		for i := 0; ; i++ {
			err := out.Close()
			if err == nil {
				break
			}
			if !errors.Is(err, hdfs.ErrReplicating) || i == 50 {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		rd, err := fs.Open(dst)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		return bulkFileOf(t, dst, rd, rd.Stat().Size())
	}

	// A file that spans two regions is refused before anything is loaded.
	spanning := tempTable(t, c, "bulkspan", nil, []byte("b250"))
	bf := copyTo("spanning")
	if string(bf.FirstRow) != "b000" || string(bf.LastRow) != "b499" || string(bf.Family) != "f" {
		t.Fatalf("bounds %q..%q family %q", bf.FirstRow, bf.LastRow, bf.Family)
	}
	var se *SpanError
	if err := c.BulkLoad(ctx, spanning, []BulkFile{bf}); !errors.As(err, &se) || !bytes.Equal(se.Region.EndKey, []byte("b250")) {
		t.Fatalf("spanning file: got %v, want SpanError at b250", err)
	}

	dst := tempTable(t, c, "bulkdst", nil, []byte("m"))
	if err := c.BulkLoad(ctx, dst, []BulkFile{copyTo("good")}); err != nil {
		t.Fatal(err)
	}
	want := dump(scanAll(t, c, src, &Scan{MaxVersions: 10}))
	if got := dump(scanAll(t, c, dst, &Scan{MaxVersions: 10})); got != want || len(dumpLines(got)) != len(cells) {
		t.Fatalf("bulk loaded table differs from the source:\n%s", tail(got, 500))
	}
	diffLines(t, "oracle dump of bulk-loaded table", dumpLines(oracle(t, "dump-table", dst)), dumpLines(want))

	// A region server that refuses a load (loaded=false; HBase's own test
	// hook fails its secure bulk load after it made the load's staging
	// directory, before it moved a file) gives a *BulkLoadError, and the
	// staging directory is left: a refused load can leave files there that
	// the caller looks for before loading again (BulkStagedPath).
	refused := tempTable(t, c, "bulkrefused", nil, []byte("m"))
	t.Log(control(t, st, "bulkload-refuse 1 "+refused))
	bf = copyTo("refused")
	var token string
	err = c.BulkLoadWith(ctx, refused, []BulkFile{bf}, BulkLoadOptions{Prepared: func(tok string) error { token = tok; return nil }})
	var le *BulkLoadError
	if !errors.As(err, &le) {
		t.Fatalf("refused load: got %v, want a BulkLoadError", err)
	}
	if _, err := fs.Stat(bf.Path); err != nil {
		t.Fatalf("the file of the refused load is not where it was: %v", err)
	}
	tu, err := url.Parse(token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(tu.Path); err != nil {
		t.Fatalf("the refused load's staging directory %s is gone: %v", token, err)
	}
	if err := c.BulkLoad(ctx, refused, []BulkFile{bf}); err != nil {
		t.Fatalf("loading the refused file again: %v", err)
	}
	diffLines(t, "oracle dump of the table loaded after a refusal", dumpLines(oracle(t, "dump-table", refused)), dumpLines(want))
}
