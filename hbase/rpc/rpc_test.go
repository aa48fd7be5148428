package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/pb"
)

func TestCellBlockRoundTrip(t *testing.T) {
	cells := []cell.Cell{
		{Row: []byte("row1"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 42, Type: cell.Put, Value: []byte("v")},
		{Row: []byte("row1"), Family: []byte("f"), Qualifier: nil, Timestamp: 7, Type: cell.DeleteFamily},
		{Row: []byte{0, 0xFF}, Family: []byte("fam"), Qualifier: []byte{1, 2, 3}, Timestamp: -1, Type: cell.Put, Value: bytes.Repeat([]byte("x"), 1000)},
		// A per-cell TTL tag (type 8, an 8-byte TTL): the cell carries it
		// to the server (KeyValueCodecWithTags).
		{Row: []byte("row2"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 9, Type: cell.Put, Value: []byte("w"), Tags: []byte{0, 9, 8, 0, 0, 0, 0, 0, 0, 0x0e, 0x10}},
	}
	var block []byte
	want := 0
	for i := range cells {
		block = AppendCell(block, &cells[i])
		want += CellBlockLen(&cells[i])
		if len(block) != want {
			t.Fatalf("cell %d: block is %d bytes, CellBlockLen sums to %d", i, len(block), want)
		}
	}
	got, err := DecodeCells(NewCellBlock(block), len(cells), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cells {
		if cell.Compare(&got[i], &cells[i]) != 0 || !bytes.Equal(got[i].Value, cells[i].Value) || !bytes.Equal(got[i].Tags, cells[i].Tags) {
			t.Errorf("cell %d: got %s tags %x, want %s tags %x", i, &got[i], got[i].Tags, &cells[i], cells[i].Tags)
		}
	}
}

func TestCellBlockWithTags(t *testing.T) {
	c := cell.Cell{Row: []byte("r"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("v")}
	// KeyValueCodecWithTags layout: the KeyValue, then u16 tags length, tags.
	tags := []byte{0, 2, 9, 'x'} // one tag: length 2, type 9, value "x"
	block := AppendCell(nil, &c)
	binary.BigEndian.PutUint32(block, binary.BigEndian.Uint32(block)+uint32(2+len(tags)))
	block = binary.BigEndian.AppendUint16(block, uint16(len(tags)))
	block = append(block, tags...)
	var got cell.Cell
	if err := NewCellBlock(block).Next(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Tags, tags) || string(got.Value) != "v" {
		t.Fatalf("got tags %x value %q", got.Tags, got.Value)
	}
}

// TestCheckTags: tags past the u16 length a cell block gives them are an
// error, never a wrapped length that sends other bytes.
func TestCheckTags(t *testing.T) {
	c := cell.Cell{Row: []byte("r"), Family: []byte("f"), Timestamp: 1, Type: cell.Put, Tags: make([]byte, MaxTagsLen)}
	if err := CheckTags(&c); err != nil {
		t.Fatalf("%d bytes of tags: %v", len(c.Tags), err)
	}
	c.Tags = make([]byte, MaxTagsLen+1)
	if err := CheckTags(&c); err == nil {
		t.Fatalf("%d bytes of tags: no error", len(c.Tags))
	}
}

func TestCellBlockCorrupt(t *testing.T) {
	c := cell.Cell{Row: []byte("r"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("value")}
	good := AppendCell(nil, &c)
	cases := map[string][]byte{
		"short header":   good[:10],
		"truncated":      good[:len(good)-1],
		"key overruns":   func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[4:], 1000); return b }(),
		"value overruns": func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[8:], 1000); return b }(),
		"bad key":        func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint16(b[12:], 500); return b }(),
		"trailing not tags": func() []byte {
			b := bytes.Clone(good)
			binary.BigEndian.PutUint32(b, binary.BigEndian.Uint32(b)+1)
			return append(b, 7)
		}(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			var got cell.Cell
			err := NewCellBlock(b).Next(&got)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestRequestFraming(t *testing.T) {
	param := &pb.GetRequest{Region: &pb.RegionSpecifier{Type: pb.RegionSpecifier_REGION_NAME.Enum(), Value: []byte("t,,1.abc.")}, Get: &pb.Get{Row: []byte("r")}}
	cb := []byte("cellblock")
	frame, err := AppendRequest(nil, &pb.RequestHeader{CallId: proto.Uint32(7), MethodName: proto.String("Get")}, param, cb)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-4 {
		t.Fatalf("total %d, frame has %d bytes after it", n, len(frame)-4)
	}
	rest := frame[4:]
	hb, rest, err := readDelimited(rest, "header")
	if err != nil {
		t.Fatal(err)
	}
	var hdr pb.RequestHeader
	if err := proto.Unmarshal(hb, &hdr); err != nil {
		t.Fatal(err)
	}
	if hdr.GetCallId() != 7 || hdr.GetMethodName() != "Get" || !hdr.GetRequestParam() || hdr.GetCellBlockMeta().GetLength() != uint32(len(cb)) {
		t.Fatalf("header %v", &hdr)
	}
	pbytes, rest, err := readDelimited(rest, "param")
	if err != nil {
		t.Fatal(err)
	}
	var got pb.GetRequest
	if err := proto.Unmarshal(pbytes, &got); err != nil || !proto.Equal(&got, param) {
		t.Fatalf("param %v, %v", &got, err)
	}
	if !bytes.Equal(rest, cb) {
		t.Fatalf("cell block %q", rest)
	}
}

// responseFrame builds a response frame body (without the u32 total), as a
// server writes it.
func responseFrame(t testing.TB, hdr *pb.ResponseHeader, msg proto.Message, cb []byte) []byte {
	if cb != nil {
		hdr.CellBlockMeta = &pb.CellBlockMeta{Length: proto.Uint32(uint32(len(cb)))}
	}
	b, err := appendDelimited(nil, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if msg != nil {
		if b, err = appendDelimited(b, msg); err != nil {
			t.Fatal(err)
		}
	}
	return append(b, cb...)
}

func TestParseResponse(t *testing.T) {
	cb := AppendCell(nil, &cell.Cell{Row: []byte("r"), Family: []byte("f"), Timestamp: 1, Type: cell.Put})
	ok := responseFrame(t, &pb.ResponseHeader{CallId: proto.Uint32(3)}, &pb.ScanResponse{CellsPerResult: []uint32{1}}, cb)
	r, err := ParseResponse(ok)
	if err != nil {
		t.Fatal(err)
	}
	var sr pb.ScanResponse
	if err := proto.Unmarshal(r.Message, &sr); err != nil || len(sr.CellsPerResult) != 1 || !bytes.Equal(r.CellBlock, cb) {
		t.Fatalf("message %v (%v), cell block %x", &sr, err, r.CellBlock)
	}

	exc := responseFrame(t, &pb.ResponseHeader{CallId: proto.Uint32(4), Exception: &pb.ExceptionResponse{
		ExceptionClassName: proto.String(ExcRegionMoved),
		StackTrace:         proto.String(ExcRegionMoved + ": Region moved to: hostname=h port=16020 startCode=1. As of locationSeqNum=5.\n\tat x"),
		Hostname:           proto.String("h"), Port: proto.Int32(16020),
	}}, nil, nil)
	r, err = ParseResponse(exc)
	if err != nil || r.Header.Exception == nil || r.Message != nil {
		t.Fatalf("exception frame: %v %v", r, err)
	}
	re := remoteError(r.Header.Exception, "rs1:16020")
	if re.Retry() != Relocate || re.Host != "h" || re.Port != 16020 || !strings.Contains(re.Error(), "Region moved to") || strings.Contains(re.Error(), "\tat") {
		t.Fatalf("remote error %v (%s)", re, re.Retry())
	}

	empty := responseFrame(t, &pb.ResponseHeader{CallId: proto.Uint32(5)}, &pb.CleanupBulkLoadResponse{}, nil)
	if _, err := ParseResponse(empty); err != nil {
		t.Fatalf("empty message: %v", err)
	}

	for name, b := range map[string][]byte{
		"header overrun":       {0x20, 1, 2},
		"cell block too short": ok[:len(ok)-1],
		"trailing garbage":     append(bytes.Clone(empty), 1, 2, 3),
		"bad varint":           {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
	} {
		if _, err := ParseResponse(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

func TestActionErrorRegionMoved(t *testing.T) {
	e := &pb.NameBytesPair{Name: proto.String(ExcRegionMoved), Value: []byte(ExcRegionMoved + ": Region moved to: hostname=rs2.example port=16020 startCode=1700000000000. As of locationSeqNum=12.\n\tat ...")}
	re := ActionError(e, "rs1:16020")
	if re.Host != "rs2.example" || re.Port != 16020 || re.Retry() != Relocate {
		t.Fatalf("got host %q port %d retry %s", re.Host, re.Port, re.Retry())
	}
	for _, msg := range []string{"Region moved to: hostname= port=x", "nothing here", "hostname=h port=99999"} {
		if h, p := parseMovedTo(msg); h != "" || p != 0 {
			t.Errorf("parseMovedTo(%q) = %q, %d", msg, h, p)
		}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		class      string
		doNotRetry bool
		want       Retry
	}{
		{ExcNotServingRegion, false, Relocate},
		{ExcRegionMoved, false, Relocate},
		{ExcServerStopped, false, Relocate},
		{ExcRegionOpening, false, Backoff},
		{ExcRegionTooBusy, false, Backoff},
		{ExcServerNotRunningYet, false, Backoff},
		{ExcCallQueueTooBig, false, Backoff},
		{ExcPleaseHold, false, Backoff},
		{ExcMultiTooLarge, false, RetryNow},
		{ExcRetryImmediately, false, RetryNow},
		{ExcUnknownScanner, true, RestartScanner},
		{ExcOutOfOrderScanner, true, RestartScanner},
		{ExcScannerReset, true, RestartScanner},
		{ExcTableNotFound, true, GiveUp},
		{ExcNoSuchColumnFamily, true, GiveUp},
		{ExcDoNotRetry, false, GiveUp},
		{"java.io.IOException", false, Backoff},
		{"org.example.SomethingFatal", true, GiveUp},
		{ExcRegionTooBusy, true, GiveUp},
	}
	for _, c := range cases {
		if got := Classify(c.class, c.doNotRetry); got != c.want {
			t.Errorf("Classify(%s, %v) = %s, want %s", c.class, c.doNotRetry, got, c.want)
		}
	}
	err := &RemoteError{Class: ExcTableNotFound}
	if !errors.Is(err, ErrTableNotFound) || errors.Is(err, ErrTableExists) {
		t.Error("errors.Is on RemoteError class sentinels")
	}
	if RetryOf(context.DeadlineExceeded) != Backoff || RetryOf(context.Canceled) != GiveUp {
		t.Error("RetryOf context errors")
	}
	if RetryOf(errors.Join(ErrConnBroken)) != Relocate || RetryOf(ErrCorrupt) != GiveUp {
		t.Error("RetryOf local errors")
	}
}

// fakeServer accepts one connection, checks the preamble and header, and
// hands requests to handle, which writes responses with reply.
type fakeServer struct {
	ln     net.Listener
	header chan *pb.ConnectionHeader
}

type fakeReq struct {
	hdr   *pb.RequestHeader
	param []byte
	cells []byte
}

func startFake(t *testing.T, handle func(conn net.Conn, reqs <-chan fakeReq)) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeServer{ln: ln, header: make(chan *pb.ConnectionHeader, 1)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		pre := make([]byte, 6)
		if _, err := io.ReadFull(br, pre); err != nil || string(pre) != "HBas\x00\x50" {
			return
		}
		var n uint32
		binary.Read(br, binary.BigEndian, &n)
		hb := make([]byte, n)
		io.ReadFull(br, hb)
		var ch pb.ConnectionHeader
		proto.Unmarshal(hb, &ch)
		fs.header <- &ch
		reqs := make(chan fakeReq)
		go handle(conn, reqs)
		for {
			if err := binary.Read(br, binary.BigEndian, &n); err != nil {
				close(reqs)
				return
			}
			frame := make([]byte, n)
			if _, err := io.ReadFull(br, frame); err != nil {
				close(reqs)
				return
			}
			hb, rest, _ := readDelimited(frame, "h")
			var rh pb.RequestHeader
			proto.Unmarshal(hb, &rh)
			var param []byte
			if rh.GetRequestParam() {
				param, rest, _ = readDelimited(rest, "p")
			}
			reqs <- fakeReq{&rh, param, rest}
		}
	}()
	return fs
}

func reply(t *testing.T, conn net.Conn, mu *sync.Mutex, hdr *pb.ResponseHeader, msg proto.Message, cb []byte) {
	body := responseFrame(t, hdr, msg, cb)
	mu.Lock()
	defer mu.Unlock()
	conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
	conn.Write(body)
}

func TestConnOutOfOrderAndExceptions(t *testing.T) {
	var wmu sync.Mutex
	fs := startFake(t, func(conn net.Conn, reqs <-chan fakeReq) {
		// Collect three calls, then answer them in reverse order: the third
		// with an exception.
		var got []fakeReq
		for r := range reqs {
			got = append(got, r)
			if len(got) == 3 {
				break
			}
		}
		for i := len(got) - 1; i >= 0; i-- {
			r := got[i]
			var row []byte
			var gr pb.GetRequest
			proto.Unmarshal(r.param, &gr)
			row = gr.GetGet().GetRow()
			if string(row) == "boom" {
				reply(t, conn, &wmu, &pb.ResponseHeader{CallId: r.hdr.CallId, Exception: &pb.ExceptionResponse{
					ExceptionClassName: proto.String(ExcRegionTooBusy), StackTrace: proto.String(ExcRegionTooBusy + ": too busy\n\tat ...")}}, nil, nil)
				continue
			}
			cb := AppendCell(nil, &cell.Cell{Row: row, Family: []byte("f"), Timestamp: 1, Type: cell.Put, Value: row})
			reply(t, conn, &wmu, &pb.ResponseHeader{CallId: r.hdr.CallId}, &pb.GetResponse{Result: &pb.Result{AssociatedCellCount: proto.Int32(1)}}, cb)
		}
		for range reqs {
		}
	})
	ctx := context.Background()
	c, err := Dial(ctx, fs.ln.Addr().String(), Config{User: "u", Service: ClientService})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := <-fs.header
	if h.GetServiceName() != ClientService || h.GetUserInfo().GetEffectiveUser() != "u" || h.GetCellBlockCodecClass() != CodecClass {
		t.Fatalf("connection header %v", h)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	vals := make([]string, 3)
	for i, row := range []string{"a", "b", "boom"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp pb.GetResponse
			req := &pb.GetRequest{Region: &pb.RegionSpecifier{Type: pb.RegionSpecifier_REGION_NAME.Enum(), Value: []byte("x")}, Get: &pb.Get{Row: []byte(row)}}
			cb, err := c.Call(ctx, "Get", req, nil, PriorityNormal, &resp)
			errs[i] = err
			if err == nil {
				cells, derr := DecodeCells(NewCellBlock(cb), int(resp.GetResult().GetAssociatedCellCount()), nil)
				if derr != nil || len(cells) != 1 {
					errs[i] = derr
					return
				}
				vals[i] = string(cells[0].Value)
			}
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || vals[0] != "a" || vals[1] != "b" {
		t.Fatalf("calls: %v %v values %q", errs[0], errs[1], vals)
	}
	var re *RemoteError
	if !errors.As(errs[2], &re) || re.Class != ExcRegionTooBusy || RetryOf(errs[2]) != Backoff {
		t.Fatalf("third call: %v", errs[2])
	}
}

func TestConnBrokenFailsAllCalls(t *testing.T) {
	fs := startFake(t, func(conn net.Conn, reqs <-chan fakeReq) {
		n := 0
		for range reqs {
			if n++; n == 2 {
				conn.Close() // the server dies with two calls in flight
			}
		}
	})
	ctx := context.Background()
	c, err := Dial(ctx, fs.ln.Addr().String(), Config{User: "u", Service: ClientService})
	if err != nil {
		t.Fatal(err)
	}
	<-fs.header
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Call(ctx, "Get", &pb.IsMasterRunningRequest{}, nil, PriorityNormal, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrConnBroken) || RetryOf(err) != Relocate {
			t.Errorf("call %d: got %v, want ErrConnBroken", i, err)
		}
	}
	if _, err := c.Call(ctx, "Get", &pb.IsMasterRunningRequest{}, nil, PriorityNormal, nil); !errors.Is(err, ErrConnBroken) {
		t.Errorf("call after break: got %v", err)
	}
}

func TestConnCallTimeout(t *testing.T) {
	timeouts := make(chan uint32, 1)
	fs := startFake(t, func(conn net.Conn, reqs <-chan fakeReq) {
		for r := range reqs {
			timeouts <- r.hdr.GetTimeout() // never answer
		}
	})
	c, err := Dial(context.Background(), fs.ln.Addr().String(), Config{User: "u", Service: ClientService})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Call(ctx, "Get", &pb.IsMasterRunningRequest{}, nil, PriorityNormal, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if ms := <-timeouts; ms == 0 || ms > 200 {
		t.Errorf("request header timeout %d ms, want 1..200", ms)
	}
	if c.Err() != nil {
		t.Errorf("a timed-out call broke the connection: %v", c.Err())
	}
}

func FuzzParseResponse(f *testing.F) {
	cb := AppendCell(nil, &cell.Cell{Row: []byte("r"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("v")})
	f.Add(responseFrame(f, &pb.ResponseHeader{CallId: proto.Uint32(1)}, &pb.ScanResponse{CellsPerResult: []uint32{1}, MoreResults: proto.Bool(true)}, cb))
	f.Add(responseFrame(f, &pb.ResponseHeader{CallId: proto.Uint32(2), Exception: &pb.ExceptionResponse{ExceptionClassName: proto.String(ExcRegionMoved)}}, nil, nil))
	f.Add([]byte{})
	f.Add(protowire.AppendVarint(nil, 1<<40))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResponse(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		var sr pb.ScanResponse
		if proto.Unmarshal(r.Message, &sr) == nil {
			rd := NewCellBlock(r.CellBlock)
			for _, n := range sr.CellsPerResult {
				if _, err := DecodeCells(rd, int(n%1000), nil); err != nil {
					break
				}
			}
		}
	})
}

func FuzzCellBlock(f *testing.F) {
	var seed []byte
	for _, c := range []cell.Cell{
		{Row: []byte("r"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("v")},
		{Row: []byte("r2"), Family: []byte("f"), Timestamp: 2, Type: cell.DeleteFamily},
	} {
		seed = AppendCell(seed, &c)
	}
	f.Add(seed)
	f.Add(seed[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewCellBlock(b)
		var out []byte
		for rd.Remaining() {
			var c cell.Cell
			start := rd.Offset()
			if err := rd.Next(&c); err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not ErrCorrupt: %v", err)
				}
				return
			}
			if rd.Offset()-start != CellBlockLen(&c) {
				return // a tags section, which re-encoding drops
			}
			out = AppendCell(out, &c)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding a decoded block changed it:\n%x\n%x", b, out)
		}
	})
}
