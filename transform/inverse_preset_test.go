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
