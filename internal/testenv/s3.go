package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// S3State is testenv/run/s3.json, which testenv/bin/s3-up writes (bin/up
// runs it): a versitygw S3 server on 127.0.0.1 over a local folder.
type S3State struct {
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint string `json:"s3_endpoint"`
	// AccessKey and SecretKey are the server's root credentials.
	AccessKey string `json:"s3_access_key"`
	SecretKey string `json:"s3_secret_key"`
	// Bucket exists and is empty when the server starts; tests write under
	// prefixes of their own.
	Bucket string `json:"s3_bucket"`
	// Region is the signing region (the server ignores it).
	Region string `json:"s3_region"`
	// ConfDir is a HADOOP_CONF_DIR whose core-site.xml names the server in
	// fs.s3a.* keys.
	ConfDir string `json:"s3_conf_dir"`
	// PID is the server's process id.
	PID int `json:"s3_pid"`
}

// LoadS3 reads testenv/run/s3.json (run-s3root/s3.json in the S3-root
// pass: that cluster has its own S3 server).
func LoadS3() (*S3State, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, "testenv", runDir(), "s3.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: no S3 server (%v); start one with testenv/bin/s3-up (testenv/bin/up does)", err)
	}
	var s S3State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", path, err)
	}
	return &s, nil
}

// RequireS3 returns the running S3 server's state, or skips the test (fails
// it under REKEY_REQUIRE_CLUSTER=1) when there is none.
func RequireS3(t testing.TB) *S3State {
	t.Helper()
	s, err := LoadS3()
	if err != nil {
		if os.Getenv("REKEY_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("integration test needs the S3 server: %v", err)
		}
		t.Skipf("integration test skipped: %v", err)
	}
	t.Logf("%s: S3 server at %s", IntegrationMarker, s.Endpoint)
	return s
}

// UseS3Conf points HADOOP_CONF_DIR at the server's core-site.xml for the
// test, so vfs.Open of an s3a:// URL finds the endpoint and keys as it
// would on a Hadoop client, and clears the AWS environment that could win
// over it or send requests elsewhere.
func (s *S3State) UseS3Conf(t *testing.T) {
	t.Setenv("HADOOP_CONF_DIR", s.ConfDir)
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "")
	}
	// No instance metadata look-ups: nothing leaves the loopback.
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}
