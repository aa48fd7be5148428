// Package s3 is the S3 backend of vfs: s3a:// and s3:// URLs name a bucket
// and a key prefix of AWS S3 or any server speaking its API. Importing it
// registers those schemes with vfs.Open.
package s3

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
)

// FS is one bucket of an S3 object store (AWS or any server speaking its
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
type FS struct {
	client *awss3.Client
	bucket string
	name   string // "s3a://bucket" for messages
}

// Options configure Dial. Empty fields come from the Hadoop
// configuration's fs.s3a.* keys, then from the AWS SDK's default chain
// (environment, shared config and credential files, instance roles).
type Options struct {
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

// ErrNoCredentials is matched by the error of a dial that found no S3
// credentials anywhere it looks.
var ErrNoCredentials = errors.New("vfs: no S3 credentials")

// OptionsFromHadoop reads the fs.s3a.* keys of a Hadoop configuration for
// bucket: fs.s3a.endpoint, fs.s3a.path.style.access, fs.s3a.endpoint.region
// (else fs.s3a.region), fs.s3a.access.key, fs.s3a.secret.key and
// fs.s3a.connection.ssl.enabled (an endpoint without a scheme is https
// unless that is false). A per-bucket key fs.s3a.bucket.BUCKET.X wins over
// fs.s3a.X, as in S3A.
func OptionsFromHadoop(conf hadoopconf.HadoopConf, bucket string) Options {
	get := func(k string) string {
		if v, ok := conf["fs.s3a.bucket."+bucket+"."+k]; ok {
			return strings.TrimSpace(v)
		}
		return strings.TrimSpace(conf["fs.s3a."+k])
	}
	o := Options{
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

// Dial opens bucket with the fs.s3a.* keys of the Hadoop configuration in
// HADOOP_CONF_DIR (or HADOOP_HOME/conf) and the AWS default chain for what
// they leave out (see OptionsFromHadoop).
func Dial(bucket string) (*FS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	return DialWith(bucket, OptionsFromHadoop(conf, bucket))
}

// DialWith opens bucket with o, and checks with a HEAD of the bucket that
// it exists and the credentials may use it, so a wrong endpoint, key or
// bucket name fails here and not in the middle of a run.
func DialWith(bucket string, o Options) (*FS, error) {
	if bucket == "" {
		return nil, fmt.Errorf("%w: an S3 URL needs a bucket (s3a://BUCKET/path)", vfs.ErrBadLocation)
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
	// The SDK's own log lines (the instance metadata service's fallbacks)
	// would reach the user's terminal beside rekey's; what failed is said
	// once, in the error below.
	loads = append(loads, config.WithLogger(logging.Nop{}))
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("vfs: S3 configuration: %w", err)
	}
	if o.AccessKey == "" && o.SecretKey == "" {
		// The default chain, tried now so that a machine with no
		// credentials hears where rekey looked, not the SDK's chain.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := cfg.Credentials.Retrieve(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: s3a://%s: rekey looked for fs.s3a.access.key and fs.s3a.secret.key (or fs.s3a.bucket.%s.access.key and .secret.key) in core-site.xml under $HADOOP_CONF_DIR, then AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the shared credentials file (~/.aws/credentials, profile $AWS_PROFILE or default), and the instance's role; give one of them (the SDK said: %v)", ErrNoCredentials, bucket, bucket, err)
		}
	}
	if cfg.Region == "" {
		// A server other than AWS ignores the region but the signature
		// needs one; us-east-1 is what S3A and the AWS CLI assume.
		cfg.Region = "us-east-1"
	}
	attempts := o.MaxAttempts
	if attempts <= 0 {
		attempts = objstore.DefaultAttempts
	}
	client := awss3.NewFromConfig(cfg, func(so *awss3.Options) {
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
	fsys := &FS{client: client, bucket: bucket, name: "s3a://" + bucket}
	if _, err := client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
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

// String implements vfs.FS.
func (s *FS) String() string { return s.name }

// Close releases nothing: the client holds only idle HTTP connections.
func (s *FS) Close() error { return nil }

// explain turns an SDK error into one that errors.Is matches against
// fs.ErrNotExist, fs.ErrExist (a failed precondition) or fs.ErrPermission,
// naming the path.
func (s *FS) explain(op, name string, err error) error {
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

// head describes the object at name, or fails with fs.ErrNotExist.
func (s *FS) head(name string) (objstore.Info, error) {
	out, err := s.client.HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(name))})
	if err != nil {
		return objstore.Info{}, s.explain("stat", name, err)
	}
	return objstore.Object(path.Base(name), aws.ToInt64(out.ContentLength), aws.ToTime(out.LastModified), aws.ToString(out.ETag)), nil
}

// isDir reports whether some key lies under name's prefix.
func (s *FS) isDir(name string) (bool, error) {
	out, err := s.client.ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(objstore.DirPrefix(name)), MaxKeys: aws.Int32(1)})
	if err != nil {
		return false, s.explain("stat", name, err)
	}
	return len(out.Contents) > 0 || len(out.CommonPrefixes) > 0, nil
}

// Stat implements vfs.FS: a HEAD of the object, else a listing of the prefix.
func (s *FS) Stat(name string) (iofs.FileInfo, error) { return objstore.Stat(name, s.stat, s.isDir) }

// stat is head as an fs.FileInfo.
func (s *FS) stat(name string) (iofs.FileInfo, error) { return s.head(name) }

// ReadDir implements vfs.FS with a delimited listing of the directory's prefix:
// objects are files, common prefixes directories. The directory's own
// marker is left out. A prefix nothing lies under is fs.ErrNotExist.
func (s *FS) ReadDir(name string) ([]iofs.FileInfo, error) {
	prefix := objstore.DirPrefix(name)
	var out []iofs.FileInfo
	found := false
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(prefix), Delimiter: aws.String("/")})
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
			out = append(out, objstore.Object(n, aws.ToInt64(o.Size), aws.ToTime(o.LastModified), aws.ToString(o.ETag)))
		}
		for _, cp := range page.CommonPrefixes {
			found = true
			n := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), prefix), "/")
			if n != "" {
				out = append(out, objstore.Dir(n))
			}
		}
	}
	return objstore.Listed(s.name, name, prefix, found, out, s.stat)
}

func init() { vfs.Register(dial, "s3a", "s3") }

// dial is Dial for vfs.Open: the URL's host is the bucket.
func dial(u *url.URL, _ vfs.Options) (vfs.WriteFS, func() error, error) {
	s, err := Dial(u.Host)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}
