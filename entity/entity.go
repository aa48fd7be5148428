// Package entity counts cells per entity: exactly for small sets, and in
// bounded memory for a whole table.
//
// An entity is what a job names with its entity fields (a user, a device);
// its key is the canonical byte form transform.Rekey.SourceEntity and
// TargetEntity return, so the old and the new table give the same key for
// the same entity. This package treats keys as opaque bytes: it does no
// parsing and no I/O beyond JSON.
//
// Three counters, each for one question:
//
//   - Exact remembers rows, cells and bytes of every entity it is given, up to
//     a limit: for the entities a verification checks, or a small table.
//   - Sketch keeps, in memory fixed by its sizes, the K heaviest entities by
//     cells and by bytes (space-saving summaries, whose counts are upper
//     bounds with a known error) and a uniform sample of N distinct entities
//     (the N entities whose seeded hash is smallest; their counts are
//     exact). Sketches merge, so each worker keeps one and the runner merges
//     them, and they are saved and loaded as JSON.
//
// Neither is safe for concurrent use.
package entity

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// By chooses the measure entities are ranked by.
type By int

const (
	// ByCells ranks entities by their number of cells.
	ByCells By = iota
	// ByBytes ranks entities by the size of their cells as serialized
	// KeyValues.
	ByBytes
)

// String returns "cells" or "bytes".
func (b By) String() string {
	switch b {
	case ByCells:
		return "cells"
	case ByBytes:
		return "bytes"
	}
	return fmt.Sprintf("By(%d)", int(b))
}

// Count is what a counter knows of one entity.
type Count struct {
	// Key is the entity key (SourceEntity's bytes).
	Key []byte
	// Name is the printable form of the key (Program.FormatEntity), when the
	// counter was given a namer; empty otherwise.
	Name string
	// Rows is the number of rows, when the caller counted them (Exact only).
	Rows  int64
	Cells int64
	Bytes int64
	// Error bounds how much the ranked measure (the By the list was asked
	// for) may exceed the truth: the true value lies in
	// [measure-Error, measure]. Zero for exact counts. The other measure of
	// a heavy hitter is a lower bound (counted only while it was tracked).
	Error int64
}

// Measure returns c's cells or bytes.
func (c *Count) Measure(by By) int64 {
	if by == ByBytes {
		return c.Bytes
	}
	return c.Cells
}

// countJSON is the saved form of a Count: keys in hex, since entity keys are
// binary.
type countJSON struct {
	Key   string `json:"key"`
	Name  string `json:"entity,omitempty"`
	Rows  int64  `json:"rows,omitempty"`
	Cells int64  `json:"cells"`
	Bytes int64  `json:"bytes"`
	Error int64  `json:"error,omitempty"`
}

// MarshalJSON writes the key as hex beside its printable name.
func (c Count) MarshalJSON() ([]byte, error) {
	return c.appendJSON(nil), nil
}

// appendJSON appends c as encoding/json writes countJSON, by hand (see
// sketchJSON.append).
func (c *Count) appendJSON(b []byte) []byte {
	b = append(b, `{"key":"`...)
	b = hex.AppendEncode(b, c.Key)
	b = append(b, '"')
	if c.Name != "" {
		b = append(b, `,"entity":`...)
		b = appendJSONString(b, c.Name)
	}
	if c.Rows != 0 {
		b = appendIntField(b, "rows", c.Rows)
	}
	b = appendIntField(b, "cells", c.Cells)
	b = appendIntField(b, "bytes", c.Bytes)
	if c.Error != 0 {
		b = appendIntField(b, "error", c.Error)
	}
	return append(b, '}')
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (c *Count) UnmarshalJSON(b []byte) error {
	var j countJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	k, err := hex.DecodeString(j.Key)
	if err != nil {
		return fmt.Errorf("entity: key %q is not hex: %w", j.Key, err)
	}
	*c = Count{Key: k, Name: j.Name, Rows: j.Rows, Cells: j.Cells, Bytes: j.Bytes, Error: j.Error}
	return nil
}

// sortCounts orders counts heaviest first by the measure, then by key so
// the order is stable across runs.
func sortCounts(cs []Count, by By) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i].Measure(by), cs[j].Measure(by)
		if a != b {
			return a > b
		}
		return string(cs[i].Key) < string(cs[j].Key)
	})
}

// SketchFile is the name of the file a run saves its merged Sketch in,
// inside the job's state folder; verify reads it from there.
const SketchFile = "entities.json"
