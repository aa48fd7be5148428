// Package gcs is the Google Cloud Storage backend of vfs: gs:// URLs name
// a bucket and a prefix. Importing it registers the scheme with vfs.Open.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
)

// FS is one bucket of Google Cloud Storage (or a server speaking its JSON
// API), as a WriteFS. Paths are object names with a leading slash, and
// directories are name prefixes ending in "/", as on S3 (see S3): MkdirAll
// writes an empty marker object "dir/" as Hadoop's GCS connector does.
//
// Writes are whole objects, visible at Close and not before (a resumable
// upload finalized at Close). Every object has a generation, a number GCS
// changes whenever the object is replaced; the backend uses it where S3's
// uses the ETag: reads of an opened object ask for its generation, and the
// delete of Rename is conditional on the generation copied.
type FS struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string // "gs://bucket" for messages
	// attempts is the library's bound per request, which bounds the
	// requests one Read of a download may make (see gcsBody).
	attempts int
}

// Options configure DialWith. Empty fields mean the library's
// defaults: Google's endpoint (or STORAGE_EMULATOR_HOST's server, without
// credentials, when that variable is set) and application default
// credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata
// server).
type Options struct {
	// Endpoint is the JSON API's base URL
	// ("http://127.0.0.1:4443/storage/v1/").
	Endpoint string
	// Anonymous sends no credentials (an emulator, a public bucket).
	Anonymous bool
	// CredentialsFile is a service account's JSON key file.
	CredentialsFile string
	// MaxAttempts bounds the library's attempts per request (0 = 8):
	// throttling (429), server errors (5xx) and broken connections are
	// retried with exponential back-off.
	MaxAttempts int
	// MaxBackoff caps the wait between attempts (0 = the library's 30 s).
	MaxBackoff time.Duration
	// HTTPClient, when set, carries the requests (and their credentials,
	// which the options above then do not add).
	HTTPClient *http.Client
}

// gcsChunk is the resumable upload's chunk: what a writer holds in memory
// and sends per request (the library's default is 16 MiB).
const gcsChunk = 8 << 20

// OptionsFromHadoop reads the keys of Hadoop's GCS connector from a
// Hadoop configuration: fs.gs.storage.root.url (the API's root, Google's
// by default) with fs.gs.storage.service.path (default "storage/v1/"),
// fs.gs.auth.type (UNAUTHENTICATED, SERVICE_ACCOUNT_JSON_KEYFILE, or
// application default credentials otherwise) and
// fs.gs.auth.service.account.json.keyfile.
func OptionsFromHadoop(conf hadoopconf.HadoopConf) Options {
	get := func(k string) string { return strings.TrimSpace(conf["fs.gs."+k]) }
	var o Options
	if root := get("storage.root.url"); root != "" {
		svc := get("storage.service.path")
		if svc == "" {
			svc = "storage/v1/"
		}
		o.Endpoint = strings.TrimSuffix(root, "/") + "/" + strings.Trim(svc, "/") + "/"
	}
	keyfile := get("auth.service.account.json.keyfile")
	switch strings.ToUpper(get("auth.type")) {
	case "UNAUTHENTICATED":
		o.Anonymous = true
	case "SERVICE_ACCOUNT_JSON_KEYFILE", "":
		o.CredentialsFile = keyfile
	}
	return o
}

// Dial opens bucket with the fs.gs.* keys of the Hadoop configuration in
// HADOOP_CONF_DIR (or HADOOP_HOME/conf) and the library's defaults for
// what they leave out (see OptionsFromHadoop).
func Dial(bucket string) (*FS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	return DialWith(bucket, OptionsFromHadoop(conf))
}

// DialWith opens bucket with o, and reads the bucket's metadata so that
// a wrong endpoint, credential or bucket name fails here and not in the
// middle of a run.
func DialWith(bucket string, o Options) (*FS, error) {
	if bucket == "" {
		return nil, fmt.Errorf("%w: a GCS URL needs a bucket (gs://BUCKET/path)", vfs.ErrBadLocation)
	}
	ctx := context.Background()
	// JSON reads: one API for every request, the one emulators implement
	// fully (the library reads through the XML API by default).
	opts := []option.ClientOption{storage.WithJSONReads()}
	switch {
	case o.HTTPClient != nil:
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	case o.Anonymous:
		opts = append(opts, option.WithoutAuthentication())
	case o.CredentialsFile != "":
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, o.CredentialsFile))
	}
	if o.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(o.Endpoint))
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("vfs: GCS client: %w", err)
	}
	attempts := o.MaxAttempts
	if attempts <= 0 {
		attempts = objstore.DefaultAttempts
	}
	retry := []storage.RetryOption{storage.WithMaxAttempts(attempts)}
	if o.MaxBackoff > 0 {
		retry = append(retry, storage.WithBackoff(gax.Backoff{Initial: o.MaxBackoff / 10, Max: o.MaxBackoff, Multiplier: 2}))
	}
	client.SetRetry(retry...)
	fsys := &FS{client: client, bucket: client.Bucket(bucket), name: "gs://" + bucket, attempts: attempts}
	if _, err := fsys.bucket.Attrs(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("vfs: GCS bucket %s (endpoint %s): %w", bucket, gcsEndpointName(o.Endpoint), fsys.explain("bucket", "/", err))
	}
	return fsys, nil
}

func gcsEndpointName(e string) string {
	if e != "" {
		return e
	}
	if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
		return h + " (STORAGE_EMULATOR_HOST)"
	}
	return "Google default"
}

// String implements vfs.FS.
func (g *FS) String() string { return g.name }

// Close releases the client's connections.
func (g *FS) Close() error { return g.client.Close() }

// object is the handle of the object at name.
func (g *FS) object(name string) *storage.ObjectHandle { return g.bucket.Object(objstore.Key(name)) }

// explain turns a library error into one that errors.Is matches against
// fs.ErrNotExist, fs.ErrExist (a failed precondition) or fs.ErrPermission,
// naming the path.
func (g *FS) explain(op, name string, err error) error {
	wrap := func(kind error) error {
		return &iofs.PathError{Op: op, Path: g.name + name, Err: fmt.Errorf("%w (%v)", kind, err)}
	}
	if errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist) {
		return wrap(iofs.ErrNotExist)
	}
	var api *googleapi.Error
	if errors.As(err, &api) {
		switch api.Code {
		case http.StatusNotFound:
			return wrap(iofs.ErrNotExist)
		case http.StatusPreconditionFailed:
			return wrap(iofs.ErrExist)
		case http.StatusUnauthorized, http.StatusForbidden:
			return wrap(iofs.ErrPermission)
		}
	}
	return &iofs.PathError{Op: op, Path: g.name + name, Err: err}
}

// attrs describes the object at name, or fails with fs.ErrNotExist.
func (g *FS) attrs(name string) (*storage.ObjectAttrs, error) {
	a, err := g.object(name).Attrs(context.Background())
	if err != nil {
		return nil, g.explain("stat", name, err)
	}
	return a, nil
}

// gcsInfo describes an object as Stat and ReadDir report it; the ETag is
// GCS's.
func gcsInfo(name string, a *storage.ObjectAttrs) objstore.Info {
	return objstore.Object(name, a.Size, a.Updated, a.Etag)
}

// isDir reports whether some object lies under name's prefix.
func (g *FS) isDir(name string) (bool, error) {
	it := g.bucket.Objects(context.Background(), &storage.Query{Prefix: objstore.DirPrefix(name)})
	it.PageInfo().MaxSize = 1
	_, err := it.Next()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, iterator.Done):
		return false, nil
	}
	return false, g.explain("stat", name, err)
}

// Stat implements vfs.FS: the object's metadata, else a listing of the prefix.
func (g *FS) Stat(name string) (iofs.FileInfo, error) { return objstore.Stat(name, g.stat, g.isDir) }

// stat is attrs as an fs.FileInfo.
func (g *FS) stat(name string) (iofs.FileInfo, error) {
	a, err := g.attrs(name)
	if err != nil {
		return nil, err
	}
	return gcsInfo(path.Base(name), a), nil
}

// ReadDir implements vfs.FS with a delimited listing of the directory's prefix:
// objects are files, prefixes directories. The directory's own marker is
// left out. A prefix nothing lies under is fs.ErrNotExist.
func (g *FS) ReadDir(name string) ([]iofs.FileInfo, error) {
	prefix := objstore.DirPrefix(name)
	var out []iofs.FileInfo
	found := false
	it := g.bucket.Objects(context.Background(), &storage.Query{Prefix: prefix, Delimiter: "/"})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, g.explain("readdir", name, err)
		}
		found = true
		if a.Prefix != "" {
			if n := strings.TrimSuffix(strings.TrimPrefix(a.Prefix, prefix), "/"); n != "" {
				out = append(out, objstore.Dir(n))
			}
			continue
		}
		if n := strings.TrimPrefix(a.Name, prefix); n != "" { // "" is the marker
			out = append(out, gcsInfo(n, a))
		}
	}
	return objstore.Listed(g.name, name, prefix, found, out, g.stat)
}

// Open implements vfs.FS. It takes the object's size and generation from its
// metadata; every read asks for that generation, so an object replaced
// while it is read fails the read (the generation is gone) instead of
// mixing two versions' bytes. An object stored with Content-Encoding gzip
// is refused: GCS would serve it decompressed (and ignore ranges), so its
// bytes would not be the stored ones a snapshot's manifest sizes.
func (g *FS) Open(name string) (vfs.File, error) {
	a, err := g.attrs(name)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := g.isDir(name); derr == nil && dir {
				return nil, &iofs.PathError{Op: "open", Path: g.name + name, Err: errors.New("is a directory")}
			}
		}
		return nil, err
	}
	if strings.EqualFold(a.ContentEncoding, "gzip") {
		return nil, &iofs.PathError{Op: "open", Path: g.name + name, Err: errors.New("stored with Content-Encoding gzip, which GCS decompresses on reading: upload it without (gsutil cp without -z/-Z)")}
	}
	obj := g.object(name).Generation(a.Generation)
	get := func(off, n int64) (io.ReadCloser, error) {
		b := &gcsBody{limit: int64(g.attempts)}
		ctx, cancel := context.WithCancelCause(context.Background())
		b.cancel = cancel
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GetConn: func(string) { b.request() }})
		r, err := obj.NewRangeReader(ctx, off, n)
		if err != nil {
			cancel(nil)
			err = g.explain("read", name, err)
			if errors.Is(err, iofs.ErrNotExist) {
				return nil, fmt.Errorf("vfs: %s%s changed or vanished since it was opened (generation %d): %w", g.name, name, a.Generation, err)
			}
			return nil, err
		}
		b.r = r
		return b, nil
	}
	return objstore.Open(g.name, name, a.Size, get), nil
}

// gcsBody is a download of the GCS library, bounded. The library's reader
// reopens a body that broke from the byte it reached, inside one Read and
// with no limit: a connection that breaks before any byte, again and
// again, would keep that Read reopening for ever. gcsBody counts the
// requests made under its context during one Read (each reopen, each of
// its retries) and, past limit (the attempts allowed one request), cancels
// the context, so the Read fails instead; objstore.File then reopens the
// download itself, within its own bound (objstore.ReadRetries without
// progress), and fails naming the object and the offset.
type gcsBody struct {
	r      *storage.Reader
	cancel context.CancelCauseFunc
	limit  int64
	reqs   atomic.Int64
}

// errGCSNoProgress is the cause gcsBody cancels a download with.
var errGCSNoProgress = errors.New("vfs: GCS download broke again and again without progress")

// request counts a request of the current Read and stops the download
// past the limit.
func (b *gcsBody) request() {
	if b.reqs.Add(1) > b.limit {
		b.cancel(errGCSNoProgress)
	}
}

func (b *gcsBody) Read(p []byte) (int, error) {
	b.reqs.Store(0)
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.reqs.Load() > b.limit {
		return n, fmt.Errorf("%w (%d requests in one read)", errGCSNoProgress, b.reqs.Load())
	}
	return n, err
}

func (b *gcsBody) Close() error {
	err := b.r.Close()
	b.cancel(nil)
	return err
}

func init() { vfs.Register(dial, "gs") }

// dial is Dial for vfs.Open: the URL's host is the bucket.
func dial(u *url.URL, _ vfs.Options) (vfs.WriteFS, func() error, error) {
	g, err := Dial(u.Host)
	if err != nil {
		return nil, nil, err
	}
	return g, g.Close, nil
}
