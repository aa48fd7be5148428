package transform

import "testing"

// CheckRoundTrip lets the external tests run the round trip over the job
// files' programs.
func CheckRoundTrip(t *testing.T, p *Program, seed uint64, least int) {
	checkRoundTrip(t, p, seed, least)
}
