package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/spf13/cobra"
)

// inspectHFileOptions are the flags of `rekey inspect hfile`.
type inspectHFileOptions struct {
	cells     bool
	cellsOnly bool
}

func newInspectHFileCmd() *cobra.Command {
	var fl inspectHFileOptions
	cmd := &cobra.Command{
		Use:   "hfile PATH",
		Short: "Show an HFile's trailer, file info and index, or dump its cells",
		Long: `Show one HFile: its trailer (version, codec, entry count, index levels,
section offsets), every file-info entry (decoded where rekey knows the key),
the data index and the load-on-open blocks. PATH is a local path, file:///path
or hdfs://host:port/path (hdfs://nameservice/path with HADOOP_CONF_DIR).

With --cells, also print every cell, one line per cell in the canonical dump
format (rowhex, family, qualifierhex, timestamp, type, valuehex;
tab-separated); --cells-only prints just those lines, to diff against the test
oracle's dump-hfile. A file that is corrupt or cannot be read exits non-zero
with an error naming the file, block offset and block type.
` + exitStatusHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runInspectHFile(cmd, args, fl) },
	}
	f := cmd.Flags()
	f.BoolVar(&fl.cells, "cells", false, "print every cell in the canonical dump format after the summary")
	f.BoolVar(&fl.cellsOnly, "cells-only", false, "print only the cells (no summary)")
	return cmd
}

// openHFileArg opens a local, file:// or hdfs:// HFile named on the command
// line.
func openHFileArg(arg string) (*hfile.Reader, func(), error) {
	loc, err := vfs.OpenWith(arg, locOptions())
	if err != nil {
		if errors.Is(err, vfs.ErrUnsupportedScheme) || errors.Is(err, vfs.ErrBadLocation) {
			return nil, nil, usageError{err}
		}
		return nil, nil, err
	}
	f, err := loc.FS.Open(loc.Path)
	if err != nil {
		loc.Close()
		err = fmt.Errorf("opening %s: %w", arg, err)
		// A path that is missing, a directory or not a regular file was
		// named wrong; the file is not damaged.
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, vfs.ErrNotRegular) || isDirErr(loc, err) {
			return nil, nil, usageError{err}
		}
		return nil, nil, err
	}
	r, err := hfile.Open(f, f.Size(), arg)
	if err != nil {
		f.Close()
		loc.Close()
		return nil, nil, err
	}
	return r, func() { f.Close(); loc.Close() }, nil
}

// isDirErr reports whether opening failed because the path is a directory.
func isDirErr(loc *vfs.Location, err error) bool {
	fi, serr := loc.FS.Stat(loc.Path)
	return serr == nil && fi.IsDir()
}

func runInspectHFile(cmd *cobra.Command, args []string, fl inspectHFileOptions) error {
	if fl.cells && fl.cellsOnly {
		return usageError{errors.New("--cells and --cells-only exclude each other: --cells prints the summary and the cells, --cells-only the cells alone")}
	}
	r, done, err := openHFileArg(args[0])
	if err != nil {
		return err
	}
	defer done()
	w := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	defer w.Flush()
	if !fl.cellsOnly {
		if err := printHFileSummary(w, r); err != nil {
			return err
		}
	}
	if !fl.cells && !fl.cellsOnly {
		return nil
	}
	if !fl.cellsOnly {
		fmt.Fprintln(w, "cells:")
	}
	it := r.NewIterator()
	defer it.Close()
	var line []byte
	var n uint64
	for ok := it.First(); ok; ok = it.Next() {
		line = cell.AppendDump(line[:0], it.Cell())
		w.Write(line)
		n++
	}
	if err := it.Err(); err != nil {
		w.Flush()
		return fmt.Errorf("after %d cells: %w", n, err)
	}
	if n != r.Entries() {
		w.Flush()
		return fmt.Errorf("%s: read %d cells but the trailer counts %d", r.Name(), n, r.Entries())
	}
	return nil
}

func printHFileSummary(w io.Writer, r *hfile.Reader) error {
	t := r.Trailer()
	fmt.Fprintf(w, "file: %s (%d bytes)\n", r.Name(), r.Size())
	fmt.Fprintf(w, "trailer:\n")
	fmt.Fprintf(w, "  version: %d.%d\n", t.MajorVersion, t.MinorVersion)
	fmt.Fprintf(w, "  codec: %s\n", t.Codec)
	fmt.Fprintf(w, "  entries: %d\n", t.EntryCount)
	fmt.Fprintf(w, "  comparator: %s\n", t.ComparatorClassName)
	fmt.Fprintf(w, "  data index: %d level(s), %d root entries, %d bytes uncompressed\n", t.NumDataIndexLevels, t.DataIndexCount, t.UncompressedDataIndexSize)
	fmt.Fprintf(w, "  meta blocks: %d\n", t.MetaIndexCount)
	fmt.Fprintf(w, "  data blocks: first at %d, last at %d\n", t.FirstDataBlockOffset, t.LastDataBlockOffset)
	fmt.Fprintf(w, "  load-on-open at %d, file info at %d, trailer %d bytes\n", t.LoadOnOpenOffset, t.FileInfoOffset, t.Size)
	fmt.Fprintf(w, "  total uncompressed bytes: %d\n", t.TotalUncompressedBytes)
	info := r.Info()
	fmt.Fprintf(w, "file info:\n")
	for _, k := range info.Keys() {
		fmt.Fprintf(w, "  %s = %s\n", k, fileInfoValue(k, info.Raw[k]))
	}
	fmt.Fprintf(w, "derived: encoding %s, tags %v (compressed %v), mvcc %v\n", info.Encoding, info.IncludesTags, info.TagsCompressed, info.IncludesMVCC)
	if k, ok := r.FirstKey(); ok {
		fmt.Fprintf(w, "first key: %s\n", keyString(k))
	}
	if k, ok := r.LastKey(); ok {
		fmt.Fprintf(w, "last key: %s\n", keyString(k))
	}
	idx, err := r.DataIndex()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "data index: %d data blocks\n", len(idx))
	for i, e := range idx {
		if len(idx) > 12 && i == 5 {
			fmt.Fprintf(w, "  ... %d more ...\n", len(idx)-10)
		}
		if len(idx) > 12 && i >= 5 && i < len(idx)-5 {
			continue
		}
		fmt.Fprintf(w, "  block %d: offset %d, %d bytes, key %s\n", i, e.Offset, e.Size, keyString(e.Key))
	}
	for _, e := range r.MetaIndex() {
		fmt.Fprintf(w, "meta block %q: offset %d, %d bytes\n", e.Key, e.Offset, e.Size)
	}
	fmt.Fprintf(w, "load-on-open blocks:\n")
	for _, b := range r.LoadOnOpenBlocks() {
		fmt.Fprintf(w, "  %s at %d: %d bytes on disk, %d uncompressed\n", b.Type, b.Offset, b.OnDiskSize, b.UncompressedSize)
	}
	return nil
}

// keyString renders a serialized KeyValue key the way HBase tools do:
// row/family:qualifier/timestamp/type, non-printable bytes escaped.
func keyString(k []byte) string {
	var c cell.Cell
	if err := cell.ParseKey(k, &c); err != nil {
		return "0x" + hex.EncodeToString(k)
	}
	return fmt.Sprintf("%s/%s:%s/%d/%s", printable(c.Row), printable(c.Family), printable(c.Qualifier), c.Timestamp, c.Type)
}

func printable(b []byte) string {
	var sb strings.Builder
	for _, x := range b {
		if x >= 0x20 && x < 0x7f && x != '\\' {
			sb.WriteByte(x)
		} else {
			fmt.Fprintf(&sb, "\\x%02X", x)
		}
	}
	return sb.String()
}

// fileInfoValue decodes the values whose types HBase fixes; anything else
// is shown as text when it is printable UTF-8, else hex.
func fileInfoValue(key string, v []byte) string {
	switch key {
	case "hfile.LASTKEY", "hfile.KEY_OF_BIGGEST_CELL":
		return keyString(v)
	case "hfile.AVG_KEY_LEN", "hfile.AVG_VALUE_LEN", "hfile.MAX_TAGS_LEN", "KEY_VALUE_VERSION", "BLOOM_FILTER_PARAM":
		if len(v) == 4 {
			return strconv.Itoa(int(int32(binary.BigEndian.Uint32(v))))
		}
	case "hfile.CREATE_TIME_TS", "MAX_MEMSTORE_TS_KEY", "MAX_SEQ_ID_KEY", "DELETE_FAMILY_COUNT", "EARLIEST_PUT_TS",
		"BULKLOAD_TIMESTAMP", "hfile.LEN_OF_BIGGEST_CELL", "MOB_CELLS_COUNT":
		if len(v) == 8 {
			return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)), 10)
		}
	case "hfile.TAGS_COMPRESSED", "MAJOR_COMPACTION_KEY", "EXCLUDE_FROM_MINOR_COMPACTION", "SKIP_RESET_SEQ_ID", "HISTORICAL":
		if len(v) == 1 {
			return strconv.FormatBool(v[0] != 0)
		}
	case "TIMERANGE":
		if len(v) >= 16 && !strings.HasPrefix(string(v), "PBUF") {
			return fmt.Sprintf("[%d, %d]", int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])))
		}
	}
	if utf8.Valid(v) && !strings.ContainsFunc(string(v), func(r rune) bool { return r < 0x20 }) {
		return strconv.Quote(string(v))
	}
	return "0x" + hex.EncodeToString(v)
}
