package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeFiveMinutes: the README stays a five-minute read (issue 50:
// about 1,500 words; the rest belongs in docs/), and its walkthrough keeps
// the commands in the order a newcomer runs them, which
// TestReadmeWalkthrough runs on the mini cluster.
func TestReadmeFiveMinutes(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(string(b))); n > 1500 {
		t.Errorf("README.md has %d words (as wc -w counts them), more than 1,500: move details to docs/", n)
	}
	var verbs []string
	for _, c := range walkthroughCommands(t) {
		if len(c) > 1 {
			verbs = append(verbs, c[1])
		}
	}
	if got := strings.Join(verbs, " "); got != "plan run verify load verify" {
		t.Errorf("the walkthrough's commands are %q, want plan run verify load verify", got)
	}
}
