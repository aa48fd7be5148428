package hbase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// BulkFile is one HFile to bulk load: its family, its path as the region
// servers see it (same file system as hbase.rootdir, so the load is a
// rename), and its first and last row keys. The bounds are data the caller
// supplies: whoever wrote the file knows them (hfile.Writer's Stats), and
// a file read back can give them (hfile.Reader's FirstKey and LastKey).
type BulkFile struct {
	Family   []byte
	Path     string
	FirstRow []byte
	LastRow  []byte
}

// SpanError reports an HFile whose rows do not lie inside one region of the
// target table; such a file must be split at the region boundary (or
// written partitioned by region) before it can be loaded.
type SpanError struct {
	File   BulkFile
	Region *Region
}

func (e *SpanError) Error() string {
	return fmt.Sprintf("hbase: bulk load: %s (rows %q..%q) spans region boundary: region %s ends at %q", e.File.Path, e.File.FirstRow, e.File.LastRow, e.Region.Name, e.Region.EndKey)
}

// BulkLoadError reports a BulkLoadHFile call the region server answered
// with loaded=false (for example a file outside the region, or a file it
// could not open; its log says which).
type BulkLoadError struct {
	Region *Region
	Files  []BulkFile
	// WithToken says the call carried the caller's file-system token.
	WithToken bool
}

func (e *BulkLoadError) Error() string {
	var paths []string
	for _, f := range e.Files {
		paths = append(paths, f.Path)
	}
	if e.WithToken {
		// A secure server that cannot use the token (expired, cancelled,
		// for another file system) or cannot move the files with it
		// answers so too; its log says "Failed to complete bulk load".
		return fmt.Sprintf("hbase: bulk load into region %s refused (loaded=false) for %v: the region server could not load them with the caller's file-system delegation token (expired or cancelled, issued by another HDFS, or the caller may not move the files), or a file lies outside the region; see the region server log", e.Region.Name, paths)
	}
	return fmt.Sprintf("hbase: bulk load into region %s refused (loaded=false) for %v; see the region server log", e.Region.Name, paths)
}

// proto is the token as HBase's DelegationToken message; nil for none.
func (t *FSToken) proto() *pb.DelegationToken {
	if t == nil {
		return nil
	}
	return &pb.DelegationToken{Identifier: t.Identifier, Password: t.Password, Kind: proto.String(t.Kind), Service: proto.String(t.Service)}
}

// FSToken is the caller's delegation token for the file system the
// HFiles are on (an HDFS delegation token). A secure region server moves
// the files with it, so as the caller: the caller's staging folder can
// stay private to the caller. Identifier and Password are secrets; String
// leaves them out.
type FSToken struct {
	Identifier []byte
	Password   []byte
	Kind       string
	// Service must name the same file system as the region server's own
	// token does ("ip:port" of the NameNode, or "ha-hdfs:<nameservice>"):
	// the server adds its own token only for another service, and Hadoop
	// picks a token by service.
	Service string
}

// String describes the token without its secrets.
func (t *FSToken) String() string {
	if t == nil {
		return "no file-system token"
	}
	return fmt.Sprintf("%s token for %s (secrets withheld)", t.Kind, t.Service)
}

// GoString is String: %#v must not print the secrets either.
func (t *FSToken) GoString() string { return t.String() }

// BulkLoadOptions tune BulkLoadWith.
type BulkLoadOptions struct {
	// FSToken, when set, goes with every BulkLoadHFile call (fs_token).
	// Without it a secure region server moves the files as its own user
	// (with its own token), which must then be able to rename them.
	FSToken *FSToken
	// Prepared, when set, is called with the bulk token (see
	// PrepareBulkLoad) before any file is sent; an error from it stops
	// the load. A caller that may be stopped part way records the token:
	// BulkStagedPath then says where a file it finds missing may sit.
	Prepared func(token string) error
	// Landed, when set, is asked before a region's BulkLoadHFile is sent
	// again after a call that went unanswered (a per-call timeout, a
	// broken connection): the region server may have loaded the files, or
	// may still be loading them, and a second call would load them twice
	// (when it copies them from another file system, the files are still
	// there to copy). True counts the region loaded; an error ends the
	// load. Without it the call is sent again.
	Landed func(ctx context.Context, files []BulkFile) (bool, error)
}

// PrepareBulkLoad asks HBase for a bulk load's staging directory, a path on
// HBase's file system; its string is the bulk token the load's requests
// carry. A region server moves each file sent into this directory (see
// BulkStagedPath) and from there into the region; CleanupBulkLoad deletes
// it. BulkLoadWith prepares its own; this is for callers that need one
// without loading (tests that recreate a region server's half-done load).
func (c *Client) PrepareBulkLoad(ctx context.Context, table string) (string, error) {
	return c.prepareBulkLoad(ctx, table, nil)
}

// prepareBulkLoad is PrepareBulkLoad through the region holding row.
func (c *Client) prepareBulkLoad(ctx context.Context, table string, row []byte) (string, error) {
	var token string
	err := c.withRegion(ctx, "prepare bulk load into "+table, []byte(table), row, func(ctx context.Context, r *Region) error {
		var resp pb.PrepareBulkLoadResponse
		req := &pb.PrepareBulkLoadRequest{TableName: tableName(table), Region: r.spec()}
		if _, err := c.call(ctx, r.Server, rpc.ClientService, "PrepareBulkLoad", req, nil, rpc.PriorityNormal, &resp); err != nil {
			return err
		}
		token = resp.GetBulkToken()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hbase: bulk load into %s: %w", table, err)
	}
	if token == "" {
		return "", fmt.Errorf("hbase: bulk load into %s: the region server gave an empty bulk token", table)
	}
	return token, nil
}

// CleanupBulkLoad asks HBase to delete the staging directory of the bulk
// load with token (see PrepareBulkLoad), through the region of table
// holding row, with whatever it holds. BulkLoadWith does so itself unless
// a request went unanswered or was refused; a caller that kept such a
// token may clean it once it knows the directory holds none of its files.
func (c *Client) CleanupBulkLoad(ctx context.Context, table string, row []byte, token string) error {
	if err := c.cleanupBulkLoad(ctx, table, row, token); err != nil {
		return fmt.Errorf("hbase: bulk load into %s: %w", table, err)
	}
	return nil
}

func (c *Client) cleanupBulkLoad(ctx context.Context, table string, row []byte, token string) error {
	err := c.withRegion(ctx, "cleanup bulk load", []byte(table), row, func(ctx context.Context, r *Region) error {
		req := &pb.CleanupBulkLoadRequest{BulkToken: proto.String(token), Region: r.spec()}
		_, err := c.call(ctx, r.Server, rpc.ClientService, "CleanupBulkLoad", req, nil, rpc.PriorityNormal, &pb.CleanupBulkLoadResponse{})
		return err
	})
	if err != nil {
		return fmt.Errorf("cleaning staging %s failed: %w", token, err)
	}
	return nil
}

// BulkStagedPath is where a region server holds the file at src, sent in a
// bulk load for family with token, between taking it from the caller and
// moving it into the region: the family's directory under the token's
// directory, under the file's own name (HBase's secure bulk load does so
// when the file is on HBase's own file system, where it is renamed, not
// copied). A file found there was not loaded: its load was cut short (the
// region server failed mid-load, or the caller stopped waiting).
func BulkStagedPath(token string, family []byte, src string) string {
	return strings.TrimSuffix(token, "/") + "/" + string(family) + "/" + path.Base(src)
}

// BulkLoad is BulkLoadWith without options: no file-system token.
func (c *Client) BulkLoad(ctx context.Context, table string, files []BulkFile) error {
	return c.BulkLoadWith(ctx, table, files, BulkLoadOptions{})
}

// BulkLoadWith loads HFiles into table through HBase 2.x's secure bulk load:
// PrepareBulkLoad returns a staging token, BulkLoadHFile moves each region's
// files in (all families of a region in one atomic call, with sequence ids
// assigned), CleanupBulkLoad removes the staging directory. Every file must
// lie inside one region: that is checked against the current region
// boundaries before anything is loaded, and a *SpanError names the first
// file that does not. Files of regions loaded before an error stay loaded.
// When ctx ends, no further region's load is sent, but one already sent is
// waited for; if a request went unanswered (a timeout, a broken connection)
// or was refused (loaded=false), the staging directory is left in place,
// as it may hold files on their way in or not moved back.
func (c *Client) BulkLoadWith(ctx context.Context, table string, files []BulkFile, o BulkLoadOptions) (err error) {
	if len(files) == 0 {
		return nil
	}
	tb := []byte(table)
	type group struct {
		region *Region
		files  []BulkFile
	}
	var groups []*group
	byRegion := map[string]*group{}
	for _, f := range files {
		if len(f.Family) == 0 || f.Path == "" {
			return fmt.Errorf("hbase: bulk load into %s: file %q has no family or path", table, f.Path)
		}
		if bytes.Compare(f.FirstRow, f.LastRow) > 0 {
			return fmt.Errorf("hbase: bulk load into %s: %s: first row %q sorts after last row %q", table, f.Path, f.FirstRow, f.LastRow)
		}
		r, err := c.Locate(ctx, tb, f.FirstRow)
		if err != nil {
			return fmt.Errorf("hbase: bulk load into %s: locating %s: %w", table, f.Path, err)
		}
		if !r.Contains(f.LastRow) {
			return &SpanError{File: f, Region: r}
		}
		g := byRegion[string(r.Name)]
		if g == nil {
			g = &group{region: r}
			byRegion[string(r.Name)] = g
			groups = append(groups, g)
		}
		g.files = append(g.files, f)
	}

	token, err := c.prepareBulkLoad(ctx, table, groups[0].region.StartKey)
	if err != nil {
		return err
	}
	// unanswered says a BulkLoadHFile request may still be running on its
	// region server: it was sent and no answer came back (a timeout, a
	// broken connection). The server moves each file into the staging
	// directory and from there into the region, and CleanupBulkLoad deletes
	// that directory with whatever is in it: removing it then could delete
	// files on their way in, cells lost without an error. So it stays.
	unanswered := false
	// refused says a region server answered loaded=false. It may have
	// moved files into the staging directory and failed to move them back
	// (the refusal seen here: its file system closed under the load by
	// another load's cleanup, which also fails the move back), and
	// CleanupBulkLoad would delete them with the directory: the files of a
	// refused load are looked for there (BulkStagedPath) before the next
	// attempt, so it stays.
	refused := false
	defer func() {
		if unanswered || refused {
			return
		}
		// The staging directory holds nothing once files are loaded, but it
		// must not pile up; failing to remove it is not worth failing the
		// load for, unless the load itself succeeded.
		cerr := c.cleanupBulkLoad(context.WithoutCancel(ctx), table, groups[0].region.StartKey, token)
		if err == nil && cerr != nil {
			err = fmt.Errorf("hbase: bulk load into %s: files loaded, but %w", table, cerr)
		}
	}()

	if o.Prepared != nil {
		if err = o.Prepared(token); err != nil {
			return fmt.Errorf("hbase: bulk load into %s: %w", table, err)
		}
	}
	for _, g := range groups {
		g := g
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("hbase: bulk load into %s: %w", table, cerr)
			return err
		}
		// A region's load, once sent, is waited for even when ctx ends (an
		// interrupt): its answer says whether the files went in, and the
		// staging directory may be removed only after it (unanswered).
		// The RPC and operation timeouts still bound the wait.
		// unansweredHere says a call for this region went unanswered.
		unansweredHere := false
		err = c.withRegion(context.WithoutCancel(ctx), "bulk load into "+string(g.region.Name), tb, g.files[0].FirstRow, func(ctx context.Context, r *Region) error {
			if unansweredHere && o.Landed != nil {
				done, err := o.Landed(ctx, g.files)
				if err != nil {
					return &landedError{err}
				}
				if done {
					return nil
				}
			}
			// The region may have split or merged since the check above.
			for _, f := range g.files {
				if !r.Contains(f.FirstRow) || !r.Contains(f.LastRow) {
					return &SpanError{File: f, Region: r}
				}
			}
			req := &pb.BulkLoadHFileRequest{Region: r.spec(), AssignSeqNum: proto.Bool(true), BulkToken: proto.String(token), FsToken: o.FSToken.proto()}
			for _, f := range g.files {
				req.FamilyPath = append(req.FamilyPath, &pb.BulkLoadHFileRequest_FamilyPath{Family: f.Family, Path: proto.String(f.Path)})
			}
			var resp pb.BulkLoadHFileResponse
			callCtx := ctx
			if testFirstBulkLoadTimeout > 0 && !unansweredHere {
				var cancel context.CancelFunc
				callCtx, cancel = context.WithTimeout(ctx, testFirstBulkLoadTimeout)
				defer cancel()
			}
			if _, err := c.call(callCtx, r.Server, rpc.ClientService, "BulkLoadHFile", req, nil, rpc.PriorityNormal, &resp); err != nil {
				var re *rpc.RemoteError
				if !errors.As(err, &re) {
					unanswered, unansweredHere = true, true
				}
				return err
			}
			if !resp.GetLoaded() {
				refused = true
				return &BulkLoadError{Region: r, Files: g.files, WithToken: o.FSToken != nil}
			}
			return nil
		})
		if err != nil {
			var se *SpanError
			if errors.As(err, &se) {
				return se
			}
			var le *landedError
			if errors.As(err, &le) {
				return fmt.Errorf("hbase: bulk load into %s: %w", table, le.err)
			}
			return fmt.Errorf("hbase: bulk load into %s: %w", table, err)
		}
	}
	return nil
}

// testFirstBulkLoadTimeout, when set by a test, bounds the first
// BulkLoadHFile call of each region, so it goes unanswered while the
// region server goes on loading.
var testFirstBulkLoadTimeout time.Duration

// landedError carries an error of BulkLoadOptions.Landed through the
// region retry loop, which gives up on it (rpc.GiveUp): the caller could
// not tell whether an unanswered load landed, and sending it again might
// load it twice.
type landedError struct{ err error }

func (e *landedError) Error() string { return e.err.Error() }
func (e *landedError) Unwrap() error { return e.err }

// Retry gives up: see landedError.
func (e *landedError) Retry() rpc.Retry { return rpc.GiveUp }
