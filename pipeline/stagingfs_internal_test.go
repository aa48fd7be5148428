package pipeline

import (
	"strings"
	"testing"
)

// TestStagingWarning checks when a run warns that the region servers will
// copy its staged HFiles: S3 staging against an HDFS root dir, or against
// another bucket; and the same bucket under either S3 scheme too (HBase
// copies within S3A as well: TestS3RootSnapshotRunAndLoad sees it), saying
// why; not the same Azure container by either endpoint, the same GCS
// bucket (neither tested against a cluster) or the same NameNode; with the
// root dir unknown, only staging off HDFS, saying that rekey could not
// learn it.
func TestStagingWarning(t *testing.T) {
	for _, c := range []struct {
		staging, root, want string
	}{
		{"s3a://b/stage", "hdfs://nn:8020/hbase", "is on hdfs://nn:8020"},
		{"s3a://b/stage", "s3a://other/hbase", "is on s3://other"},
		{"s3a://b/stage", "s3://b/hbase", "is in the bucket of the cluster's hbase.rootdir"},
		{"s3://B/stage", "s3a://b/hbase", "will copy every staged HFile at load time"},
		{"hdfs://nn:8020/tmp/x", "hdfs://nn:8020/hbase", ""},
		{"hdfs://nn2:8020/tmp/x", "hdfs://nn:8020/hbase", "is on hdfs://nn:8020"},
		{"/tmp/stage", "hdfs://nn:8020/hbase", "is on local"},
		{"hdfs:///tmp/x", "hdfs://nn:8020/hbase", ""},
		{"s3a://b/stage", "", "cannot learn the cluster's hbase.rootdir"},
		{"hdfs://nn:8020/tmp/x", "", ""},
		// One Azure container by its dfs and its blob endpoint.
		{"abfs://c@acct.dfs.core.windows.net/stage", "wasbs://c@acct.blob.core.windows.net/hbase", ""},
		{"abfss://c@acct.dfs.core.windows.net/stage", "abfs://c@acct.dfs.core.windows.net/hbase", ""},
		{"abfs://c@acct.dfs.core.windows.net/stage", "abfs://d@acct.dfs.core.windows.net/hbase", "is on azure://d@acct"},
		{"gs://b/stage", "hdfs://nn:8020/hbase", "is on hdfs://nn:8020"},
		{"gs://b/stage", "gs://b/hbase", ""},
	} {
		got := stagingWarning(c.staging, c.root, "test")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("staging %s, root %q: %q, want %q", c.staging, c.root, got, c.want)
		}
	}
}
