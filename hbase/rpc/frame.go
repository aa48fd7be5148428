package rpc

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
)

// MaxFrame bounds the size of a response frame a connection accepts. HBase
// servers cap responses far below this (hbase.server.scanner.max.result.size
// and the RPC size limits); a larger length means a corrupt stream.
const MaxFrame = 1 << 30

// appendDelimited appends m as a uvarint length followed by its bytes.
func appendDelimited(dst []byte, m proto.Message) ([]byte, error) {
	size := proto.Size(m)
	dst = protowire.AppendVarint(dst, uint64(size))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, m)
}

// AppendRequest appends one request frame: the u32 total, the delimited
// header, the delimited param (when not nil) and the cell block. It fills
// the header's request_param and cell_block_meta from the arguments.
func AppendRequest(dst []byte, hdr *pb.RequestHeader, param proto.Message, cellBlock []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if param != nil {
		hdr.RequestParam = proto.Bool(true)
	}
	if len(cellBlock) > 0 {
		hdr.CellBlockMeta = &pb.CellBlockMeta{Length: proto.Uint32(uint32(len(cellBlock)))}
	}
	var err error
	if dst, err = appendDelimited(dst, hdr); err != nil {
		return nil, fmt.Errorf("hbase/rpc: encoding request header: %w", err)
	}
	if param != nil {
		if dst, err = appendDelimited(dst, param); err != nil {
			return nil, fmt.Errorf("hbase/rpc: encoding %s request: %w", hdr.GetMethodName(), err)
		}
	}
	dst = append(dst, cellBlock...)
	return closeFrame(dst, start, hdr)
}

// appendRequestRaw is AppendRequest for a param already encoded and a cell
// block in pieces (their concatenation is the block).
func appendRequestRaw(dst []byte, hdr *pb.RequestHeader, param []byte, cells [][]byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	hdr.RequestParam = proto.Bool(true)
	n := 0
	for _, p := range cells {
		n += len(p)
	}
	if n > MaxFrame {
		return nil, fmt.Errorf("hbase/rpc: %s request's cell block of %d bytes is over the %d-byte frame limit", hdr.GetMethodName(), n, MaxFrame)
	}
	if n > 0 {
		hdr.CellBlockMeta = &pb.CellBlockMeta{Length: proto.Uint32(uint32(n))}
	}
	var err error
	if dst, err = appendDelimited(dst, hdr); err != nil {
		return nil, fmt.Errorf("hbase/rpc: encoding request header: %w", err)
	}
	dst = protowire.AppendVarint(dst, uint64(len(param)))
	dst = append(dst, param...)
	dst = slices.Grow(dst, n)
	for _, p := range cells {
		dst = append(dst, p...)
	}
	return closeFrame(dst, start, hdr)
}

// closeFrame writes the length of the request frame that starts at
// dst[start] (its 4-byte prefix), refusing one over MaxFrame.
func closeFrame(dst []byte, start int, hdr *pb.RequestHeader) ([]byte, error) {
	total := len(dst) - start - 4
	if total > MaxFrame {
		return nil, fmt.Errorf("hbase/rpc: %s request of %d bytes is over the %d-byte frame limit", hdr.GetMethodName(), total, MaxFrame)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	return dst, nil
}

// readDelimited splits a uvarint-length-prefixed message off the front of b.
func readDelimited(b []byte, what string) (msg, rest []byte, err error) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 {
		return nil, nil, fmt.Errorf("%w: %s: bad length prefix", ErrCorrupt, what)
	}
	if n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: %s: length %d overruns the %d bytes left in the frame", ErrCorrupt, what, n, len(b)-k)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// Response is one parsed response frame.
type Response struct {
	Header *pb.ResponseHeader
	// Message is the encoded response message; nil when Header has an
	// exception.
	Message []byte
	// CellBlock is the trailing cell block, or nil.
	CellBlock []byte
}

// ParseResponse parses a response frame without its leading u32 total. The
// returned slices point into frame.
func ParseResponse(frame []byte) (*Response, error) {
	hb, rest, err := readDelimited(frame, "response header")
	if err != nil {
		return nil, err
	}
	r := &Response{Header: &pb.ResponseHeader{}}
	if err := proto.Unmarshal(hb, r.Header); err != nil {
		return nil, fmt.Errorf("%w: response header: %v", ErrCorrupt, err)
	}
	if r.Header.Exception != nil {
		return r, nil
	}
	// A successful call always carries its message (possibly empty, a zero
	// length); only an exception leaves it out.
	if len(rest) > 0 {
		if r.Message, rest, err = readDelimited(rest, "response message"); err != nil {
			return nil, fmt.Errorf("call %d: %w", r.Header.GetCallId(), err)
		}
	}
	if m := r.Header.CellBlockMeta; m != nil {
		if int64(m.GetLength()) != int64(len(rest)) {
			return nil, fmt.Errorf("%w: call %d: cell block meta says %d bytes, frame has %d", ErrCorrupt, r.Header.GetCallId(), m.GetLength(), len(rest))
		}
		r.CellBlock = rest
	} else if len(rest) > 0 {
		return nil, fmt.Errorf("%w: call %d: %d unexpected bytes after the response message", ErrCorrupt, r.Header.GetCallId(), len(rest))
	}
	return r, nil
}

// remoteError converts an ExceptionResponse.
func remoteError(e *pb.ExceptionResponse, server string) *RemoteError {
	return &RemoteError{
		Class:      e.GetExceptionClassName(),
		Message:    firstLine(e.GetStackTrace()),
		StackTrace: e.GetStackTrace(),
		Host:       e.GetHostname(),
		Port:       int(e.GetPort()),
		DoNotRetry: e.GetDoNotRetry(),
		Server:     server,
	}
}

// ActionError converts the NameBytesPair HBase uses for a failed action of a
// Multi call (name: exception class; value: the stringified exception).
func ActionError(e *pb.NameBytesPair, server string) *RemoteError {
	msg := firstLine(string(e.GetValue()))
	re := &RemoteError{Class: e.GetName(), Message: msg, StackTrace: string(e.GetValue()), Server: server}
	if re.Class == ExcRegionMoved {
		// Multi carries no host and port fields; the message says
		// "Region moved to: hostname=H port=P startCode=S. ..."
		re.Host, re.Port = parseMovedTo(msg)
	}
	return re
}

// parseMovedTo extracts the new location from a RegionMovedException
// message, or returns "", 0.
func parseMovedTo(msg string) (string, int) {
	field := func(name string) string {
		i := strings.Index(msg, name+"=")
		if i < 0 {
			return ""
		}
		v := msg[i+len(name)+1:]
		if j := strings.IndexAny(v, " ."); j >= 0 && name == "port" {
			v = v[:j]
		} else if j := strings.IndexByte(v, ' '); j >= 0 {
			v = v[:j]
		}
		return v
	}
	host, port := field("hostname"), field("port")
	p, err := strconv.Atoi(port)
	if host == "" || err != nil || p <= 0 || p > 65535 {
		return "", 0
	}
	return host, p
}
