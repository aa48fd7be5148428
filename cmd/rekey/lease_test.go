package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// cliEnv makes the test binary run as rekey itself (see TestMain), so a
// test can start several rekey processes at once.
const cliEnv = "REKEY_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestTwoRunsOfOneJobAtOnce is the scenario of issue 25: two
// `rekey run JOB --sink hfiles --offline` of one job, with its default
// checkpoint and staging folder, started together. One finishes (exit 0,
// every cell of the demo snapshot staged: 31413, the oracle's dump in
// testdata/snapshots/demo_events.cells); the other is refused at once
// (exit 2), naming the process that holds the state.
func TestTwoRunsOfOneJobAtOnce(t *testing.T) {
	job := demoJob(t)
	// The cap keeps the first run going for about three seconds, so the
	// second starts while it holds the state.
	args := []string{"run", job, "--sink", "hfiles", "--offline", "--progress", "none", "--json", "--max-cells-per-sec", "10000"}
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	var ps [2]*proc
	for i := range ps {
		p := &proc{cmd: exec.Command(os.Args[0], args...)}
		p.cmd.Env = append(os.Environ(), cliEnv+"=1")
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	codes := map[int]*proc{}
	for _, p := range ps {
		p.cmd.Wait()
		codes[p.cmd.ProcessState.ExitCode()] = p
	}
	won, lost := codes[0], codes[2]
	if won == nil || lost == nil {
		for _, p := range ps {
			t.Logf("exit %d\n%s\n%s", p.cmd.ProcessState.ExitCode(), p.stdout.String(), p.stderr.String())
		}
		t.Fatalf("want one run to exit 0 and the other 2")
	}
	var sum struct {
		Finished bool  `json:"finished"`
		Written  int64 `json:"cells_written"`
	}
	if err := json.Unmarshal(won.stdout.Bytes(), &sum); err != nil || !sum.Finished || sum.Written != 31413 {
		t.Errorf("the run that held the state: %v, %+v\n%s", err, sum, won.stderr.String())
	}
	msg := lost.stderr.String()
	if !strings.Contains(msg, "is held by") || !strings.Contains(msg, fmt.Sprintf("pid %d on host", won.cmd.Process.Pid)) {
		t.Errorf("the refused run does not name pid %d:\n%s", won.cmd.Process.Pid, msg)
	}
	if lost.stdout.Len() > 0 {
		t.Errorf("the refused run printed a summary:\n%s", lost.stdout.String())
	}
}
