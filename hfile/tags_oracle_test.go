package hfile

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestOracleTagsInClusterFiles: store files with tags that HBase itself
// wrote, in every data block encoding with COMPRESS_TAGS on (the delta
// encodings then dictionary-compress tags) and once with it off: region
// server flushes of cells with per-cell TTLs (Put.setTTL) and of a
// client's ACL- and visibility-style tags (sent with
// KeyValueCodecWithTags), and StoreFileWriter files bulk loaded. Each
// file, read by our reader, must equal HBase's HFile reader's dump, tags
// column included, and each file must say its tags are compressed
// exactly where HBase's writer compresses them.
func TestOracleTagsInClusterFiles(t *testing.T) {
	st := testenv.Require(t)
	table := os.Getenv("REKEY_TEST_PREFIX") + "hfile_tags"
	testenv.DropAfter(t, table, "")
	encodings := []string{"NONE", "PREFIX", "DIFF", "FAST_DIFF", "ROW_INDEX_V1"}
	var fams []map[string]any
	for i, e := range encodings {
		fams = append(fams, map[string]any{"name": fmt.Sprintf("e%d", i), "encoding": e, "versions": 3, "compression": "SNAPPY"})
	}
	fams = append(fams, map[string]any{"name": "off", "encoding": "FAST_DIFF", "compress_tags": false, "versions": 3})
	ts := time.Now().Add(time.Hour).UnixMilli()
	gen := func(prefix string, tags func(i int) []byte) []cell.Cell {
		var out []cell.Cell
		for i := 0; i < 200; i++ {
			for _, f := range fams {
				out = append(out, cell.Cell{Row: []byte(fmt.Sprintf("%s%04d", prefix, i)), Family: []byte(f["name"].(string)), Qualifier: []byte(fmt.Sprintf("q%d", i%4)),
					Timestamp: ts + int64(i), Type: cell.Put, Value: []byte(fmt.Sprintf("value %d", i)), Tags: tags(i)})
			}
		}
		return out
	}
	tag := func(typ byte, v string) []byte {
		return append(binary.BigEndian.AppendUint16(nil, uint16(1+len(v))), append([]byte{typ}, v...)...)
	}
	dir := t.TempDir()
	write := func(name string, cells []cell.Cell) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, testenv.DumpCellsTags(cells), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Repeated tag values are what the dictionary compresses.
	clientTags := func(i int) []byte { return append(tag(1, fmt.Sprintf("user%d", i%3)), tag(2, "secret|public")...) }
	bulkTags := func(i int) []byte {
		if i%3 == 0 {
			return nil
		}
		return append(tag(1, "bulk"), tag(0x80, fmt.Sprintf("k%d", i%5))...)
	}
	spec, _ := json.Marshal(map[string]any{
		"table": table, "families": fams,
		"steps": []map[string]any{
			{"op": "cells", "file": write("ttl.cells", gen("t", func(int) []byte { return nil })), "ttl_ms": 86400000},
			{"op": "cells", "file": write("client.cells", gen("c", clientTags)), "client_tags": true},
			{"op": "flush"},
			{"op": "bulk_cells", "file": write("bulk.cells", gen("b", bulkTags))},
		},
	})
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", specPath)

	client, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{st.NameNode}, User: hdfsUser()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var urls []string
	var dumps [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(testenv.Oracle(t, "files", table))), "\n") {
		u, _, _ := strings.Cut(line, "\t")
		urls = append(urls, u)
		dumps = append(dumps, []string{"dump-hfile", "--tags", u})
	}
	if len(urls) != 2*len(fams) {
		t.Fatalf("%d store files, want a flushed and a bulk-loaded one per family (%d families)", len(urls), len(fams))
	}
	want := testenv.OracleDumps(t, dumps)
	compressed := map[bool]int{}
	for i, u := range urls {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		f, err := client.Open(pu.Path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Open(f, f.Stat().Size(), u)
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		info := r.Info()
		if !info.IncludesTags {
			t.Errorf("%s: HBase wrote no tags section", u)
		}
		fam := filepath.Base(filepath.Dir(pu.Path))
		bulk := strings.Contains(pu.Path, "_SeqId_")
		// HBase's writer marks tags compressed (hfile.TAGS_COMPRESSED)
		// under any data block encoding when the family says COMPRESS_TAGS.
		wantCompressed := fam != "off" && info.Encoding != EncodingNone
		if info.TagsCompressed != wantCompressed {
			t.Errorf("%s (%s, bulk loaded %v): tags compressed %v, want %v", u, info.Encoding, bulk, info.TagsCompressed, wantCompressed)
		}
		compressed[info.TagsCompressed]++
		var got []byte
		it := r.NewIterator()
		for ok := it.First(); ok; ok = it.Next() {
			got = testenv.AppendDumpTags(got, it.Cell())
		}
		if err := it.Err(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
		it.Close()
		f.Close()
		if len(want[i]) == 0 {
			t.Errorf("%s: HBase's reader returned no cells", u)
		}
		sameDump(t, u, got, want[i])
	}
	t.Logf("%d files: %d with compressed tags, %d without", len(urls), compressed[true], compressed[false])
}
