package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// A dry run of the demo job over the bundled snapshot: Prepare assembles
// the run from the job file (here with its sink section replaced by a dry
// run, so no cluster is needed), Start and Wait run it.
func ExamplePrepare() {
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		log.Fatal(err)
	}
	dir, _ := os.MkdirTemp("", "rekey-example")
	defer os.RemoveAll(dir)
	j.Run.Checkpoint = filepath.Join(dir, "checkpoint.json")
	j.BadKeys.File = ""
	j.Sink.Kind = job.SinkDryRun

	ctx := context.Background()
	r, err := pipeline.Prepare(ctx, j, pipeline.Options{Workers: 2})
	if err != nil {
		log.Fatal(err)
	}
	p := r.Outline()
	fmt.Printf("%s sink, %d workers, %d splits to do\n", p.Sink, p.Workers, p.Todo)
	if err := r.Start(ctx); err != nil {
		log.Fatal(err)
	}
	sum, err := r.Wait()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read %d cells, mapped %d, finished %v\n", sum.Read, sum.Written, sum.Finished)
	// Output:
	// dry-run sink, 2 workers, 4 splits to do
	// read 31413 cells, mapped 31413, finished true
}

// Execute is Prepare, Start and Wait in one call; a given sink replaces
// the job's.
func ExampleExecute() {
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		log.Fatal(err)
	}
	dir, _ := os.MkdirTemp("", "rekey-example")
	defer os.RemoveAll(dir)
	j.Run.Checkpoint = filepath.Join(dir, "checkpoint.json")
	j.BadKeys.File = ""

	sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum.Sink, sum.Done, "of", sum.Splits, "splits")
	// Output: dry-run 4 of 4 splits
}
