package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
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
)

// Azure is one container of an Azure storage account (Blob storage, or
// Data Lake Storage Gen2 through its Blob API), as a WriteFS. Paths are
// blob names with a leading slash, and directories are name prefixes
// ending in "/", as on S3 (see S3): MkdirAll writes an empty marker blob
// "dir/".
//
// Writes are whole block blobs, visible at Close and not before (blocks
// staged while writing, committed at Close). Reads of an opened blob ask
// for its ETag (If-Match); exclusive creates ask that none exists
// (If-None-Match: *); the delete of Rename asks for the ETag copied.
type Azure struct {
	c    *container.Client
	name string // "abfs://container@account" for messages
}

// AzureOptions configure DialAzureWith. A connection string wins; else the
// account and key sign requests to Endpoint.
type AzureOptions struct {
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

// AzureOptionsFromHadoop reads what a Hadoop client would for the account
// host ("ACCOUNT.dfs.core.windows.net" or "ACCOUNT.blob.core.windows.net"):
// fs.azure.account.key.HOST (the key given for the other endpoint of the
// same account also serves), then the environment's
// AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT and
// AZURE_STORAGE_KEY. The Blob endpoint is the host's, with ".dfs." read as
// ".blob." (Data Lake accounts answer the Blob API there).
func AzureOptionsFromHadoop(conf hadoopconf.HadoopConf, host string) AzureOptions {
	account, _, _ := strings.Cut(host, ".")
	blobHost := strings.Replace(host, ".dfs.", ".blob.", 1)
	o := AzureOptions{Account: account, Endpoint: "https://" + blobHost}
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

// DialAzure opens the container of the account host with the Hadoop
// configuration in HADOOP_CONF_DIR (or HADOOP_HOME/conf) and the
// environment (see AzureOptionsFromHadoop).
func DialAzure(containerName, host string) (*Azure, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	return DialAzureWith(containerName, AzureOptionsFromHadoop(conf, host))
}

// DialAzureWith opens containerName with o, and reads the container's
// properties so that a wrong endpoint, key or name fails here.
func DialAzureWith(containerName string, o AzureOptions) (*Azure, error) {
	if containerName == "" {
		return nil, fmt.Errorf("%w: an Azure URL needs a container (abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/path)", ErrBadLocation)
	}
	attempts := o.MaxAttempts
	if attempts <= 0 {
		attempts = s3DefaultAttempts
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
	a := &Azure{c: c, name: "abfs://" + containerName + "@" + o.Account}
	if o.Account == "" {
		a.name = "abfs://" + containerName
	}
	if _, err := c.GetProperties(context.Background(), nil); err != nil {
		return nil, fmt.Errorf("vfs: Azure container %s (%s): %w", containerName, c.URL(), a.explain("container", "/", err))
	}
	return a, nil
}

// String implements FS.
func (a *Azure) String() string { return a.name }

// Close releases nothing: the client holds only idle HTTP connections.
func (a *Azure) Close() error { return nil }

// blob is the client of the blob at name.
func (a *Azure) blob(name string) *blob.Client { return a.c.NewBlobClient(key(name)) }

// explain turns an SDK error into one that errors.Is matches against
// fs.ErrNotExist, fs.ErrExist (a failed condition) or fs.ErrPermission.
func (a *Azure) explain(op, name string, err error) error {
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
func (a *Azure) props(name string) (s3Info, error) {
	p, err := a.blob(name).GetProperties(context.Background(), nil)
	if err != nil {
		return s3Info{}, a.explain("stat", name, err)
	}
	return s3Info{name: path.Base(name), size: deref(p.ContentLength), mtime: deref(p.LastModified), etag: string(deref(p.ETag))}, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// isDir reports whether some blob lies under name's prefix.
func (a *Azure) isDir(name string) (bool, error) {
	prefix := dirPrefix(name)
	one := int32(1)
	page, err := a.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix, MaxResults: &one}).NextPage(context.Background())
	if err != nil {
		return false, a.explain("stat", name, err)
	}
	return len(page.Segment.BlobItems) > 0, nil
}

// Stat implements FS: the blob's properties, else a listing of the prefix.
func (a *Azure) Stat(name string) (iofs.FileInfo, error) { return statObject(name, a.stat, a.isDir) }

// stat is props as an fs.FileInfo.
func (a *Azure) stat(name string) (iofs.FileInfo, error) { return a.props(name) }

// ReadDir implements FS with a hierarchical listing ("/") of the
// directory's prefix. The directory's own marker is left out. A prefix
// nothing lies under is fs.ErrNotExist.
func (a *Azure) ReadDir(name string) ([]iofs.FileInfo, error) {
	prefix := dirPrefix(name)
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
			out = append(out, s3Info{name: n, size: deref(b.Properties.ContentLength), mtime: deref(b.Properties.LastModified), etag: string(deref(b.Properties.ETag))})
		}
		for _, bp := range page.Segment.BlobPrefixes {
			found = true
			if n := strings.TrimSuffix(strings.TrimPrefix(deref(bp.Name), prefix), "/"); n != "" {
				out = append(out, s3Info{name: n, dir: true})
			}
		}
	}
	return listed(a.name, name, prefix, found, out, a.stat)
}

// Open implements FS. It takes the blob's size and ETag from its
// properties; every read asks for that ETag (If-Match), so a blob replaced
// while it is read fails the read instead of mixing two versions' bytes.
func (a *Azure) Open(name string) (File, error) {
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
	etag := azcore.ETag(fi.etag)
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
				return nil, fmt.Errorf("vfs: %s%s changed since it was opened (ETag %s): %w", a.name, name, fi.etag, err)
			}
			return nil, err
		}
		return resp.Body, nil
	}
	return &objFile{store: a.name, name: name, size: fi.size, get: get}, nil
}
