package hfiles

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/vfs"
)

// stagedSent stages cells for two regions (split at "n") into a local
// folder without loading, then marks both regions as sent, the state a
// load leaves once it sent each region's first request. It returns the
// sink (reopened on the folder, as a resumed load opens it) and its state.
func stagedSent(t *testing.T) (*Sink, *finishState) {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("n")}, Memory: 256 << 10, Workers: 2, HFileSize: 32 << 10}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "one", genCells(5, 4000))
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	st, found, err := s.readFinish()
	if err != nil || !found || !st.Written {
		t.Fatalf("finish.json: found %v, error %v", found, err)
	}
	st.Sent = map[string]bool{}
	for _, r := range s.regions.Regions {
		st.Sent[r.Dir] = true
	}
	return s, st
}

// fakeLanded makes the cluster's store files hold the files with the ids
// given, for the test's length.
func fakeLanded(t *testing.T, ids map[string]bool) {
	testLanded = func(ctx context.Context, family string, first, last []byte) (map[string]string, error) {
		out := map[string]string{}
		for id := range ids {
			out[id] = "hdfs://nn/hbase/data/default/t/r/" + family + "/" + id
		}
		return out, nil
	}
	t.Cleanup(func() { testLanded = nil })
}

// regionFiles returns the recorded files of region i of st.
func regionFiles(st *finishState, i int) []hfileInfo {
	var out []hfileInfo
	for _, ps := range st.Parts {
		if ps.Region == i {
			out = append(out, ps.Files...)
		}
	}
	return out
}

// TestLoadSentMissingFile hand-picks each way a load resumed after a load
// was sent for every region decides on a recorded file; no case sends a
// request (the sink has no client: a request would panic). The store
// files' ids come from a stand-in for the region servers (testLanded);
// the lookup itself is TestLoadSentMissingFileCluster's.
func TestLoadSentMissingFile(t *testing.T) {
	ctx := context.Background()
	t.Run("missing and in no store file fails naming it", func(t *testing.T) {
		s, st := stagedSent(t)
		landed := map[string]bool{}
		for _, f := range regionFiles(st, 1) {
			landed[f.ID] = true
		}
		fakeLanded(t, landed)
		for _, f := range allFiles(st) {
			if err := s.fs.Remove(path.Join(s.root, f.Name)); err != nil {
				t.Fatal(err)
			}
		}
		lost := regionFiles(st, 0)
		err := s.loadAll(ctx, logRep{t}, st)
		if !errors.Is(err, ErrMissingHFile) {
			t.Fatalf("load with region %s's files gone and in no store file: %v, want ErrMissingHFile", s.regions.Regions[0].Dir, err)
		}
		// The region's files are all gone; the load names the first it
		// meets, whichever of them that is (st.Parts is a map: the order
		// of regionFiles is not the loader's, which the test once assumed
		// and failed on under load).
		named := false
		for _, f := range lost {
			named = named || strings.Contains(err.Error(), path.Base(f.Name))
		}
		if !named || !strings.Contains(err.Error(), s.regions.Regions[0].Dir) || !strings.Contains(err.Error(), "--fresh") {
			t.Errorf("error does not name one of the files %v, their region %s and the way out: %v", lost, s.regions.Regions[0].Dir, err)
		}
		if st.Loaded[s.regions.Regions[0].Dir] {
			t.Errorf("region %s is marked loaded", s.regions.Regions[0].Dir)
		}
	})
	t.Run("missing and in a store file counts loaded", func(t *testing.T) {
		s, st := stagedSent(t)
		landed := map[string]bool{}
		for _, f := range allFiles(st) {
			landed[f.ID] = true
			if err := s.fs.Remove(path.Join(s.root, f.Name)); err != nil {
				t.Fatal(err)
			}
		}
		fakeLanded(t, landed)
		if err := s.loadAll(ctx, logRep{t}, st); err != nil {
			t.Fatal(err)
		}
		if n := s.Stats().RegionsLoaded; n != 2 {
			t.Errorf("%d regions loaded, want 2", n)
		}
	})
	t.Run("copied and in a store file is not sent again", func(t *testing.T) {
		// The region servers copied the files (staging on S3) and the run
		// stopped before the Loaded marks were saved: every file is still
		// in the folder, and in the region.
		s, st := stagedSent(t)
		landed := map[string]bool{}
		for _, f := range allFiles(st) {
			landed[f.ID] = true
		}
		fakeLanded(t, landed)
		if err := s.loadAll(ctx, logRep{t}, st); err != nil {
			t.Fatal(err)
		}
		saved, _, err := s.readFinish()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.regions.Regions {
			if !saved.Loaded[r.Dir] {
				t.Errorf("region %s is not marked loaded in finish.json", r.Dir)
			}
		}
		for _, f := range allFiles(st) {
			if _, err := s.fs.Stat(path.Join(s.root, f.Name)); !notExist(err) {
				t.Errorf("%s is still staged after its region was marked loaded (stat error %v)", f.Name, err)
			}
		}
	})
	t.Run("missing and staged without an id fails", func(t *testing.T) {
		s, st := stagedSent(t)
		fakeLanded(t, map[string]bool{})
		for _, ps := range st.Parts {
			for i := range ps.Files {
				if err := s.fs.Remove(path.Join(s.root, ps.Files[i].Name)); err != nil {
					t.Fatal(err)
				}
				ps.Files[i].ID = "" // recorded by a rekey that wrote no ids
			}
		}
		err := s.loadAll(ctx, logRep{t}, st)
		if !errors.Is(err, ErrMissingHFile) || !strings.Contains(err.Error(), "without a file id") {
			t.Fatalf("load with files gone that carry no id: %v, want ErrMissingHFile saying they have none", err)
		}
	})
}

// TestLoadUnansweredLanded: after a BulkLoadHFile call went unanswered,
// the load asks whether its files are in the region before sending it
// again (hbase.BulkLoadOptions.Landed): all of them is loaded, none is
// not, and some but not all is an error (sending again would load the
// others twice, not sending would lose the rest).
func TestLoadUnansweredLanded(t *testing.T) {
	s, st := stagedSent(t)
	files := regionFiles(st, 0)
	if len(files) < 2 {
		t.Fatalf("region 0 has %d files; the test wants two or more", len(files))
	}
	var sent []hbase.BulkFile
	ids := map[string]string{}
	for _, f := range files {
		u := s.url(path.Join(s.root, f.Name))
		sent = append(sent, hbase.BulkFile{Family: []byte("f1"), Path: u, FirstRow: f.FirstRow, LastRow: f.LastRow})
		ids[u] = f.ID
	}
	reg := &s.regions.Regions[0]
	for _, c := range []struct {
		name    string
		landed  int
		want    bool
		wantErr error
	}{
		{"none landed", 0, false, nil},
		{"all landed", len(files), true, nil},
		{"some landed", 1, false, ErrPartialLoad},
	} {
		t.Run(c.name, func(t *testing.T) {
			landed := map[string]bool{}
			for _, f := range files[:c.landed] {
				landed[f.ID] = true
			}
			fakeLanded(t, landed)
			got, err := s.sentLanded(context.Background(), reg, sent, ids, "")
			if got != c.want || !errors.Is(err, c.wantErr) {
				t.Fatalf("sentLanded = %v, %v; want %v, %v", got, err, c.want, c.wantErr)
			}
		})
	}
}

// TestLoadUnansweredWaitsInFlight: an unanswered call whose file is still
// in the load's staging directory (the region server copying it) is still
// at work; sending again then was seen to make the two calls fail one
// another, or could load the file twice. The answer waits until the file
// has left the staging directory and is in the region.
func TestLoadUnansweredWaitsInFlight(t *testing.T) {
	s, st := stagedSent(t)
	f := regionFiles(st, 0)[0]
	u := s.url(path.Join(s.root, f.Name))
	sent := []hbase.BulkFile{{Family: []byte("f1"), Path: u, FirstRow: f.FirstRow, LastRow: f.LastRow}}
	token := path.Join(t.TempDir(), "staging", "root__t__token")
	staged := hbase.BulkStagedPath(token, []byte("f1"), u)
	if err := s.fs.MkdirAll(path.Dir(staged)); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(s.fs, staged, []byte("copy under way")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	landed := map[string]bool{}
	testLanded = func(ctx context.Context, family string, first, last []byte) (map[string]string, error) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]string{}
		for id := range landed {
			out[id] = "store/" + id
		}
		return out, nil
	}
	t.Cleanup(func() { testLanded = nil })
	const work = 700 * time.Millisecond
	go func() {
		time.Sleep(work)
		mu.Lock()
		landed[f.ID] = true
		mu.Unlock()
		s.fs.Remove(staged)
	}()
	began := time.Now()
	got, err := s.sentLanded(context.Background(), &s.regions.Regions[0], sent, map[string]string{u: f.ID}, token)
	if err != nil || !got {
		t.Fatalf("sentLanded with the call still at work = %v, %v; want true once it lands", got, err)
	}
	if waited := time.Since(began); waited < work {
		t.Errorf("answered after %v, before the call in flight finished (%v)", waited, work)
	}
}
