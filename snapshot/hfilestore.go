package snapshot

import (
	"io"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
)

// The hfile package is the store file reader.
func init() { openStoreReader = openHFile }

type hfileStore struct {
	rd *hfile.Reader
	m  fileMeta
}

func openHFile(r io.ReaderAt, size int64, name string) (storeReader, error) {
	rd, err := hfile.Open(r, size, name)
	if err != nil {
		return nil, err
	}
	fi := rd.Info()
	m := fileMeta{
		MaxSeqID:      fi.MaxSeqID,
		HasMaxSeqID:   fi.HasMaxSeqID,
		IncludesMVCC:  fi.IncludesMVCC,
		BulkLoadTS:    fi.BulkLoadTS,
		HasBulkLoadTS: fi.HasBulkLoadTS,
		TimeRangeMin:  fi.TimeRangeMin,
		TimeRangeMax:  fi.TimeRangeMax,
		HasTimeRange:  fi.HasTimeRange,
		Entries:       rd.Entries(),
		MaxTagsLen:    fi.MaxTagsLen,
	}
	if lk, ok := rd.LastKey(); ok {
		m.LastKey = lk
	}
	if fk, ok := rd.FirstKey(); ok {
		m.FirstKey = fk
		m.DataStart = int64(rd.Trailer().FirstDataBlockOffset)
	}
	// SKIP_RESET_SEQ_ID (MOB compaction output): a one-byte boolean, as
	// HStoreFile reads it.
	if v, ok := fi.Raw["SKIP_RESET_SEQ_ID"]; ok && len(v) == 1 && v[0] != 0 {
		m.SkipResetSeqID = true
	}
	return &hfileStore{rd: rd, m: m}, nil
}

func (h *hfileStore) meta() fileMeta { return h.m }
func (h *hfileStore) newIter(data io.ReaderAt) cellIter {
	return h.rd.NewStreamIterator(data)
}
func (h *hfileStore) close() error { return h.rd.Close() }

// dataEnd is where the data section ends: the load-on-open section after
// it was read when the file was opened.
func (h *hfileStore) dataEnd() int64 { return int64(h.rd.Trailer().LoadOnOpenOffset) }

func (h *hfileStore) blocksEnd(key *cell.Cell) (int64, error) { return h.rd.BlocksEnd(key) }

func (h *hfileStore) dataIndex() ([]indexKey, error) {
	idx, err := h.rd.DataIndex()
	if err != nil {
		return nil, err
	}
	out := make([]indexKey, len(idx))
	for i, e := range idx {
		out[i] = indexKey{Key: e.Key, Offset: e.Offset}
	}
	return out, nil
}
