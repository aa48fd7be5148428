package hfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// FileInfo is the file-info block (FILEINF2), typed. Raw keeps every entry,
// including ones this package does not interpret (Phoenix, Hudi, MOB...).
type FileInfo struct {
	// LastKey is the serialized KeyValue key of the last cell, nil if absent.
	LastKey     []byte
	AvgKeyLen   int32
	AvgValueLen int32
	CreateTime  int64
	// IncludesTags is true when hfile.MAX_TAGS_LEN is present: then every
	// cell in the data blocks carries a tags length (and maybe tags).
	IncludesTags bool
	MaxTagsLen   int32
	// TagsCompressed: tags in encoded blocks use HBase's tag dictionary.
	TagsCompressed bool
	// IncludesMVCC is true when KEY_VALUE_VERSION is 1: every cell is
	// followed by its memstore timestamp (sequence id) as a Hadoop VLong.
	IncludesMVCC  bool
	MaxMemstoreTS int64
	// Encoding is the data block encoding (DATA_BLOCK_ENCODING).
	Encoding Encoding
	// BloomType is BLOOM_FILTER_TYPE, "" when absent (no bloom).
	BloomType       string
	MaxSeqID        int64
	HasMaxSeqID     bool
	MajorCompaction bool
	// TimeRange from TIMERANGE; HasTimeRange is false when absent.
	TimeRangeMin, TimeRangeMax int64
	HasTimeRange               bool
	// BulkLoadTS is BULKLOAD_TIMESTAMP; HasBulkLoadTS marks a bulk-loaded file.
	BulkLoadTS    int64
	HasBulkLoadTS bool
	EarliestPutTS int64
	// Raw holds every entry by key.
	Raw map[string][]byte
}

// Keys returns the raw keys in sorted order, for stable printing.
func (fi *FileInfo) Keys() []string {
	keys := make([]string, 0, len(fi.Raw))
	for k := range fi.Raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var pbMagic = []byte("PBUF")

// parseFileInfo decodes the payload of a FILEINF2 block: PBUF, then a
// length-delimited FileInfoProto (repeated BytesBytesPair map_entry = 1).
func parseFileInfo(p []byte) (FileInfo, error) {
	fi := FileInfo{Raw: map[string][]byte{}}
	if !bytes.HasPrefix(p, pbMagic) {
		return fi, errDecode("file info does not start with PBUF")
	}
	p = p[4:]
	n, ln := protowire.ConsumeVarint(p)
	if ln < 0 || n > uint64(len(p)-ln) {
		return fi, errDecode("file info length prefix overruns the block")
	}
	msg := p[ln : ln+int(n)]
	for len(msg) > 0 {
		num, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return fi, errDecode("file info protobuf: %v", protowire.ParseError(k))
		}
		msg = msg[k:]
		if num != 1 || typ != protowire.BytesType {
			k = protowire.ConsumeFieldValue(num, typ, msg)
			if k < 0 {
				return fi, errDecode("file info protobuf: %v", protowire.ParseError(k))
			}
			msg = msg[k:]
			continue
		}
		pair, k := protowire.ConsumeBytes(msg)
		if k < 0 {
			return fi, errDecode("file info entry: %v", protowire.ParseError(k))
		}
		msg = msg[k:]
		var key, val []byte
		for len(pair) > 0 {
			pn, pt, k := protowire.ConsumeTag(pair)
			if k < 0 {
				return fi, errDecode("file info entry: %v", protowire.ParseError(k))
			}
			pair = pair[k:]
			if pt != protowire.BytesType {
				k = protowire.ConsumeFieldValue(pn, pt, pair)
				if k < 0 {
					return fi, errDecode("file info entry: %v", protowire.ParseError(k))
				}
				pair = pair[k:]
				continue
			}
			b, k := protowire.ConsumeBytes(pair)
			if k < 0 {
				return fi, errDecode("file info entry: %v", protowire.ParseError(k))
			}
			pair = pair[k:]
			switch pn {
			case 1:
				key = b
			case 2:
				val = b
			}
		}
		fi.Raw[string(key)] = bytes.Clone(val)
	}
	return fi, fi.interpret()
}

// interpret fills the typed fields from Raw.
func (fi *FileInfo) interpret() error {
	i32 := func(k string) (int32, bool, error) {
		v, ok := fi.Raw[k]
		if !ok {
			return 0, false, nil
		}
		if len(v) != 4 {
			return 0, true, errDecode("file info %s is %d bytes, want 4", k, len(v))
		}
		return int32(binary.BigEndian.Uint32(v)), true, nil
	}
	i64 := func(k string) (int64, bool, error) {
		v, ok := fi.Raw[k]
		if !ok {
			return 0, false, nil
		}
		if len(v) != 8 {
			return 0, true, errDecode("file info %s is %d bytes, want 8", k, len(v))
		}
		return int64(binary.BigEndian.Uint64(v)), true, nil
	}
	boolean := func(k string) bool {
		v := fi.Raw[k]
		return len(v) == 1 && v[0] != 0
	}
	var err error
	var ok bool
	fi.LastKey = fi.Raw["hfile.LASTKEY"]
	if fi.AvgKeyLen, _, err = i32("hfile.AVG_KEY_LEN"); err != nil {
		return err
	}
	if fi.AvgValueLen, _, err = i32("hfile.AVG_VALUE_LEN"); err != nil {
		return err
	}
	if fi.CreateTime, _, err = i64("hfile.CREATE_TIME_TS"); err != nil {
		return err
	}
	if fi.MaxTagsLen, fi.IncludesTags, err = i32("hfile.MAX_TAGS_LEN"); err != nil {
		return err
	}
	fi.TagsCompressed = boolean("hfile.TAGS_COMPRESSED")
	var kvVersion int32
	if kvVersion, _, err = i32("KEY_VALUE_VERSION"); err != nil {
		return err
	}
	fi.IncludesMVCC = kvVersion == 1
	if fi.MaxMemstoreTS, _, err = i64("MAX_MEMSTORE_TS_KEY"); err != nil {
		return err
	}
	if v, ok := fi.Raw["DATA_BLOCK_ENCODING"]; ok {
		e, known := encodingByName(string(v))
		if !known {
			return errDecode("file info DATA_BLOCK_ENCODING %q is not an encoding HBase 2.x defines", v)
		}
		fi.Encoding = e
	}
	fi.BloomType = string(fi.Raw["BLOOM_FILTER_TYPE"])
	if fi.MaxSeqID, fi.HasMaxSeqID, err = i64("MAX_SEQ_ID_KEY"); err != nil {
		return err
	}
	fi.MajorCompaction = boolean("MAJOR_COMPACTION_KEY")
	if fi.BulkLoadTS, fi.HasBulkLoadTS, err = i64("BULKLOAD_TIMESTAMP"); err != nil {
		return err
	}
	if fi.EarliestPutTS, _, err = i64("EARLIEST_PUT_TS"); err != nil {
		return err
	}
	if v, present := fi.Raw["TIMERANGE"]; present {
		if fi.TimeRangeMin, fi.TimeRangeMax, ok = parseTimeRange(v); !ok {
			return errDecode("file info TIMERANGE (%d bytes) is neither two int64s nor a PBUF TimeRangeTracker", len(v))
		}
		fi.HasTimeRange = true
	}
	return nil
}

// parseTimeRange accepts both encodings HBase 2.x writers used: two BE
// int64s, or PBUF + TimeRangeTracker{uint64 from = 1; uint64 to = 2}.
func parseTimeRange(v []byte) (lo, hi int64, ok bool) {
	if bytes.HasPrefix(v, pbMagic) {
		b := v[4:]
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return 0, 0, false
			}
			b = b[n:]
			if typ != protowire.VarintType {
				n = protowire.ConsumeFieldValue(num, typ, b)
				if n < 0 {
					return 0, 0, false
				}
				b = b[n:]
				continue
			}
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, false
			}
			b = b[n:]
			switch num {
			case 1:
				lo = int64(x)
			case 2:
				hi = int64(x)
			}
		}
		return lo, hi, true
	}
	// HBase reads two longs from a stream and ignores anything after them;
	// some writers pad the value to 32 bytes.
	if len(v) >= 16 {
		return int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), true
	}
	return 0, 0, false
}

// Encoding is a data block encoding, numbered by the u16 id HBase writes at
// the start of every encoded block.
type Encoding uint16

// Data block encodings HBase 2.x knows.
const (
	EncodingNone       Encoding = 0
	EncodingPrefix     Encoding = 2
	EncodingDiff       Encoding = 3
	EncodingFastDiff   Encoding = 4
	EncodingPrefixTree Encoding = 6
	EncodingRowIndexV1 Encoding = 7
)

// String returns HBase's name for the encoding.
func (e Encoding) String() string {
	switch e {
	case EncodingNone:
		return "NONE"
	case EncodingPrefix:
		return "PREFIX"
	case EncodingDiff:
		return "DIFF"
	case EncodingFastDiff:
		return "FAST_DIFF"
	case EncodingPrefixTree:
		return "PREFIX_TREE"
	case EncodingRowIndexV1:
		return "ROW_INDEX_V1"
	}
	return fmt.Sprintf("Encoding(%d)", uint16(e))
}

func encodingByName(s string) (Encoding, bool) {
	for _, e := range []Encoding{EncodingNone, EncodingPrefix, EncodingDiff, EncodingFastDiff, EncodingPrefixTree, EncodingRowIndexV1} {
		if e.String() == s {
			return e, true
		}
	}
	return 0, false
}
