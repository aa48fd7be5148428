package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// runInspectTableCLI runs `rekey inspect table ARGS`.
func runInspectTableCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runRekey(t, append([]string{"inspect", "table"}, args...)...)
}

func TestInspectTableMatchesOracle(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	table := fmt.Sprintf("inspecttable_%d", time.Now().UnixNano())
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: table, Families: []hbase.Family{{Name: "f", Attributes: map[string]string{"VERSIONS": "2"}}}, SplitKeys: [][]byte{{0x80}}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.DisableTable(ctx, table)
		c.DeleteTable(ctx, table)
	}()
	for i := 0; i < 50; i++ {
		row := []byte{byte(i * 5), 'x'}
		var cells []cell.Cell
		for v := 0; v < 3; v++ {
			cells = append(cells, cell.Cell{Row: row, Family: []byte("f"), Qualifier: []byte("q"), Timestamp: int64(100 + v), Type: cell.Put, Value: []byte{byte(i), byte(v)}})
		}
		if err := c.Put(ctx, []byte(table), row, cells); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := c.Delete(ctx, []byte(table), row, []cell.Cell{{Row: row, Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 102, Type: cell.Delete}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, raw := range []bool{false, true} {
		oargs := []string{"dump-table", table}
		cargs := []string{"--zk", st.ZKQuorum, "--cells", table}
		if raw {
			oargs = append(oargs, "--raw")
			cargs = append(cargs, "--raw")
		}
		want := testenv.Oracle(t, oargs...)
		code, got, _ := runInspectTableCLI(t, cargs...)
		if code != 0 || got != string(want) || got == "" {
			t.Fatalf("raw=%v: exit %d, output differs from the oracle's:\n%s\nwant\n%s", raw, code, got, want)
		}
	}
	code, got, _ := runInspectTableCLI(t, "--zk", st.ZKQuorum, table)
	if code != 0 || bytes.Count([]byte(got), []byte("\n")) != 2 {
		t.Fatalf("regions: exit %d:\n%s", code, got)
	}
	if code, _, _ := runInspectTableCLI(t, "--zk", st.ZKQuorum, table+"_missing"); code != exitUsage {
		t.Fatalf("missing table: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := runInspectTableCLI(t, "--raw", "--zk", st.ZKQuorum, table); code != exitUsage {
		t.Fatalf("--raw without --cells: exit %d, want %d", code, exitUsage)
	}
}
