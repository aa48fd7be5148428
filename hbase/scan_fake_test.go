package hbase

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// fakeRS is a scripted region server for scanner behavior the real cluster
// cannot be made to show on demand (heartbeats, short leases, a forgotten
// scanner). handle answers each ScanRequest in arrival order.
type fakeRS struct {
	ln     net.Listener
	mu     sync.Mutex
	reqs   []*pb.ScanRequest
	handle func(i int, req *pb.ScanRequest) (*pb.ScanResponse, []cell.Cell, *pb.ExceptionResponse)
}

func startFakeRS(t *testing.T, handle func(i int, req *pb.ScanRequest) (*pb.ScanResponse, []cell.Cell, *pb.ExceptionResponse)) *fakeRS {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRS{ln: ln, handle: handle}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f
}

func readDelim(b []byte) ([]byte, []byte) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 || int(n) > len(b)-k {
		return nil, nil
	}
	return b[k : k+int(n)], b[k+int(n):]
}

func (f *fakeRS) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	pre := make([]byte, 6)
	if _, err := io.ReadFull(br, pre); err != nil {
		return
	}
	var n uint32
	if binary.Read(br, binary.BigEndian, &n) != nil {
		return
	}
	if _, err := io.ReadFull(br, make([]byte, n)); err != nil {
		return
	}
	for {
		if binary.Read(br, binary.BigEndian, &n) != nil {
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		hb, rest := readDelim(frame)
		var rh pb.RequestHeader
		proto.Unmarshal(hb, &rh)
		pbytes, _ := readDelim(rest)
		var req pb.ScanRequest
		proto.Unmarshal(pbytes, &req)
		f.mu.Lock()
		i := len(f.reqs)
		f.reqs = append(f.reqs, &req)
		f.mu.Unlock()
		resp, cells, exc := f.handle(i, &req)
		hdr := &pb.ResponseHeader{CallId: rh.CallId, Exception: exc}
		var block []byte
		for j := range cells {
			block = rpc.AppendCell(block, &cells[j])
		}
		if len(block) > 0 {
			hdr.CellBlockMeta = &pb.CellBlockMeta{Length: proto.Uint32(uint32(len(block)))}
		}
		hbytes, _ := proto.Marshal(hdr)
		body := protowire.AppendVarint(nil, uint64(len(hbytes)))
		body = append(body, hbytes...)
		if exc == nil {
			rbytes, _ := proto.Marshal(resp)
			body = protowire.AppendVarint(body, uint64(len(rbytes)))
			body = append(body, rbytes...)
		}
		body = append(body, block...)
		conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
		conn.Write(body)
	}
}

func (f *fakeRS) requests() []*pb.ScanRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.ScanRequest(nil), f.reqs...)
}

// offlineClient is a Client whose region cache already knows table "t"
// (one region on addr), so it needs no ZooKeeper.
func offlineClient(addr string) *Client {
	cfg := Config{ZKQuorum: "unused:1", User: "test", Pause: 10 * time.Millisecond}
	cfg.fill()
	c := &Client{cfg: cfg, pool: map[poolKey]*poolEntry{}, cache: regionCache{tables: map[string]*tableRegions{}}}
	c.cache.add(&Region{Table: "t", Name: []byte("t,,1.abc."), Server: addr})
	return c
}

func kv(row, q string) cell.Cell {
	return cell.Cell{Row: []byte(row), Family: []byte("f"), Qualifier: []byte(q), Timestamp: 1, Type: cell.Put, Value: []byte(row + q)}
}

// TestScannerHeartbeatRenewRestart drives one scan through a partial row, a
// lease renewal while the caller is slow, a heartbeat, a forgotten scanner
// and the reopen that must skip the cells already returned.
func TestScannerHeartbeatRenewRestart(t *testing.T) {
	var renews int
	var mu sync.Mutex
	fs := startFakeRS(t, func(i int, req *pb.ScanRequest) (*pb.ScanResponse, []cell.Cell, *pb.ExceptionResponse) {
		if req.GetRenew() {
			mu.Lock()
			renews++
			mu.Unlock()
			return &pb.ScanResponse{ScannerId: proto.Uint64(7), MoreResults: proto.Bool(true)}, nil, nil
		}
		switch {
		case req.Scan != nil && len(req.Scan.StartRow) == 0:
			// Open: the first two cells of r1, as a partial result; a
			// 200 ms lease.
			return &pb.ScanResponse{ScannerId: proto.Uint64(7), CellsPerResult: []uint32{2}, PartialFlagPerResult: []bool{true},
				MoreResults: proto.Bool(true), MoreResultsInRegion: proto.Bool(true), Ttl: proto.Uint32(200), MvccReadPoint: proto.Uint64(42)}, []cell.Cell{kv("r1", "a"), kv("r1", "b")}, nil
		case req.Scan != nil:
			// Reopen at r1: the server sends the whole row again.
			return &pb.ScanResponse{ScannerId: proto.Uint64(8), CellsPerResult: []uint32{3, 1},
				MoreResults: proto.Bool(true), MoreResultsInRegion: proto.Bool(false)}, []cell.Cell{kv("r1", "a"), kv("r1", "b"), kv("r1", "c"), kv("r2", "a")}, nil
		case req.GetNextCallSeq() == 0:
			return &pb.ScanResponse{ScannerId: proto.Uint64(7), HeartbeatMessage: proto.Bool(true), MoreResults: proto.Bool(true), MoreResultsInRegion: proto.Bool(true)}, nil, nil
		default:
			return nil, nil, &pb.ExceptionResponse{ExceptionClassName: proto.String(rpc.ExcUnknownScanner), StackTrace: proto.String(rpc.ExcUnknownScanner + ": Unknown scanner '7'."), DoNotRetry: proto.Bool(true)}
		}
	})
	c := offlineClient(fs.ln.Addr().String())
	defer c.Close()
	sc := c.Scan(context.Background(), []byte("t"), &Scan{Caching: 10})
	var got []string
	for sc.Next() {
		got = append(got, string(sc.Cell().Row)+":"+string(sc.Cell().Qualifier))
		if len(got) == 1 {
			time.Sleep(350 * time.Millisecond) // a slow caller: the lease must be renewed
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"r1:a", "r1:b", "r1:c", "r2:a"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	mu.Lock()
	if renews < 2 {
		t.Errorf("%d lease renewals during a 350 ms pause with a 200 ms lease", renews)
	}
	mu.Unlock()
	if sc.Restarts() != 1 {
		t.Errorf("%d restarts, want 1", sc.Restarts())
	}
	var reopen *pb.ScanRequest
	var seqs []uint64
	for _, r := range fs.requests() {
		switch {
		case r.GetRenew():
		case r.Scan != nil && len(r.Scan.StartRow) > 0:
			reopen = r
		case r.Scan == nil && !r.GetCloseScanner():
			seqs = append(seqs, r.GetNextCallSeq())
		}
	}
	if reopen == nil || string(reopen.Scan.StartRow) != "r1" || !reopen.Scan.GetIncludeStartRow() || reopen.Scan.GetMvccReadPoint() != 42 {
		t.Fatalf("reopen request %v", reopen)
	}
	if len(seqs) != 2 || seqs[0] != 0 || seqs[1] != 1 {
		t.Fatalf("next_call_seq of the next calls: %v", seqs)
	}
	if !reopen.GetClientHandlesPartials() || !reopen.GetClientHandlesHeartbeats() || !reopen.Scan.GetAllowPartialResults() {
		t.Fatalf("reopen does not declare partials and heartbeats: %v", reopen)
	}
}
