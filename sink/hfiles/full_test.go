package hfiles

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/sink"
)

// TestStageDiskFullDuringMerge: the runs fit on a 1 MiB tmpfs but the
// HFiles merged from them do not (runs are compressed, these HFiles are
// not). Finish fails with a FullError that names the partition being
// merged, the free space and the need estimated from the runs; once the
// tmpfs is grown, Finish again writes HFiles that hold exactly the cells.
func TestStageDiskFullDuringMerge(t *testing.T) {
	disk := testenv.SmallDisk(t, "1m")
	ctx := context.Background()
	keys := [][]byte{[]byte("h"), []byte("p")}
	s, err := New(ctx, Options{Staging: disk, Table: "t", SplitKeys: keys, Memory: 4 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := genCells(31, 8000), genCells(32, 8000)
	writeSplit(t, s, "a", a)
	writeSplit(t, s, "b", b)
	err = s.Finish(ctx, logRep{t})
	var fe *FullError
	if !errors.Is(err, ErrStagingFull) || !errors.As(err, &fe) {
		t.Fatalf("Finish on a full disk: %v; want a FullError", err)
	}
	t.Logf("%v", err)
	if !strings.HasPrefix(fe.While, "merging region ") || fe.Free < 0 || fe.Folder != disk {
		t.Errorf("FullError while %q, free %d, folder %q", fe.While, fe.Free, fe.Folder)
	}

	testenv.GrowDisk(t, disk, "64m")
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatalf("Finish once there is room: %v", err)
	}
	got := checkStaged(t, s.RegionMap(), readStaged(t, disk), 32)
	equalDumps(t, got, sorted(append(a, b...)))
	// The estimate against what the folder held at its peak: the runs and
	// every HFile, before the runs were removed.
	st := s.Stats()
	peak := st.RunBytes + st.HFileBytes
	t.Logf("estimated need %d (%s); runs %d + HFiles %d = %d", fe.Need, fe.Basis, st.RunBytes, st.HFileBytes, peak)
	if fe.Need < peak*3/4 || fe.Need > peak*3/2 {
		t.Errorf("the error estimated %d bytes needed; the folder held %d at its peak", fe.Need, peak)
	}
}

// TestStageDiskFullWhileWritingDirect: a split in order writes its own
// HFiles as its cells come (direct.go); when the staging folder fills
// then, the error is a FullError, as it is for runs and the merge, so the
// run stops saying what the folder holds and needs.
func TestStageDiskFullWhileWritingDirect(t *testing.T) {
	disk := testenv.SmallDisk(t, "6m")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: disk, Table: "t", Memory: 64 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// About 16 MB of cells: the first 4 MiB go to the split's HFiles when
	// it turns direct, and the disk fills after that, cell by cell.
	cells := orderedCells(rowNames("b", 4000), 100, strings.Repeat("v", 20))
	w, err := s.Begin(ctx, sink.SplitInfo{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	written := 0
	for i := range cells {
		if werr = w.Write(ctx, &cells[i]); werr != nil {
			break
		}
		written++
	}
	if werr == nil {
		_, werr = w.Commit(ctx)
		t.Logf("every cell written; the commit: %v", werr)
	} else {
		w.Abort()
	}
	var fe *FullError
	if !errors.Is(werr, ErrStagingFull) || !errors.As(werr, &fe) {
		t.Fatalf("the split filled a 6 MiB folder (%d of %d cells written): %v; want a FullError", written, len(cells), werr)
	}
	if written == len(cells) {
		t.Errorf("the folder filled only at the commit: the test wants it full while the split writes directly")
	}
	t.Logf("%d of %d cells written: %v", written, len(cells), werr)
	// What the folder holds counts the HFiles still open: the split's file
	// filled it, no file was finished yet, and a 6 MiB folder that is full
	// holds more than a MiB of them.
	if fe.Held < 1<<20 {
		t.Errorf("the error says the folder holds %d bytes of the job's files, want the open HFiles' (over 1 MiB)", fe.Held)
	}
	if n := s.openHFiles.Load(); n != 0 {
		t.Errorf("%d bytes still counted as open HFiles after the split aborted", n)
	}
}
