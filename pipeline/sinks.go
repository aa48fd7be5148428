package pipeline

// The sinks this build offers. Each registers how it is built from the
// job's sink section (sink.Register); the run, which builds the sink a job
// names, is the one package that imports them all, so that a program
// linking pipeline can run every kind of job while cmd/rekey and verify
// import none. A new sink adds its line here.
import (
	_ "github.com/rekeyhq/rekey/sink/bigtable"
	_ "github.com/rekeyhq/rekey/sink/hfiles"
	_ "github.com/rekeyhq/rekey/sink/puts"
)
