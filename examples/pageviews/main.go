// Command pageviews shows a custom transform: what a YAML job cannot say,
// written in Go in a few lines and run from your own main package.
//
// The demo table `events` has one row per user and one cell per event, the
// qualifier the event time (8-byte epoch millis) and the value text such as
// "click:/home". This transform keeps only the clicks and files each under
// the page it hit: new row = user | day (the layout language does the key),
// new qualifier = page path | millis into the day (Go does that, because it
// depends on the value). Other events are dropped.
//
//	go run ./examples/pageviews -root testdata/snapshots/demo_events -name demo_events -limit 20
//
// It prints the new cells in the canonical dump format. A real job hands the
// same Mapper to the pipeline, which writes the cells to the new table.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// pageViews is the custom transform. It leans on a compiled layout for the
// key and adds the value-dependent part; like the presets it reuses its
// buffers, so the cells it emits are valid until the next call.
type pageViews struct {
	keys *transform.Rekey
	qual []byte
}

// Map implements transform.Mapper: one event in, one click or nothing out.
// A key that does not fit comes back as an error wrapping
// transform.ErrBadKey, and the job's bad_keys policy decides what happens.
func (m *pageViews) Map(src cell.Cell, emit func(cell.Cell)) error {
	page, ok := bytes.CutPrefix(src.Value, []byte("click:"))
	if !ok {
		return nil // not a click: dropped on purpose
	}
	out, err := m.keys.Apply(&src)
	if err != nil {
		return err
	}
	m.qual = append(append(append(m.qual[:0], page...), 0), out.Qualifier...)
	out.Qualifier = m.qual
	emit(out)
	return nil
}

// newPageViews compiles the key part: the wide -> bucketed preset of
// configs/demo.yaml, written as a Go Spec.
func newPageViews() (*pageViews, error) {
	prog, err := transform.Compile(transform.Spec{
		Source: transform.LayoutSpec{
			Row:       []transform.ComponentSpec{{Type: "string", Field: "user"}},
			Qualifier: []transform.ComponentSpec{{Type: "int", Field: "ts", Width: 8}},
		},
		Target: transform.LayoutSpec{
			Row: []transform.ComponentSpec{
				{Type: "string", Field: "user", Sep: 0, HasSep: true},
				{Type: "time_bucket", Field: "day", Of: []string{"ts"}, Unit: "day", Format: "iso"},
			},
			Qualifier: []transform.ComponentSpec{{Type: "offset", Of: []string{"ts"}, Bucket: "day"}},
		},
		Entity:   []string{"user"},
		Families: map[string]string{"e": "p"},
	})
	if err != nil {
		return nil, err
	}
	return &pageViews{keys: prog.New()}, nil
}

func main() {
	root := flag.String("root", "testdata/snapshots/demo_events", "HBase root directory holding the snapshot")
	name := flag.String("name", "demo_events", "snapshot name")
	limit := flag.Int("limit", 20, "stop after this many output cells (0: all)")
	flag.Parse()
	if err := run(context.Background(), *root, *name, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "pageviews:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root, name string, limit int) error {
	m, err := newPageViews()
	if err != nil {
		return err
	}
	var mapper transform.Mapper = m // what the pipeline takes
	snap, err := snapshot.Open(ctx, root, name, snapshot.OpenOptions{})
	if err != nil {
		return err
	}
	defer snap.Close()
	splits, err := snap.Splits(snapshot.SplitOptions{})
	if err != nil {
		return err
	}
	var line []byte
	written := 0
	emit := func(c cell.Cell) {
		written++
		line = cell.AppendDump(line[:0], &c)
		os.Stdout.Write(line)
	}
	for _, sp := range splits {
		err := snap.ReadSplit(ctx, sp, snapshot.ScanOptions{}, func(c *cell.Cell) error {
			if limit > 0 && written >= limit {
				return cell.ErrStop
			}
			return mapper.Map(*c, emit)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
