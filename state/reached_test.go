package state

import (
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// TestReachedRoundTripAndDamage: a record reads back as written; none is
// not found; a damaged one, or one naming no snapshot, is an error, never
// taken for "no record".
func TestReachedRoundTripAndDamage(t *testing.T) {
	fsys := vfs.NewMem()
	name := ReachedBeside("/jobs/a.rekey/checkpoint.json")
	if name != "/jobs/a.rekey/checkpoint.reached.json" {
		t.Fatalf("ReachedBeside = %s", name)
	}
	if _, found, err := ReadReached(fsys, name); found || err != nil {
		t.Fatalf("no record: found %v, %v", found, err)
	}
	want := Reached{Snapshot: "a", Table: "default:t", Created: 5, TTLTime: 7, Job: "f00", Written: time.Unix(1, 0).UTC()}
	if err := fsys.MkdirAll("/jobs/a.rekey"); err != nil {
		t.Fatal(err)
	}
	if err := WriteReached(fsys, name, want); err != nil {
		t.Fatal(err)
	}
	got, found, err := ReadReached(fsys, name)
	want.Format = ReachedFormat
	if err != nil || !found || *got != want {
		t.Fatalf("read back %+v, %v, %v; want %+v", got, found, err, want)
	}
	for _, bad := range []string{`{"format":1,"snapshot":"a"`, `{"format":1,"job":"f00"}`, `{"format":1,"snapshot":"a","job":"f","extra":1}`} {
		if err := vfs.WriteFileAtomic(fsys, name, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadReached(fsys, name); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("record %s: %v, want damaged", bad, err)
		}
	}
}
