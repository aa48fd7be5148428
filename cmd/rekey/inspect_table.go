package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
)

// inspectTableOptions are the flags of `rekey inspect table`.
type inspectTableOptions struct {
	zk          string
	znodeParent string
	cells       bool
	raw         bool
	maxVersions int
	start, stop string
	limit       int
	families    []string
	timeout     time.Duration
}

func newInspectTableCmd() *cobra.Command {
	var fl inspectTableOptions
	cmd := &cobra.Command{
		Use:   "table TABLE",
		Short: "Show a live table's regions, or dump its cells, through rekey's HBase client",
		Long: `Show the regions of a live HBase table (encoded name, start key, end key in
hex, and the region server serving each), read from hbase:meta with rekey's own
HBase client.

With --cells, scan the table and print every cell in the canonical dump
format (rowhex, family, qualifierhex, timestamp, type, valuehex;
tab-separated), so the output diffs against the test oracle's dump-table.
Without --max-versions the scan returns every version the families keep;
--raw adds delete markers and the cells they mask.

The cluster is found through ZooKeeper: --zk host:port[,host:port], else
$REKEY_ZK, else $HBASE_CONF_DIR/hbase-site.xml; --znode-parent, else
hbase-site.xml's zookeeper.znode.parent, else /hbase.
` + exitStatusHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runInspectTable(cmd, args, fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.zk, "zk", "", "ZooKeeper quorum host:port[,host:port] (default: $REKEY_ZK, else $HBASE_CONF_DIR/hbase-site.xml)")
	f.StringVar(&fl.znodeParent, "znode-parent", "", "zookeeper.znode.parent of the cluster (default: hbase-site.xml's, else /hbase)")
	f.BoolVar(&fl.cells, "cells", false, "print every cell in the canonical dump format")
	f.BoolVar(&fl.raw, "raw", false, "with --cells: raw scan (delete markers and masked cells)")
	f.IntVar(&fl.maxVersions, "max-versions", 0, "with --cells: versions per column (0 = all the families keep)")
	f.StringVar(&fl.start, "start", "", "with --cells: first row, hex")
	f.StringVar(&fl.stop, "stop", "", "with --cells: row to stop before, hex")
	f.IntVar(&fl.limit, "limit", 0, "with --cells: at most this many rows (0 = all)")
	f.StringSliceVar(&fl.families, "family", nil, "with --cells: only these families")
	f.DurationVar(&fl.timeout, "timeout", 2*time.Minute, "bound on each HBase operation, retries included")
	return cmd
}

// cluster finds the cluster to inspect as hbase.Locate does, from --zk and
// --znode-parent; from names where the quorum came from.
func (fl inspectTableOptions) cluster() (cfg hbase.Config, from string, err error) {
	if cfg, from, err = hbase.Locate(fl.zk, fl.znodeParent); err != nil {
		return cfg, "", err
	}
	cfg.OperationTimeout = fl.timeout
	return cfg, from, nil
}

func runInspectTable(cmd *cobra.Command, args []string, fl inspectTableOptions) error {
	// No cluster named, or an hbase-site.xml that names none, is the
	// user's to fix.
	cfg, from, err := fl.cluster()
	if err != nil {
		return usageError{err}
	}
	if fl.maxVersions < 0 || fl.limit < 0 {
		return usageError{errors.New("--max-versions and --limit must be >= 0")}
	}
	// pflag turns --family "" into no families, which would mean all.
	if cmd.Flags().Changed("family") && (len(fl.families) == 0 || slices.Contains(fl.families, "")) {
		return usageError{errors.New(`--family "": a family name cannot be empty`)}
	}
	if !fl.cells && (fl.raw || fl.maxVersions != 0 || fl.start != "" || fl.stop != "" || fl.limit != 0 || len(fl.families) > 0) {
		return usageError{errors.New("--raw, --max-versions, --start, --stop, --limit and --family only apply with --cells")}
	}
	start, err := hex.DecodeString(fl.start)
	if err != nil {
		return usageError{fmt.Errorf("--start: %w", err)}
	}
	stop, err := hex.DecodeString(fl.stop)
	if err != nil {
		return usageError{fmt.Errorf("--stop: %w", err)}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if cfg.Kerberos != nil && cfg.Kerberos.Login == nil && cfg.Kerberos.Identity == nil {
		cfg.Kerberos.Identity = runIdentity
	}
	stderr := cmd.ErrOrStderr()
	cfg.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, "rekey: "+format+"\n", args...) }
	c, err := hbase.NewClient(cfg)
	if err != nil {
		return fmt.Errorf("cluster from %s: %w", from, err)
	}
	defer c.Close()
	table := args[0]
	out := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<16)
	defer out.Flush()
	if !fl.cells {
		regions, err := c.Regions(ctx, table)
		if err != nil {
			if errors.Is(err, hbase.ErrTableNotFound) {
				return usageError{err}
			}
			return err
		}
		for _, r := range regions {
			name := strings.TrimSuffix(string(r.Name), ".")
			enc := name[strings.LastIndexByte(name, '.')+1:]
			server := r.Server
			if server == "" {
				server = "-"
			}
			fmt.Fprintf(out, "%s\t%x\t%x\t%s\n", enc, r.StartKey, r.EndKey, server)
		}
		return nil
	}
	s := &hbase.Scan{Start: start, Stop: stop, Raw: fl.raw, MaxVersions: fl.maxVersions, Limit: fl.limit, Caching: 5000, MaxResultSize: 8 << 20}
	if s.MaxVersions == 0 {
		s.MaxVersions = 1<<31 - 1 // the server caps it at each family's VERSIONS
	}
	for _, f := range fl.families {
		s.Families = append(s.Families, []byte(f))
	}
	sc := c.Scan(ctx, []byte(table), s)
	defer sc.Close()
	var line []byte
	for sc.Next() {
		line = cell.AppendDump(line[:0], sc.Cell())
		if _, err := out.Write(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, hbase.ErrTableNotFound) {
			return usageError{err}
		}
		return err
	}
	return out.Flush()
}
