package s3_test

import (
	"bytes"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colinmarc/hdfs/v2/hadoopconf"
	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/s3"
)

// TestS3ReadPinsETag replaces an object on versitygw after it was opened:
// the next ranged GET asks for the ETag seen at Open (If-Match), the server
// refuses it, and the read fails naming the object instead of returning the
// new version's bytes; a read-ahead stream opened on the old version fails
// the same way. The positional read before the replacement shows the pinned
// GET itself is accepted.
func TestS3ReadPinsETag(t *testing.T) {
	st := testenv.RequireS3(t)
	s := s3test.Dial(t, st)
	dir := s3test.Prefix(t, s, "vfs-pin")
	name := dir + "/obj"
	s3test.WriteObject(t, s, name, []byte("old bytes"))
	f, err := s.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 9)
	if n, err := f.ReadAt(p, 0); err != nil || string(p[:n]) != "old bytes" {
		t.Fatalf("read before the replacement: %q, %v", p[:n], err)
	}
	s3test.WriteObject(t, s, name, []byte("new bytes"))
	if got := s3test.Stored(t, st, name); string(got) != "new bytes" {
		t.Fatalf("the server holds %q, want the new version", got)
	}
	n, err := f.ReadAt(p, 0)
	if err == nil || !strings.Contains(err.Error(), "changed since it was opened") || !strings.Contains(err.Error(), name) {
		t.Errorf("ReadAt of a replaced object: %q, %v; want the change reported, naming %s", p[:n], err, name)
	}
	ra := vfs.NewReadAhead(f, 0, vfs.ReadAheadOptions{Chunk: 1 << 20})
	defer ra.Close()
	n, err = ra.ReadAt(p, 0)
	if err == nil || !strings.Contains(err.Error(), "changed since it was opened") {
		t.Errorf("read-ahead of a replaced object: %q, %v; want the change reported", p[:n], err)
	}
}

// TestS3Schemes opens the same bucket as s3a:// and s3:// through vfs.Open
// (core-site.xml's fs.s3a.* keys, as a Hadoop client would): what one
// writes the other lists and reads, and versitygw stores it under the key
// both name.
func TestS3Schemes(t *testing.T) {
	st := testenv.RequireS3(t)
	st.UseS3Conf(t)
	dir := s3Prefix(t)
	s3a, err := vfs.Open("s3a://" + st.Bucket + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s3a.Close()
	defer s3a.FS.RemoveAll(dir)
	s3, err := vfs.Open("s3://" + st.Bucket + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if s3.Path != dir {
		t.Fatalf("s3:// path %q, want %q", s3.Path, dir)
	}
	s3test.WriteObject(t, s3.FS, dir+"/via-s3", []byte("written through s3://"))
	if got := s3test.Stored(t, st, dir+"/via-s3"); string(got) != "written through s3://" {
		t.Fatalf("the server stored %q", got)
	}
	if got, err := vfs.ReadFile(s3a.FS, dir+"/via-s3"); err != nil || string(got) != "written through s3://" {
		t.Errorf("read through s3a://: %q, %v", got, err)
	}
	ents, err := s3.FS.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "via-s3" {
		t.Errorf("s3:// listing: %v, %v", ents, err)
	}
}

// writeCoreSite writes a HADOOP_CONF_DIR with a core-site.xml of the given
// properties and points the test's HADOOP_CONF_DIR at it, with the AWS
// environment cleared (as UseS3Conf does) so only what the test sets is
// seen.
func writeCoreSite(t *testing.T, props map[string]string) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
	for k, v := range props {
		b.WriteString("  <property><name>" + k + "</name><value>" + v + "</value></property>\n")
	}
	b.WriteString("</configuration>\n")
	if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
	}
	// No shared files of the machine's user, no instance metadata look-ups:
	// nothing leaves the loopback, nothing outside the test is read.
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-aws-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("HADOOP_CONF_DIR", dir)
}

// TestS3OptionsFromHadoop reads the fs.s3a.* keys S3A reads: an endpoint
// without a scheme is https unless fs.s3a.connection.ssl.enabled is false,
// fs.s3a.endpoint.region wins over fs.s3a.region, and a per-bucket key
// fs.s3a.bucket.B.X wins over fs.s3a.X for bucket B only.
func TestS3OptionsFromHadoop(t *testing.T) {
	conf := hadoopconf.HadoopConf{
		"fs.s3a.endpoint":                            "s3.example:9000",
		"fs.s3a.region":                              "eu-west-1",
		"fs.s3a.access.key":                          "AK",
		"fs.s3a.secret.key":                          "SK",
		"fs.s3a.bucket.other.endpoint":               "http://127.0.0.1:1",
		"fs.s3a.bucket.other.path.style.access":      "true",
		"fs.s3a.bucket.other.endpoint.region":        "us-west-2",
		"fs.s3a.bucket.other.access.key":             "AK2",
		"fs.s3a.bucket.plain.connection.ssl.enabled": "false",
	}
	for _, c := range []struct {
		bucket string
		want   s3.Options
	}{
		{"b", s3.Options{Endpoint: "https://s3.example:9000", Region: "eu-west-1", AccessKey: "AK", SecretKey: "SK"}},
		{"plain", s3.Options{Endpoint: "http://s3.example:9000", Region: "eu-west-1", AccessKey: "AK", SecretKey: "SK"}},
		{"other", s3.Options{Endpoint: "http://127.0.0.1:1", PathStyle: true, Region: "us-west-2", AccessKey: "AK2", SecretKey: "SK"}},
	} {
		if got := s3.OptionsFromHadoop(conf, c.bucket); got != c.want {
			t.Errorf("bucket %s: %+v, want %+v", c.bucket, got, c.want)
		}
	}
}

// TestS3Credentials opens versitygw's bucket through vfs.Open with the
// credentials coming each way a Hadoop or AWS client finds them, and the
// endpoint from core-site.xml: the fs.s3a.* keys (endpoint without a scheme
// and fs.s3a.connection.ssl.enabled=false, per-bucket keys); no keys in
// core-site.xml, the AWS default chain's environment variables; its shared
// credentials file with a named profile (AWS_PROFILE). Wrong keys in
// core-site.xml win over good ones in the environment and are refused by
// the server at Open (ErrPermission), so the chain is not consulted when
// core-site.xml names keys. (The wrong key there is the right access key
// with a wrong secret: versitygw answers an unknown access key with 404
// XAdminUserNotFound, which a HEAD, having no body, reports as a missing
// bucket; AWS answers 403 InvalidAccessKeyId.)
func TestS3Credentials(t *testing.T) {
	st := testenv.RequireS3(t)
	hostPort := strings.TrimPrefix(st.Endpoint, "http://")
	url := "s3a://" + st.Bucket + "/creds"
	opens := func(t *testing.T) {
		t.Helper()
		loc, err := vfs.Open(url)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer loc.Close()
		if _, err := loc.FS.ReadDir("/"); err != nil {
			t.Fatalf("listing the bucket: %v", err)
		}
	}
	t.Run("CoreSiteKeys", func(t *testing.T) {
		writeCoreSite(t, map[string]string{
			"fs.s3a.endpoint":                            hostPort,
			"fs.s3a.connection.ssl.enabled":              "false",
			"fs.s3a.path.style.access":                   "true",
			"fs.s3a.bucket." + st.Bucket + ".access.key": st.AccessKey,
			"fs.s3a.bucket." + st.Bucket + ".secret.key": st.SecretKey,
			"fs.s3a.access.key":                          "wrong",
			"fs.s3a.secret.key":                          "wrong",
		})
		opens(t)
	})
	t.Run("EnvironmentChain", func(t *testing.T) {
		writeCoreSite(t, map[string]string{"fs.s3a.endpoint": st.Endpoint, "fs.s3a.path.style.access": "true"})
		t.Setenv("AWS_ACCESS_KEY_ID", st.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", st.SecretKey)
		opens(t)
	})
	t.Run("SharedCredentialsProfile", func(t *testing.T) {
		writeCoreSite(t, map[string]string{"fs.s3a.endpoint": st.Endpoint, "fs.s3a.path.style.access": "true"})
		creds := filepath.Join(t.TempDir(), "credentials")
		body := "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[rekey-test]\naws_access_key_id = " + st.AccessKey + "\naws_secret_access_key = " + st.SecretKey + "\n"
		if err := os.WriteFile(creds, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
		t.Setenv("AWS_PROFILE", "rekey-test")
		opens(t)
	})
	t.Run("CoreSiteKeysWinOverTheChain", func(t *testing.T) {
		writeCoreSite(t, map[string]string{"fs.s3a.endpoint": st.Endpoint, "fs.s3a.path.style.access": "true",
			"fs.s3a.access.key": st.AccessKey, "fs.s3a.secret.key": "wrong"})
		t.Setenv("AWS_ACCESS_KEY_ID", st.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", st.SecretKey)
		_, err := vfs.Open(url)
		if !errors.Is(err, iofs.ErrPermission) || !strings.Contains(err.Error(), st.Endpoint) {
			t.Fatalf("Open with a wrong secret in core-site.xml: %v; want ErrPermission naming the endpoint", err)
		}
	})
}

// TestS3ReadAheadWithinBudget scans a 3 MiB object on versitygw front to
// back in 64 KiB reads through vfs.ReadAhead (as snapshot scans read store
// files) with 512 KiB chunks and a 1 MiB budget, through a proxy that
// records the downloads: the bytes are the object's; the chunks held never
// pass the budget; the scan is served by a few large GETs (an open-ended
// stream, "bytes=N-"), not one per read. A second scan while the first
// holds the budget finds no room, starts no stream, and still reads the
// right bytes with ranged GETs.
func TestS3ReadAheadWithinBudget(t *testing.T) {
	st := testenv.RequireS3(t)
	p := s3test.StartFaultProxy(t, st.Endpoint, s3test.S3Protocol)
	s := dialThrough(t, st, p, 0)
	dir := s3Prefix(t)
	defer s.RemoveAll(dir)
	data := s3test.RandomBytes(3<<20, 9)
	s3test.WriteObject(t, s, dir+"/obj", data)
	f, err := s.Open(dir + "/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	scan := func(ra *vfs.ReadAhead) {
		t.Helper()
		got := make([]byte, len(data))
		for off := 0; off < len(data); off += 64 << 10 {
			if _, err := ra.ReadAt(got[off:off+64<<10], int64(off)); err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatal("the scan read other bytes than the object's")
		}
	}
	const budget = 1 << 20
	b := vfs.NewBudget(budget)
	p.CutReads(0, 0) // resets the recorded ranges
	ra := vfs.NewReadAhead(f, 0, vfs.ReadAheadOptions{Chunk: 512 << 10, Budget: b})
	defer ra.Close()
	scan(ra)
	gets := p.Ranges()
	if _, peak := b.Used(); peak > budget || peak == 0 {
		t.Errorf("peak read-ahead buffers %d bytes, want some and at most the budget %d", peak, budget)
	}
	if st := ra.Stats(); st.Streams == 0 {
		t.Errorf("no stream was used: %+v", st)
	}
	open := 0
	for _, r := range gets {
		if strings.HasSuffix(r, "-") {
			open++
		}
	}
	if open == 0 || len(gets) > 4 {
		t.Errorf("downloads %q for 48 reads: want a few, one of them an open-ended stream", gets)
	}

	p.CutReads(0, 0)
	ra2 := vfs.NewReadAhead(f, 0, vfs.ReadAheadOptions{Chunk: 512 << 10, Budget: b})
	scan(ra2)
	if st := ra2.Stats(); st.Streams != 0 {
		t.Errorf("a stream started beyond the budget: %+v", st)
	}
	ra2.Close()
	ra.Close()
	if now, _ := b.Used(); now != 0 {
		t.Errorf("%d bytes of the budget still held after Close", now)
	}
	t.Logf("downloads of the scan within the budget: %q; the scan without room: %d ranged GETs", gets, len(p.Ranges()))
}
