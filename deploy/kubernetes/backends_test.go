package kubernetes_test

// The tests reach HDFS, S3, GCS and Azure through vfs.Open (a job's root
// dir, staging folder or checkpoint): the test binary links every backend,
// as the rekey command does; the package itself imports none.
import _ "github.com/rekeyhq/rekey/vfs/all"
