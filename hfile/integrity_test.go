package hfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// The tests here hold the reader to "no silent loss": a damaged HFile
// reads as an error, or as exactly the cells of the undamaged file. Every
// damaged input is built in the test from an HFile HBase wrote (committed
// under testdata/snapshots).

// fixtureFile is the HFile the reproductions use: 450 cells in six
// NONE-encoded, uncompressed, CRC32C-checksummed data blocks.
const fixtureFile = "../testdata/snapshots/enc_none/data/default/enc_none/01e7d08b7344c3fb4c74b9ddc35d630e/a/619ecc521c714b9cbdbad653d05fb486"

func readFixture(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("committed fixture: %v", err)
	}
	return b
}

// fixtureHFiles lists the smallest HFile of each committed fixture
// snapshot up to 128 KiB (each snapshot has its own encoding and codec;
// larger files only repeat the same layouts at more cost), plus the
// issue's reproduction file.
func fixtureHFiles(t testing.TB) []string {
	t.Helper()
	best := map[string]os.FileInfo{}
	paths := map[string]string{}
	err := filepath.Walk("../testdata/snapshots", func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.HasPrefix(fi.Name(), ".") || !strings.Contains(p, "/data/") {
			return err
		}
		if strings.Contains(fi.Name(), ".") || fi.Size() > 128<<10 {
			return nil // names with dots are references
		}
		snap := strings.Split(strings.TrimPrefix(p, "../testdata/snapshots/"), "/")[0]
		if b, ok := best[snap]; !ok || fi.Size() < b.Size() {
			best[snap], paths[snap] = fi, p
		}
		return nil
	})
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixture HFiles under ../testdata/snapshots: %v", err)
	}
	out := []string{fixtureFile}
	for _, p := range paths {
		out = append(out, p)
	}
	sort.Strings(out[1:])
	return out
}

// cellsOf reads every cell of an HFile image: their dump lines, or the
// first error. A clean read must also have checked the entry count.
func cellsOf(data []byte) ([]byte, error) {
	r, err := Open(bytes.NewReader(data), int64(len(data)), "damaged.hfile")
	if err != nil {
		return nil, err
	}
	it := r.NewIterator()
	defer it.Close()
	var out []byte
	for ok := it.First(); ok; ok = it.Next() {
		out = cell.AppendDump(out, it.Cell())
		if len(out) > 64*len(data)+1<<20 {
			return nil, errors.New("runaway output")
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if !it.CountChecked() {
		return nil, errors.New("a whole-file read did not check the entry count")
	}
	return out, nil
}

// requireSameOrError is the property: damage yields an ErrCorrupt or
// ErrUnsupported error, or the undamaged file's cells.
func requireSameOrError(t *testing.T, what string, want, damaged []byte) {
	t.Helper()
	got, err := cellsOf(damaged)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%s: unclassified error %v", what, err)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read without error but the cells differ from the undamaged file's (%d vs %d dump bytes)", what, len(got), len(want))
	}
}

// TestTrailerClaimsNoData is the first reproduction: one byte of
// the trailer turns the entry-count field into a fixed64 that swallows the
// counts, so the trailer claims an empty file that has six data blocks.
func TestTrailerClaimsNoData(t *testing.T) {
	data := readFixture(t, fixtureFile)
	data[23544] = 0x29
	_, err := Open(bytes.NewReader(data), int64(len(data)), "f1")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "f1") {
		t.Fatalf("Open = %v, want ErrCorrupt naming the file", err)
	}
}

// trailerProto returns the offset and length of the trailer's protobuf
// bytes (after the magic and the length varint) in an HFile image.
func trailerProto(t *testing.T, data []byte) (int, int) {
	t.Helper()
	off := len(data) - trailerSizeV3 + len(trailerMagic)
	n, k := binary.Uvarint(data[off:])
	if k <= 0 {
		t.Fatal("trailer length prefix")
	}
	return off + k, int(n)
}

// TestTrailerCrossChecks damages single trailer fields to values that
// parse, one at a time, and names what each must be refused for.
func TestTrailerCrossChecks(t *testing.T) {
	good := readFixture(t, fixtureFile)
	want, err := cellsOf(good)
	if err != nil {
		t.Fatal(err)
	}
	pbOff, pbLen := trailerProto(t, good)
	// setField rewrites the varint of a trailer field in place; the new
	// value must take as many bytes as the old.
	setField := func(num byte, v uint64) []byte {
		d := bytes.Clone(good)
		pb := d[pbOff : pbOff+pbLen]
		for i := 0; i < len(pb); {
			tag := pb[i]
			i++
			if tag&7 == 2 {
				l, k := binary.Uvarint(pb[i:])
				i += k + int(l)
				continue
			}
			_, k := binary.Uvarint(pb[i:])
			if tag>>3 == num {
				// A varint padded to k bytes (protobuf accepts that).
				for j := 0; j < k; j++ {
					b := byte(v & 0x7f)
					v >>= 7
					if j < k-1 {
						b |= 0x80
					}
					pb[i+j] = b
				}
				if v != 0 {
					t.Fatalf("field %d: new value does not fit %d varint bytes", num, k)
				}
				return d
			}
			i += k
		}
		t.Fatalf("trailer has no field %d", num)
		return nil
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		error string
	}{
		{"entry count 0", setField(7, 0), "the trailer counts 0 cells but 6 root data index entries"},
		{"entry count 449", setField(7, 449), "read 450 cells from the first data block at 0 to the last at 20892, but the trailer counts 449"},
		{"no root entries", setField(5, 0), "the trailer counts 450 cells but 0 root data index entries"},
		{"5 root entries", setField(5, 5), "bytes follow the 5 root entries the trailer counts"},
		{"two index levels", setField(8, 2), "for a 2-level index"},
		{"zero index levels", setField(8, 0), "0 data index levels"},
		{"last data block moved back", setField(10, 16709), "data blocks indexed from offset 0 to 20892, but the trailer says 0 to 16709"},
		{"index size", setField(3, 200), "single-level data index is 201 bytes but the trailer says 200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cellsOf(tc.data)
			if err == nil {
				t.Fatalf("read %d dump bytes (undamaged: %d) without error", len(got), len(want))
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("error %v, want ErrCorrupt saying %q", err, tc.error)
			}
		})
	}
}

// blockOffsets lists where every block of an HFile image starts, by
// walking headers from the first data block to the trailer.
func blockOffsets(t testing.TB, data []byte) []int {
	t.Helper()
	r, err := Open(bytes.NewReader(data), int64(len(data)), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	end := int64(len(data)) - int64(r.Trailer().Size)
	var out []int
	for off := int64(0); off < end; {
		h, err := parseHeader(data[off:], off, int64(len(data)))
		if err != nil {
			t.Fatalf("block at %d: %v", off, err)
		}
		out = append(out, int(off))
		off += int64(h.onDiskSize())
	}
	return out
}

// TestBlockClaimingNoChecksum is the second class: a block whose
// checksum-type byte says "none" in a checksummed file would skip
// verification, so damage to its payload would read as other values.
func TestBlockClaimingNoChecksum(t *testing.T) {
	good := readFixture(t, fixtureFile)
	r, err := Open(bytes.NewReader(good), int64(len(good)), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	lo := r.LoadOnOpenBlocks() // root index, meta index, file info, bloom meta
	for _, tc := range []struct {
		name string
		off  int
		typ  string
	}{
		{"second data block", blockOffsets(t, good)[1], "DATABLK*"},
		{"meta index block", int(lo[1].Offset), "IDXROOT2"},
		{"file info block", int(lo[2].Offset), "FILEINF2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := bytes.Clone(good)
			d[tc.off+24] = checksumNull
			d[tc.off+headerSize+2] ^= 0x01 // and damage its payload
			_, err := cellsOf(d)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum type NULL differs from the file's CRC32C") {
				t.Fatalf("error %v, want the NULL checksum type refused", err)
			}
			if want := fmt.Sprintf("%s block at offset %d", tc.typ, tc.off); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v does not say %q", err, want)
			}
		})
	}
	// A different chunk size is refused too.
	d := bytes.Clone(good)
	binary.BigEndian.PutUint32(d[blockOffsets(t, good)[2]+25:], 8192)
	if _, err := cellsOf(d); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bytes-per-checksum change read as %v", err)
	}
}

// TestSingleBitFlips flips every bit of the trailer's protobuf and version,
// of every block header and of the whole load-on-open section of one HFile
// per committed fixture snapshot: each flip reads as an error or as the
// undamaged cells. (Payload bits are covered by the CRC32C checksums and
// sampled by FuzzDamagedHFile.)
func TestSingleBitFlips(t *testing.T) {
	for _, p := range fixtureHFiles(t) {
		good := readFixture(t, p)
		want, err := cellsOf(good)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		r, err := Open(bytes.NewReader(good), int64(len(good)), p)
		if err != nil {
			t.Fatal(err)
		}
		var spans [][2]int
		for _, off := range blockOffsets(t, good) {
			spans = append(spans, [2]int{off, off + headerSize})
		}
		spans = append(spans, [2]int{int(r.Trailer().LoadOnOpenOffset), len(good) - trailerSizeV3})
		pbOff, pbLen := trailerProto(t, good)
		spans = append(spans, [2]int{pbOff - 1, pbOff + pbLen}, [2]int{len(good) - 4, len(good)})
		flips := 0
		for _, sp := range spans {
			for i := sp[0]; i < sp[1]; i++ {
				for bit := 0; bit < 8; bit++ {
					d := bytes.Clone(good)
					d[i] ^= 1 << bit
					requireSameOrError(t, fmt.Sprintf("%s: bit %d of byte %d", p, bit, i), want, d)
					flips++
				}
			}
		}
		t.Logf("%s: %d single-bit flips, none read as other cells", filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(p)))), flips)
	}
}

// FuzzDamagedHFile damages a committed HBase-written HFile anywhere: the
// fuzzer picks a fixture, then a list of (offset, xor) edits and a
// truncation. The property is the one a backfill needs: an error, or
// exactly the undamaged file's cells.
func FuzzDamagedHFile(f *testing.F) {
	paths := fixtureHFiles(f)
	goods := make([][]byte, len(paths))
	wants := make([][]byte, len(paths))
	for i, p := range paths {
		goods[i] = readFixture(f, p)
		w, err := cellsOf(goods[i])
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		wants[i] = w
	}
	f.Add(uint8(0), uint32(0), []byte{0x20, 0x5b, 0, 0, 0x08})         // the trailer
	f.Add(uint8(1), uint32(0), []byte{0x18, 0x00, 0, 0, 0x02})         // a block header
	f.Add(uint8(2), uint32(100), []byte{0x00, 0x02, 0, 0, 0x40, 0x01}) // a payload, truncated
	f.Fuzz(func(t *testing.T, which uint8, cut uint32, edits []byte) {
		i := int(which) % len(goods)
		d := bytes.Clone(goods[i])
		// Each edit is 5 bytes: a big-endian offset (taken modulo the
		// size) and a byte to xor there.
		for len(edits) >= 5 {
			off := int(binary.BigEndian.Uint32(edits)) % len(d)
			d[off] ^= edits[4]
			edits = edits[5:]
		}
		if cut > 0 {
			d = d[:len(d)-int(cut)%len(d)]
		}
		requireSameOrError(t, "damaged "+paths[i], wants[i], d)
	})
}
