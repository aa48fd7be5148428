package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/spf13/cobra"
)

// inspectSnapshotOptions are the flags of `rekey inspect snapshot`.
type inspectSnapshotOptions struct {
	cells       bool
	raw         bool
	maxVersions int
	jsonOut     bool
	now         string
	families    []string
}

func newInspectSnapshotCmd() *cobra.Command {
	var fl inspectSnapshotOptions
	cmd := &cobra.Command{
		Use:   "snapshot ROOTDIR NAME",
		Short: "Show a snapshot's table, families and regions, or dump its cells",
		Long: `Show a table snapshot: its table, each family's attributes, and every region
with its start and end keys and store files. ROOTDIR is the HBase root dir:
a local path, file:///path, hdfs://host:port/path or hdfs://nameservice/path.

With --cells, print every cell the snapshot holds, as HBase's
TableSnapshotScanner reads it, one line per cell in the canonical dump format
(rowhex, family, qualifierhex, timestamp, type, valuehex; tab-separated), so
the output diffs against the test oracle's dump-snapshot. --raw includes delete
markers and masked cells; --max-versions caps versions per column (0: the
family's VERSIONS, or all versions with --raw).
` + exitStatusHelp,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return runInspectSnapshot(cmd, args, fl) },
	}
	f := cmd.Flags()
	f.BoolVar(&fl.cells, "cells", false, "print every cell in the canonical dump format")
	f.BoolVar(&fl.raw, "raw", false, "with --cells: raw scan (delete markers, no delete masking or TTL)")
	f.IntVar(&fl.maxVersions, "max-versions", 0, "with --cells: versions per column (0 = family VERSIONS; all with --raw)")
	f.BoolVar(&fl.jsonOut, "json", false, "print the description as JSON")
	f.StringVar(&fl.now, "now", "", "with --cells: reference time for TTL, RFC 3339 or epoch ms (default: current time, as HBase; 'snapshot' = creation time)")
	f.StringSliceVar(&fl.families, "family", nil, "with --cells: only these families")
	return cmd
}

func runInspectSnapshot(cmd *cobra.Command, args []string, fl inspectSnapshotOptions) error {
	if fl.maxVersions < 0 {
		return usageError{fmt.Errorf("--max-versions %d: must be >= 0", fl.maxVersions)}
	}
	if fl.cells && fl.jsonOut {
		return usageError{errors.New("--json describes the snapshot; it does not combine with --cells")}
	}
	if !fl.cells && (fl.raw || fl.maxVersions != 0 || fl.now != "" || len(fl.families) > 0) {
		return usageError{errors.New("--raw, --max-versions, --now and --family only apply with --cells")}
	}
	// pflag turns --family "" into no families at all, which would mean
	// every family: refuse it rather than widen the scan.
	if cmd.Flags().Changed("family") && len(fl.families) == 0 {
		return usageError{errors.New(`--family "": a family name cannot be empty`)}
	}
	for _, f := range fl.families {
		if f == "" {
			return usageError{errors.New(`--family "": a family name cannot be empty`)}
		}
	}
	ctx := cmd.Context()
	s, err := snapshot.Open(ctx, args[0], args[1], snapshot.OpenOptions{Location: locOptions()})
	if err != nil {
		return openError(err)
	}
	defer s.Close()
	out := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<16)
	if fl.cells {
		opts := snapshot.ScanOptions{Raw: fl.raw, MaxVersions: fl.maxVersions}
		for _, f := range fl.families {
			opts.Families = append(opts.Families, []byte(f))
		}
		switch {
		case fl.now == "snapshot":
			opts.Now = s.Info().CreationTime
		case fl.now != "":
			t, err := parseNow(fl.now)
			if err != nil {
				return usageError{err}
			}
			opts.Now = t
		}
		if err := dumpSnapshotCells(cmd, s, opts, out); err != nil {
			// What was written stays written, but the error and the exit
			// code say it is incomplete.
			out.Flush()
			return fmt.Errorf("cell dump incomplete: %w", err)
		}
		return out.Flush()
	}
	if fl.jsonOut {
		if err := writeSnapshotJSON(s, out); err != nil {
			return err
		}
	} else {
		writeSnapshotText(s, out)
	}
	return out.Flush()
}

// openError classifies an error from snapshot.Open for the exit code: a
// root or snapshot that is missing or misnamed is the caller's (2); any
// other failure means the snapshot is damaged or unreadable (1).
func openError(err error) error {
	if errors.Is(err, snapshot.ErrNotFound) || errors.Is(err, snapshot.ErrInvalid) {
		return usageError{err}
	}
	return err
}

func parseNow(v string) (time.Time, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now %q: want RFC 3339, epoch milliseconds or 'snapshot'", v)
	}
	return t, nil
}

func dumpSnapshotCells(cmd *cobra.Command, s *snapshot.Snapshot, opts snapshot.ScanOptions, w io.Writer) error {
	splits, err := s.Splits(snapshot.SplitOptions{})
	if err != nil {
		return err
	}
	var line []byte
	for _, sp := range splits {
		err := s.ReadSplit(cmd.Context(), sp, opts, func(c *cell.Cell) error {
			line = cell.AppendDump(line[:0], c)
			_, err := w.Write(line)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

type snapshotJSON struct {
	Name         string            `json:"name"`
	Table        string            `json:"table"`
	CreationTime string            `json:"creation_time"`
	Version      int               `json:"version"`
	Type         string            `json:"type"`
	Owner        string            `json:"owner,omitempty"`
	TableAttrs   map[string]string `json:"table_attributes,omitempty"`
	Families     []familyJSON      `json:"families"`
	Regions      []regionJSON      `json:"regions"`
	TotalBytes   int64             `json:"total_bytes"`
}

type familyJSON struct {
	Name             string            `json:"name"`
	Versions         int               `json:"versions"`
	MinVersions      int               `json:"min_versions"`
	TTL              int64             `json:"ttl_seconds"`
	KeepDeletedCells string            `json:"keep_deleted_cells"`
	Attributes       map[string]string `json:"attributes"`
}

type regionJSON struct {
	EncodedName string      `json:"encoded_name"`
	StartKey    string      `json:"start_key_hex"`
	EndKey      string      `json:"end_key_hex"`
	Bytes       int64       `json:"bytes"`
	Files       []storeJSON `json:"store_files"`
}

type storeJSON struct {
	Family    string `json:"family"`
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	Reference string `json:"reference,omitempty"`
}

func describeSnapshot(s *snapshot.Snapshot) snapshotJSON {
	info, td := s.Info(), s.Table()
	j := snapshotJSON{Name: info.Name, Table: info.Table, Version: info.Version, Type: info.Type, Owner: info.Owner, TableAttrs: td.Attributes}
	if !info.CreationTime.IsZero() {
		j.CreationTime = info.CreationTime.Format(time.RFC3339Nano)
	}
	for _, f := range td.Families {
		j.Families = append(j.Families, familyJSON{Name: string(f.Name), Versions: f.MaxVersions, MinVersions: f.MinVersions, TTL: f.TTL, KeepDeletedCells: f.KeepDeletedCells.String(), Attributes: f.Attributes})
	}
	for _, r := range s.Regions() {
		rj := regionJSON{EncodedName: r.EncodedName, StartKey: hex.EncodeToString(r.StartKey), EndKey: hex.EncodeToString(r.EndKey), Bytes: r.Bytes()}
		for _, ff := range r.Families {
			for _, sf := range ff.Files {
				st := storeJSON{Family: string(ff.Family), Name: sf.Name, Size: sf.Size}
				if sf.Reference != nil {
					half := "bottom"
					if sf.Reference.Top {
						half = "top"
					}
					st.Reference = half + " of split at row " + hex.EncodeToString(sf.Reference.SplitRow())
				}
				rj.Files = append(rj.Files, st)
			}
		}
		j.TotalBytes += rj.Bytes
		j.Regions = append(j.Regions, rj)
	}
	return j
}

func writeSnapshotJSON(s *snapshot.Snapshot, w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(describeSnapshot(s))
}

// printableKey shows a row key readably: as text when it is printable
// ASCII, else as hex.
func printableKey(k string) string {
	b, _ := hex.DecodeString(k)
	if len(b) == 0 {
		return `""`
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "0x" + k
		}
	}
	return strconv.Quote(string(b))
}

func writeSnapshotText(s *snapshot.Snapshot, w io.Writer) {
	j := describeSnapshot(s)
	fmt.Fprintf(w, "snapshot  %s\ntable     %s\ncreated   %s\nversion   %d\ntype      %s\n", j.Name, j.Table, j.CreationTime, j.Version, j.Type)
	fmt.Fprintf(w, "families  %d\n", len(j.Families))
	for _, f := range j.Families {
		fmt.Fprintf(w, "  %s  VERSIONS=%d MIN_VERSIONS=%d TTL=%s KEEP_DELETED_CELLS=%s", f.Name, f.Versions, f.MinVersions, ttlText(f.TTL), f.KeepDeletedCells)
		keys := make([]string, 0, len(f.Attributes))
		for k := range f.Attributes {
			switch k {
			case "VERSIONS", "MIN_VERSIONS", "TTL", "KEEP_DELETED_CELLS":
				continue
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, " %s=%s", k, f.Attributes[k])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "regions   %d (%d bytes)\n", len(j.Regions), j.TotalBytes)
	for _, r := range j.Regions {
		fmt.Fprintf(w, "  %s  [%s, %s)  %d bytes, %d files\n", r.EncodedName, printableKey(r.StartKey), printableKey(r.EndKey), r.Bytes, len(r.Files))
		for _, f := range r.Files {
			ref := ""
			if f.Reference != "" {
				ref = "  (" + f.Reference + ")"
			}
			fmt.Fprintf(w, "      %s/%s  %d%s\n", f.Family, f.Name, f.Size, ref)
		}
	}
}

func ttlText(ttl int64) string {
	if ttl == snapshot.ForeverTTL {
		return "FOREVER"
	}
	return strings.TrimSpace(strconv.FormatInt(ttl, 10))
}
