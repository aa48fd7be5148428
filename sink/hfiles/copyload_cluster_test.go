package hfiles

import (
	"context"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// TestCopyLoadKilledBetweenRegions stages on S3 (versitygw), so the mini
// cluster's region servers copy every staged file into the table instead of
// moving it: the staged files stay in the bucket after their load. The load is
// stopped once the first region is loaded, and finish.json is put back as
// it was at that moment, which is what a run killed then leaves (a
// deferred save never runs). The resumed load must not load that region
// again: the target's store files, each read by HBase's own HFile reader,
// hold every cell once. (A scan, raw too, shows one of two equal cells
// loaded twice, so it alone cannot tell; it is compared as well, for the
// cells it does show.) Before, the Loaded mark was saved lazily on the premise
// that loaded files are gone from the folder, and the resume loaded the
// region a second time. The first region's staged files are removed once
// its mark is saved, and no staged file is left at the end.
func TestCopyLoadKilledBetweenRegions(t *testing.T) {
	st := testenv.Require(t)
	if !st.S3AClient {
		t.Skipf("the region servers have no S3A client (HBase %s), so they cannot load from S3", st.HBaseVersion)
	}
	s3 := testenv.RequireS3(t)
	s3.UseS3Conf(t)
	direct := s3test.Dial(t, s3)
	prefix := s3test.Prefix(t, direct, "copyload")
	c, table, _ := clusterTable(t, "copyload", "k")
	staging := "s3a://" + s3.Bucket + prefix
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, NoLoad: true, Memory: 1 << 20, Workers: 1, HFileSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cells := genCells(23, 8000)
	writeSplit(t, s, "one", cells)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ld, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once     sync.Once
		killed   []byte // finish.json as the kill leaves it
		firstReg *Region
		snapErr  error
	)
	testAfterLoaded = func(reg *Region) {
		once.Do(func() {
			firstReg = reg
			killed, snapErr = vfs.ReadFile(ld.fs, path.Join(ld.root, ld.state))
			cancel()
		})
	}
	t.Cleanup(func() { testAfterLoaded = nil })
	err = ld.Finish(cctx, logRep{t})
	testAfterLoaded = nil
	t.Logf("load stopped after region %v was loaded: %v", firstReg != nil, err)
	if firstReg == nil || snapErr != nil {
		t.Fatalf("no region was loaded before the stop (state read: %v)", snapErr)
	}
	stateFile := path.Join(ld.root, ld.state)
	var first []string
	if st, _, err := ld.readFinish(); err != nil {
		t.Fatal(err)
	} else {
		for _, ps := range st.Parts {
			if ld.regions.Regions[ps.Region].Dir == firstReg.Dir {
				for _, f := range ps.Files {
					first = append(first, path.Join(ld.root, f.Name))
				}
			}
		}
	}
	ld.Close()
	if err := vfs.WriteFileAtomic(direct, stateFile, killed); err != nil {
		t.Fatal(err)
	}
	for _, p := range first {
		if _, err := direct.Stat(p); !notExist(err) {
			t.Errorf("%s of loaded region %s is still staged (stat error %v): it is removed once the region's mark is saved", p, firstReg.Dir, err)
		}
	}

	ld, err = New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	if err := ld.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	// The rule: every cell staged, once. A scan (raw too) shows one of two
	// equal cells loaded twice, so the store files themselves are read,
	// each with HBase's own HFile reader.
	testenv.SameCells(t, "target loaded from S3 staging, stopped after the first region and resumed (raw)", testenv.DumpTable(t, table, true), cells)
	testenv.SameCells(t, "cells of the target's store files, each read by HBase", storedCells(t, st, table), cells)
	if left := hfilesUnder(t, direct, path.Join(prefix, hfilesDir)); len(left) != 0 {
		t.Errorf("%d staged HFiles left after every region was loaded from S3 (first %s)", len(left), left[0])
	}
}

// storedCells lists the store files of table under the cluster's root dir
// (data/default/TABLE/REGION/FAMILY/NAME) and returns every cell in them,
// each file read by HBase's HFile reader (the oracle's dump-hfile). A file
// loaded twice gives its cells twice.
func storedCells(t *testing.T, st *testenv.State, table string) []cell.Cell {
	t.Helper()
	loc, err := vfs.Open(st.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	u, err := url.Parse(st.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	tdir := path.Join(loc.Path, "data", "default", table)
	regions, err := loc.FS.ReadDir(tdir)
	if err != nil {
		t.Fatal(err)
	}
	var dumps [][]string
	for _, r := range regions {
		if !r.IsDir() || strings.HasPrefix(r.Name(), ".") {
			continue
		}
		for _, fam := range []string{"f1", "f2"} {
			files, err := loc.FS.ReadDir(path.Join(tdir, r.Name(), fam))
			if notExist(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if f.IsDir() {
					continue
				}
				p := path.Join(tdir, r.Name(), fam, f.Name())
				dumps = append(dumps, []string{"dump-hfile", u.Scheme + "://" + u.Host + p})
			}
		}
	}
	if len(dumps) == 0 {
		t.Fatalf("no store file under %s", tdir)
	}
	var out []cell.Cell
	for _, d := range testenv.OracleDumps(t, dumps) {
		cells, err := testenv.ParseDump(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cells...)
	}
	return out
}
