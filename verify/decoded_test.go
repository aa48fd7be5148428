package verify_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
)

// TestDifferencesDecoded: the differing cells of a mismatch carry their
// keys decoded by the job's layouts beside the hex, and the HTML page
// shows both, with each entity's key in hex beside its decoded name. The
// expected forms are computed here from the dumped keys by the demo
// layouts written out (old row = user, qualifier = event time; new row =
// user, day start as 8 bytes; qualifier = millis into the day), not by the
// transform under test.
func TestDifferencesDecoded(t *testing.T) {
	// The bug: cells of a day's first hour go to the previous day's row.
	edit := func(c *cell.Cell) {
		if binary.BigEndian.Uint32(c.Qualifier) < uint32(hourMs) {
			day := int64(binary.BigEndian.Uint64(c.Row[6:]))
			c.Row = binary.BigEndian.AppendUint64(c.Row[:6:6], uint64(day-dayMs))
		}
	}
	j, staged := stageRun(t, demoLayout, breaking(edit))
	old, err := verify.OpenSnapshot(context.Background(), filepath.Join("..", "testdata", "snapshots", "demo_events"), "demo_events", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	var ch verify.Choice
	seen := map[string]bool{}
	for _, c := range demoCells(t) {
		if !seen[string(c.Row)] {
			seen[string(c.Row)] = true
			k, err := j.Program.ParseEntity("user=" + string(c.Row))
			if err != nil {
				t.Fatal(err)
			}
			ch.Add(k, verify.ByAll)
		}
	}
	res, err := verify.Compare(context.Background(), verify.Config{Program: j.Program, Old: old, New: staged, Method: verify.Inverse,
		NewMapper: func() transform.Mapper { return breaking(edit)(j.Program) }}, ch.Targets())
	if err != nil {
		t.Fatal(err)
	}
	date := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
	keyOf := func(dump string) (row, qual []byte) {
		f := strings.Split(dump, "\t")
		row, _ = hex.DecodeString(f[0])
		qual, _ = hex.DecodeString(f[2])
		return row, qual
	}
	checked := 0
	for _, r := range res {
		if r.Match {
			continue
		}
		for _, d := range r.First {
			row, qual := keyOf(d.Old)
			ts := int64(binary.BigEndian.Uint64(qual))
			if want := fmt.Sprintf("user=%s ts=%s", row, date(ts)); d.OldFields != want {
				t.Errorf("%s: old cell %q decoded as %q, want %q", r.Entity, d.Old, d.OldFields, want)
			}
			row, qual = keyOf(d.New)
			day, off := int64(binary.BigEndian.Uint64(row[6:])), int64(binary.BigEndian.Uint32(qual))
			// Fields in the order the job defines them: user and ts by
			// the old key, day by the new.
			if want := fmt.Sprintf("user=%s ts=%s day=%s", row[:6], date(day+off), date(day)); d.NewFields != want {
				t.Errorf("%s: new cell %q decoded as %q, want %q", r.Entity, d.New, d.NewFields, want)
			}
			checked++
		}
		if wantKey := hex.EncodeToString(append([]byte(strings.TrimPrefix(r.Entity, "user=")), 0, 1)); r.Key != wantKey {
			t.Errorf("%s: key %s, want %s", r.Entity, r.Key, wantKey)
		}
	}
	if checked == 0 {
		t.Fatal("no differences: the bug moved nothing, the test shows nothing")
	}
	var page, text bytes.Buffer
	rep := verify.NewReport(res)
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Match {
			continue
		}
		d := r.First[0]
		for _, want := range []string{"<td><code>" + r.Key + "</code></td>", d.OldFields, d.NewFields} {
			if !strings.Contains(page.String(), want) {
				t.Errorf("the HTML page lacks %q", want)
			}
		}
		for _, want := range []string{"\n         " + d.OldFields + "\n", "\n         " + d.NewFields + "\n"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("the text report lacks %q", want)
			}
		}
		break
	}
}
