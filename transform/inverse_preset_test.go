package transform_test

import (
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
)

// TestPresetsRoundTrip: for every preset job file in configs/, random old
// cells mapped forward and read back with Unmap give the old cells again,
// and each preset has an inverse.
func TestPresetsRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("preset files %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			j, err := job.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if ok, why := j.Program.Invertible(); !ok {
				t.Fatalf("no inverse: %s", why)
			}
			transform.CheckRoundTrip(t, j.Program, 3, 1000)
		})
	}
}

// TestPresetsMirroredBugs: each preset's forward codec given a bug its
// parser and builder share (a bucket twice as long, another separator, a
// salt modulo another count, a sign bit flipped, a time not reversed in
// the new or the old key): read back with the forward codec on both sides
// every new cell gives its old cell, the blind spot; Unmap, with its own
// codec, flags every cell the bug gave another key.
func TestPresetsMirroredBugs(t *testing.T) {
	for _, tc := range []struct{ file, bug string }{
		{"demo.yaml", "time buckets twice as long"},
		{"wide_to_bucketed.yaml", "string separator | for 0x00"},
		{"wide_to_bucketed.yaml", "time buckets twice as long"},
		{"salt.yaml", "salt modulo one bucket fewer"},
		{"salt.yaml", "reversed_ts not reversed in the old key"},
		{"tall_to_wide.yaml", "uint as sortable_int"},
		{"rekey.yaml", "reversed_ts not reversed in the new key"},
	} {
		t.Run(tc.file+": "+tc.bug, func(t *testing.T) {
			j, err := job.Load(filepath.Join("..", "configs", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			transform.CheckMirroredBug(t, j.Program, tc.bug, 5, 200)
		})
	}
}
