package testenv

import (
	"os/exec"
	"testing"
)

// SmallDisk mounts a tmpfs of size (as mount's size= takes it: 256k, 1m)
// on a new folder and returns the folder, for tests of a file system that
// fills up; it is unmounted when the test ends. The test is skipped where
// mounting is not allowed (not root, or no CAP_SYS_ADMIN in a container).
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (needs root and CAP_SYS_ADMIN): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// GrowDisk resizes a SmallDisk to size, keeping its files.
func GrowDisk(t testing.TB, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs on %s: %v: %s", dir, err, out)
	}
}
