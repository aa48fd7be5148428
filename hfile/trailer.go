package hfile

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Trailer sizes by major version; the trailer is fixed-size so a reader can
// find it from the end of the file.
const (
	trailerSizeV2  = 212
	trailerSizeV3  = 4096
	maxTrailerSize = trailerSizeV3
)

var trailerMagic = []byte("TRABLK\"$")

// Codec is a block compression algorithm, numbered as HBase's
// Compression.Algorithm ordinals stored in the trailer.
type Codec uint32

// Compression algorithms by trailer ordinal.
const (
	CodecLZO    Codec = 0
	CodecGZ     Codec = 1
	CodecNone   Codec = 2
	CodecSnappy Codec = 3
	CodecLZ4    Codec = 4
	CodecBZip2  Codec = 5
	CodecZstd   Codec = 6
	CodecLZMA   Codec = 7
	CodecBrotli Codec = 8
)

// String returns the name HBase uses for the codec in column family
// descriptors.
func (c Codec) String() string {
	switch c {
	case CodecLZO:
		return "LZO"
	case CodecGZ:
		return "GZ"
	case CodecNone:
		return "NONE"
	case CodecSnappy:
		return "SNAPPY"
	case CodecLZ4:
		return "LZ4"
	case CodecBZip2:
		return "BZIP2"
	case CodecZstd:
		return "ZSTD"
	case CodecLZMA:
		return "LZMA"
	case CodecBrotli:
		return "BROTLI"
	}
	return fmt.Sprintf("Codec(%d)", uint32(c))
}

// Trailer is the fixed file trailer: where the load-on-open section is, how
// many cells and index levels there are, and how blocks are compressed.
type Trailer struct {
	MajorVersion int
	MinorVersion int
	// FileInfoOffset is the offset of the FILEINF2 block.
	FileInfoOffset uint64
	// LoadOnOpenOffset is the offset of the root data index block, the
	// first block of the section read when the file is opened.
	LoadOnOpenOffset uint64
	// UncompressedDataIndexSize sums the uncompressed sizes of all data
	// index blocks.
	UncompressedDataIndexSize uint64
	// TotalUncompressedBytes is informational.
	TotalUncompressedBytes uint64
	// DataIndexCount is the number of entries in the root data index.
	DataIndexCount uint32
	// MetaIndexCount is the number of meta blocks.
	MetaIndexCount uint32
	// EntryCount is the number of cells in the file.
	EntryCount uint64
	// NumDataIndexLevels is 1 when the root index points at data blocks,
	// 2 with leaf index blocks, 3 or more with intermediate levels.
	NumDataIndexLevels uint32
	// FirstDataBlockOffset is -1 when the file has no data blocks.
	FirstDataBlockOffset int64
	// LastDataBlockOffset is the offset of the last data block.
	LastDataBlockOffset int64
	// ComparatorClassName is the Java comparator the writer recorded.
	ComparatorClassName string
	// Codec compresses every block's payload.
	Codec Codec
	// Encrypted is true when the trailer carries a wrapped data key.
	Encrypted bool
	// Size is the trailer's size in bytes (212 for v2, 4096 for v3).
	Size int
}

// trailerSize maps a major version to its fixed trailer size.
func trailerSize(major int) (int, bool) {
	switch major {
	case 2:
		return trailerSizeV2, true
	case 3:
		return trailerSizeV3, true
	}
	return 0, false
}

// parseVersion splits the last four bytes of a file into major and minor
// versions: the major lives in the low three bytes, the minor in the top one.
func parseVersion(last4 []byte) (major, minor int) {
	v := binary.BigEndian.Uint32(last4)
	return int(v & 0x00FFFFFF), int(v >> 24)
}

// parseTrailer decodes a trailer from tail, the last bytes of a file of
// the given size (at most maxTrailerSize of them).
func parseTrailer(tail []byte, size int64, name string) (Trailer, error) {
	var t Trailer
	if len(tail) < 4 {
		return t, corruptf(name, -1, 0, "file is %d bytes, too short for an HFile trailer", size)
	}
	major, minor := parseVersion(tail[len(tail)-4:])
	t.MajorVersion, t.MinorVersion = major, minor
	switch {
	case major == 1:
		return t, unsupportedf(name, "HFile v1 (written by HBase 0.90 or older); rewrite it with a newer HBase (major compaction)")
	case major == 2 && minor < 2:
		return t, unsupportedf(name, "HFile v2.%d (written by HBase 0.92-0.94, no protobuf trailer); rewrite it with a newer HBase (major compaction)", minor)
	}
	ts, ok := trailerSize(major)
	if !ok {
		return t, corruptf(name, -1, 0, "trailer version %d.%d (bytes %x at the end of the file) is not an HFile version", major, minor, tail[len(tail)-4:])
	}
	t.Size = ts
	if len(tail) < ts {
		return t, corruptf(name, -1, 0, "file is %d bytes, shorter than the %d-byte v%d trailer", size, ts, major)
	}
	b := tail[len(tail)-ts:]
	trailerOff := size - int64(ts)
	if !bytes.Equal(b[:8], trailerMagic) {
		return t, corruptf(name, trailerOff, BlockTrailer, "bad magic %q, want %q", b[:8], trailerMagic)
	}
	body := b[8 : ts-4]
	n, ln := protowire.ConsumeVarint(body)
	if ln < 0 || n > uint64(len(body)-ln) {
		return t, corruptf(name, trailerOff, BlockTrailer, "protobuf length prefix does not fit the trailer")
	}
	if err := t.unmarshal(body[ln : ln+int(n)]); err != nil {
		return t, corruptf(name, trailerOff, BlockTrailer, "%v", err)
	}
	return t, nil
}

// unmarshal decodes FileTrailerProto by hand; only fields 1-13 mean
// anything to a reader and unknown ones are skipped.
func (t *Trailer) unmarshal(b []byte) error {
	t.FirstDataBlockOffset = -1
	t.Codec = CodecNone
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("trailer protobuf: bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.VarintType && num <= 12 && num != 11 {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("trailer protobuf field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			switch num {
			case 1:
				t.FileInfoOffset = v
			case 2:
				t.LoadOnOpenOffset = v
			case 3:
				t.UncompressedDataIndexSize = v
			case 4:
				t.TotalUncompressedBytes = v
			case 5:
				t.DataIndexCount = uint32(v)
			case 6:
				t.MetaIndexCount = uint32(v)
			case 7:
				t.EntryCount = v
			case 8:
				t.NumDataIndexLevels = uint32(v)
			case 9:
				t.FirstDataBlockOffset = int64(v)
			case 10:
				t.LastDataBlockOffset = int64(v)
			case 12:
				t.Codec = Codec(v)
			}
			continue
		}
		if typ == protowire.BytesType && (num == 11 || num == 13) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("trailer protobuf field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			if num == 11 {
				t.ComparatorClassName = string(v)
			} else {
				t.Encrypted = true
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("trailer protobuf field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// comparatorKind classifies the comparator class name: HBase 2.x reads all
// of the cell-key comparators the same way; raw-byte comparators mean the
// keys are not KeyValue keys.
func rawBytesComparator(name string) bool {
	switch name {
	case "org.apache.hadoop.hbase.KeyValue$RawBytesComparator",
		"org.apache.hadoop.hbase.util.Bytes$ByteArrayComparator":
		return true
	}
	return false
}
