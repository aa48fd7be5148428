package verify

import (
	"testing"

	"github.com/rekeyhq/rekey/job"
)

// TestRunRejectsDir: the run's reject files are looked for in the state
// folder's rejects/, with a URL's host kept (path.Join made
// hdfs://nn:8020/x into hdfs:/nn:8020/x, and verify failed with exit 2 on
// every job whose checkpoint is on HDFS, as the Kubernetes overlay's is).
func TestRunRejectsDir(t *testing.T) {
	for ck, want := range map[string]string{
		"hdfs://nn:8020/rekey/events/checkpoint.json": "hdfs://nn:8020/rekey/events/rejects",
		"s3a://bucket/jobs/a/checkpoint.json":         "s3a://bucket/jobs/a/rejects",
		"/var/rekey/checkpoint.json":                  "/var/rekey/rejects",
	} {
		j := &job.Job{Path: "/jobs/events.yaml"}
		j.Run.Checkpoint = ck
		if got := runRejectsDir(j.StateDir()); got != want {
			t.Errorf("checkpoint %s: rejects in %s, want %s", ck, got, want)
		}
	}
}
