package hfiles

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestLoadSentMissingFileCluster: a load is interrupted right after a
// region's Sent mark is saved, before its request goes out (testAfterSent),
// so the region is marked sent and holds none of its files. One of its
// staged files is then taken away (a staging folder cleaned, a second
// loader). The resumed load asks the region server for the region's store
// files (GetStoreFile), finds the file's id in none, and fails naming the
// file and the region: before, a sent region's missing file counted as
// loaded, and its cells were lost without a word. With the file put back
// the load finishes, and HBase's raw scan holds every cell once.
func TestLoadSentMissingFileCluster(t *testing.T) {
	c, table, staging := clusterTable(t, "sentmiss", "k")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, NoLoad: true, Memory: 1 << 20, Workers: 1, HFileSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cells := genCells(21, 8000)
	writeSplit(t, s, "one", cells)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var sentDir string
	testAfterSent = func(reg *Region) {
		once.Do(func() {
			sentDir = reg.Dir
			cancel()
		})
	}
	t.Cleanup(func() { testAfterSent = nil })
	ld, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	err = ld.Finish(cctx, logRep{t})
	testAfterSent = nil
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("load cancelled after the first Sent mark: %v, want context.Canceled", err)
	}
	st, _, err := ld.readFinish()
	ld.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Sent[sentDir] || st.Loaded[sentDir] {
		t.Fatalf("region %s: sent %v, loaded %v; the test wants it sent and not loaded", sentDir, st.Sent[sentDir], st.Loaded[sentDir])
	}
	var gone string
	for _, ps := range st.Parts {
		if ld.regions.Regions[ps.Region].Dir == sentDir && len(ps.Files) > 0 {
			gone = path.Join(ld.root, ps.Files[len(ps.Files)-1].Name)
		}
	}
	if gone == "" {
		t.Fatalf("region %s has no recorded file", sentDir)
	}
	aside := path.Join(ld.root, "aside-"+path.Base(gone))
	if err := ld.fs.Rename(gone, aside); err != nil {
		t.Fatal(err)
	}

	ld, err = New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	err = ld.Finish(ctx, logRep{t})
	if !errors.Is(err, ErrMissingHFile) || !strings.Contains(err.Error(), path.Base(gone)) || !strings.Contains(err.Error(), sentDir) {
		t.Fatalf("resumed load with %s gone from sent region %s: %v, want ErrMissingHFile naming both", gone, sentDir, err)
	}
	t.Logf("refused: %v", err)
	if err := ld.fs.Rename(aside, gone); err != nil {
		t.Fatal(err)
	}
	ld.Close()

	ld, err = New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	if err := ld.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	// The rule: every cell written, once, in the scan and in the store
	// files (a scan shows one of two equal cells loaded twice).
	testenv.SameCells(t, "target after the refused and the completed load (raw)", testenv.DumpTable(t, table, true), cells)
	testenv.SameCells(t, "cells of the target's store files, each read by HBase", storedCells(t, testenv.Require(t), table), cells)
}
