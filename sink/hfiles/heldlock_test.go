package hfiles

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// gatedFS holds the first run file's Create until gate is closed, saying
// so on entered: a spill that takes long.
type gatedFS struct {
	vfs.WriteFS
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedFS) Create(name string) (vfs.WriteFile, error) {
	if strings.Contains(name, "/"+runsDir+"/") {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.entered)
			<-g.gate
		}
	}
	return g.WriteFS.Create(name)
}

// TestStageKeptSpillLeavesOthersWriting: while one worker spills a kept
// split to make room (a run written, which takes a while), another
// worker's Write whose memory fits goes on instead of waiting for the
// spill behind the sink's lock; every split is reported durable once and
// the HFiles hold every cell.
func TestStageKeptSpillLeavesOthersWriting(t *testing.T) {
	ctx := context.Background()
	o := Options{Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 8 << 20, Workers: 2, NoDirect: true}
	s, log := newKept(t, o)
	gfs := &gatedFS{WriteFS: s.fs, entered: make(chan struct{}), gate: make(chan struct{})}
	s.fs = gfs
	released := false
	release := func() {
		if !released {
			released = true
			close(gfs.gate)
		}
	}
	defer release()

	var all []cell.Cell
	for _, id := range []string{"k1", "k2"} {
		cells := genCells(int64(len(all)+1), 9000) // about 1 MiB each: kept
		for i := range cells {
			cells[i].Row = append([]byte(id), cells[i].Row...)
		}
		if ack := writeSplit(t, s, id, cells); !ack.Held {
			t.Fatalf("split %s was not kept", id)
		}
		all = append(all, cells...)
	}
	b, err := s.Begin(ctx, sink.SplitInfo{ID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	small := cell.Cell{Row: []byte("b0"), Family: []byte("f1"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("v")}
	if err := b.Write(ctx, &small); err != nil {
		t.Fatal(err)
	}
	all = append(all, small.Clone())
	free := o.Memory - s.held.Load()
	if free < 1<<20 {
		t.Fatalf("only %d bytes free; the test needs room for b's next chunk", free)
	}
	t.Logf("kept %d bytes; %d free", s.held.Load(), free)

	// a's cell needs more than is free: a spills a kept split, and its
	// run's Create waits at the gate.
	a, err := s.Begin(ctx, sink.SplitInfo{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	huge := cell.Cell{Row: []byte("a0"), Family: []byte("f1"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: bytes.Repeat([]byte{7}, int(free)+1)}
	aDone := make(chan error, 1)
	go func() { aDone <- a.Write(ctx, &huge) }()
	select {
	case <-gfs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("a's Write spilled no kept split")
	}
	all = append(all, huge.Clone())

	// b's next cell needs a chunk of its own, which fits in what is free.
	mid := cell.Cell{Row: []byte("b1"), Family: []byte("f1"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: bytes.Repeat([]byte{8}, int(free/2))}
	bDone := make(chan error, 1)
	go func() { bDone <- b.Write(ctx, &mid) }()
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		release()
		<-bDone
		t.Fatal("b's Write, whose memory fits, waited for a's spill of a kept split")
	}
	all = append(all, mid.Clone())
	release()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	for _, w := range []sink.SplitSink{a, b} {
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if ids := log.reported(); len(ids) != 4 {
		t.Errorf("reported durable: %v; want each of the 4 splits once", ids)
	}
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, log.dir), 32), sorted(all))
}
