package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Oracle runs testenv/bin/oracle (HBase's own Java client and readers)
// with args against the running mini cluster and returns its standard
// output. It fails the test with the command's standard error when the
// oracle exits non-zero. Subcommands: `testenv/bin/oracle help`.
func Oracle(t testing.TB, args ...string) []byte {
	t.Helper()
	out, err := RunOracle(args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// RunOracle is Oracle for code that wants the error rather than a failed
// test (benchmarks, helpers that retry).
func RunOracle(args ...string) ([]byte, error) {
	return OracleCall{Args: args}.Run()
}

// OracleCall is one run of testenv/bin/oracle with a deadline: a call
// that hangs (a snapshot waiting on a master busy with another test's
// region server stop, a seed behind a region in transition) fails its own
// test within OracleTimeout, naming the call, the cluster's state and where
// the oracle's main thread stood, instead of holding the package until go
// test's own timeout kills it with no word on why.
type OracleCall struct {
	// Args are the oracle's subcommand and its arguments.
	Args []string
	// Env is added to the process's environment ("NAME=value").
	Env []string
	// Stdout receives the standard output instead of Run's result.
	Stdout io.Writer
	// Stderr receives a copy of the standard error, for callers that read
	// what the oracle says on success too.
	Stderr io.Writer
	// Label names the oracle in messages; "testenv/bin/oracle" by default.
	Label string
	// ClusterState describes the cluster the call waited on, for the
	// message of a call past its deadline; nil asks the plain cluster's
	// control channel.
	ClusterState func() string
}

// OracleTimeout bounds one oracle call: TESTENV_ORACLE_TIMEOUT (a Go
// duration; 0 means none), 5 minutes by default. The calls tests make
// (seeds of at most a few million cells, dumps, snapshots, region moves)
// take seconds, under CI's load a minute; a master waiting out its own
// snapshot or procedure timeout is what takes longer, and that is a
// failure to report, not to wait out.
func OracleTimeout() time.Duration {
	if v := os.Getenv("TESTENV_ORACLE_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return 5 * time.Minute
}

// Run runs the call and returns its standard output (nil when Stdout is
// set). A non-zero exit is an error carrying the end of standard error;
// a call past OracleTimeout is stopped and its error says where it stood.
func (c OracleCall) Run() ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	label := c.Label
	if label == "" {
		label = "testenv/bin/oracle"
	}
	cmd := exec.Command(filepath.Join(root, "testenv", "bin", "oracle"), c.Args...)
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	cmd.Stderr = &stderr
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, c.Stderr)
	}
	// stdout doubles as where the JVM prints its thread dump on SIGQUIT;
	// with a caller's writer, the dump goes there and is not quoted.
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", label, strings.Join(c.Args, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	limit := OracleTimeout()
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err = <-done:
	case <-timeout:
		return stdout.Bytes(), c.hung(cmd, done, label, limit, &stdout, &stderr)
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %v\n%s", label, strings.Join(c.Args, " "), err, tail(stderr.String(), 4000))
	}
	if c.Stdout != nil {
		return nil, nil
	}
	return stdout.Bytes(), nil
}

// hung stops a call past its deadline and says what it can of why: the
// cluster's state from the control channel, and the oracle's main thread
// from the thread dump the JVM prints on SIGQUIT (bin/oracle execs java,
// so the process is the JVM) before it is killed.
func (c OracleCall) hung(cmd *exec.Cmd, done <-chan error, label string, limit time.Duration, stdout, stderr *bytes.Buffer) error {
	describe := c.ClusterState
	if describe == nil {
		describe = plainClusterState
	}
	state := describe()
	cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	where := "not known (its standard output went to the caller)"
	if c.Stdout == nil {
		where = mainThread(stdout.String())
	}
	return fmt.Errorf("%s %s: no answer within %v (TESTENV_ORACLE_TIMEOUT); stopped.\ncluster: %s\noracle's main thread: %s\nstandard error:\n%s",
		label, strings.Join(c.Args, " "), limit, state, where, tail(stderr.String(), 2000))
}

// plainClusterState asks the plain cluster's control channel for its
// state (cluster-state).
func plainClusterState() string {
	st, err := Load()
	if err != nil {
		return "unknown: " + err.Error()
	}
	s, err := st.ControlWithin("cluster-state", 30*time.Second)
	if err != nil {
		return "unknown: " + err.Error()
	}
	return s
}

// mainThread cuts the "main" thread's stack out of a JVM thread dump, up
// to 25 frames: where the oracle waited.
func mainThread(dump string) string {
	i := strings.Index(dump, "\n\"main\"")
	if i < 0 {
		return "no thread dump (the JVM did not answer SIGQUIT within 3 s)"
	}
	lines := strings.Split(dump[i+1:], "\n")
	var keep []string
	for n, l := range lines {
		if n > 0 && strings.TrimSpace(l) == "" || n > 26 {
			break
		}
		keep = append(keep, l)
	}
	return "\n" + strings.Join(keep, "\n")
}

// tail keeps the last n bytes of s: a Java stack trace's cause is at its
// start, but an oracle failure's own message is on the first line, so
// keep the first line too.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	first, _, _ := strings.Cut(s, "\n")
	return first + "\n...\n" + s[len(s)-n:]
}

// Control sends one command to the cluster process's control channel and
// returns the text after "ok" of its one-line answer. Commands: ping,
// list-regionservers (answers the live servers as host,port,startcode,
// ordered by port), stop-regionserver N (N indexes that list, or a
// host,port,startcode), start-regionserver, stop-master, start-master,
// zk-expire-session HOST:PORT, shutdown, and the dfs2-* and dfs3-* commands
// of the extra HDFS clusters (testenv/README.md lists them all). An
// "error ..." answer is returned as an error. Stopping and starting a
// region server waits until the master has noticed, which can take a
// minute.
func (s *State) Control(command string) (string, error) {
	return s.ControlWithin(command, 5*time.Minute)
}

// ControlWithin is Control with its own bound on the whole exchange.
func (s *State) ControlWithin(command string, limit time.Duration) (string, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ControlPort))
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("testenv control %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(limit)); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(conn, "%s\n", command); err != nil {
		return "", fmt.Errorf("testenv control %s: %w", addr, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("testenv control %s: reading the answer to %q: %w", addr, command, err)
	}
	line = strings.TrimRight(line, "\r\n")
	if rest, ok := strings.CutPrefix(line, "ok"); ok {
		return strings.TrimSpace(rest), nil
	}
	return "", fmt.Errorf("testenv control %q: %s", command, line)
}

// OracleDumps runs several oracle dumps (each a dump-snapshot, dump-table
// or dump-hfile argument list) in one oracle JVM, through its dump-batch
// command, and returns their outputs in order: a test that compares many
// scans pays the JVM's start-up once. It fails the test if any dump fails.
func OracleDumps(t testing.TB, dumps [][]string) [][]byte {
	t.Helper()
	dir := t.TempDir()
	var list strings.Builder
	for i, args := range dumps {
		for _, a := range args {
			if strings.ContainsAny(a, "\t\n") {
				t.Fatalf("oracle dump argument %q holds a tab or newline", a)
			}
		}
		fmt.Fprintf(&list, "%s\t%s\n", filepath.Join(dir, fmt.Sprintf("dump%03d", i)), strings.Join(args, "\t"))
	}
	listFile := filepath.Join(dir, "list")
	if err := os.WriteFile(listFile, []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	Oracle(t, "dump-batch", listFile)
	out := make([][]byte, len(dumps))
	for i := range dumps {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("dump%03d", i)))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}
