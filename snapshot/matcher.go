package snapshot

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/rekeyhq/rekey/cell"
)

// matchCode is what the matcher tells the scanner to do with a cell; the
// names follow HBase's ScanQueryMatcher.MatchCode.
type matchCode uint8

const (
	matchInclude matchCode = iota
	matchSkip
	matchSeekNextCol
)

// timeRange is HBase's TimeRange: [min, max), all time by default.
type timeRange struct {
	min, max int64
	all      bool
}

func newTimeRange(min, max int64) timeRange {
	if max == 0 {
		max = math.MaxInt64
	}
	return timeRange{min: min, max: max, all: min <= 0 && max == math.MaxInt64}
}

// compare is -1 when ts is older than the range, 1 when newer, 0 inside.
func (t timeRange) compare(ts int64) int {
	if t.all {
		return 0
	}
	if ts < t.min {
		return -1
	}
	if ts >= t.max {
		return 1
	}
	return 0
}

func (t timeRange) within(ts int64) bool        { return t.all || (t.min <= ts && ts < t.max) }
func (t timeRange) withinOrAfter(ts int64) bool { return t.all || ts >= t.min }

// familyRules are the per-family settings of one scan (HBase's ScanInfo
// combined with the Scan).
type familyRules struct {
	raw         bool
	maxVersions int
	minVersions int
	// oldestUnexpired is now - TTL in ms (0 in raw mode: no TTL).
	oldestUnexpired int64
	now             int64
	tr              timeRange
	// seePastDeletes is KEEP_DELETED_CELLS != FALSE: delete markers outside
	// the time range are then ignored, so time-range reads see what lay
	// behind them.
	seePastDeletes bool
	// columns, when non-nil, are the qualifiers wanted in this family.
	columns map[string]struct{}
}

// matcher applies HBase's user-scan rules to the cells of one row and
// family, in cell order. It is the composition of NormalUserScanQueryMatcher
// (or RawScanQueryMatcher), ScanWildcardColumnTracker and
// ScanDeleteTracker, re-expressed: see the comments for the rules each
// step carries.
type matcher struct {
	r *familyRules

	// Column tracker: the current column, how many versions of it were
	// counted, and the timestamp and type of the last one included (HBase
	// drops an exact duplicate coming from another file).
	colQual    []byte
	colSet     bool
	count      int
	latestTS   int64
	latestType cell.Type

	// Delete tracker (normal mode only).
	hasFamilyStamp bool
	familyStamp    int64
	familyVersions []int64
	delQual        []byte
	delSet         bool
	delType        cell.Type
	delTS          int64

	// tracked: the last cell given to match reached the column tracker,
	// so colQual is its qualifier (see match's sameCol).
	tracked bool
}

// reset starts a new row (or family: each family has its own tracker in
// HBase).
func (m *matcher) reset(r *familyRules) {
	m.r = r
	m.colSet = false
	m.count = 0
	m.resetTSAndType()
	m.hasFamilyStamp = false
	m.familyStamp = 0
	m.familyVersions = m.familyVersions[:0]
	m.delSet = false
	m.tracked = false
}

func (m *matcher) resetTSAndType() {
	m.latestTS = math.MaxInt64
	m.latestType = 0
}

// ttlTagType is HBase's TagType.TTL_TAG_TYPE: a per-cell TTL in ms.
const ttlTagType = 8

// cellTTLExpired reports whether a per-cell TTL tag (the first one) says
// the cell has expired.
func cellTTLExpired(c *cell.Cell, now int64) bool {
	t := c.Tags
	for len(t) >= 3 {
		n := int(binary.BigEndian.Uint16(t))
		if n < 1 || 2+n > len(t) {
			return false // malformed tags: no TTL to honour
		}
		if t[2] == ttlTagType {
			v := t[3 : 2+n]
			if len(v) != 8 {
				return false
			}
			ttl := int64(binary.BigEndian.Uint64(v))
			return c.Timestamp+ttl < now
		}
		t = t[2+n:]
	}
	return false
}

// match decides what to do with c, the next cell of the current row and
// family. sameCol says c has the qualifier of the cell given to the
// previous call (the store file's encoding said so): when that cell reached
// the column tracker, the qualifier need not be compared again.
func (m *matcher) match(c *cell.Cell, sameCol bool) matchCode {
	r := m.r
	ts := c.Timestamp
	prevTracked := m.tracked
	m.tracked = false
	// preCheck: a cell past the TTL ends its column (unless MIN_VERSIONS
	// keeps some expired versions, which the version check handles).
	if ts == math.MinInt64 || (r.minVersions <= 0 && ts < r.oldestUnexpired) {
		return matchSeekNextCol
	}
	if len(c.Tags) > 0 && cellTTLExpired(c, r.now) {
		return matchSkip
	}
	if !r.raw {
		if c.Type.IsDelete() {
			include := r.tr.withinOrAfter(ts)
			if r.seePastDeletes {
				include = r.tr.within(ts)
			}
			if include {
				m.addDelete(c)
			}
			return matchSkip
		}
		if m.hasFamilyStamp || len(m.familyVersions) > 0 || m.delSet {
			switch m.isDeleted(c) {
			case deletedFamily, deletedColumn:
				return matchSeekNextCol
			case deletedVersion, deletedFamilyVersion:
				return matchSkip
			}
		}
	}
	// matchColumn
	switch r.tr.compare(ts) {
	case 1:
		return matchSkip
	case -1:
		return matchSeekNextCol
	}
	if r.columns != nil {
		if _, ok := r.columns[string(c.Qualifier)]; !ok {
			return matchSeekNextCol
		}
	}
	// checkVersions
	same := m.colSet && ((sameCol && prevTracked) || bytes.Equal(c.Qualifier, m.colQual))
	m.tracked = true
	if !same {
		m.colQual = append(m.colQual[:0], c.Qualifier...)
		m.colSet = true
		m.count = 0
		m.resetTSAndType()
	} else if ts == m.latestTS && c.Type == m.latestType {
		return matchSkip
	}
	if !c.Type.IsDelete() {
		m.count++
	}
	if m.count > r.maxVersions {
		return matchSeekNextCol
	}
	if r.columns != nil && ts < r.oldestUnexpired && m.count >= r.minVersions {
		// HBase's ExplicitColumnTracker (a scan that names columns)
		// includes the expired version that reaches MIN_VERSIONS, or the
		// first one past it, and then ends the column
		// (INCLUDE_AND_SEEK_NEXT_COL), where the wildcard tracker drops
		// expired versions past MIN_VERSIONS. A full count ends it here.
		m.count = r.maxVersions
		m.latestTS, m.latestType = ts, c.Type
		return matchInclude
	}
	if m.count <= r.minVersions || ts >= r.oldestUnexpired {
		m.latestTS, m.latestType = ts, c.Type
		return matchInclude
	}
	return matchSeekNextCol
}

type deleteResult uint8

const (
	notDeleted deleteResult = iota
	deletedFamily
	deletedFamilyVersion
	deletedColumn
	deletedVersion
)

// addDelete records a delete marker, as ScanDeleteTracker.add: markers
// already covered by a DeleteFamily are dropped; a DeleteFamily keeps only
// its timestamp; DeleteFamilyVersion timestamps accumulate; for one column
// only the most general marker (highest type code) is kept.
func (m *matcher) addDelete(c *cell.Cell) {
	ts := c.Timestamp
	if m.hasFamilyStamp && ts <= m.familyStamp {
		return
	}
	switch c.Type {
	case cell.DeleteFamily:
		m.hasFamilyStamp = true
		m.familyStamp = ts
		return
	case cell.DeleteFamilyVersion:
		m.familyVersions = append(m.familyVersions, ts)
		return
	}
	if m.delSet && c.Type < m.delType && bytes.Equal(c.Qualifier, m.delQual) {
		return
	}
	m.delQual = append(m.delQual[:0], c.Qualifier...)
	m.delSet = true
	m.delType = c.Type
	m.delTS = ts
}

// isDeleted checks a Put against the markers seen so far in this row and
// family, as ScanDeleteTracker.isDeleted.
func (m *matcher) isDeleted(c *cell.Cell) deleteResult {
	ts := c.Timestamp
	if m.hasFamilyStamp && ts <= m.familyStamp {
		return deletedFamily
	}
	for _, v := range m.familyVersions {
		if v == ts {
			return deletedFamilyVersion
		}
	}
	if m.delSet {
		cmp := bytes.Compare(c.Qualifier, m.delQual)
		switch {
		case cmp == 0:
			if m.delType == cell.DeleteColumn {
				return deletedColumn
			}
			if ts == m.delTS {
				return deletedVersion
			}
			// An older version: a Delete marker covers exactly one.
			m.delSet = false
		case cmp > 0:
			m.delSet = false // moved on to the next column
		}
	}
	return notDeleted
}
