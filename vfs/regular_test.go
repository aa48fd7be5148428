//go:build unix

package vfs

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefusesNonRegularFiles: a FIFO would block Open forever and a
// device reads bytes that are no file's, so both are refused up front.
func TestOpenRefusesNonRegularFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, p := range []string{fifo, "/dev/null", "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			f, err := Local{}.Open(p)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("Open(%s) = %v, want ErrNotRegular", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Open(%s) blocked", p)
		}
	}
}
