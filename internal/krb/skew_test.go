package krb

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// skewedKDC starts the oracle's KDC of its own (MiniKdc, one principal)
// under faketime with its clock ahead by ahead, and returns what it
// printed: krb5.conf, keytab, principal and the time the KDC believed.
// Go reads the clock through the vDSO, so faketime cannot move rekey's
// clock; it moves the JVM's, which is the KDC's.
func skewedKDC(t *testing.T, ahead time.Duration) (conf, keytab, principal string, kdcNow time.Time) {
	t.Helper()
	faketime, err := exec.LookPath("faketime")
	if err != nil {
		if os.Getenv("REKEY_REQUIRE_SECURE") == "1" {
			t.Fatal("faketime is not installed (apt-get install faketime): the clock-skew test cannot run")
		}
		t.Skip("CLOCK SKEW NOT TESTED: faketime is not installed (apt-get install faketime)")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	offset := fmt.Sprintf("+%ds", int64(ahead/time.Second))
	cmd := exec.Command(faketime, "-f", offset, filepath.Join(root, "testenv", "bin", "oracle"), "kdc", dir)
	// The JVM's monotonic clock stays real: faking it stalls its timers.
	cmd.Env = append(os.Environ(), "FAKETIME_DONT_FAKE_MONOTONIC=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the KDC stops when its input closes
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the KDC printed nothing: %v\n%s", err, stderr.String())
	}
	var out struct {
		Krb5Conf  string `json:"krb5_conf"`
		Keytab    string `json:"keytab"`
		Principal string `json:"principal"`
		NowMs     int64  `json:"now_ms"`
	}
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		t.Fatalf("the KDC printed %q: %v", line, err)
	}
	return out.Krb5Conf, out.Keytab, out.Principal, time.UnixMilli(out.NowMs)
}

// TestSecureClockSkewAgainstAKDC: a KDC whose clock runs ten minutes
// ahead of this host's (twice the 5 minutes Kerberos allows) refuses a
// keytab login, and rekey says the clocks disagree, in the user's terms
// (krb.ErrClockSkew), naming the principal; the same KDC with its clock
// one minute ahead lets the login through.
func TestSecureClockSkewAgainstAKDC(t *testing.T) {
	testenv.RequireSecure(t)
	conf, keytab, principal, kdcNow := skewedKDC(t, 10*time.Minute)
	if off := time.Until(kdcNow); off < 9*time.Minute {
		t.Fatalf("the KDC's clock is %v ahead; faketime did not move it", off.Round(time.Second))
	}
	_, err := loginPast(Options{Keytab: keytab, Principal: principal, Krb5Conf: conf})
	if !errors.Is(err, ErrClockSkew) {
		t.Fatalf("login against a KDC 10 minutes ahead: %v, want ErrClockSkew", err)
	}
	for _, want := range []string{principal, "clock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Logf("10 minutes ahead: %v", err)

	conf, keytab, principal, _ = skewedKDC(t, time.Minute)
	if _, err := loginPast(Options{Keytab: keytab, Principal: principal, Krb5Conf: conf}); err != nil {
		t.Fatalf("login against a KDC 1 minute ahead (within the 5 allowed): %v", err)
	}
}

// loginPast is LoginWith against a KDC that has just started: a JVM
// under faketime, whose first answers can take longer than the client's
// read timeout on a loaded machine. An unreachable KDC is asked again, a
// few times; any other answer (the skew the test wants, or a success) is
// returned as it is.
func loginPast(o Options) (*Login, error) {
	var err error
	for range 4 {
		var l *Login
		l, err = LoginWith(o)
		if !errors.Is(err, ErrKDCUnreachable) {
			return l, err
		}
		time.Sleep(2 * time.Second)
	}
	return nil, err
}
