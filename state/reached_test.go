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

// TestStagedReachedRoundTripAndDamage: the record a staged run leaves for
// its load reads back as written; none is not found; a damaged one, or
// one naming no place for the record, is an error.
func TestStagedReachedRoundTripAndDamage(t *testing.T) {
	fsys := vfs.NewMem()
	name := "/staging/" + StagedReachedFile
	if _, found, err := ReadStagedReached(fsys, name); found || err != nil {
		t.Fatalf("no record: found %v, %v", found, err)
	}
	if err := fsys.MkdirAll("/staging"); err != nil {
		t.Fatal(err)
	}
	want := StagedReached{
		Record: Reached{Snapshot: "b", Table: "default:t", Created: 9, TTLTime: 11, Job: "f00", Written: time.Unix(2, 0).UTC()},
		Path:   "/jobs/a.rekey/checkpoint.reached.json", Since: "a", SinceCreated: 5,
	}
	if err := WriteStagedReached(fsys, name, want); err != nil {
		t.Fatal(err)
	}
	got, found, err := ReadStagedReached(fsys, name)
	want.Format, want.Record.Format = ReachedFormat, ReachedFormat
	if err != nil || !found || *got != want {
		t.Fatalf("read back %+v, %v, %v; want %+v", got, found, err, want)
	}
	for _, bad := range []string{`{"format":1,"record":{"snapshot":"b","job":"f"}}`, `{"format":1,"path":"/p","record":{"job":"f"}}`, `{"format":1,"path":"/p","record":{"snapshot":"b","job":"f"},"extra":1}`, `{"format":1`} {
		if err := vfs.WriteFileAtomic(fsys, name, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadStagedReached(fsys, name); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("record %s: %v, want damaged", bad, err)
		}
	}
}
