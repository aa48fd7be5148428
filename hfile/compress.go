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

// maxExpansion is how many output bytes one compressed byte can produce at
// most (rounded up) for the codecs whose output is allocated up front;
// it rejects headers whose uncompressed size cannot be real before
// allocating it. ZSTD and BZIP2 can expand far more (a megabyte of zeros
// fits in a few dozen bytes), so their output buffer instead grows with
// the data actually decoded.
func maxExpansion(c Codec) int {
	switch c {
	case CodecGZ:
		return 1100 // deflate: 258 bytes per ~2 bits
	case CodecSnappy:
		return 64
	case CodecLZ4:
		return 256
	}
	return 1
}

// growable reports codecs whose output buffer grows as it is decoded.
func growable(c Codec) bool { return c == CodecZstd || c == CodecBZip2 }

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
	if n > maxBlockSize || (c != CodecNone && !growable(c) && n > len(src)*maxExpansion(c)+1024) {
		return dst, errDecode("uncompressed size %d is impossible for %d %s-compressed bytes", n, len(src), c)
	}
	if growable(c) {
		// Start from what the input can plausibly produce; decoding
		// appends beyond it only as real output appears.
		if cap(dst) < n {
			dst = make([]byte, 0, min(n, 64*len(src)+64<<10))
		}
		dst = dst[:0]
		if n == 0 {
			return dst, nil
		}
		if c == CodecBZip2 {
			return d.bunzip(dst, src, n)
		}
		if bytes.HasPrefix(src, zstdMagic) {
			return unzstd(dst, src, n)
		}
		return decodeHadoopBlocks(c, dst, src, n)
	}
	if cap(dst) < n {
		putBlock(dst)
		dst = getBlock(n)
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
		return decodeHadoopBlocks(c, dst[:0], src, n)
	}
	return dst, errDecode("codec %s is not supported", c)
}

// bunzip reads a bzip2 stream into a buffer that grows with the output.
func (d *decompressor) bunzip(dst, src []byte, n int) ([]byte, error) {
	d.src.Reset(src)
	zr := bzip2.NewReader(&d.src)
	for len(dst) < n {
		if len(dst) == cap(dst) {
			dst = append(dst[:cap(dst)], make([]byte, min(n-cap(dst), max(cap(dst), 64<<10)))...)[:len(dst)]
		}
		k, err := zr.Read(dst[len(dst):min(cap(dst), n)])
		dst = dst[:len(dst)+k]
		if err != nil && len(dst) < n {
			if errors.Is(err, io.EOF) {
				return dst, errDecode("bzip2 stream ends after %d of the %d bytes the header promises", len(dst), n)
			}
			return dst, errDecode("bzip2: %v", err)
		}
	}
	return dst, nil
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

// unzstd decodes a plain zstd stream (Hadoop's native ZStandardCodec),
// appending to dst, which must end up exactly n bytes long.
func unzstd(dst, src []byte, n int) ([]byte, error) {
	dec, err := zstdDecoder()
	if err != nil {
		return dst, errDecode("zstd: %v", err)
	}
	if err := checkZstdHeader(src, n); err != nil {
		return dst, err
	}
	out, err := dec.DecodeAll(src, dst)
	if err != nil {
		return dst, errDecode("zstd: %v", err)
	}
	if len(out) != n {
		return dst, errDecode("zstd stream decodes to %d bytes, header says %d", len(out), n)
	}
	return out, nil
}

// checkZstdHeader rejects a frame whose declared content size exceeds
// what may remain, before the decoder allocates for it.
func checkZstdHeader(src []byte, limit int) error {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return errDecode("zstd frame header: %v", err)
	}
	if h.HasFCS && h.FrameContentSize > uint64(limit) {
		return errDecode("zstd frame declares %d bytes, at most %d expected", h.FrameContentSize, limit)
	}
	return nil
}

// decodeHadoopBlocks undoes Hadoop's BlockCompressorStream framing (see the
// comment at the top of this file), appending to buf until it holds
// exactly n bytes. Snappy and LZ4 chunks decode in place into buf's
// capacity; zstd chunks append, growing buf only as output appears.
func decodeHadoopBlocks(c Codec, buf, src []byte, n int) ([]byte, error) {
	for len(buf) < n {
		if len(src) < 4 {
			return buf, errDecode("%s block framing: truncated before a length at output byte %d of %d", c, len(buf), n)
		}
		raw := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if raw > n-len(buf) {
			return buf, errDecode("%s block framing: frame of %d bytes overruns the %d-byte payload at output byte %d", c, raw, n, len(buf))
		}
		end := len(buf) + raw
		for len(buf) < end {
			if len(src) < 4 {
				return buf, errDecode("%s block framing: truncated before a chunk length at output byte %d", c, len(buf))
			}
			clen := int(binary.BigEndian.Uint32(src))
			src = src[4:]
			if clen > len(src) || clen < 0 {
				return buf, errDecode("%s block framing: chunk of %d bytes overruns the %d bytes left", c, clen, len(src))
			}
			before := len(buf)
			var err error
			buf, err = decodeChunk(c, buf, end, src[:clen])
			if err != nil {
				return buf, errDecode("%s chunk at output byte %d: %v", c, before, err)
			}
			if len(buf) == before {
				return buf, errDecode("%s block framing: empty chunk at output byte %d", c, before)
			}
			src = src[clen:]
		}
	}
	return buf, nil
}

// decodeChunk decodes one raw codec block, appending it to buf; the output
// must not pass end.
func decodeChunk(c Codec, buf []byte, end int, chunk []byte) ([]byte, error) {
	switch c {
	case CodecSnappy:
		k, err := snappy.DecodedLen(chunk)
		if err != nil {
			return buf, err
		}
		if k > end-len(buf) {
			return buf, errDecode("chunk decodes to %d bytes, only %d expected", k, end-len(buf))
		}
		dst := buf[len(buf) : len(buf)+k]
		out, err := snappy.Decode(dst, chunk)
		if err != nil {
			return buf, err
		}
		if k > 0 && &out[0] != &dst[0] {
			return buf, errDecode("snappy chunk decoded out of place")
		}
		return buf[:len(buf)+k], nil
	case CodecLZ4:
		k, err := lz4.UncompressBlock(chunk, buf[len(buf):end])
		if err != nil {
			return buf, err
		}
		return buf[:len(buf)+k], nil
	case CodecZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return buf, err
		}
		if err := checkZstdHeader(chunk, end-len(buf)); err != nil {
			return buf, err
		}
		out, err := dec.DecodeAll(chunk, buf)
		if err != nil {
			return buf, err
		}
		if len(out) > end {
			return buf, errDecode("chunk decodes past the expected size")
		}
		return out, nil
	}
	return buf, errDecode("codec %s has no block framing", c)
}
