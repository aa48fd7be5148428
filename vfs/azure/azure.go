// Package azure is the Azure Blob Storage backend of vfs: abfs://,
// abfss://, wasb:// and wasbs:// URLs name a container of an account
// (CONTAINER@ACCOUNT.dfs.core.windows.net or .blob.core.windows.net) and a
// prefix. Importing it registers those schemes with vfs.Open.
package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
)

// FS is one container of an Azure storage account (Blob storage, or
// Data Lake Storage Gen2 through its Blob API), as a WriteFS. Paths are
// blob names with a leading slash, and directories are name prefixes
// ending in "/", as on S3 (see the s3 backend): MkdirAll writes an empty marker blob
// "dir/".
//
// Writes are whole block blobs, visible at Close and not before (blocks
// staged while writing, committed at Close). Reads of an opened blob ask
// for its ETag (If-Match); exclusive creates ask that none exists
// (If-None-Match: *); the delete of Rename asks for the ETag copied.
type FS struct {
	c    *container.Client
	name string // "abfs://container@account" for messages
}

// Options configure DialWith. A connection string wins; else the
// account and key sign requests to Endpoint.
type Options struct {
	// ConnectionString is an account's connection string
	// ("DefaultEndpointsProtocol=…;AccountName=…;AccountKey=…;BlobEndpoint=…").
	ConnectionString string
	// Account and Key are the storage account's name and shared key.
	Account, Key string
	// Endpoint is the Blob service's URL ("https://ACCOUNT.blob.core.windows.net").
	Endpoint string
	// MaxAttempts bounds the SDK's attempts per request (0 = 8): throttling
	// (503 ServerBusy, 429) and server errors are retried with back-off.
	MaxAttempts int
	// MaxBackoff caps the wait between attempts (0 = the SDK's 60 s).
	MaxBackoff time.Duration
}

// OptionsFromHadoop reads what a Hadoop client would for the account
// host ("ACCOUNT.dfs.core.windows.net" or "ACCOUNT.blob.core.windows.net"):
// fs.azure.account.key.HOST (the key given for the other endpoint of the
// same account also serves), then the environment's
// AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT and
// AZURE_STORAGE_KEY. The Blob endpoint is the host's, with ".dfs." read as
// ".blob." (Data Lake accounts answer the Blob API there).
func OptionsFromHadoop(conf hadoopconf.HadoopConf, host string) Options {
	account, _, _ := strings.Cut(host, ".")
	blobHost := strings.Replace(host, ".dfs.", ".blob.", 1)
	o := Options{Account: account, Endpoint: "https://" + blobHost}
	for _, h := range []string{host, blobHost, strings.Replace(host, ".blob.", ".dfs.", 1)} {
		if k := strings.TrimSpace(conf["fs.azure.account.key."+h]); k != "" {
			o.Key = k
			return o
		}
	}
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
		o.ConnectionString = cs
		return o
	}
	if a := os.Getenv("AZURE_STORAGE_ACCOUNT"); a == account || a == "" {
		o.Key = os.Getenv("AZURE_STORAGE_KEY")
	}
	return o
}

// Dial opens the container of the account host with the Hadoop
// configuration in HADOOP_CONF_DIR (or HADOOP_HOME/conf) and the
// environment (see OptionsFromHadoop).
func Dial(containerName, host string) (*FS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	return DialWith(containerName, OptionsFromHadoop(conf, host))
}

// DialWith opens containerName with o, and reads the container's
// properties so that a wrong endpoint, key or name fails here.
func DialWith(containerName string, o Options) (*FS, error) {
	if containerName == "" {
		return nil, fmt.Errorf("%w: an Azure URL needs a container (abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/path)", vfs.ErrBadLocation)
	}
	attempts := o.MaxAttempts
	if attempts <= 0 {
		attempts = objstore.DefaultAttempts
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: int32(attempts - 1), MaxRetryDelay: o.MaxBackoff}}}
	if o.MaxBackoff > 0 {
		opts.Retry.RetryDelay = o.MaxBackoff / 10
	}
	var c *container.Client
	var err error
	switch {
	case o.ConnectionString != "":
		c, err = container.NewClientFromConnectionString(o.ConnectionString, containerName, opts)
	case o.Key != "":
		var cred *container.SharedKeyCredential
		if cred, err = container.NewSharedKeyCredential(o.Account, o.Key); err == nil {
			c, err = container.NewClientWithSharedKeyCredential(strings.TrimSuffix(o.Endpoint, "/")+"/"+containerName, cred, opts)
		}
	default:
		return nil, fmt.Errorf("vfs: Azure account %s: no key (fs.azure.account.key.* in core-site.xml, AZURE_STORAGE_KEY or AZURE_STORAGE_CONNECTION_STRING)", o.Account)
	}
	if err != nil {
		return nil, fmt.Errorf("vfs: Azure client: %w", err)
	}
	a := &FS{c: c, name: "abfs://" + containerName + "@" + o.Account}
	if o.Account == "" {
		a.name = "abfs://" + containerName
	}
	if _, err := c.GetProperties(context.Background(), nil); err != nil {
		return nil, fmt.Errorf("vfs: Azure container %s (%s): %w", containerName, c.URL(), a.explain("container", "/", err))
	}
	return a, nil
}

// String implements vfs.FS.
func (a *FS) String() string { return a.name }

// Close releases nothing: the client holds only idle HTTP connections.
func (a *FS) Close() error { return nil }

// blob is the client of the blob at name.
func (a *FS) blob(name string) *blob.Client { return a.c.NewBlobClient(objstore.Key(name)) }

// explain turns an SDK error into one that errors.Is matches against
// fs.ErrNotExist, fs.ErrExist (a failed condition) or fs.ErrPermission.
func (a *FS) explain(op, name string, err error) error {
	wrap := func(kind error) error {
		return &iofs.PathError{Op: op, Path: a.name + name, Err: fmt.Errorf("%w (%v)", kind, err)}
	}
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound, bloberror.ResourceNotFound):
		return wrap(iofs.ErrNotExist)
	case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.SourceConditionNotMet, bloberror.BlobAlreadyExists):
		return wrap(iofs.ErrExist)
	case bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.AuthorizationFailure):
		return wrap(iofs.ErrPermission)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusNotFound:
			return wrap(iofs.ErrNotExist)
		case http.StatusPreconditionFailed, http.StatusConflict:
			return wrap(iofs.ErrExist)
		case http.StatusForbidden:
			return wrap(iofs.ErrPermission)
		}
	}
	return &iofs.PathError{Op: op, Path: a.name + name, Err: err}
}

// props describes the blob at name, or fails with fs.ErrNotExist.
func (a *FS) props(name string) (objstore.Info, error) {
	p, err := a.blob(name).GetProperties(context.Background(), nil)
	if err != nil {
		return objstore.Info{}, a.explain("stat", name, err)
	}
	return objstore.Object(path.Base(name), deref(p.ContentLength), deref(p.LastModified), string(deref(p.ETag))), nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// isDir reports whether some blob lies under name's prefix.
func (a *FS) isDir(name string) (bool, error) {
	prefix := objstore.DirPrefix(name)
	one := int32(1)
	page, err := a.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix, MaxResults: &one}).NextPage(context.Background())
	if err != nil {
		return false, a.explain("stat", name, err)
	}
	return len(page.Segment.BlobItems) > 0, nil
}

// Stat implements vfs.FS: the blob's properties, else a listing of the prefix.
func (a *FS) Stat(name string) (iofs.FileInfo, error) { return objstore.Stat(name, a.stat, a.isDir) }

// stat is props as an fs.FileInfo.
func (a *FS) stat(name string) (iofs.FileInfo, error) { return a.props(name) }

// ReadDir implements vfs.FS with a hierarchical listing ("/") of the
// directory's prefix. The directory's own marker is left out. A prefix
// nothing lies under is fs.ErrNotExist.
func (a *FS) ReadDir(name string) ([]iofs.FileInfo, error) {
	prefix := objstore.DirPrefix(name)
	var out []iofs.FileInfo
	found := false
	p := a.c.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{Prefix: &prefix})
	for p.More() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return nil, a.explain("readdir", name, err)
		}
		for _, b := range page.Segment.BlobItems {
			found = true
			n := strings.TrimPrefix(deref(b.Name), prefix)
			if n == "" || b.Properties == nil {
				continue // the directory's marker
			}
			out = append(out, objstore.Object(n, deref(b.Properties.ContentLength), deref(b.Properties.LastModified), string(deref(b.Properties.ETag))))
		}
		for _, bp := range page.Segment.BlobPrefixes {
			found = true
			if n := strings.TrimSuffix(strings.TrimPrefix(deref(bp.Name), prefix), "/"); n != "" {
				out = append(out, objstore.Dir(n))
			}
		}
	}
	return objstore.Listed(a.name, name, prefix, found, out, a.stat)
}

// Open implements vfs.FS. It takes the blob's size and ETag from its
// properties; every read asks for that ETag (If-Match), so a blob replaced
// while it is read fails the read instead of mixing two versions' bytes.
func (a *FS) Open(name string) (vfs.File, error) {
	fi, err := a.props(name)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := a.isDir(name); derr == nil && dir {
				return nil, &iofs.PathError{Op: "open", Path: a.name + name, Err: errors.New("is a directory")}
			}
		}
		return nil, err
	}
	b := a.blob(name)
	etag := azcore.ETag(objstore.ETag(fi))
	get := func(off, n int64) (io.ReadCloser, error) {
		rng := blob.HTTPRange{Offset: off}
		if n > 0 {
			rng.Count = n
		}
		resp, err := b.DownloadStream(context.Background(), &blob.DownloadStreamOptions{Range: rng,
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}})
		if err != nil {
			err = a.explain("read", name, err)
			if errors.Is(err, iofs.ErrExist) {
				return nil, fmt.Errorf("vfs: %s%s changed since it was opened (ETag %s): %w", a.name, name, objstore.ETag(fi), err)
			}
			return nil, err
		}
		return resp.Body, nil
	}
	return objstore.Open(a.name, name, fi.Size(), get), nil
}

func init() { vfs.Register(dial, "abfs", "abfss", "wasb", "wasbs") }

// dial is Dial for vfs.Open: the URL's user part is the container, its
// host the account's.
func dial(u *url.URL, _ vfs.Options) (vfs.WriteFS, func() error, error) {
	a, err := Dial(u.User.Username(), u.Host)
	if err != nil {
		return nil, nil, err
	}
	return a, a.Close, nil
}
