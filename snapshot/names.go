package snapshot

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"

	"github.com/rekeyhq/rekey/snapshot/manifest"
)

// Store file name patterns, as HBase's StoreFileInfo and HFileLink define
// them: an HFile is hex with an optional _SeqId_<n>_ (bulk load) or _del
// (MOB) suffix; a link is [<ns>=]<table>=<region>-<hfile>; a reference is
// <hfile or link>.<parent encoded region>.
const (
	hfileRE     = `[0-9a-f]+(?:_SeqId_[0-9]+_|_del)?`
	tableNameRE = `[_\pL\pN][-_.\pL\pN]*`
	linkRE      = `(?:(` + tableNameRE + `)=)?(` + tableNameRE + `)=([0-9a-f]+)-(` + hfileRE + `)`
)

var (
	hfileNamePattern = regexp.MustCompile(`^` + hfileRE + `$`)
	linkNamePattern  = regexp.MustCompile(`^` + linkRE + `$`)
	refNamePattern   = regexp.MustCompile(`^(` + hfileRE + `|` + linkRE + `)\.(.+)$`)
	bulkSeqIDPattern = regexp.MustCompile(`_SeqId_([0-9]+)_`)
)

func isReferenceName(name string) bool { return refNamePattern.MatchString(name) }

// link is a parsed HFileLink name.
type link struct {
	ns, table, region, hfile string
}

func parseLink(name string) (link, bool) {
	m := linkNamePattern.FindStringSubmatch(name)
	if m == nil {
		return link{}, false
	}
	ns := m[1]
	if ns == "" {
		ns = "default"
	}
	return link{ns: ns, table: m[2], region: m[3], hfile: m[4]}, true
}

// bulkLoadSeqID returns n for a file named ..._SeqId_<n>_.
func bulkLoadSeqID(name string) (int64, bool) {
	m := bulkSeqIDPattern.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// encodedRegionName computes a region's encoded name for manifests that do
// not record it: the lowercase hex MD5 of the region name
// "<table>,<startKey>,<regionId>[_<replica %04X>]", where the table is
// written without "default:".
func encodedRegionName(ri *manifest.RegionInfo) string {
	var b []byte
	tn := ri.GetTableName()
	if ns := string(tn.GetNamespace()); ns != "" && ns != "default" {
		b = append(b, ns...)
		b = append(b, ':')
	}
	b = append(b, tn.GetQualifier()...)
	b = append(b, ',')
	b = append(b, ri.GetStartKey()...)
	b = append(b, ',')
	b = strconv.AppendUint(b, ri.GetRegionId(), 10)
	if r := ri.GetReplicaId(); r > 0 {
		b = append(b, fmt.Sprintf("_%04X", r)...)
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}
