package main

import "github.com/spf13/cobra"

// inspectCmd groups the read-only operator tools: inspect hfile, inspect
// snapshot. Each lives in its own file and adds itself here.
var inspectCmd = &cobra.Command{
	Use:   "inspect",
	Short: "Look inside HFiles and snapshots without changing anything",
}

func init() { rootCmd.AddCommand(inspectCmd) }
