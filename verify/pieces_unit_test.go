package verify

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// TestNewPiecesFollowTheOldCuts: the new range of a wide sensor row is cut
// at the hours the old pieces' starts fall in, read from data index keys
// as HBase writes them (a qualifier cut short of its 8 bytes, a row cut
// with none), each hour once and in order, and none outside the range.
func TestNewPiecesFollowTheOldCuts(t *testing.T) {
	j, err := job.Load(filepath.Join("..", "configs", "wide_to_bucketed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := j.Program
	key, err := p.ParseEntity("sensor=s1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.TargetRange(key)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := func(h int, m int) []byte {
		return binary.BigEndian.AppendUint64(nil, uint64(base.Add(time.Duration(h)*time.Hour+time.Duration(m)*time.Minute).UnixMilli()))
	}
	region := snapshot.Region{Families: []snapshot.FamilyFiles{{Family: []byte("d")}}}
	at := func(row string, q []byte) snapshot.Split {
		sp := snapshot.Split{StartRow: []byte(row), Region: region}
		if q != nil {
			sp.StartColumn = &snapshot.Column{Family: []byte("d"), Qualifier: q}
		}
		return sp
	}
	starts := []snapshot.Split{
		at("s1", ts(5, 30)),     // 05h
		at("s1", ts(2, 10)[:6]), // cut short: 02h, out of order
		at("s1", ts(5, 50)),     // 05h again: one cut
		at("s1", ts(9, 0)[:7]),  // cut short: padded, just before 09:00
		at("s0", ts(3, 0)),      // another sensor, before the range
		at("s2", nil),           // a row cut after the range
	}
	got := newPieces(p.New(), starts, r)
	hour := func(h int) []byte {
		return append([]byte("s1\x00"), base.Add(time.Duration(h)*time.Hour).Format("2006-01-02T15")...)
	}
	// The 7-byte key of 09:00 padded with a zero byte is 09:00 less up to
	// 255 ms: 08h.
	want := []transform.KeyRange{{Start: r.Start, Stop: hour(2)}, {Start: hour(2), Stop: hour(5)}, {Start: hour(5), Stop: hour(8)}, {Start: hour(8), Stop: r.Stop}}
	if len(got) != len(want) {
		t.Fatalf("pieces %v, want %v", got, want)
	}
	for i := range want {
		if !bytes.Equal(got[i].Start, want[i].Start) || !bytes.Equal(got[i].Stop, want[i].Stop) {
			t.Errorf("piece %d: %s, want %s", i, got[i], want[i])
		}
	}
}
