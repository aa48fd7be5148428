package hfile

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// hadoopChunk is the most uncompressed input the writer puts in one chunk
// of Hadoop's block framing (see compress.go). Hadoop's decompressors
// decode each chunk into a fixed buffer (256 KiB for its Snappy and LZ4
// codecs, with the compressor cutting chunks at 218 KiB and 255 KiB); a
// chunk of 128 KiB fits every codec HBase 2.x reads this framing with.
const hadoopChunk = 128 << 10

// compressor compresses block payloads for the writer. It keeps each
// codec's state so that, once its buffers have grown, compressing a block
// allocates nothing.
type compressor struct {
	codec Codec
	gz    *gzip.Writer
	lz4   lz4.Compressor
	zstd  *zstd.Encoder
	sink  bytes.Buffer // gzip's output
}

func newCompressor(c Codec) (*compressor, error) {
	z := &compressor{codec: c}
	switch c {
	case CodecNone, CodecSnappy, CodecLZ4:
	case CodecGZ:
		z.gz = gzip.NewWriter(&z.sink)
	case CodecZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, fmt.Errorf("hfile: zstd encoder: %w", err)
		}
		z.zstd = enc
	default:
		return nil, fmt.Errorf("%w: the writer cannot compress with %s", ErrUnsupported, c)
	}
	return z, nil
}

// appendCompressed appends the stored form of payload to dst: a gzip
// member for GZ, Hadoop's block framing with one raw codec block per chunk
// for SNAPPY, LZ4 and ZSTD (HBase's own ZSTD codec frames it so).
func (z *compressor) appendCompressed(dst, payload []byte) ([]byte, error) {
	switch z.codec {
	case CodecNone:
		return append(dst, payload...), nil
	case CodecGZ:
		z.sink.Reset()
		z.gz.Reset(&z.sink)
		if _, err := z.gz.Write(payload); err != nil {
			return dst, fmt.Errorf("hfile: gzip: %w", err)
		}
		if err := z.gz.Close(); err != nil {
			return dst, fmt.Errorf("hfile: gzip: %w", err)
		}
		return append(dst, z.sink.Bytes()...), nil
	}
	if len(payload) == 0 {
		return dst, nil
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	for rest := payload; len(rest) > 0; {
		chunk := rest[:min(hadoopChunk, len(rest))]
		rest = rest[len(chunk):]
		lenAt := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		var err error
		switch z.codec {
		case CodecSnappy:
			// s2's plain Snappy-compatible encoder, not klauspost's
			// snappy.Encode (which is s2.EncodeSnappyBetter): the better
			// search costs far more CPU than the few percent of file
			// size it saves, and on half-random values it writes a
			// larger file than the plain one. Either is a snappy stream
			// HBase decodes.
			dst = grow(dst, s2.MaxEncodedLen(len(chunk)))
			out := s2.EncodeSnappy(dst[len(dst):cap(dst)], chunk)
			dst = dst[:len(dst)+len(out)]
		case CodecLZ4:
			dst = grow(dst, lz4.CompressBlockBound(len(chunk)))
			var n int
			n, err = z.lz4.CompressBlock(chunk, dst[len(dst):cap(dst)])
			if err == nil && n == 0 {
				// With a destination of CompressBlockBound bytes lz4
				// always emits a block (literals at worst); 0 would
				// mean a chunk HBase could not decode.
				err = fmt.Errorf("lz4 refused a %d-byte chunk", len(chunk))
			}
			dst = dst[:len(dst)+n]
		case CodecZstd:
			dst = z.zstd.EncodeAll(chunk, dst)
		}
		if err != nil {
			return dst, fmt.Errorf("hfile: %s: %w", z.codec, err)
		}
		binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	}
	return dst, nil
}

// grow makes room for n more bytes after len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), 2*cap(b)+n)
	copy(nb, b)
	return nb
}
