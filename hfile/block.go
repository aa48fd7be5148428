package hfile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// BlockType identifies a block by its 8-byte magic.
type BlockType uint8

// Block types HBase 2.x writes. BlockTrailer is not a block but shares the
// magic convention, so errors about the trailer can say so.
const (
	BlockUnknown BlockType = iota
	BlockData
	BlockEncodedData
	BlockLeafIndex
	BlockBloomChunk
	BlockMeta
	BlockIntermediateIndex
	BlockRootIndex
	BlockFileInfo
	BlockGeneralBloomMeta
	BlockDeleteFamilyBloomMeta
	BlockTrailer
	BlockIndexV1
)

var blockMagics = [...]string{
	BlockData:                  "DATABLK*",
	BlockEncodedData:           "DATABLKE",
	BlockLeafIndex:             "IDXLEAF2",
	BlockBloomChunk:            "BLMFBLK2",
	BlockMeta:                  "METABLKc",
	BlockIntermediateIndex:     "IDXINTE2",
	BlockRootIndex:             "IDXROOT2",
	BlockFileInfo:              "FILEINF2",
	BlockGeneralBloomMeta:      "BLMFMET2",
	BlockDeleteFamilyBloomMeta: "DFBLMET2",
	BlockTrailer:               "TRABLK\"$",
	BlockIndexV1:               "IDXBLK)+",
}

// String returns the block's magic, the name HBase tools print.
func (t BlockType) String() string {
	if int(t) < len(blockMagics) && t != BlockUnknown {
		return blockMagics[t]
	}
	return "unknown"
}

// isData reports whether blocks of this type hold cells.
func (t BlockType) isData() bool { return t == BlockData || t == BlockEncodedData }

func blockTypeOf(magic []byte) BlockType {
	for t, m := range blockMagics {
		if m != "" && string(magic) == m {
			return BlockType(t)
		}
	}
	return BlockUnknown
}

// headerSize is the block header with HBase checksum fields (v2 minor >= 1
// and v3). Minor 0 headers (24 bytes) belong to files Open rejects.
const headerSize = 33

// Checksum types stored in byte 24 of the header.
const (
	checksumNull   = 0
	checksumCRC32  = 1
	checksumCRC32C = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blockHeader is the decoded 33-byte header.
type blockHeader struct {
	typ BlockType
	// onDiskSizeWithoutHeader counts the stored payload and checksums.
	onDiskSizeWithoutHeader int
	// uncompressedSize is the payload after decompression, no header and
	// no checksums.
	uncompressedSize int
	prevOffset       int64
	checksumType     byte
	bytesPerChecksum int
	// onDiskDataSizeWithHeader is header + stored payload (no checksums).
	onDiskDataSizeWithHeader int
}

// onDiskSize is the block's full size in the file, header included.
func (h *blockHeader) onDiskSize() int { return headerSize + h.onDiskSizeWithoutHeader }

// parseHeader decodes and sanity-checks a block header at file offset off.
// fileSize bounds every size so a corrupt header cannot cause a huge read.
func parseHeader(b []byte, off, fileSize int64) (blockHeader, error) {
	var h blockHeader
	if len(b) < headerSize {
		return h, errDecode("header truncated: %d of %d bytes", len(b), headerSize)
	}
	h.typ = blockTypeOf(b[:8])
	if h.typ == BlockUnknown || h.typ == BlockTrailer || h.typ == BlockIndexV1 {
		return h, errDecode("bad block magic %q", b[:8])
	}
	onDisk := int32(binary.BigEndian.Uint32(b[8:]))
	uncomp := int32(binary.BigEndian.Uint32(b[12:]))
	h.prevOffset = int64(binary.BigEndian.Uint64(b[16:]))
	h.checksumType = b[24]
	bpc := int32(binary.BigEndian.Uint32(b[25:]))
	dataWithHeader := int32(binary.BigEndian.Uint32(b[29:]))
	if onDisk < 0 || int64(onDisk) > fileSize-off-headerSize {
		return h, errDecode("on-disk size %d runs past the end of the %d-byte file", onDisk, fileSize)
	}
	if uncomp < 0 {
		return h, errDecode("negative uncompressed size %d", uncomp)
	}
	if dataWithHeader < headerSize || dataWithHeader > headerSize+onDisk {
		return h, errDecode("on-disk data size with header %d outside [%d, %d]", dataWithHeader, headerSize, headerSize+onDisk)
	}
	switch h.checksumType {
	case checksumNull, checksumCRC32, checksumCRC32C:
	default:
		return h, errDecode("unknown checksum type %d", h.checksumType)
	}
	h.onDiskSizeWithoutHeader = int(onDisk)
	h.uncompressedSize = int(uncomp)
	h.bytesPerChecksum = int(bpc)
	h.onDiskDataSizeWithHeader = int(dataWithHeader)
	if h.checksumType != checksumNull {
		if bpc < headerSize {
			return h, errDecode("bytes per checksum %d below the %d minimum", bpc, headerSize)
		}
		chunks := (h.onDiskDataSizeWithHeader + h.bytesPerChecksum - 1) / h.bytesPerChecksum
		if want := h.onDiskDataSizeWithHeader - headerSize + 4*chunks; want != h.onDiskSizeWithoutHeader {
			return h, errDecode("on-disk size %d does not equal payload %d + %d checksum bytes", h.onDiskSizeWithoutHeader, h.onDiskDataSizeWithHeader-headerSize, 4*chunks)
		}
	}
	return h, nil
}

// verifyChecksums checks the chunked checksums of a whole on-disk block
// (header, payload, checksums), as HBase computes them over header+payload
// in bytesPerChecksum chunks, each stored as a big-endian uint32.
func verifyChecksums(h *blockHeader, block []byte) error {
	if h.checksumType == checksumNull {
		return nil
	}
	data := block[:h.onDiskDataSizeWithHeader]
	sums := block[h.onDiskDataSizeWithHeader:h.onDiskSize()]
	for i, start := 0, 0; start < len(data); i, start = i+1, start+h.bytesPerChecksum {
		end := min(start+h.bytesPerChecksum, len(data))
		var got uint32
		if h.checksumType == checksumCRC32C {
			got = crc32.Checksum(data[start:end], castagnoli)
		} else {
			got = crc32.ChecksumIEEE(data[start:end])
		}
		want := binary.BigEndian.Uint32(sums[4*i:])
		if got != want {
			kind := "CRC32C"
			if h.checksumType == checksumCRC32 {
				kind = "CRC32"
			}
			return errDecode("%s checksum mismatch in chunk %d (bytes %d-%d): stored %08x, computed %08x", kind, i, start, end, want, got)
		}
	}
	return nil
}

// checksumName names a checksum type code as HBase's ChecksumType does.
func checksumName(t byte) string {
	switch t {
	case checksumNull:
		return "NULL"
	case checksumCRC32:
		return "CRC32"
	case checksumCRC32C:
		return "CRC32C"
	}
	return fmt.Sprintf("type %d", t)
}

// String summarises a header for inspect output and errors.
func (h *blockHeader) String() string {
	return fmt.Sprintf("%s onDisk=%d uncompressed=%d prev=%d checksum=%d/%d", h.typ, h.onDiskSize(), h.uncompressedSize, h.prevOffset, h.checksumType, h.bytesPerChecksum)
}
