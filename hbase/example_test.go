package hbase_test

import (
	"context"
	"errors"
	"log"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
)

// Batched puts into a live table, reporting each row HBase refused after
// every retry. It needs a cluster, so go test compiles it but does not run
// it (no Output line); hbase/cluster_test.go runs the same calls against
// the mini cluster.
func ExampleClient_NewWriter() {
	ctx := context.Background()
	cfg, _, err := hbase.Locate("", "") // $REKEY_ZK, else $HBASE_CONF_DIR/hbase-site.xml
	if err != nil {
		log.Fatal(err)
	}
	c, err := hbase.NewClient(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w := c.NewWriter([]byte("events_v2"), hbase.WriterConfig{})
	put := cell.Cell{Row: []byte("u00042"), Family: []byte("e"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("v")}
	if err := w.Write(ctx, put); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		var we *hbase.WriteError
		if errors.As(err, &we) {
			for _, f := range we.Failures {
				log.Printf("row %q: %v", f.Row, f.Err)
			}
		}
		log.Fatal(err)
	}
}
