package digestmd5

import (
	"encoding/binary"
	"fmt"
	"io"
)

// MaxFrame bounds the wrapped messages a Reader accepts: a DataNode sends
// a data packet (at most 16 MiB) as one message, whatever the client's
// maxbuf, so a larger length is damage, not data.
const MaxFrame = 16<<20 + 1<<16

// Reader reads the payload of a stream of wrapped messages, each a
// 4-byte big-endian length and the wrapped bytes (Hadoop's
// SaslInputStream framing). A read returns bytes of one message at most;
// the bytes of a message are passed on only after its MAC is checked.
type Reader struct {
	r       io.Reader
	in      Layer
	buf     []byte
	pending []byte
	err     error
}

// NewReader returns a Reader of r's messages checked by in.
func NewReader(r io.Reader, in Layer) *Reader { return &Reader{r: r, in: in} }

// Read serves the current message's payload, reading and checking the
// next message when it is used up. An error is sticky.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.pending, r.err = r.next()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// next reads and unwraps one message.
func (r *Reader) next() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.r, size[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: the stream ends inside a message's length", ErrIntegrity)
		}
		return nil, err // io.EOF between messages is the stream's end
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: a wrapped message of %d bytes, more than %d", ErrIntegrity, n, MaxFrame)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	tok := r.buf[:n]
	if _, err := io.ReadFull(r.r, tok); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: the stream ends inside a %d-byte message", ErrIntegrity, n)
		}
		return nil, err
	}
	return r.in.Unwrap(tok)
}

// Writer wraps what is written to it into messages of at most
// the layer's SendLimit bytes each and writes them, length-prefixed, to w.
type Writer struct {
	w   io.Writer
	in  Layer
	out []byte
}

// NewWriter returns a Writer signing with in onto w.
func NewWriter(w io.Writer, in Layer) *Writer { return &Writer{w: w, in: in} }

// Write sends p as one or more messages in a single write to the
// underlying writer.
func (w *Writer) Write(p []byte) (int, error) {
	w.out = w.out[:0]
	max := w.in.SendLimit()
	if max <= 0 {
		max = len(p)
	}
	for rest := p; len(rest) > 0; {
		chunk := rest[:min(len(rest), max)]
		rest = rest[len(chunk):]
		tok := w.in.Wrap(chunk)
		w.out = binary.BigEndian.AppendUint32(w.out, uint32(len(tok)))
		w.out = append(w.out, tok...)
	}
	if _, err := w.w.Write(w.out); err != nil {
		return 0, err
	}
	return len(p), nil
}
