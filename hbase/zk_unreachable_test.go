package hbase

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// TestZKSilentServerIsUnreachable: a ZooKeeper address that accepts
// connections and never answers (a server hung, or a proxy before a
// dead one) leaves the client without a session; a read that runs out
// of time there is ErrZooKeeperUnreachable, which the CLI maps to exit 4
// (retry), not a plain deadline, which it maps to 1 (final). Under load
// this, not a refused connection, was the path a CI run took.
func TestZKSilentServerIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	z, err := dialZK(ln.Addr().String(), "/hbase", 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer z.close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = z.get(ctx, "master")
	if !errors.Is(err, ErrZooKeeperUnreachable) {
		t.Fatalf("a read from a silent ZooKeeper: %v, want ErrZooKeeperUnreachable", err)
	}
}
