package hfiles

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/vfs"
)

// landedFunc returns the file ids (FileIDKey) found among the store files
// of family in the target table's regions that hold rows first..last, each
// with the store file that carries it.
type landedFunc func(ctx context.Context, family string, first, last []byte) (map[string]string, error)

// testLanded, when set by a test, replaces the lookup of landed ids in the
// cluster (Sink.landedIDs), so the load's decisions can be driven by hand.
var testLanded landedFunc

// lookupLanded is Sink.landedIDs, or the test's stand-in.
func (s *Sink) lookupLanded(ctx context.Context, family string, first, last []byte) (map[string]string, error) {
	if testLanded != nil {
		return testLanded(ctx, family, first, last)
	}
	return s.landedIDs(ctx, family, first, last)
}

// plainStoreFile matches the name of a store file that is an HFile of its
// own: 32 hex digits, with _SeqId_N_ for a bulk-loaded one. References
// (NAME.PARENT, left by a split) and links (TABLE=REGION-NAME) point at
// another region's file and are not read: a file loaded into a region
// that split since is looked for in vain, and the load then fails, naming
// the file, rather than guess.
var plainStoreFile = regexp.MustCompile(`^[0-9a-f]{32}(_SeqId_[0-9]+_)?$`)

// landedIDs asks the region servers for the store files of family in every
// current region of the target table that holds rows first..last (AdminService
// GetStoreFile) and reads each one's file info for the id rekey wrote
// there (FileIDKey). A bulk load keeps a file's bytes, under a new name in
// the store, so a staged file whose id is found is in the table.
func (s *Sink) landedIDs(ctx context.Context, family string, first, last []byte) (map[string]string, error) {
	found := map[string]string{}
	fss := &storeFSs{s: s}
	defer fss.close()
	row := first
	for {
		reg, paths, err := s.o.Client.StoreFiles(ctx, s.o.Table, row, []byte(family))
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if !plainStoreFile.MatchString(path.Base(p)) {
				continue
			}
			id, err := fss.fileID(p)
			if err != nil {
				return nil, err
			}
			if id != "" {
				found[id] = p
			}
		}
		if len(reg.EndKey) == 0 || bytes.Compare(last, reg.EndKey) < 0 {
			return found, nil
		}
		row = reg.EndKey
	}
}

// storeFSs opens the file systems of store files once for a lookup.
type storeFSs struct {
	s      *Sink
	opened map[string]*vfs.Location // by scheme://host
}

// fileID reads the file id (FileIDKey) of the store file at u, a full path
// on HBase's file system; "" when it has none (not written by rekey).
func (c *storeFSs) fileID(u string) (string, error) {
	fsys, p, err := c.open(u)
	if err != nil {
		return "", fmt.Errorf("store file %s: %w", u, err)
	}
	f, err := fsys.Open(p)
	if err != nil {
		if notExist(err) {
			return "", nil // compacted away since it was listed
		}
		return "", fmt.Errorf("store file %s: %w", u, err)
	}
	defer f.Close()
	rd, err := hfile.Open(f, f.Size(), u)
	if err != nil {
		return "", fmt.Errorf("store file %s: %w", u, err)
	}
	defer rd.Close()
	return string(rd.Info().Raw[FileIDKey]), nil
}

// open gives the file system and path of u, a path on HBase's root file
// system: the staging folder's own when both are HDFS (hosts are not
// compared: see onStagingFS), otherwise u's own, opened once (staging on
// S3 and the root dir on HDFS, say).
func (c *storeFSs) open(u string) (vfs.FS, string, error) {
	t, err := url.Parse(u)
	if err != nil {
		return nil, "", err
	}
	own, _ := url.Parse(c.s.loc.URL)
	if t.Scheme == "" || (own != nil && strings.EqualFold(t.Scheme, "hdfs") && strings.EqualFold(own.Scheme, "hdfs")) {
		return c.s.fs, t.Path, nil
	}
	key := strings.ToLower(t.Scheme) + "://" + t.Host
	loc := c.opened[key]
	if loc == nil {
		if loc, err = vfs.OpenWith(key+"/", vfs.Options{Kerberos: c.s.o.Kerberos}); err != nil {
			return nil, "", err
		}
		if c.opened == nil {
			c.opened = map[string]*vfs.Location{}
		}
		c.opened[key] = loc
	}
	return loc.FS, t.Path, nil
}

func (c *storeFSs) close() {
	for _, loc := range c.opened {
		loc.Close()
	}
}
