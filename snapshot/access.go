package snapshot

import (
	"errors"
	iofs "io/fs"
)

// checkReadable resolves the snapshot's first store file, so that a reader
// who may not read the store files (secure HBase keeps hbase.rootdir's
// data and archive directories at 700 for its own user, while the
// manifest is readable to all) fails when the snapshot opens, not midway
// through a run. Only a permission error fails here; any other shows where
// the file is read, as before.
func (s *Snapshot) checkReadable() error {
	for i := range s.regions {
		r := &s.regions[i]
		for _, ff := range r.Families {
			if len(ff.Files) == 0 {
				continue
			}
			_, err := s.resolve(r, ff.Family, &ff.Files[0])
			if errors.Is(err, iofs.ErrPermission) {
				return err
			}
			return nil
		}
	}
	return nil
}
