package bigtable_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
)

// wire watches the MutateRows calls that reach the emulator, and can
// fail them as a real instance does: a whole call (UNAVAILABLE), or some
// of its entries (the entry's status in the response; the emulator has
// applied it, which a retry then writes again at the same timestamp).
type wire struct {
	mu       sync.Mutex
	requests []request
	calls    atomic.Int64
	// failCall returns the status that fails call n (1-based) whole, or nil.
	failCall func(n int64) error
	// failEntry returns the code that fails one entry of call n, or OK.
	failEntry func(n int64, row string) codes.Code
	// creates are the CreateTable requests the admin client sent.
	creates []*btapb.CreateTableRequest
}

// request is one MutateRows request as it arrived.
type request struct {
	mutations int
	entries   []entryShape
	// bytes is the request's size on the wire, header the part of it
	// that is not its entries (table name, app profile).
	bytes, header int
	// kinds counts its mutations by kind (set_cell, delete_from_column, …).
	kinds map[string]int
}

type entryShape struct {
	row       string
	mutations int
}

func (w *wire) interceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !strings.HasSuffix(info.FullMethod, "/MutateRows") {
		return handler(srv, ss)
	}
	n := w.calls.Add(1)
	if w.failCall != nil {
		if err := w.failCall(n); err != nil {
			return err
		}
	}
	return handler(srv, &watched{ServerStream: ss, w: w, n: n})
}

type watched struct {
	grpc.ServerStream
	w    *wire
	n    int64
	rows []string
}

func (s *watched) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if req, ok := m.(*btpb.MutateRowsRequest); ok {
		r := request{bytes: proto.Size(req), header: proto.Size(&btpb.MutateRowsRequest{TableName: req.TableName, AppProfileId: req.AppProfileId, AuthorizedViewName: req.AuthorizedViewName}), kinds: map[string]int{}}
		for _, e := range req.Entries {
			r.mutations += len(e.Mutations)
			for _, m := range e.Mutations {
				// The oneof's field name: set_cell, delete_from_column, …
				m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
					r.kinds[string(fd.Name())]++
					return true
				})
			}
			r.entries = append(r.entries, entryShape{row: string(e.RowKey), mutations: len(e.Mutations)})
			s.rows = append(s.rows, string(e.RowKey))
		}
		s.w.mu.Lock()
		s.w.requests = append(s.w.requests, r)
		s.w.mu.Unlock()
	}
	return nil
}

func (s *watched) SendMsg(m any) error {
	if res, ok := m.(*btpb.MutateRowsResponse); ok && s.w.failEntry != nil {
		for _, e := range res.Entries {
			if c := s.w.failEntry(s.n, s.rows[e.Index]); c != codes.OK {
				e.Status.Code, e.Status.Message = int32(c), "injected: "+c.String()
			}
		}
	}
	return s.ServerStream.SendMsg(m)
}

// unary records the admin client's CreateTable requests: the emulator
// keeps no splits (its SampleRowKeys samples rows at random), so a
// table's initial splits can only be seen on the way in.
func (w *wire) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*btapb.CreateTableRequest); ok {
		w.mu.Lock()
		w.creates = append(w.creates, r)
		w.mu.Unlock()
	}
	return handler(ctx, req)
}

// emulator starts Google's in-process Bigtable emulator behind w and
// points the clients at it (BIGTABLE_EMULATOR_HOST), as a user's
// environment would.
func emulator(t *testing.T, w *wire) *bt.Conn {
	t.Helper()
	if w == nil {
		w = &wire{}
	}
	srv, err := bttest.NewServer("127.0.0.1:0", grpc.ChainStreamInterceptor(w.interceptor), grpc.ChainUnaryInterceptor(w.unary))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("BIGTABLE_EMULATOR_HOST", srv.Addr)
	conn, err := bt.Dial(context.Background(), &job.Bigtable{Project: "p", Instance: "i"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// newTable creates table with families d and e, keeping every version.
func newTable(t *testing.T, conn *bt.Conn, table string) {
	t.Helper()
	err := conn.Admin.CreateTableFromConf(context.Background(), &bigtable.TableConf{TableID: table,
		ColumnFamilies: map[string]bigtable.Family{"d": {GCPolicy: bigtable.NoGcPolicy()}, "e": {GCPolicy: bigtable.NoGcPolicy()}}})
	if err != nil {
		t.Fatal(err)
	}
}

// readBack reads the whole table with the client library: each cell
// with its Bigtable timestamp (microseconds).
func readBack(t *testing.T, conn *bt.Conn, table string) []cell.Cell {
	t.Helper()
	var out []cell.Cell
	err := conn.Data.Open(table).ReadRows(context.Background(), bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for fam, items := range r {
			for _, it := range items {
				out = append(out, cell.Cell{Row: []byte(it.Row), Family: []byte(fam), Qualifier: []byte(strings.TrimPrefix(it.Column, fam+":")),
					Timestamp: int64(it.Timestamp), Type: cell.Put, Value: it.Value})
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameAsWritten compares what Bigtable holds with the cells written, by
// the rule: the same row, family, qualifier and value, at the HBase
// timestamp ×1000.
func sameAsWritten(t *testing.T, got, written []cell.Cell) {
	t.Helper()
	want := map[string]int{}
	for _, c := range written {
		want[fmt.Sprintf("%q/%s:%q/%d=%x", c.Row, c.Family, c.Qualifier, c.Timestamp*1000, c.Value)]++
	}
	for _, c := range got {
		k := fmt.Sprintf("%q/%s:%q/%d=%x", c.Row, c.Family, c.Qualifier, c.Timestamp, c.Value)
		if want[k] == 0 {
			t.Errorf("extra or repeated cell in Bigtable: %.200s", k)
			return
		}
		want[k]--
	}
	for k, n := range want {
		if n > 0 {
			t.Errorf("missing from Bigtable: %.200s (and maybe more)", k)
			return
		}
	}
}

func put(row, fam, q string, ts int64, v string) cell.Cell {
	return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: cell.Put, Value: []byte(v)}
}

// writeSplit writes cells through one split of s and commits it; bad
// collects the refusals for their key.
func writeSplit(t *testing.T, s *bt.Sink, cells []cell.Cell) (sink.Ack, []*sink.BadKeyError, error) {
	t.Helper()
	ctx := context.Background()
	sp, err := s.Begin(ctx, sink.SplitInfo{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var bad []*sink.BadKeyError
	for i := range cells {
		err := sp.Write(ctx, &cells[i])
		var bk *sink.BadKeyError
		switch {
		case errors.As(err, &bk):
			bad = append(bad, bk)
		case err != nil:
			sp.Abort()
			return sink.Ack{}, bad, err
		}
	}
	ack, err := sp.Commit(ctx)
	return ack, bad, err
}

// TestBatchesAndPieces: no request holds more than Bigtable's 100,000
// mutations nor, with more than one entry, more than the batch's bound;
// a row of 200,000 cells arrives whole, in two entries (pieces), and the
// sink names it in its account and a warning; the other rows are one
// entry each.
func TestBatchesAndPieces(t *testing.T) {
	w := &wire{}
	conn := emulator(t, w)
	newTable(t, conn, "t")
	var warnings []string
	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{BatchMutations: 10_000, Warn: func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }})
	var cells []cell.Cell
	for i := 0; i < 3000; i++ {
		cells = append(cells, put(fmt.Sprintf("a%05d", i), "d", "q", 1000+int64(i), "v"))
	}
	// 400 columns of 500 versions: the emulator sorts a row's column
	// names at each new column, so 200,000 columns would take minutes.
	for q := 0; q < 400; q++ {
		for v := 0; v < 500; v++ {
			cells = append(cells, put("big", "d", fmt.Sprintf("q%03d", q), int64(1000-v), "x"))
		}
	}
	for i := 0; i < 3000; i++ {
		cells = append(cells, put(fmt.Sprintf("z%05d", i), "e", "", 7, ""))
	}
	ack, bad, err := writeSplit(t, s, cells)
	if err != nil || len(bad) > 0 {
		t.Fatalf("commit: %v, %d refused", err, len(bad))
	}
	if ack.Cells != int64(len(cells)) || ack.Failed != 0 {
		t.Errorf("ack: %+v, want %d cells", ack, len(cells))
	}
	bigEntries := 0
	for _, r := range w.requests {
		if r.mutations > bt.MaxMutations {
			t.Errorf("a request of %d mutations", r.mutations)
		}
		if len(r.entries) > 1 && r.mutations > 10_000 {
			t.Errorf("a request of %d entries, %d mutations, past the batch's 10,000", len(r.entries), r.mutations)
		}
		for _, e := range r.entries {
			if e.row == "big" {
				bigEntries++
			} else if e.mutations != 1 {
				t.Errorf("row %q in an entry of %d mutations, want 1", e.row, e.mutations)
			}
		}
	}
	if bigEntries != 2 {
		t.Errorf("row big arrived in %d entries, want 2", bigEntries)
	}
	st := s.Account().(bt.Stats)
	if len(st.RowsInPieces) != 1 || st.RowsInPieces[0].Row != `"big"` || st.RowsInPieces[0].Pieces != 2 || st.RowsInPieces[0].Cells != 200_000 {
		t.Errorf("rows in pieces: %+v", st.RowsInPieces)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `row "big" (200000 cells) written in 2 pieces, not atomic`) {
		t.Errorf("warnings: %q", warnings)
	}
	sameAsWritten(t, readBack(t, conn, "t"), cells)
}

// TestAtomicRowsRefuses: with atomic_rows, a row past 100,000 cells is a
// bad key: the cell that passes the bound is refused with the cells of
// the row taken before it (given back to the run), the row's later cells
// are refused too, and nothing of the row reaches Bigtable; the rows
// around it are written.
func TestAtomicRowsRefuses(t *testing.T) {
	conn := emulator(t, nil)
	newTable(t, conn, "t")
	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{AtomicRows: true})
	cells := []cell.Cell{put("a", "d", "q", 1, "v")}
	for i := 0; i < 100_005; i++ {
		cells = append(cells, put("big", "d", fmt.Sprintf("q%03d", i/500), int64(1000-i%500), "x"))
	}
	cells = append(cells, put("c", "d", "q", 1, "v"))
	ack, bad, err := writeSplit(t, s, cells)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 5 || len(bad[0].Dropped) != 100_000 || len(bad[1].Dropped) != 0 || !strings.Contains(bad[0].Why, "atomic_rows") {
		t.Fatalf("%d refusals, the first dropping %d cells: %v", len(bad), len(bad[0].Dropped), bad[0])
	}
	if d := bad[0].Dropped[99_999]; string(d.Qualifier) != "q199" || d.Timestamp != 501 {
		t.Errorf("last dropped cell %s/%d, want q199/501", d.Qualifier, d.Timestamp)
	}
	if ack.Cells != 2 || ack.Failed != 0 {
		t.Errorf("ack %+v, want the 2 other rows' cells", ack)
	}
	sameAsWritten(t, readBack(t, conn, "t"), []cell.Cell{cells[0], cells[len(cells)-1]})
}

// TestRefusedCells: a row key over 4 KiB (or empty) is a bad key, a key
// of exactly 4 KiB is written; a delete marker and a negative timestamp
// fail the run (neither has a Bigtable form), as does a tagged cell with
// tags: fail; without it the cell is written without its tags, counted.
func TestRefusedCells(t *testing.T) {
	conn := emulator(t, nil)
	newTable(t, conn, "t")
	long := strings.Repeat("k", bt.MaxRowKey)
	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{})
	tagged := put("tagged", "d", "q", 1, "v")
	tagged.Tags = []byte{0, 9, 8, 0, 0, 0, 0, 0, 0, 0, 100} // a TTL tag
	_, bad, err := writeSplit(t, s, []cell.Cell{put(long, "d", "q", 1, "v"), put(long+"k", "d", "q", 1, "v"), put("", "d", "q", 1, "v"), tagged})
	if err != nil || len(bad) != 2 || !strings.Contains(bad[0].Why, "4097 bytes") {
		t.Fatalf("err %v, refused %d: %v", err, len(bad), bad)
	}
	if !errors.Is(bad[0], sink.ErrBadKey) {
		t.Errorf("a refusal is not sink.ErrBadKey")
	}
	sameAsWritten(t, readBack(t, conn, "t"), []cell.Cell{put(long, "d", "q", 1, "v"), put("tagged", "d", "q", 1, "v")})
	if st := s.Account().(bt.Stats); st.TagsDropped != 1 {
		t.Errorf("tags dropped: %d", st.TagsDropped)
	}

	del := put("r", "d", "q", 1, "")
	del.Type = cell.DeleteColumn
	neg := put("r", "d", "q", -3, "")
	for name, tc := range map[string]struct {
		c    cell.Cell
		o    bt.Options
		want string
	}{
		"a delete marker":           {del, bt.Options{}, "no tombstones"},
		"a negative timestamp":      {neg, bt.Options{}, "timestamp -3"},
		"a tagged cell, tags: fail": {tagged, bt.Options{FailOnTags: true}, "tags: fail"},
	} {
		s := bt.New(conn.Data.Open("t"), "t", nil, tc.o)
		_, bad, err := writeSplit(t, s, []cell.Cell{tc.c})
		if err == nil || len(bad) > 0 || errors.Is(err, sink.ErrBadKey) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (refused %d), want an error saying %q", name, err, len(bad), tc.want)
		}
	}
}

// TestTimestampsOnTheWire: the emulator, which refuses what Bigtable
// refuses (a timestamp that is not a whole millisecond, or past the
// largest), takes a cell at HBase's LATEST_TIMESTAMP at Bigtable's
// largest timestamp, counted, beside an ordinary one ×1000.
func TestTimestampsOnTheWire(t *testing.T) {
	conn := emulator(t, nil)
	newTable(t, conn, "t")
	var warned []string
	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{Warn: func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }})
	ack, _, err := writeSplit(t, s, []cell.Cell{put("r", "d", "a", 1767225600123, "v1"), put("r", "d", "b", math.MaxInt64, "v2")})
	if err != nil || ack.Cells != 2 || ack.Failed != 0 {
		t.Fatalf("ack %+v: %v", ack, err)
	}
	got := readBack(t, conn, "t")
	if len(got) != 2 || got[0].Timestamp != 1767225600123000 || got[1].Timestamp != int64(bt.MaxTimestamp) {
		t.Errorf("read back %+v", got)
	}
	if st := s.Account().(bt.Stats); st.TimestampsAtMax != 1 || len(warned) != 1 {
		t.Errorf("at max: %d, warnings %q", st.TimestampsAtMax, warned)
	}
}

// TestFaultsRetried: whole calls failing with UNAVAILABLE and entries
// failing with UNAVAILABLE or RESOURCE_EXHAUSTED are sent again until
// they land (counted as retries, so the run slows down), and the table
// then holds every cell once; an entry failing with a code no retry
// cures is counted failed, with its row in the examples.
func TestFaultsRetried(t *testing.T) {
	w := &wire{
		failCall: func(n int64) error {
			if n <= 2 {
				return status.Error(codes.Unavailable, "injected: unavailable")
			}
			return nil
		},
		failEntry: func(n int64, row string) codes.Code {
			switch {
			case row == "denied":
				return codes.PermissionDenied
			case n == 3 && strings.HasSuffix(row, "0"):
				return codes.Unavailable
			case n <= 5 && strings.HasSuffix(row, "7"):
				return codes.ResourceExhausted
			}
			return codes.OK
		},
	}
	conn := emulator(t, w)
	newTable(t, conn, "t")
	s := bt.New(conn.Data.Open("t"), "t", conn.Calls(), bt.Options{BatchMutations: 100})
	var cells []cell.Cell
	for i := 0; i < 1000; i++ {
		cells = append(cells, put(fmt.Sprintf("r%04d", i), "d", "q", int64(i), "v"))
	}
	cells = append(cells, put("denied", "d", "q", 1, "v"), put("denied", "d", "r", 1, "v"))
	ack, _, err := writeSplit(t, s, cells)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Cells != 1000 || ack.Failed != 2 || len(ack.FailedExamples) != 1 || !strings.Contains(ack.FailedExamples[0], `row "denied" (2 cells)`) {
		t.Errorf("ack %+v", ack)
	}
	// Two whole calls failed, then entries of three more.
	if s.Retries() < 3 {
		t.Errorf("%d retries counted after %d calls", s.Retries(), w.calls.Load())
	}
	got := readBack(t, conn, "t")
	var landed []cell.Cell
	for _, c := range got {
		if string(c.Row) != "denied" { // the emulator applied it before the injected failure
			landed = append(landed, c)
		}
	}
	sameAsWritten(t, landed, cells[:1000])
	t.Logf("%d MutateRows calls on the wire, %d retries counted by the sink", w.calls.Load(), s.Retries())
}

// TestReady: a missing table is created with its families' GC rules from
// the source families (what does not map named in a warning); an
// existing table lacking a family, or with a rule that would remove
// cells the run writes, is refused with sink.ErrTarget naming it.
func TestReady(t *testing.T) {
	conn := emulator(t, nil)
	ctx := context.Background()
	fams := []sink.Family{
		{Target: "d", Source: "o", MaxVersions: 3, TTL: 7 * 24 * time.Hour, MinVersions: 1,
			Attributes: map[string]string{"VERSIONS": "3", "TTL": "604800 SECONDS (7 DAYS)", "COMPRESSION": "SNAPPY"}},
		{Target: "e", Source: "e", MaxVersions: 1, Attributes: map[string]string{"VERSIONS": "1"}},
	}
	var warned []string
	warn := func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }
	created, err := bt.Ready(ctx, conn.Admin, bt.Target{Table: "new", Families: fams, Create: true, SplitKeys: [][]byte{[]byte("m")}, Warn: warn})
	if err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	info, err := conn.Admin.TableInfo(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, f := range info.FamilyInfos {
		rules[f.Name] = f.FullGCPolicy.String()
	}
	if rules["d"] != "(versions() > 3 || age() > 7d)" || rules["e"] != "versions() > 1" {
		t.Errorf("created rules %q", rules)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "COMPRESSION SNAPPY") || !strings.Contains(warned[0], "MIN_VERSIONS 1") {
		t.Errorf("warnings %q", warned)
	}
	// Ready again: the table exists and fits.
	if created, err := bt.Ready(ctx, conn.Admin, bt.Target{Table: "new", Families: fams, Create: true}); err != nil || created {
		t.Errorf("ready on the created table: %v, %v", created, err)
	}
	if _, err := bt.Ready(ctx, conn.Admin, bt.Target{Table: "absent", Families: fams}); !errors.Is(err, sink.ErrTarget) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("absent table without create: %v", err)
	}
	for name, tc := range map[string]struct {
		fams map[string]bigtable.Family
		want string
	}{
		"a family missing":  {map[string]bigtable.Family{"d": {GCPolicy: bigtable.MaxVersionsPolicy(3)}}, "no family e"},
		"too few versions":  {map[string]bigtable.Family{"d": {GCPolicy: bigtable.MaxVersionsPolicy(1)}, "e": {GCPolicy: bigtable.NoGcPolicy()}}, "family d (versions() > 1) would remove cells the job writes: it keeps 1 versions of a column, and the job writes up to 3"},
		"a shorter max age": {map[string]bigtable.Family{"d": {GCPolicy: bigtable.MaxVersionsPolicy(3)}, "e": {GCPolicy: bigtable.MaxAgePolicy(time.Hour)}}, "family e (age() > 1h) would remove cells"},
	} {
		table := strings.ReplaceAll(name, " ", "_")
		if err := conn.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: table, ColumnFamilies: tc.fams}); err != nil {
			t.Fatal(err)
		}
		_, err := bt.Ready(ctx, conn.Admin, bt.Target{Table: table, Families: fams, Create: true})
		if !errors.Is(err, sink.ErrTarget) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want sink.ErrTarget saying %q", name, err, tc.want)
		}
	}
	if _, err := bt.Ready(ctx, conn.Admin, bt.Target{Table: "x", Families: []sink.Family{{Target: "a:b", MaxVersions: 1}}, Create: true}); !errors.Is(err, sink.ErrTarget) || !errors.Is(err, job.ErrBigtableFamily) {
		t.Errorf("family a:b: %v", err)
	}
}

// TestLargeRows: a row past 256 MiB (257 cells of 1 MiB) fails the run
// at the cell that passes the bound, naming the row and
// allow_large_rows; with allow_large_rows it is written whole, in
// pieces, named in the stats and a warning. The rows before it are
// written either way.
func TestLargeRows(t *testing.T) {
	conn := emulator(t, nil)
	newTable(t, conn, "t")
	mib := strings.Repeat("x", 1<<20)
	cells := []cell.Cell{put("a", "d", "q", 1, "v")}
	for i := range 257 {
		cells = append(cells, put("huge", "d", fmt.Sprintf("q%03d", i), 1, mib))
	}
	// Entries and requests of 2 MiB at most: the emulator takes messages
	// of 4 MiB (a real instance, 256 MB).
	o := bt.Options{BatchBytes: 2 << 20, EntryBytes: 2 << 20, Timeout: 30 * time.Second}
	s := bt.New(conn.Data.Open("t"), "t", nil, o)
	_, bad, err := writeSplit(t, s, cells)
	if err == nil || len(bad) > 0 || !strings.Contains(err.Error(), `row "huge" passes 256 MiB`) || !strings.Contains(err.Error(), "allow_large_rows: true") {
		t.Fatalf("without allow_large_rows: %v (refused %d), want the run stopped naming the row", err, len(bad))
	}

	var warnings []string
	o.AllowLargeRows, o.Warn = true, func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }
	s = bt.New(conn.Data.Open("t"), "t", nil, o)
	ack, bad, err := writeSplit(t, s, cells)
	if err != nil || len(bad) > 0 || ack.Cells != int64(len(cells)) {
		t.Fatalf("with allow_large_rows: %v, refused %d, ack %+v, want %d cells", err, len(bad), ack, len(cells))
	}
	st := s.Account().(bt.Stats)
	if len(st.LargeRows) != 1 || st.LargeRows[0] != `"huge"` {
		t.Errorf("large rows %q, want the one", st.LargeRows)
	}
	large := 0
	for _, w := range warnings {
		if strings.Contains(w, `row "huge" is over 256 MiB`) {
			large++
		}
	}
	if large != 1 {
		t.Errorf("warnings %q, want one naming the large row", warnings)
	}
}

// TestTooLargeNotRetried: an entry past the server's message limit (the
// emulator takes 4 MiB, as a gRPC server does unless told otherwise) is
// refused with RESOURCE_EXHAUSTED, the code of Bigtable's push-back; sent
// again it is refused again, so it is counted failed at once, naming the
// limit, instead of being retried until the request's timeout. The rows
// beside it are written.
func TestTooLargeNotRetried(t *testing.T) {
	conn := emulator(t, nil)
	newTable(t, conn, "t")
	big := strings.Repeat("x", 5<<20)
	cells := []cell.Cell{put("a", "d", "q", 1, "v"), put("big", "d", "q", 1, big), put("c", "d", "q", 1, "v")}
	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{BatchBytes: 1 << 10, EntryBytes: 8 << 20, Timeout: 20 * time.Second})
	ack, bad, err := writeSplit(t, s, cells)
	if err != nil || len(bad) > 0 {
		t.Fatalf("%v, refused %d", err, len(bad))
	}
	st := s.Account().(bt.Stats)
	if ack.Failed != 1 || st.Retries != 0 || len(ack.FailedExamples) != 1 || !strings.Contains(ack.FailedExamples[0], "larger than max") {
		t.Errorf("ack %+v, %d retries; want the one cell failed at once, naming the limit", ack, st.Retries)
	}
	got := map[string]bool{}
	for _, c := range readBack(t, conn, "t") {
		got[string(c.Row)] = true
	}
	if !got["a"] || !got["c"] || got["big"] {
		t.Errorf("rows written %v, want a and c", got)
	}
}
