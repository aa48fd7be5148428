// Package hfile reads and writes HBase HFiles. It reads format v3 (any
// minor) and v2 minor >= 2, as HBase 1.x and 2.x write them, with every data block encoding HBase 2.x
// has (NONE, PREFIX, DIFF, FAST_DIFF, ROW_INDEX_V1) and the codecs NONE, GZ,
// SNAPPY, LZ4, ZSTD and BZIP2. Older formats (v1, v2.0/2.1), encryption,
// PREFIX_TREE and LZO are rejected with ErrUnsupported; bytes that are not a
// valid file fail with ErrCorrupt, naming the file, block offset and type.
//
// # File layout
//
//	offset 0  ┌──────────────────────────────┐  "scanned block section"
//	          │ DATABLK* / DATABLKE          │  data blocks, in key order,
//	          │ IDXLEAF2 (inline leaf index) │  interleaved with inline leaf
//	          │ BLMFBLK2 (bloom chunk)       │  index and bloom blocks
//	          │ ...                          │
//	          ├──────────────────────────────┤  "non-scanned section"
//	          │ METABLKc, IDXINTE2           │  meta blocks, intermediate index
//	 load-on- ├──────────────────────────────┤
//	 open     │ IDXROOT2  root data index    │  + 16 bytes mid-key metadata
//	          │ IDXROOT2  meta index         │    when there are >= 2 levels
//	          │ FILEINF2  file info          │  PBUF + FileInfoProto
//	          │ BLMFMET2 / DFBLMET2          │  bloom metadata (skipped)
//	          ├──────────────────────────────┤
//	          │ trailer (212 B v2, 4096 B v3)│  "TRABLK\"$", delimited
//	          │                              │  FileTrailerProto, zero pad,
//	          │                    version   │  u32 minor<<24 | major
//	          └──────────────────────────────┘
//
// # Block
//
//	 0  magic[8]                   "DATABLK*", "IDXROOT2", ...
//	 8  i32 onDiskSizeWithoutHeader stored payload + checksums
//	12  i32 uncompressedSize        payload after decompression
//	16  i64 prevBlockOffset         previous block of the same type
//	24  u8  checksumType            0 NULL, 1 CRC32, 2 CRC32C
//	25  i32 bytesPerChecksum
//	29  i32 onDiskDataSizeWithHeader
//	33  payload (compressed as a whole; see compress.go for the framings)
//	    checksums: one big-endian u32 per bytesPerChecksum chunk of
//	    header+payload
//
// # Cells
//
// An unencoded data block is a run of
//
//	i32 keyLen | i32 valueLen | key | value
//	  [u16 tagsLen | tags]   when the file info has hfile.MAX_TAGS_LEN
//	  [VLong memstoreTS]      when KEY_VALUE_VERSION is 1
//
// where key = u16 rowLen | row | u8 familyLen | family | qualifier |
// i64 timestamp | u8 type. Encoded blocks (DATABLKE) start with a u16
// encoding id and rebuild each key from the previous one; decode.go
// describes each encoding where it is decoded.
//
// # Reading
//
//	r, err := hfile.Open(f, size, name) // or hfile.OpenFile(path)
//	if err != nil { ... }
//	it := r.NewIterator()
//	for ok := it.First(); ok; ok = it.Next() {
//		c := it.Cell() // valid until the next call; Clone to keep
//	}
//	if err := it.Err(); err != nil { ... }
//	it.Close()
//
// SeekGE walks the block index (root, intermediate, leaf) to the one data
// block that can hold the target and scans forward from there. Iterators
// reuse their buffers: a steady-state scan allocates nothing per cell.
//
// # Writing
//
// Writer writes HFile v3 as HBase 2.x's bulk-load path does
// (HFileOutputFormat2 over StoreFileWriter): data blocks of a chosen size in
// any of the encodings above, compressed with NONE, GZ, SNAPPY, LZ4 or ZSTD,
// CRC32C checksums, inline leaf index blocks and intermediate levels once
// the index outgrows one block, an optional ROW or ROWCOL compound bloom
// filter, and the file info a bulk-loaded file carries (BULKLOAD_TIMESTAMP,
// BULKLOAD_SOURCE_TASK, MAJOR_COMPACTION_KEY, TIMERANGE, LASTKEY, ...).
//
//	w, err := hfile.NewWriter(f, hfile.WriterOptions{Encoding: hfile.EncodingFastDiff, Codec: hfile.CodecSnappy, Bloom: hfile.BloomRow})
//	for _, c := range sortedCells {
//		if err := w.Append(&c); err != nil { ... } // out of order: ErrOutOfOrder
//	}
//	err = w.Close()             // index, bloom meta, file info, trailer
//	s := w.Stats()              // s.FirstRow, s.LastRow: the bulk-load bounds
//
// Append copies what it keeps and allocates nothing per cell once its
// buffers have grown.
package hfile
