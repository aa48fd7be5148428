package hbase

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// faultCells generates cell i of a fault test: 4 qualifiers per row, an
// 8-byte value, a distinct timestamp per cell so that a cell written twice
// as a new version would show up as two cells.
func faultCell(i int) cell.Cell {
	row := i / 4
	return cell.Cell{
		Row:       []byte(fmt.Sprintf("r%07d", row)),
		Family:    []byte("f"),
		Qualifier: []byte{'q', byte('0' + i%4)},
		Timestamp: 1767225600000 + int64(i),
		Type:      cell.Put,
		Value:     []byte(fmt.Sprintf("%08d", i)),
	}
}

// oracleCount returns rows and cells (all versions) under prefix, as HBase's
// own client counts them.
func oracleCount(t testing.TB, table, prefix string) (rows, cells int64) {
	out := oracle(t, "count", table, "--prefix", hex.EncodeToString([]byte(prefix)))
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "\t")
		if len(f) == 3 && f[0] == hex.EncodeToString([]byte(prefix)) {
			rows, _ = strconv.ParseInt(f[1], 10, 64)
			cells, _ = strconv.ParseInt(f[2], 10, 64)
			return rows, cells
		}
	}
	t.Fatalf("oracle count: no line for prefix %q in:\n%s", prefix, out)
	return 0, 0
}

// checkFaultCells scans the table raw, all versions, and checks that each
// cell index in want appears exactly once with its value, and no others.
func checkFaultCells(t testing.TB, c *Client, table string, n int, want func(i int) bool) {
	t.Helper()
	seen := make([]bool, n)
	sc := c.Scan(context.Background(), []byte(table), &Scan{Raw: true, MaxVersions: 1 << 20, Caching: 5000, MaxResultSize: 8 << 20})
	defer sc.Close()
	var total, extra, dup int
	for sc.Next() {
		cl := sc.Cell()
		total++
		i := int(cl.Timestamp - 1767225600000)
		if i < 0 || i >= n || cell.Compare(cl, &[]cell.Cell{faultCell(i)}[0]) != 0 || string(cl.Value) != fmt.Sprintf("%08d", i) {
			if extra++; extra < 5 {
				t.Errorf("unexpected cell %s", cl)
			}
			continue
		}
		if seen[i] {
			if dup++; dup < 5 {
				t.Errorf("cell %d stored twice", i)
			}
		}
		seen[i] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for i := range seen {
		if want(i) && !seen[i] {
			if missing++; missing < 5 {
				t.Errorf("cell %d (%s) acknowledged but not in the table", i, &[]cell.Cell{faultCell(i)}[0])
			}
		}
	}
	if missing+extra+dup > 0 {
		t.Fatalf("%d cells scanned: %d missing, %d unexpected, %d duplicated", total, missing, extra, dup)
	}
	t.Logf("%d cells scanned, all present once", total)
}

// TestWriterSurvivesSplitAndMove writes a million small cells while HBase
// splits one region and moves another: every cell must arrive, once.
func TestWriterSurvivesSplitAndMove(t *testing.T) {
	c, _ := testClient(t)
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	ctx := context.Background()
	table := tempTable(t, c, "faults", nil, []byte(fmt.Sprintf("r%07d", n/8)))
	w := c.NewWriter([]byte(table), WriterConfig{})

	// The writes are paced over about 40 s and the last tenth waits for the
	// split and the move to finish, so both happen while cells flow.
	faultsDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	var werr error
	go func() {
		defer wg.Done()
		perCell := 40 * time.Second / time.Duration(n)
		for i := 0; i < n; i++ {
			if i%1000 == 0 {
				time.Sleep(time.Until(start.Add(time.Duration(i) * perCell)))
			}
			if i == n*9/10 {
				<-faultsDone
			}
			if werr = w.Write(ctx, faultCell(i)); werr != nil {
				return
			}
		}
		werr = w.Close(ctx)
	}()
	func() {
		defer close(faultsDone)
		for w.Stats().Written < uint64(n/10) && time.Since(start) < time.Minute {
			time.Sleep(50 * time.Millisecond)
		}
		splitRow := fmt.Sprintf("r%07d", n/8/2)
		t.Logf("%v: %d written; splitting at %s", time.Since(start).Round(time.Millisecond), w.Stats().Written, splitRow)
		oracle(t, "split", table, hex.EncodeToString([]byte(splitRow)))
		moveRow := fmt.Sprintf("r%07d", n/4*3/4)
		t.Logf("%v: %d written; moving the region of %s", time.Since(start).Round(time.Millisecond), w.Stats().Written, moveRow)
		t.Log(strings.TrimSpace(oracle(t, "move", table, hex.EncodeToString([]byte(moveRow)))))
		t.Logf("%v: %d written after split and move", time.Since(start).Round(time.Millisecond), w.Stats().Written)
	}()
	wg.Wait()
	el := time.Since(start)
	st := w.Stats()
	t.Logf("%d cells in %v (%.0f cells/s), %d Multi calls, %d retries", st.Written, el.Round(time.Millisecond), float64(st.Written)/el.Seconds(), st.Calls, st.Retries)
	if werr != nil {
		t.Fatal(werr)
	}
	if st.Written != uint64(n) || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	regions, err := c.Regions(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(regions) < 3 {
		t.Errorf("the table has %d regions after the split", len(regions))
	}
	checkFaultCells(t, c, table, n, func(int) bool { return true })
	if _, cells := oracleCount(t, table, "r"); cells != int64(n) {
		t.Fatalf("HBase's client counts %d cells, want %d", cells, n)
	}
}

// TestDestructiveWriterRegionServerStopped stops a region server mid-run. The writer
// retries until its deadline and then reports the failed rows; every cell
// not reported failed must be in the table.
func TestDestructiveWriterRegionServerStopped(t *testing.T) {
	testenv.RequireDestructive(t)
	c, st := testClient(t)
	ctx := context.Background()
	n := 200_000
	table := tempTable(t, c, "rsstop", nil, []byte(fmt.Sprintf("r%07d", n/4/2)))
	regions, err := c.Regions(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	servers := strings.Fields(strings.TrimPrefix(control(t, st, "list-regionservers"), "ok"))
	if len(servers) < 2 {
		t.Fatalf("the test cluster should have 2 region servers, has %v", servers)
	}
	// Stop the server of the table's first region (by HOST,PORT,STARTCODE).
	victim := -1
	for i, s := range servers {
		f := strings.Split(s, ",")
		if len(f) == 3 && f[0]+":"+f[1] == regions[0].Server {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("region server %s not in %v", regions[0].Server, servers)
	}
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			control(t, st, "start-regionserver")
		}
	}
	t.Cleanup(restart)

	// A retry deadline shorter than HBase needs to reassign the stopped
	// server's regions (even a graceful stop takes seconds), so the rows
	// sent to it in the meantime must be reported failed.
	w := c.NewWriter([]byte(table), WriterConfig{RetryTimeout: 300 * time.Millisecond, MaxCellsPerCall: 2000})
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			if werr = w.Write(ctx, faultCell(i)); werr != nil {
				return
			}
			if i%(n/10) == 0 {
				time.Sleep(200 * time.Millisecond) // spread the run over the stop
			}
		}
		werr = w.Close(ctx)
	}()
	for w.Stats().Written < uint64(n/10) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Log(control(t, st, fmt.Sprintf("stop-regionserver %d", victim)))
	wg.Wait()
	stats := w.Stats()
	t.Logf("stats %+v", stats)
	failedCells := map[int]bool{}
	var we *WriteError
	switch {
	case werr == nil:
		t.Fatal("no write failed although a region server was stopped for longer than the retry deadline")
	case errors.As(werr, &we):
		for _, f := range we.Failures {
			if len(f.Row) == 0 || f.Err == nil || len(f.Cells) == 0 {
				t.Fatalf("failure without row, error or cells: %+v", f)
			}
			for _, cl := range f.Cells {
				failedCells[int(cl.Timestamp-1767225600000)] = true
			}
		}
		t.Logf("%d mutations failed, first: %v", len(we.Failures), we.Failures[0].Err)
	default:
		t.Fatalf("writer: %v", werr)
	}
	if uint64(len(failedCells)) != stats.Failed || stats.Written+stats.Failed != uint64(n) {
		t.Fatalf("written %d + failed %d (%d listed) != %d", stats.Written, stats.Failed, len(failedCells), n)
	}
	// Bring the server back and wait for the table to be whole again.
	restart()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := c.Get(ctx, []byte(table), []byte("r0000000"), nil); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("table not readable after restart: %v", err)
		}
		time.Sleep(time.Second)
	}
	checkFaultCells(t, c, table, n, func(i int) bool { return !failedCells[i] })
}

// TestScanSurvivesMoveAndSplit moves the region a scan is reading, then
// splits that same region at a row ahead of the scan: each time the scan
// reopens where it stopped and returns every cell once, in order. The test
// checks that the move made the scan reopen, that HBase really split the
// region at that row (its region list has the two daughters) while the
// scan was still in the parent, and that the split made the scan reopen
// again.
func TestScanSurvivesMoveAndSplit(t *testing.T) {
	c, _ := testClient(t)
	ctx := context.Background()
	n := 60_000
	// 4 cells a row: rows 0 to 14999, in two regions split at row 7500.
	table := tempTable(t, c, "scanfaults", nil, []byte(fmt.Sprintf("r%07d", n/4/2)))
	w := c.NewWriter([]byte(table), WriterConfig{})
	for i := 0; i < n; i++ {
		if err := w.Write(ctx, faultCell(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The split point: row 6750, in the first region, ahead of the scan
	// when it splits (at row 6000) and before the region's end (7500).
	splitRow := fmt.Sprintf("r%07d", n/4*9/20)
	sc := c.Scan(ctx, []byte(table), &Scan{Caching: 200, MaxResultSize: 16 << 10})
	defer sc.Close()
	i := 0
	afterMove := -1
	for sc.Next() {
		cl := sc.Cell()
		want := faultCell(i)
		if cell.Compare(cl, &want) != 0 || string(cl.Value) != string(want.Value) {
			t.Fatalf("cell %d: got %s, want %s", i, cl, &want)
		}
		i++
		switch i {
		case n / 5:
			t.Log(strings.TrimSpace(oracle(t, "move", table, hex.EncodeToString(cl.Row))))
		case n / 5 * 2:
			afterMove = sc.Restarts()
			if afterMove == 0 {
				t.Fatal("the scan never reopened after the move: the move did not hit it")
			}
			oracle(t, "split", table, hex.EncodeToString([]byte(splitRow)))
			requireSplitAt(t, table, splitRow)
			t.Logf("split at %s while the scan was at %s", splitRow, cl.Row)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("scanned %d cells, want %d", i, n)
	}
	if afterMove < 0 {
		t.Fatal("the scan ended before the split")
	}
	if sc.Restarts() <= afterMove {
		t.Fatalf("the scan never reopened after the split (%d restarts before it, %d in all): it did not cross the split", afterMove, sc.Restarts())
	}
	t.Logf("%d cells, %d restarts (%d after the move, %d after the split)", i, sc.Restarts(), afterMove, sc.Restarts()-afterMove)
}

// requireSplitAt fails the test unless HBase's region list for table (the
// oracle's) has a region ending and the next starting at row.
func requireSplitAt(t *testing.T, table, row string) {
	t.Helper()
	at := hex.EncodeToString([]byte(row))
	var ends, starts bool
	lines := strings.Split(strings.TrimSpace(oracle(t, "regions", table)), "\n")
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) < 3 {
			t.Fatalf("oracle regions line %q", l)
		}
		starts = starts || f[1] == at
		ends = ends || f[2] == at
	}
	if !starts || !ends || len(lines) != 3 {
		t.Fatalf("after the split at %s, HBase lists %d regions:\n%s\nwant 3, two of them meeting at %s", row, len(lines), strings.Join(lines, "\n"), at)
	}
}
