package hbase

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

func region(table, start, end, server string) *Region {
	return &Region{Table: table, Name: []byte(table + "," + start + ",1.x."), StartKey: []byte(start), EndKey: []byte(end), Server: server}
}

func TestRegionCache(t *testing.T) {
	var c regionCache
	c.tables = map[string]*tableRegions{}
	a, b, z := region("t", "", "g", "s1"), region("t", "g", "p", "s2"), region("t", "p", "", "s1")
	for _, r := range []*Region{z, a, b} {
		c.add(r)
	}
	for row, want := range map[string]*Region{"": a, "a": a, "g": b, "o\xff": b, "p": z, "zzz": z} {
		if got := c.lookup("t", []byte(row)); got != want {
			t.Errorf("lookup %q = %v, want %v", row, got, want)
		}
	}
	if c.lookup("other", []byte("a")) != nil {
		t.Error("lookup in an unknown table")
	}
	// A split of b: its daughters replace it.
	d1, d2 := region("t", "g", "k", "s2"), region("t", "k", "p", "s1")
	c.add(d1)
	if c.lookup("t", []byte("m")) != nil {
		t.Error("the split parent is still cached next to its daughter")
	}
	c.add(d2)
	if c.lookup("t", []byte("m")) != d2 || c.lookup("t", []byte("h")) != d1 {
		t.Error("daughters not found")
	}
	c.forget(d1)
	if c.lookup("t", []byte("h")) != nil || c.lookup("t", []byte("m")) != d2 {
		t.Error("forget removed the wrong region")
	}
	c.forgetServer("s1")
	if c.lookup("t", []byte("a")) != nil || c.lookup("t", []byte("m")) != nil || c.lookup("t", []byte("q")) != nil {
		t.Error("forgetServer kept regions of s1")
	}
	c.moved(a, "s3")
	if r := c.lookup("t", []byte("a")); r == nil || r.Server != "s3" {
		t.Errorf("moved: %v", r)
	}
}

func TestOverlaps(t *testing.T) {
	cases := []struct {
		a, b *Region
		want bool
	}{
		{region("t", "", "g", ""), region("t", "g", "", ""), false},
		{region("t", "", "h", ""), region("t", "g", "", ""), true},
		{region("t", "", "", ""), region("t", "g", "k", ""), true},
		{region("t", "a", "b", ""), region("t", "c", "d", ""), false},
	}
	for _, c := range cases {
		if got := overlaps(c.a, c.b); got != c.want {
			t.Errorf("overlaps(%v, %v) = %v", c.a, c.b, got)
		}
		if got := overlaps(c.b, c.a); got != c.want {
			t.Errorf("overlaps(%v, %v) = %v", c.b, c.a, got)
		}
	}
}

func TestMetaKeyAndTableName(t *testing.T) {
	if got := string(metaKey("ns:t", []byte("row"))); got != "ns:t,row,99999999999999" {
		t.Errorf("metaKey = %q", got)
	}
	tn := tableName("t")
	if string(tn.Namespace) != "default" || string(tn.Qualifier) != "t" || tableString(tn) != "t" {
		t.Errorf("tableName(t) = %v", tn)
	}
	tn = tableName("ns:t")
	if string(tn.Namespace) != "ns" || tableString(tn) != "ns:t" {
		t.Errorf("tableName(ns:t) = %v", tn)
	}
	if normTable("default:t") != "t" {
		t.Error("normTable")
	}
}

// znode builds znode data as HBase writes it: metadata prefix, PBUF, message.
func znode(m proto.Message, withPrefix bool) []byte {
	var b []byte
	if withPrefix {
		id := []byte("12345@host\x00\x01\x02\x03\x04\x05\x06\x07")
		b = append(b, 0xFF)
		b = binary.BigEndian.AppendUint32(b, uint32(len(id)))
		b = append(b, id...)
	}
	b = append(b, "PBUF"...)
	pbb, _ := proto.Marshal(m)
	return append(b, pbb...)
}

func TestStripZNodeData(t *testing.T) {
	m := &pb.MetaRegionServer{Server: &pb.ServerName{HostName: proto.String("rs1.example"), Port: proto.Uint32(16020), StartCode: proto.Uint64(99)}}
	for _, prefix := range []bool{true, false} {
		b, err := stripZNodeData(znode(m, prefix), "/hbase/meta-region-server")
		if err != nil {
			t.Fatal(err)
		}
		var got pb.MetaRegionServer
		if err := proto.Unmarshal(b, &got); err != nil || serverAddr(got.Server) != "rs1.example:16020" {
			t.Fatalf("prefix %v: %v %v", prefix, &got, err)
		}
	}
	for name, b := range map[string][]byte{
		"short prefix":  {0xFF, 0, 0},
		"id overrun":    {0xFF, 0, 0, 0, 9, 'a'},
		"no magic":      []byte("XBUF\x0a\x00"),
		"prefix, no pb": {0xFF, 0, 0, 0, 1, 'a', 'P'},
	} {
		if _, err := stripZNodeData(b, "/z"); err == nil || !strings.Contains(err.Error(), "/z") {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if fmtAddr("::1", 16020) != "[::1]:16020" {
		t.Error("IPv6 address")
	}
}

func metaCells(row string, info *pb.RegionInfo, server string) []cell.Cell {
	ri, _ := proto.Marshal(info)
	cells := []cell.Cell{{Row: []byte(row), Family: []byte("info"), Qualifier: []byte("regioninfo"), Type: cell.Put, Value: append([]byte("PBUF"), ri...)}}
	if server != "" {
		cells = append(cells, cell.Cell{Row: []byte(row), Family: []byte("info"), Qualifier: []byte("server"), Type: cell.Put, Value: []byte(server)})
	}
	return cells
}

func TestParseMetaRow(t *testing.T) {
	info := &pb.RegionInfo{RegionId: proto.Uint64(7), TableName: tableName("ns:t"), StartKey: []byte("a"), EndKey: []byte("m")}
	r, err := parseMetaRow(metaCells("ns:t,a,7.abc.", info, "h:1"))
	if err != nil || r.Table != "ns:t" || string(r.StartKey) != "a" || string(r.EndKey) != "m" || r.Server != "h:1" || string(r.Name) != "ns:t,a,7.abc." || r.ID != 7 {
		t.Fatalf("%v %v", r, err)
	}
	info.Split = proto.Bool(true)
	if _, err := parseMetaRow(metaCells("ns:t,a,7.abc.", info, "h:1")); rpc.RetryOf(err) != rpc.Backoff {
		t.Fatalf("split parent: %v", err)
	}
	if r, err := parseMetaRow([]cell.Cell{{Row: []byte("t"), Family: []byte("table"), Qualifier: []byte("state")}}); r != nil || err != nil {
		t.Fatalf("table state row: %v %v", r, err)
	}
	bad := metaCells("t,,1.x.", info, "")
	bad[0].Value = []byte("nope")
	if _, err := parseMetaRow(bad); err == nil {
		t.Fatal("regioninfo without magic accepted")
	}
}

func TestResultsOf(t *testing.T) {
	c1 := cell.Cell{Row: []byte("r1"), Family: []byte("f"), Qualifier: []byte("a"), Timestamp: 1, Type: cell.Put, Value: []byte("x")}
	c2 := cell.Cell{Row: []byte("r2"), Family: []byte("f"), Qualifier: []byte("b"), Timestamp: 2, Type: cell.Delete}
	block := rpc.AppendCell(rpc.AppendCell(nil, &c1), &c2)
	res, err := resultsOf(nil, []uint32{1, 1}, []bool{false, true}, block)
	if err != nil || len(res) != 2 || !res[1].partial || string(res[1].cells[0].Row) != "r2" {
		t.Fatalf("cell block results: %+v %v", res, err)
	}
	if _, err := resultsOf(nil, []uint32{1}, nil, block); !errors.Is(err, rpc.ErrCorrupt) {
		t.Fatalf("extra cells in block: %v", err)
	}
	if _, err := resultsOf(nil, []uint32{3}, nil, block); !errors.Is(err, rpc.ErrCorrupt) {
		t.Fatalf("too few cells in block: %v", err)
	}
	inline := []*pb.Result{{Cell: []*pb.Cell{{Row: c1.Row, Family: c1.Family, Qualifier: c1.Qualifier, Timestamp: proto.Uint64(1), CellType: pb.CellType_PUT.Enum(), Value: c1.Value}}}}
	res, err = resultsOf(inline, nil, nil, nil)
	if err != nil || len(res) != 1 || cell.Compare(&res[0].cells[0], &c1) != 0 || !bytes.Equal(res[0].cells[0].Value, c1.Value) {
		t.Fatalf("inline results: %+v %v", res, err)
	}
}

func TestPrefixStop(t *testing.T) {
	for prefix, want := range map[string]string{"": "", "abc": "abd", "a\xff": "b", "\xff\xff": "", "a\x00": "a\x01"} {
		if got := string(PrefixStop([]byte(prefix))); got != want {
			t.Errorf("PrefixStop(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func TestScanColumns(t *testing.T) {
	s := Scan{Families: [][]byte{[]byte("a")}, Columns: []Column{
		{Family: []byte("b"), Qualifier: []byte("x")}, {Family: []byte("b"), Qualifier: []byte("y")}, {Family: []byte("c")},
	}}
	cols := s.columns()
	if len(cols) != 3 || string(cols[1].Family) != "b" || len(cols[1].Qualifier) != 2 || len(cols[2].Qualifier) != 0 {
		t.Fatalf("%v", cols)
	}
	if timeRange(0, 0) != nil || timeRange(5, 0).GetTo() != uint64(cell.LatestTimestamp) {
		t.Fatal("timeRange")
	}
}

func FuzzStripZNodeData(f *testing.F) {
	f.Add(znode(&pb.Master{Master: &pb.ServerName{HostName: proto.String("m"), Port: proto.Uint32(16000)}}, true))
	f.Add(znode(&pb.MetaRegionServer{Server: &pb.ServerName{HostName: proto.String("r")}}, false))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := stripZNodeData(b, "/hbase/master")
		if err != nil {
			return
		}
		var m pb.Master
		if proto.Unmarshal(out, &m) == nil {
			_ = serverAddr(m.GetMaster())
		}
	})
}

func FuzzParseMetaRow(f *testing.F) {
	info := &pb.RegionInfo{RegionId: proto.Uint64(7), TableName: tableName("t"), StartKey: []byte("a")}
	f.Add(metaCells("t,a,7.x.", info, "h:1")[0].Value, []byte("h:1"))
	f.Add([]byte("PBUF"), []byte{})
	f.Fuzz(func(t *testing.T, ri, server []byte) {
		cells := []cell.Cell{
			{Row: []byte("t,,1.x."), Family: []byte("info"), Qualifier: []byte("regioninfo"), Type: cell.Put, Value: ri},
			{Row: []byte("t,,1.x."), Family: []byte("info"), Qualifier: []byte("server"), Type: cell.Put, Value: server},
		}
		r, err := parseMetaRow(cells)
		if err == nil && r != nil && r.Server != string(server) {
			t.Fatalf("server %q, want %q", r.Server, server)
		}
	})
}
