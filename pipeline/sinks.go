package pipeline

// The sinks this build offers: the one list of them, beside the job's
// list of kinds (job.SinkKinds). Each registers how it is built from the
// job's sink section and what the run may ask of it (sink.Kind: its
// split floor, whether it writes a catch-up's deletes, when its run
// reaches the target, its plan checks); the run, which builds the sink a
// job names, is the one package that imports them all and asks the kind
// instead of naming it, so that a program linking pipeline can run every
// kind of job while cmd/rekey and verify import none. A new sink adds
// its line here.
import (
	_ "github.com/rekeyhq/rekey/sink/bigtable"
	_ "github.com/rekeyhq/rekey/sink/hfiles"
	_ "github.com/rekeyhq/rekey/sink/puts"
)
