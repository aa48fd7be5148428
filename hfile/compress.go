package hfile

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// How HBase frames compressed block payloads
//
// Every block payload is compressed on its own (HBase resets the codec per
// block), so each one is a complete stream in the codec's framing:
//
//   - GZ: one gzip member (RFC 1952, with header), from Java's
//     GZIPOutputStream or Hadoop's GzipCodec.
//   - SNAPPY, LZ4 and HBase's own ZSTD codec: Hadoop's block framing
//     (BlockCompressorStream). It is a sequence of
//     u32 BE uncompressed length, then chunks of u32 BE compressed length +
//     one raw codec block, until the chunks add up to that length. Hadoop
//     cuts a chunk at its buffer size (256 KiB minus overhead), so a block
//     holding a big cell has several chunks.
//   - ZSTD from Hadoop's native ZStandardCodec: a plain zstd stream, no
//     length prefix. The two framings are told apart by the zstd frame
//     magic at the start.
//   - BZIP2: a bzip2 stream.
//
// Decompression fills exactly the header's uncompressed size; a stream that
// decodes to more or fewer bytes is corrupt.

// maxBlockSize bounds any block's uncompressed size: HBase caps cells at
// far less, and it keeps a corrupt header from asking for gigabytes.
const maxBlockSize = 1 << 30

// maxExpansion is how many output bytes one compressed byte can produce in
// each codec at most (rounded up), used to reject headers whose
// uncompressed size cannot be real before allocating it.
func maxExpansion(c Codec) int {
	switch c {
	case CodecGZ:
		return 1100 // deflate: 258 bytes per ~2 bits
	case CodecSnappy:
		return 64
	case CodecLZ4:
		return 256
	case CodecZstd, CodecBZip2:
		return 1 << 16
	}
	return 1
}

var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(maxBlockSize),
		zstd.WithDecoderLowmem(false))
})

var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

// decompressor holds per-iterator codec state so steady-state reads reuse
// it instead of allocating a reader per block.
type decompressor struct {
	src bytes.Reader
	gz  *gzip.Reader
}

// supported reports whether this package can decode the codec.
func (c Codec) supported() bool {
	switch c {
	case CodecNone, CodecGZ, CodecSnappy, CodecLZ4, CodecZstd, CodecBZip2:
		return true
	}
	return false
}

// decompress decodes src, one block's stored payload, into dst[:n],
// growing dst if needed, and returns dst[:n].
func (d *decompressor) decompress(c Codec, dst, src []byte, n int) ([]byte, error) {
	if n > maxBlockSize || (c != CodecNone && n > len(src)*maxExpansion(c)+1024) {
		return dst, errDecode("uncompressed size %d is impossible for %d %s-compressed bytes", n, len(src), c)
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	if n == 0 {
		return dst, nil
	}
	switch c {
	case CodecNone:
		if len(src) != n {
			return dst, errDecode("uncompressed block has %d payload bytes, header says %d", len(src), n)
		}
		copy(dst, src)
		return dst, nil
	case CodecGZ:
		return dst, d.gunzip(dst, src)
	case CodecSnappy, CodecLZ4:
		return dst, decodeHadoopBlocks(c, dst, src)
	case CodecZstd:
		if bytes.HasPrefix(src, zstdMagic) {
			return dst, unzstd(dst, src)
		}
		return dst, decodeHadoopBlocks(c, dst, src)
	case CodecBZip2:
		d.src.Reset(src)
		if _, err := io.ReadFull(bzip2.NewReader(&d.src), dst); err != nil {
			return dst, errDecode("bzip2: %v", err)
		}
		return dst, nil
	}
	return dst, errDecode("codec %s is not supported", c)
}

func (d *decompressor) gunzip(dst, src []byte) error {
	d.src.Reset(src)
	var err error
	if d.gz == nil {
		d.gz, err = gzip.NewReader(&d.src)
	} else {
		err = d.gz.Reset(&d.src)
	}
	if err != nil {
		return errDecode("gzip header: %v", err)
	}
	d.gz.Multistream(false)
	if _, err := io.ReadFull(d.gz, dst); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return errDecode("gzip stream ends before the %d bytes the header promises", len(dst))
		}
		return errDecode("gzip: %v", err)
	}
	return nil
}

// unzstd decodes a plain zstd stream (Hadoop's native ZStandardCodec).
func unzstd(dst, src []byte) error {
	dec, err := zstdDecoder()
	if err != nil {
		return errDecode("zstd: %v", err)
	}
	out, err := dec.DecodeAll(src, dst[:0:len(dst)])
	if err != nil {
		return errDecode("zstd: %v", err)
	}
	if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return errDecode("zstd stream decodes to %d bytes, header says %d", len(out), len(dst))
	}
	return nil
}

// decodeHadoopBlocks undoes Hadoop's BlockCompressorStream framing (see the
// comment at the top of this file) into exactly len(dst) bytes.
func decodeHadoopBlocks(c Codec, dst, src []byte) error {
	out := 0
	for out < len(dst) {
		if len(src) < 4 {
			return errDecode("%s block framing: truncated before a length at output byte %d of %d", c, out, len(dst))
		}
		raw := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if raw > len(dst)-out {
			return errDecode("%s block framing: frame of %d bytes overruns the %d-byte payload at output byte %d", c, raw, len(dst), out)
		}
		end := out + raw
		for out < end {
			if len(src) < 4 {
				return errDecode("%s block framing: truncated before a chunk length at output byte %d", c, out)
			}
			clen := int(binary.BigEndian.Uint32(src))
			src = src[4:]
			if clen > len(src) || clen < 0 {
				return errDecode("%s block framing: chunk of %d bytes overruns the %d bytes left", c, clen, len(src))
			}
			k, err := decodeChunk(c, dst[out:end], src[:clen])
			if err != nil {
				return errDecode("%s chunk at output byte %d: %v", c, out, err)
			}
			if k == 0 {
				return errDecode("%s block framing: empty chunk at output byte %d", c, out)
			}
			out += k
			src = src[clen:]
		}
	}
	return nil
}

// decodeChunk decodes one raw codec block into the front of dst and
// returns how many bytes it produced; it never writes past dst.
func decodeChunk(c Codec, dst, chunk []byte) (int, error) {
	switch c {
	case CodecSnappy:
		n, err := snappy.DecodedLen(chunk)
		if err != nil {
			return 0, err
		}
		if n > len(dst) {
			return 0, errDecode("chunk decodes to %d bytes, only %d expected", n, len(dst))
		}
		out, err := snappy.Decode(dst[:n], chunk)
		if err != nil {
			return 0, err
		}
		if n > 0 && &out[0] != &dst[0] {
			return 0, errDecode("snappy chunk decoded out of place")
		}
		return len(out), nil
	case CodecLZ4:
		n, err := lz4.UncompressBlock(chunk, dst)
		if err != nil {
			return 0, err
		}
		return n, nil
	case CodecZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return 0, err
		}
		out, err := dec.DecodeAll(chunk, dst[:0:len(dst)])
		if err != nil {
			return 0, err
		}
		if len(out) > 0 && &out[0] != &dst[0] {
			return 0, errDecode("chunk decodes past the expected size")
		}
		return len(out), nil
	}
	return 0, errDecode("codec %s has no block framing", c)
}
