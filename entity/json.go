package entity

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// sketchFormat names the file format, so a wrong file is refused by name.
const sketchFormat = "rekey-entity-sketch"

// sketchJSON is the saved form of a Sketch. It holds every counter, not only
// the k reported, so a loaded sketch merges and ranks exactly as the one
// saved. Entity keys are hex (see Count).
type sketchJSON struct {
	Format   string  `json:"format"`
	Version  int     `json:"version"`
	K        int     `json:"k"`
	N        int     `json:"n"`
	Seed     uint64  `json:"seed"`
	Capacity int     `json:"capacity"`
	Adds     int64   `json:"adds"`
	Cells    int64   `json:"cells"`
	Bytes    int64   `json:"bytes"`
	Distinct int64   `json:"distinct_estimate"`
	ByCells  []Count `json:"by_cells"`
	ByBytes  []Count `json:"by_bytes"`
	Sample   []Count `json:"sample"`
}

// WriteJSON saves the sketch (see ReadSketch). Lists are ordered heaviest
// first, the sample in hash order; with a namer set, each entity carries its
// printable form beside its hex key.
func (s *Sketch) WriteJSON(w io.Writer) error {
	by := func(m *summary) []Count {
		cs := s.named(m.counts())
		sortCounts(cs, m.by)
		return cs
	}
	j := sketchJSON{
		Format: sketchFormat, Version: 1,
		K: s.k, N: s.n, Seed: s.seed, Capacity: s.cells.cap,
		Adds: s.adds, Cells: s.totalCells, Bytes: s.totalBytes, Distinct: s.Distinct(),
		ByCells: by(&s.cells), ByBytes: by(&s.bytes), Sample: s.Sample(),
	}
	if _, err := w.Write(j.append(nil)); err != nil {
		return fmt.Errorf("entity: write sketch: %w", err)
	}
	return nil
}

// append writes j as encoding/json would (the fields in order, the same
// names and omissions), by hand: a run writes its sketch into the
// checkpoint after every split and beside it at the end, and through
// reflection (and the indentation it had) that was a tenth of a small
// job's CPU. Each count goes on a line of its own, so the file still reads
// one entity per line.
func (j *sketchJSON) append(b []byte) []byte {
	b = append(b, `{"format":`...)
	b = appendJSONString(b, j.Format)
	b = appendIntField(b, "version", int64(j.Version))
	b = appendIntField(b, "k", int64(j.K))
	b = appendIntField(b, "n", int64(j.N))
	b = append(b, `,"seed":`...)
	b = strconv.AppendUint(b, j.Seed, 10)
	b = appendIntField(b, "capacity", int64(j.Capacity))
	b = appendIntField(b, "adds", j.Adds)
	b = appendIntField(b, "cells", j.Cells)
	b = appendIntField(b, "bytes", j.Bytes)
	b = appendIntField(b, "distinct_estimate", j.Distinct)
	b = appendCounts(b, "by_cells", j.ByCells)
	b = appendCounts(b, "by_bytes", j.ByBytes)
	b = appendCounts(b, "sample", j.Sample)
	return append(b, "}\n"...)
}

// appendIntField appends ,"name":v.
func appendIntField(b []byte, name string, v int64) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, v, 10)
}

// appendCounts appends ,"name":[...] with a count on each line (null for
// a nil list, as encoding/json writes it).
func appendCounts(b []byte, name string, cs []Count) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	if cs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '\n')
		b = cs[i].appendJSON(b)
	}
	return append(b, "]\n"...)
}

// appendJSONString appends s as a JSON string. Names are printable ASCII
// almost always, copied as they are; anything else goes through
// encoding/json, which escapes it as it escapes any string.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil { // a string always marshals
				panic(err)
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Limits on a loaded sketch's sizes, far above any useful value.
const (
	maxK = 1_000_000
	maxN = 10_000_000
)

// ReadSketch loads a sketch saved by WriteJSON. It refuses files of another
// format or version, and counters that do not fit the sizes the file
// declares, rather than load a sketch that would rank wrongly.
func ReadSketch(r io.Reader) (*Sketch, error) {
	var j sketchJSON
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("entity: read sketch: %w", err)
	}
	if j.Format != sketchFormat || j.Version != 1 {
		return nil, fmt.Errorf("entity: read sketch: format %q version %d, want %q version 1", j.Format, j.Version, sketchFormat)
	}
	// Bounds before allocating: a damaged file must not size a huge map.
	if j.K < 1 || j.K > maxK || j.N < 0 || j.N > maxN || j.Capacity != Capacity(j.K) {
		return nil, fmt.Errorf("entity: read sketch: k=%d n=%d capacity=%d do not fit together (capacity for k=%d is %d)", j.K, j.N, j.Capacity, j.K, Capacity(max(j.K, 1)))
	}
	if len(j.ByCells) > j.Capacity || len(j.ByBytes) > j.Capacity || len(j.Sample) > j.N {
		return nil, fmt.Errorf("entity: read sketch: %d/%d counters and %d sampled entities exceed capacity %d and n %d", len(j.ByCells), len(j.ByBytes), len(j.Sample), j.Capacity, j.N)
	}
	s := NewSketch(j.K, j.N, j.Seed)
	s.adds, s.totalCells, s.totalBytes = j.Adds, j.Cells, j.Bytes
	for _, p := range []struct {
		m  *summary
		cs []Count
	}{{&s.cells, j.ByCells}, {&s.bytes, j.ByBytes}} {
		list := make([]*slot, 0, len(p.cs))
		for _, c := range p.cs {
			if _, dup := p.m.idx[string(c.Key)]; dup {
				return nil, fmt.Errorf("entity: read sketch: entity %x listed twice by %s", c.Key, p.m.by)
			}
			sl := &slot{key: string(c.Key), name: c.Name, cells: c.Cells, bytes: c.Bytes, err: c.Error}
			p.m.idx[sl.key] = sl
			list = append(list, sl)
		}
		p.m.rebuild(list)
	}
	for _, c := range j.Sample {
		if _, dup := s.samp.idx[string(c.Key)]; dup {
			return nil, fmt.Errorf("entity: read sketch: sampled entity %x listed twice", c.Key)
		}
		s.samp.add(c.Key, hashKey(s.seed, c.Key), c.Cells, c.Bytes)
		s.samp.idx[string(c.Key)].name = c.Name
	}
	return s, nil
}
