package vfs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
)

// S3 is one bucket of an S3 object store (AWS or any server speaking its
// API), as a WriteFS. Paths are keys with a leading slash: "/a/b" is the
// key "a/b". An object store has no directories: a directory is a key
// prefix ending in "/", which exists when some key starts with it; MkdirAll
// writes an empty marker object "dir/" as Hadoop's S3A does, so an empty
// directory can be listed.
//
// Writes are whole objects: nothing written through Create is visible
// before Close returns, and then all of it is (a single PUT, or a multipart
// upload completed at Close). Rename is a server-side copy followed by a
// delete of the source; see Rename for what that keeps of the local
// semantics.
type S3 struct {
	client *s3.Client
	bucket string
	name   string // "s3a://bucket" for messages
}

// S3Options configure DialS3. Empty fields come from the Hadoop
// configuration's fs.s3a.* keys, then from the AWS SDK's default chain
// (environment, shared config and credential files, instance roles).
type S3Options struct {
	// Endpoint is the server's URL ("http://127.0.0.1:9000"); empty means
	// AWS's endpoint for the region.
	Endpoint string
	// PathStyle addresses the bucket in the path (http://host/bucket/key)
	// rather than in the host name, as servers other than AWS need.
	PathStyle bool
	// Region is the signing region.
	Region string
	// AccessKey and SecretKey are static credentials; both empty means the
	// default credential chain.
	AccessKey, SecretKey string
	// MaxAttempts bounds the SDK's attempts per request (0 = 8): throttling
	// answers (503 SlowDown) and server errors are retried with jittered
	// exponential back-off by the SDK's standard retryer.
	MaxAttempts int
	// MaxBackoff caps the wait between attempts (0 = the SDK's 20 s).
	MaxBackoff time.Duration
	// HTTPClient, when set, carries the requests (tests route them through
	// a fault-injecting proxy this way, or by Endpoint).
	HTTPClient *http.Client
}

// s3DefaultAttempts is the SDK's attempt bound unless S3Options says
// otherwise: more than the SDK's 3, since a throttled bucket (SlowDown)
// may need several backed-off tries while a long scan must not fail.
const s3DefaultAttempts = 8

// S3OptionsFromHadoop reads the fs.s3a.* keys of a Hadoop configuration for
// bucket: fs.s3a.endpoint, fs.s3a.path.style.access, fs.s3a.endpoint.region
// (else fs.s3a.region), fs.s3a.access.key, fs.s3a.secret.key and
// fs.s3a.connection.ssl.enabled (an endpoint without a scheme is https
// unless that is false). A per-bucket key fs.s3a.bucket.BUCKET.X wins over
// fs.s3a.X, as in S3A.
func S3OptionsFromHadoop(conf hadoopconf.HadoopConf, bucket string) S3Options {
	get := func(k string) string {
		if v, ok := conf["fs.s3a.bucket."+bucket+"."+k]; ok {
			return strings.TrimSpace(v)
		}
		return strings.TrimSpace(conf["fs.s3a."+k])
	}
	o := S3Options{
		Endpoint:  get("endpoint"),
		PathStyle: strings.EqualFold(get("path.style.access"), "true"),
		Region:    get("endpoint.region"),
		AccessKey: get("access.key"),
		SecretKey: get("secret.key"),
	}
	if o.Region == "" {
		o.Region = get("region")
	}
	if o.Endpoint != "" && !strings.Contains(o.Endpoint, "://") {
		scheme := "https://"
		if strings.EqualFold(get("connection.ssl.enabled"), "false") {
			scheme = "http://"
		}
		o.Endpoint = scheme + o.Endpoint
	}
	return o
}

// DialS3 opens bucket with the fs.s3a.* keys of the Hadoop configuration in
// HADOOP_CONF_DIR (or HADOOP_HOME/conf) and the AWS default chain for what
// they leave out (see S3OptionsFromHadoop).
func DialS3(bucket string) (*S3, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	return DialS3With(bucket, S3OptionsFromHadoop(conf, bucket))
}

// DialS3With opens bucket with o, and checks with a HEAD of the bucket that
// it exists and the credentials may use it, so a wrong endpoint, key or
// bucket name fails here and not in the middle of a run.
func DialS3With(bucket string, o S3Options) (*S3, error) {
	if bucket == "" {
		return nil, fmt.Errorf("%w: an S3 URL needs a bucket (s3a://BUCKET/path)", ErrBadLocation)
	}
	ctx := context.Background()
	var loads []func(*config.LoadOptions) error
	if o.Region != "" {
		loads = append(loads, config.WithRegion(o.Region))
	}
	if o.AccessKey != "" || o.SecretKey != "" {
		loads = append(loads, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, os.Getenv("AWS_SESSION_TOKEN"))))
	}
	if o.HTTPClient != nil {
		loads = append(loads, config.WithHTTPClient(o.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("vfs: S3 configuration: %w", err)
	}
	if cfg.Region == "" {
		// A server other than AWS ignores the region but the signature
		// needs one; us-east-1 is what S3A and the AWS CLI assume.
		cfg.Region = "us-east-1"
	}
	attempts := o.MaxAttempts
	if attempts <= 0 {
		attempts = s3DefaultAttempts
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		so.Retryer = retry.NewStandard(func(ro *retry.StandardOptions) {
			ro.MaxAttempts = attempts
			if o.MaxBackoff > 0 {
				ro.MaxBackoff = o.MaxBackoff
			}
		})
		// Checksums only where the API requires them: servers other than
		// AWS differ in the trailing checksums they accept, and ranged GETs
		// carry no whole-object checksum to validate.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	fsys := &S3{client: client, bucket: bucket, name: "s3a://" + bucket}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return nil, fmt.Errorf("vfs: S3 bucket %s (endpoint %s): %w", bucket, endpointName(o.Endpoint), fsys.explain("headbucket", "/", err))
	}
	return fsys, nil
}

func endpointName(e string) string {
	if e == "" {
		return "AWS default"
	}
	return e
}

// String implements FS.
func (s *S3) String() string { return s.name }

// Close releases nothing: the client holds only idle HTTP connections.
func (s *S3) Close() error { return nil }

// key turns a path into an object key.
func key(name string) string { return strings.TrimPrefix(path.Clean("/"+name), "/") }

// dirPrefix is the key prefix of the directory name ("" for the root).
func dirPrefix(name string) string {
	k := key(name)
	if k == "" {
		return ""
	}
	return k + "/"
}

// explain turns an SDK error into one that errors.Is matches against
// fs.ErrNotExist, fs.ErrExist (a failed precondition) or fs.ErrPermission,
// naming the path.
func (s *S3) explain(op, name string, err error) error {
	var nf *types.NotFound
	var nsk *types.NoSuchKey
	var nsb *types.NoSuchBucket
	switch {
	case errors.As(err, &nf), errors.As(err, &nsk), errors.As(err, &nsb):
		return &iofs.PathError{Op: op, Path: s.name + name, Err: fmt.Errorf("%w (%v)", iofs.ErrNotExist, err)}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound", "NoSuchBucket":
			return &iofs.PathError{Op: op, Path: s.name + name, Err: fmt.Errorf("%w (%v)", iofs.ErrNotExist, err)}
		case "PreconditionFailed", "ConditionalRequestConflict":
			return &iofs.PathError{Op: op, Path: s.name + name, Err: fmt.Errorf("%w (%v)", iofs.ErrExist, err)}
		case "AccessDenied", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch":
			return &iofs.PathError{Op: op, Path: s.name + name, Err: fmt.Errorf("%w (%v)", iofs.ErrPermission, err)}
		}
	}
	return &iofs.PathError{Op: op, Path: s.name + name, Err: err}
}

// s3Info is a file or directory of an S3 bucket.
type s3Info struct {
	name  string
	size  int64
	mtime time.Time
	etag  string
	dir   bool
}

func (i s3Info) Name() string       { return i.name }
func (i s3Info) Size() int64        { return i.size }
func (i s3Info) ModTime() time.Time { return i.mtime }
func (i s3Info) IsDir() bool        { return i.dir }
func (i s3Info) Mode() iofs.FileMode {
	if i.dir {
		return iofs.ModeDir | 0o755
	}
	return 0o644
}

// Sys returns the object's ETag (a string, quotes included), "" for a
// directory.
func (i s3Info) Sys() any { return i.etag }

// ETag returns the ETag of an object as Stat or ReadDir on S3 described it,
// or "" for anything else.
func ETag(fi iofs.FileInfo) string {
	if i, ok := fi.(s3Info); ok {
		return i.etag
	}
	return ""
}

// head describes the object at name, or fails with fs.ErrNotExist.
func (s *S3) head(name string) (s3Info, error) {
	out, err := s.client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(key(name))})
	if err != nil {
		return s3Info{}, s.explain("stat", name, err)
	}
	return s3Info{name: path.Base(name), size: aws.ToInt64(out.ContentLength), mtime: aws.ToTime(out.LastModified), etag: aws.ToString(out.ETag)}, nil
}

// isDir reports whether some key lies under name's prefix.
func (s *S3) isDir(name string) (bool, error) {
	out, err := s.client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(dirPrefix(name)), MaxKeys: aws.Int32(1)})
	if err != nil {
		return false, s.explain("stat", name, err)
	}
	return len(out.Contents) > 0 || len(out.CommonPrefixes) > 0, nil
}

// Stat implements FS: a HEAD of the object, else a listing of the prefix.
func (s *S3) Stat(name string) (iofs.FileInfo, error) { return statObject(name, s.stat, s.isDir) }

// stat is head as an fs.FileInfo.
func (s *S3) stat(name string) (iofs.FileInfo, error) { return s.head(name) }

// ReadDir implements FS with a delimited listing of the directory's prefix:
// objects are files, common prefixes directories. The directory's own
// marker is left out. A prefix nothing lies under is fs.ErrNotExist.
func (s *S3) ReadDir(name string) ([]iofs.FileInfo, error) {
	prefix := dirPrefix(name)
	var out []iofs.FileInfo
	found := false
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(prefix), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return nil, s.explain("readdir", name, err)
		}
		for _, o := range page.Contents {
			found = true
			n := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if n == "" {
				continue // the directory's marker
			}
			out = append(out, s3Info{name: n, size: aws.ToInt64(o.Size), mtime: aws.ToTime(o.LastModified), etag: aws.ToString(o.ETag)})
		}
		for _, cp := range page.CommonPrefixes {
			found = true
			n := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), prefix), "/")
			if n != "" {
				out = append(out, s3Info{name: n, dir: true})
			}
		}
	}
	return listed(s.name, name, prefix, found, out, s.stat)
}
