package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// newInspectCmd groups the read-only operator tools: inspect hfile,
// snapshot and table, each in its own file.
func newInspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Look inside HFiles and snapshots without changing anything",
		Long: `Look inside an HFile (inspect hfile), a snapshot (inspect snapshot) or a
live table (inspect table) without changing anything.
` + exitStatusHelp,
		// Without a RunE cobra prints the help for "inspect nosuch" and exits 0;
		// naming no tool, or one that does not exist, is a usage error.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.Help()
				return usageError{errors.New("inspect: name what to inspect: hfile, snapshot or table")}
			}
			return usageError{fmt.Errorf("inspect: unknown subcommand %q (expected hfile, snapshot or table)", args[0])}
		},
	}
	cmd.AddCommand(newInspectHFileCmd(), newInspectSnapshotCmd(), newInspectTableCmd())
	return cmd
}
