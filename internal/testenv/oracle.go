package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(root, "testenv", "bin", "oracle"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("testenv/bin/oracle %s: %v\n%s", strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	return stdout.Bytes(), nil
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
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ControlPort))
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("testenv control %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Minute)); err != nil {
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
