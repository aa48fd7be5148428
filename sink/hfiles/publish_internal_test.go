package hfiles

import (
	"testing"

	"github.com/rekeyhq/rekey/internal/vfstest"
	"github.com/rekeyhq/rekey/vfs"
)

// TestPublishPlanRaceOnObjectStore: of two spill shards publishing the
// plan on an object store, the second learns it lost at Close (412); it
// must take the winner's plan, never remove it (which left the winner's
// shards without the plan they partitioned by).
func TestPublishPlanRaceOnObjectStore(t *testing.T) {
	fs := vfstest.LateExclusive{Mem: vfs.NewMem()}
	first, err := RegionMapFromSplitKeys("t", [][]byte{[]byte("m")})
	if err != nil {
		t.Fatal(err)
	}
	second, _ := RegionMapFromSplitKeys("t", [][]byte{[]byte("k"), []byte("p")})
	if _, err := publishRegionMap(fs, "/plan.json", first); err != nil {
		t.Fatal(err)
	}
	got, err := publishRegionMap(fs, "/plan.json", second)
	if err != nil || len(got.Regions) != 2 {
		t.Fatalf("the second publish: %v, %+v; want the first plan (2 regions)", err, got)
	}
	if ok, _ := vfs.Exists(fs, "/plan.json"); !ok {
		t.Fatal("the winner's plan.json was removed by the loser")
	}
}
