package main

import (
	"encoding/binary"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

func TestPageViews(t *testing.T) {
	m, err := newPageViews()
	if err != nil {
		t.Fatal(err)
	}
	q := binary.BigEndian.AppendUint64(nil, 1767268800123) // 2026-01-01T12:00:00.123Z
	var got []cell.Cell
	emit := func(c cell.Cell) { got = append(got, c.Clone()) }
	m.Map(cell.Cell{Row: []byte("u00007"), Family: []byte("e"), Qualifier: q, Timestamp: 5, Type: cell.Put, Value: []byte("click:/home")}, emit)
	m.Map(cell.Cell{Row: []byte("u00007"), Family: []byte("e"), Qualifier: q, Timestamp: 5, Type: cell.Put, Value: []byte("view:/home")}, emit)
	if len(got) != 1 {
		t.Fatalf("%d cells out, want only the click", len(got))
	}
	c := got[0]
	if string(c.Row) != "u00007\x002026-01-01" || string(c.Family) != "p" || string(c.Qualifier) != "/home\x00\x02\x93\x2e\x7b" {
		t.Fatalf("got %q/%q:%q", c.Row, c.Family, c.Qualifier)
	}
}
