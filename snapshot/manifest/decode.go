// Package manifest decodes the protobuf files HBase writes into a table
// snapshot: .snapshotinfo (SnapshotDescription), data.manifest
// (SnapshotDataManifest, v2), region-manifest.* (SnapshotRegionManifest),
// a v1 region's .regioninfo (PBUF + delimited RegionInfo), a v1 table
// descriptor (PBUF + TableSchema) and split Reference files (PBUF +
// Reference, or the pre-protobuf Writable form).
//
// The messages in snapshot.proto hold only the fields rekey reads, with
// HBase's field numbers. Every decoder returns an error wrapping ErrCorrupt
// for malformed input; none panics.
package manifest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/writable"
	"google.golang.org/protobuf/proto"
)

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("snapshot/manifest: corrupt")

// pbMagic prefixes HBase's protobuf-serialized blobs in files.
var pbMagic = []byte("PBUF")

// MaxManifestSize bounds the data.manifest size we accept, like HBase's
// snapshot.manifest.size.limit (64 MiB default), so a garbage file cannot
// make us allocate without bound.
const MaxManifestSize = 64 << 20

func corrupt(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
	}
	return fmt.Errorf("%w: %s", ErrCorrupt, what)
}

// DecodeSnapshotInfo parses a .snapshotinfo file (raw SnapshotDescription,
// no magic).
func DecodeSnapshotInfo(b []byte) (*SnapshotDescription, error) {
	var d SnapshotDescription
	if err := proto.Unmarshal(b, &d); err != nil {
		return nil, corrupt(".snapshotinfo", err)
	}
	if d.Name == nil {
		return nil, corrupt(".snapshotinfo: no snapshot name", nil)
	}
	return &d, nil
}

// DecodeDataManifest parses a v2 data.manifest (raw SnapshotDataManifest).
func DecodeDataManifest(b []byte) (*SnapshotDataManifest, error) {
	if len(b) > MaxManifestSize {
		return nil, corrupt(fmt.Sprintf("data.manifest: %d bytes, above the %d-byte limit", len(b), MaxManifestSize), nil)
	}
	var m SnapshotDataManifest
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, corrupt("data.manifest", err)
	}
	if m.TableSchema == nil {
		return nil, corrupt("data.manifest: no table schema", nil)
	}
	for i, r := range m.RegionManifests {
		if err := checkRegionManifest(r); err != nil {
			return nil, fmt.Errorf("data.manifest: region manifest %d: %w", i, err)
		}
	}
	return &m, nil
}

// DecodeRegionManifest parses one region-manifest.<encoded> file.
func DecodeRegionManifest(b []byte) (*SnapshotRegionManifest, error) {
	var m SnapshotRegionManifest
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, corrupt("region manifest", err)
	}
	if err := checkRegionManifest(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

func checkRegionManifest(m *SnapshotRegionManifest) error {
	if m.RegionInfo == nil {
		return corrupt("region manifest without region info", nil)
	}
	if m.RegionInfo.TableName == nil {
		return corrupt("region info without table name", nil)
	}
	for _, ff := range m.FamilyFiles {
		if ff.FamilyName == nil {
			return corrupt("family files without family name", nil)
		}
		for _, sf := range ff.StoreFiles {
			if sf.GetName() == "" {
				return corrupt(fmt.Sprintf("family %q: store file without name", ff.FamilyName), nil)
			}
			if sf.Reference != nil {
				if _, err := DecodeReferencePB(sf.Reference); err != nil {
					return fmt.Errorf("store file %s: %w", sf.GetName(), err)
				}
			}
		}
	}
	return nil
}

// DecodeRegionInfoFile parses a .regioninfo file: PBUF, then a
// length-delimited RegionInfo.
func DecodeRegionInfoFile(b []byte) (*RegionInfo, error) {
	if !bytes.HasPrefix(b, pbMagic) {
		return nil, corrupt(".regioninfo: no PBUF magic (pre-0.96 Writable form is not supported)", nil)
	}
	b = b[len(pbMagic):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, corrupt(".regioninfo: bad length prefix", nil)
	}
	var ri RegionInfo
	if err := proto.Unmarshal(b[k:k+int(n)], &ri); err != nil {
		return nil, corrupt(".regioninfo", err)
	}
	if ri.TableName == nil {
		return nil, corrupt(".regioninfo: no table name", nil)
	}
	return &ri, nil
}

// DecodeTableInfoFile parses a table descriptor file (.tableinfo.*):
// PBUF then a TableSchema to the end of the file.
func DecodeTableInfoFile(b []byte) (*TableSchema, error) {
	if !bytes.HasPrefix(b, pbMagic) {
		return nil, corrupt(".tableinfo: no PBUF magic", nil)
	}
	var ts TableSchema
	if err := proto.Unmarshal(b[len(pbMagic):], &ts); err != nil {
		return nil, corrupt(".tableinfo", err)
	}
	return &ts, nil
}

// Ref is a decoded split reference: which half of the parent's store file
// a daughter region reads.
type Ref struct {
	// SplitKey is a serialized KeyValue key, normally the first-on-row key
	// of the split row.
	SplitKey []byte
	// Top is true for the upper half (keys >= SplitKey), false for the
	// bottom half (keys < SplitKey).
	Top bool
	// Key is SplitKey parsed (its slices alias SplitKey): every decoder
	// checks and parses it here, once, so readers compare cells with Key.
	Key cell.Cell
}

// SplitRow is the row of the split key: the first row of the top half.
func (r *Ref) SplitRow() []byte { return r.Key.Row }

// DecodeReference parses the content of a Reference file: PBUF then a
// Reference message to EOF, or the pre-0.96 Writable form (one boolean
// byte, non-zero = top, then a Hadoop-vint-prefixed split key).
func DecodeReference(b []byte) (Ref, error) {
	if bytes.HasPrefix(b, pbMagic) {
		var r Reference
		if err := proto.Unmarshal(b[len(pbMagic):], &r); err != nil {
			return Ref{}, corrupt("reference file", err)
		}
		return DecodeReferencePB(&r)
	}
	if len(b) < 2 {
		return Ref{}, corrupt(fmt.Sprintf("reference file: %d bytes", len(b)), nil)
	}
	top := b[0] != 0
	n, k, err := writable.ReadVLong(b[1:])
	if err != nil {
		return Ref{}, corrupt("legacy reference file: split key length", err)
	}
	rest := b[1+k:]
	if n < 0 || int64(len(rest)) < n {
		return Ref{}, corrupt(fmt.Sprintf("legacy reference file: split key length %d, %d bytes left", n, len(rest)), nil)
	}
	if int64(len(rest)) != n {
		return Ref{}, corrupt(fmt.Sprintf("legacy reference file: %d trailing bytes", int64(len(rest))-n), nil)
	}
	return checkSplitKey(Ref{SplitKey: append([]byte(nil), rest[:n]...), Top: top})
}

// checkSplitKey insists the split key is a KeyValue key: the half-file
// reader compares cells with it.
func checkSplitKey(r Ref) (Ref, error) {
	if err := cell.ParseKey(r.SplitKey, &r.Key); err != nil {
		return Ref{}, corrupt("reference split key", err)
	}
	return r, nil
}

// DecodeReferencePB converts a manifest's Reference message.
func DecodeReferencePB(r *Reference) (Ref, error) {
	if r.Splitkey == nil {
		return Ref{}, corrupt("reference without split key", nil)
	}
	if r.Range == nil {
		return Ref{}, corrupt("reference without range", nil)
	}
	switch r.GetRange() {
	case Reference_TOP:
		return checkSplitKey(Ref{SplitKey: r.Splitkey, Top: true})
	case Reference_BOTTOM:
		return checkSplitKey(Ref{SplitKey: r.Splitkey})
	}
	return Ref{}, corrupt(fmt.Sprintf("reference range %d", r.GetRange()), nil)
}
