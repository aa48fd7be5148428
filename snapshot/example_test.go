package snapshot_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
)

// Reading a snapshot HBase wrote (the bundled demo snapshot, a local copy
// of an HBase root dir): open it, cut it into splits, scan each.
func ExampleOpen() {
	ctx := context.Background()
	s, err := snapshot.Open(ctx, "../testdata/snapshots/demo_events", "demo_events", snapshot.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	splits, err := s.Splits(snapshot.SplitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var cells int
	for _, sp := range splits {
		sc, err := s.NewScanner(ctx, sp, snapshot.ScanOptions{})
		if err != nil {
			log.Fatal(err)
		}
		for sc.Next() {
			_ = sc.Cell() // valid until the next call
			cells++
		}
		if err := sc.Close(); err != nil { // the scan's error, if any
			log.Fatal(err)
		}
	}
	fmt.Printf("table %s: %d regions, %d cells\n", s.Info().Table, len(s.Regions()), cells)
	// Output: table default:events: 4 regions, 31413 cells
}

// ReadSplit is a split's scan in one call: the callback sees each cell,
// and cell.ErrStop ends the scan early without an error.
func ExampleSnapshot_ReadSplit() {
	ctx := context.Background()
	s, err := snapshot.Open(ctx, "../testdata/snapshots/demo_events", "demo_events", snapshot.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	splits, _ := s.Splits(snapshot.SplitOptions{})
	n := 0
	err = s.ReadSplit(ctx, splits[0], snapshot.ScanOptions{MaxVersions: 1}, func(c *cell.Cell) error {
		if n++; n == 3 {
			return cell.ErrStop
		}
		return nil
	})
	fmt.Println(n, err)
	// Output: 3 <nil>
}
