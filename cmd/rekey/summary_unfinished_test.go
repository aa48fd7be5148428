package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// cutMidSplit is a dry run that stops the run (cancels its context) when
// it takes its after-th cell, inside a split: what a Ctrl-C does.
type cutMidSplit struct {
	sink.DryRun
	n      atomic.Int64
	after  int64
	cancel func()
}

func (s *cutMidSplit) Begin(ctx context.Context, i sink.SplitInfo) (sink.SplitSink, error) {
	in, err := s.DryRun.Begin(ctx, i)
	return &cutSplit{in, s}, err
}

type cutSplit struct {
	sink.SplitSink
	s *cutMidSplit
}

func (x *cutSplit) Write(ctx context.Context, c *cell.Cell) error {
	if x.s.n.Add(1) == x.s.after {
		x.s.cancel()
	}
	return x.SplitSink.Write(ctx, c)
}

// dumpCells is the number of cells in HBase's own dump of a test
// snapshot (one line a cell).
func dumpCells(t *testing.T, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../testdata/snapshots", name+".cells"))
	if err != nil {
		t.Fatal(err)
	}
	return int64(bytes.Count(b, []byte("\n")))
}

// TestInterruptedSummaryCountsUnfinished: a run stopped inside a split
// counts the cells of its finished splits as read and says how many it
// read in the splits it left unfinished, which --resume reads again (an
// interrupted run said "cells 0 read" after about 10k). By the rule: the
// resumed job reads HBase's dump of the snapshot, and the unfinished
// splits were read at least as far as the sink took cells from them and
// no further than the cells the finished splits leave.
func TestInterruptedSummaryCountsUnfinished(t *testing.T) {
	j, err := job.Load(demoJob(t))
	if err != nil {
		t.Fatal(err)
	}
	j.BadKeys.File = ""
	total := dumpCells(t, "demo_events")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Small splits (the snapshot in 25), so that some finish first.
	cut := &cutMidSplit{after: 10000, cancel: cancel}
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: cut, Workers: 1, SplitBytes: 8 << 10})
	if !errors.Is(err, pipeline.ErrInterrupted) || sum == nil {
		t.Fatalf("run stopped at cell %d: %v, want ErrInterrupted", cut.after, err)
	}
	if sum.Done == 0 || sum.Done == sum.Splits {
		t.Fatalf("%d of %d splits done: the cut is not between splits' ends, the case tests nothing", sum.Done, sum.Splits)
	}
	resumed, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: 8 << 10, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	// The resumed run's summary counts the job's splits, the earlier
	// run's among them.
	if resumed.Read != total {
		t.Errorf("the resumed job read %d cells, want %d (HBase's dump)", resumed.Read, total)
	}
	if least, most := cut.after-sum.Written, total-sum.Read; sum.ReadUnfinished < least || sum.ReadUnfinished > most {
		t.Errorf("%d read in unfinished splits, want from %d (taken by the sink) to %d (the cells of the splits not finished)", sum.ReadUnfinished, least, most)
	}
	var out bytes.Buffer
	printRunSummary(&out, sum)
	for _, want := range []string{
		fmt.Sprintf("  cells     %d read, %d mapped", sum.Read, sum.Written),
		fmt.Sprintf("            and %d read in splits left unfinished, read again on --resume\n", sum.ReadUnfinished),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestUnmergedPartitionsOneLine: a staged run whose partitions (region and
// family) keep the HFiles their splits wrote says so in one line with the
// counts, not a line per partition (32 lines for a 31k-cell job); the
// counts are those of the staged folder's files.
func TestUnmergedPartitionsOneLine(t *testing.T) {
	job := demoJob(t)
	code, out, errOut := runRekey(t, "run", job, "--sink", "hfiles", "--offline", "--no-load", "--progress", "none")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	hfiles := filepath.Join(strings.TrimSuffix(job, ".yaml")+".rekey", "staging", "hfiles")
	parts, err := filepath.Glob(filepath.Join(hfiles, "*", "*"))
	if err != nil || len(parts) < 2 {
		t.Fatalf("staged partitions %v (%v): want two or more", parts, err)
	}
	files := 0
	for _, p := range parts {
		ents, err := os.ReadDir(p)
		if err != nil {
			t.Fatal(err)
		}
		files += len(ents)
	}
	line := regexp.MustCompile(`(?m)^rekey: hfiles: (\d+) of (\d+) partitions \(region and family\) keep the (\d+) HFiles their splits wrote, unmerged$`)
	all := line.FindAllStringSubmatch(errOut, -1)
	if len(all) != 1 {
		t.Fatalf("%d lines on unmerged partitions, want 1:\n%s", len(all), errOut)
	}
	want := []string{fmt.Sprint(len(parts)), fmt.Sprint(len(parts)), fmt.Sprint(files)}
	if got := all[0][1:]; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("unmerged line says %v (partitions kept, partitions, HFiles), the folder holds %v", got, want)
	}
	if n := strings.Count(errOut, "kept as they are"); n > 0 {
		t.Errorf("%d lines per partition beside the one line:\n%s", n, errOut)
	}
}
