package transform

import "testing"

// CheckRoundTrip lets the external tests run the round trip over the job
// files' programs.
func CheckRoundTrip(t *testing.T, p *Program, seed uint64, least int) {
	t.Helper()
	checkRoundTrip(t, p, seed, least)
}

// CheckMirroredBug lets the external tests give a job file's program a
// forward codec bug shared by its parser and builder (forwardBugs).
func CheckMirroredBug(t *testing.T, p *Program, bug string, seed uint64, least int) {
	t.Helper()
	checkMirroredBug(t, p, bug, seed, least)
}
