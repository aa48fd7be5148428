package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"google.golang.org/protobuf/proto"
)

func TestDecodeLegacyReferenceFromCorpus(t *testing.T) {
	corpus := testenv.Corpus(t)
	b, err := os.ReadFile(filepath.Join(corpus, "hbase", "a6a6562b777440fd9c34885428f5cb61.21e75333ada3d5bafb34bb918f29576c"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := DecodeReference(b)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Top {
		t.Error("want the bottom half")
	}
	var c cell.Cell
	if err := cell.ParseKey(ref.SplitKey, &c); err != nil {
		t.Fatal(err)
	}
	if string(c.Row) != "0001049952" || len(c.Family) != 0 || len(c.Qualifier) != 0 || c.Timestamp != cell.LatestTimestamp || c.Type != cell.Maximum {
		t.Errorf("split key = %s, want first-on-row of 0001049952", c.String())
	}
}

func TestDecodeReferencePB(t *testing.T) {
	key := []byte("\x00\x01m\x00\x7f\xff\xff\xff\xff\xff\xff\xff\xff")
	for _, top := range []bool{true, false} {
		rng := Reference_BOTTOM
		if top {
			rng = Reference_TOP
		}
		body, _ := proto.Marshal(&Reference{Splitkey: key, Range: &rng})
		ref, err := DecodeReference(append([]byte("PBUF"), body...))
		if err != nil {
			t.Fatal(err)
		}
		if ref.Top != top || string(ref.SplitKey) != string(key) {
			t.Errorf("got %+v", ref)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		fn   func() error
	}{
		{"snapshotinfo garbage", func() error { _, err := DecodeSnapshotInfo([]byte{0xff, 0xff, 0xff}); return err }},
		{"snapshotinfo without name", func() error { _, err := DecodeSnapshotInfo(nil); return err }},
		{"manifest without schema", func() error { _, err := DecodeDataManifest(nil); return err }},
		{"region manifest without region info", func() error { _, err := DecodeRegionManifest(nil); return err }},
		{"reference too short", func() error { _, err := DecodeReference([]byte{1}); return err }},
		{"legacy reference length overruns", func() error { _, err := DecodeReference([]byte{0, 20, 1, 2}); return err }},
		{"legacy reference trailing bytes", func() error { _, err := DecodeReference([]byte{0, 1, 1, 2}); return err }},
		{"PB reference without range", func() error {
			b, _ := proto.Marshal(&Reference{Splitkey: []byte("k")})
			_, err := DecodeReference(append([]byte("PBUF"), b...))
			return err
		}},
		{"regioninfo without magic", func() error { _, err := DecodeRegionInfoFile([]byte("xx")); return err }},
		{"regioninfo bad length", func() error { _, err := DecodeRegionInfoFile([]byte("PBUF\x7f")); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.fn(); !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestRegionInfoFileRoundTrip(t *testing.T) {
	ri := &RegionInfo{RegionId: proto.Uint64(7), TableName: &TableName{Namespace: []byte("default"), Qualifier: []byte("t")}, StartKey: []byte("a")}
	body, _ := proto.Marshal(ri)
	b := append([]byte("PBUF"), byte(len(body)))
	b = append(b, body...)
	got, err := DecodeRegionInfoFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetRegionId() != 7 || string(got.StartKey) != "a" {
		t.Errorf("got %v", got)
	}
}

func FuzzDecodeReference(f *testing.F) {
	f.Add([]byte{0, 22, 0, 10, '0', '0', '0', '1', '0', '4', '9', '9', '5', '2', 0, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("PBUF\x0a\x0d\x00\x01m\x00\x7f\xff\xff\xff\xff\xff\xff\xff\xff\x10\x01"))
	f.Add([]byte{1, 0x8f, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ref, err := DecodeReference(b)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
		if err == nil && ref.SplitKey == nil {
			t.Fatal("nil split key without error")
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	rng := Reference_TOP
	m := &SnapshotDataManifest{
		TableSchema: &TableSchema{TableName: &TableName{Namespace: []byte("default"), Qualifier: []byte("t")},
			ColumnFamilies: []*ColumnFamilySchema{{Name: []byte("f"), Attributes: []*BytesBytesPair{{First: []byte("VERSIONS"), Second: []byte("3")}}}}},
		RegionManifests: []*SnapshotRegionManifest{{
			RegionInfo: &RegionInfo{RegionId: proto.Uint64(1), TableName: &TableName{Qualifier: []byte("t")}},
			FamilyFiles: []*SnapshotRegionManifest_FamilyFiles{{FamilyName: []byte("f"), StoreFiles: []*SnapshotRegionManifest_StoreFile{
				{Name: proto.String("abc"), FileSize: proto.Uint64(10)},
				{Name: proto.String("abc.def"), Reference: &Reference{Splitkey: []byte("\x00\x01m\x00\x7f\xff\xff\xff\xff\xff\xff\xff\xff"), Range: &rng}},
			}}},
		}},
	}
	b, _ := proto.Marshal(m)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := DecodeDataManifest(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
		if _, err := DecodeRegionManifest(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
		if _, err := DecodeSnapshotInfo(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
		DecodeRegionInfoFile(b)
		DecodeTableInfoFile(b)
	})
}
