package bigtable_test

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
)

// gcloudEmulator is where the Google Cloud SDK installs cbtemulator
// (gcloud components install bigtable), when it is not on PATH.
const gcloudEmulator = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator"

// cbtemulator starts gcloud's Bigtable emulator on a free loopback port,
// points BIGTABLE_EMULATOR_HOST at it for the test, and kills it at the
// end; the test is skipped, saying so loudly, where the machine has none.
func cbtemulator(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("cbtemulator")
	if err != nil {
		if _, serr := os.Stat(gcloudEmulator); serr != nil {
			t.Skipf("CBTEMULATOR NOT FOUND: neither on PATH nor at %s; install it with `gcloud components install bigtable` to run this test", gcloudEmulator)
		}
		bin = gcloudEmulator
	}
	// A port the kernel just gave out and took back: free unless another
	// process takes it in the moment before the emulator binds it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s after 10s: %v\n%s", bin, addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	t.Logf("cbtemulator %s on %s", bin, addr)
}

// TestCbtemulatorRoundTrip: against gcloud's cbtemulator (a separate
// process, over a real socket), Ready creates the table with its
// families' GC rules from the source families (d: 300 versions; e: one
// version, 7 days), and the sink writes 2,000 rows of random binary keys
// (0x00 and 0xff among their bytes, one of 4 KiB), empty qualifiers and
// values, a column of 250 versions and a 1 MB value; read back with
// Google's client, the table holds exactly the cells written, at their
// timestamps ×1000.
func TestCbtemulatorRoundTrip(t *testing.T) {
	cbtemulator(t)
	ctx := context.Background()
	conn, err := bt.Dial(ctx, &job.Bigtable{Project: "p", Instance: "i"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fams := []sink.Family{
		{Target: "d", Source: "d", MaxVersions: 300},
		{Target: "e", Source: "e", MaxVersions: 1, TTL: 7 * 24 * time.Hour},
	}
	created, err := bt.Ready(ctx, conn.Admin, bt.Target{Table: "rt", Families: fams, Create: true, SplitKeys: [][]byte{{0x80}}})
	if err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	info, err := conn.Admin.TableInfo(ctx, "rt")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, f := range info.FamilyInfos {
		rules[f.Name] = f.FullGCPolicy.String()
	}
	if rules["d"] != "versions() > 300" || rules["e"] != "(versions() > 1 || age() > 7d)" {
		t.Errorf("created GC rules %q", rules)
	}

	// Family e keeps 7 days: its cells are written at the last hour's
	// times, so no GC pass of the emulator may take them.
	now := time.Now().UnixMilli()
	rng := rand.New(rand.NewSource(52))
	var cells []cell.Cell
	seen := map[string]bool{}
	for len(seen) < 2000 {
		k := make([]byte, 1+rng.Intn(24))
		rng.Read(k)
		if len(seen)%100 == 0 {
			k = append(k, 0x00, 0xff) // the bytes a text-minded tool mangles
		}
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		cells = append(cells,
			put(string(k), "d", fmt.Sprintf("q\x00%d", len(seen)), 1767225600000+int64(len(seen)), fmt.Sprintf("v%d", rng.Int())),
			put(string(k), "e", "", now-int64(rng.Intn(3_600_000)), ""))
	}
	long := strings.Repeat("\xfe", bt.MaxRowKey)
	for _, k := range []string{long, "versions-of-one-column", "one-megabyte-value-row"} {
		if seen[k] {
			t.Fatalf("a random key is %q", k) // the seed would have to change
		}
	}
	cells = append(cells, put(long, "d", "q", 1, "key of 4 KiB"))
	for v := range 250 {
		cells = append(cells, put("versions-of-one-column", "d", "c", 1767225600000-int64(v), fmt.Sprint(v)))
	}
	mb := make([]byte, 1<<20)
	rng.Read(mb)
	cells = append(cells, put("one-megabyte-value-row", "d", "mb", 5, string(mb)))
	s := bt.New(conn.Data.Open("rt"), "rt", conn.Calls(), bt.Options{BatchBytes: 2 << 20, Timeout: 30 * time.Second})
	ack, bad, err := writeSplit(t, s, cells)
	if err != nil || len(bad) > 0 || ack.Cells != int64(len(cells)) || ack.Failed != 0 {
		t.Fatalf("commit: %v, %d refused, ack %d (%d failed), want %d", err, len(bad), ack.Cells, ack.Failed, len(cells))
	}
	got := readBack(t, conn, "rt")
	if len(got) != len(cells) {
		t.Errorf("read back %d cells, wrote %d", len(got), len(cells))
	}
	sameAsWritten(t, got, cells)
}
