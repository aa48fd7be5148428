package hfiles

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/rekeyhq/rekey/hfile"
)

// FamilyOptions turns a column family's attributes, as HBase's descriptor
// names them (DATA_BLOCK_ENCODING, COMPRESSION, BLOOMFILTER, BLOCKSIZE),
// into HFile writer options, so staged files are written the way the
// family's own flushes would be. Other attributes do not affect the file.
func FamilyOptions(attrs map[string]string) (hfile.WriterOptions, error) {
	var o hfile.WriterOptions
	o.Codec = hfile.CodecNone
	for k, v := range attrs {
		v = strings.ToUpper(v)
		switch k {
		case "DATA_BLOCK_ENCODING":
			found := false
			for _, e := range []hfile.Encoding{hfile.EncodingNone, hfile.EncodingPrefix, hfile.EncodingDiff, hfile.EncodingFastDiff, hfile.EncodingRowIndexV1} {
				if e.String() == v {
					o.Encoding, found = e, true
				}
			}
			if !found {
				return o, fmt.Errorf("hfiles: DATA_BLOCK_ENCODING %q cannot be written", v)
			}
		case "COMPRESSION":
			found := false
			for _, c := range []hfile.Codec{hfile.CodecNone, hfile.CodecGZ, hfile.CodecSnappy, hfile.CodecLZ4, hfile.CodecZstd} {
				if c.String() == v {
					o.Codec, found = c, true
				}
			}
			if !found {
				return o, fmt.Errorf("hfiles: COMPRESSION %q cannot be written", v)
			}
		case "BLOOMFILTER":
			switch v {
			case "NONE":
				o.Bloom = hfile.BloomNone
			case "ROW":
				o.Bloom = hfile.BloomRow
			case "ROWCOL":
				o.Bloom = hfile.BloomRowCol
			default:
				return o, fmt.Errorf("hfiles: BLOOMFILTER %q cannot be written", v)
			}
		case "BLOCKSIZE":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("hfiles: BLOCKSIZE %q is not a size in bytes", v)
			}
			o.BlockSize = n
		}
	}
	return o, nil
}

// tableFamilies reads the writer options of every family of the live
// table from its descriptor.
func tableFamilies(ctx context.Context, c Cluster, table string) (map[string]hfile.WriterOptions, error) {
	desc, err := c.DescribeTable(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("hfiles: describe %s: %w", table, err)
	}
	out := map[string]hfile.WriterOptions{}
	for _, f := range desc.Families {
		o, err := FamilyOptions(f.Attributes)
		if err != nil {
			return nil, fmt.Errorf("hfiles: %s family %s: %w", table, f.Name, err)
		}
		out[f.Name] = o
	}
	return out, nil
}
