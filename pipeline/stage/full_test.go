package stage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
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
	got := checkStaged(t, s.Plan(), readStaged(t, disk), 32)
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
