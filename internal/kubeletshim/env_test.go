package kubeletshim

import "testing"

// TestExpand checks $(VAR) expansion against the kubelet's documented
// rules: known names expand, unknown ones stay as written, $$ escapes.
func TestExpand(t *testing.T) {
	vars := map[string]string{"JOB_COMPLETION_INDEX": "3", "REKEY_SHARDS": "8", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"$(JOB_COMPLETION_INDEX)/$(REKEY_SHARDS)": "3/8",
		"$(NOPE)/x":               "$(NOPE)/x",
		"$$(REKEY_SHARDS)":        "$(REKEY_SHARDS)",
		"$$$(REKEY_SHARDS)":       "$8",
		"a$b":                     "a$b",
		"$(EMPTY)x":               "x",
		"$(REKEY_SHARDS":          "$(REKEY_SHARDS",
		"$()":                     "$()",
		"end$":                    "end$",
		"--from=$(REKEY_SHARDS)d": "--from=8d",
	} {
		if got := Expand(in, lookup); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRewritePaths checks that mount paths are rewritten where they stand
// as paths, nested mounts first, and that a rewritten path is not
// rewritten again by a shorter mount path it starts with.
func TestRewritePaths(t *testing.T) {
	rw := []rewrite{
		{from: "/var/run/secrets/rekey/kerberos", to: "/tmp/p/var/run/secrets/rekey/kerberos"},
		{from: "/etc/rekey", to: "/tmp/p/etc/rekey"},
		{from: "/tmp", to: "/tmp/p/tmp"},
	}
	for in, want := range map[string]string{
		"/etc/rekey/job.yaml":       "/tmp/p/etc/rekey/job.yaml",
		"/etc/rekey":                "/tmp/p/etc/rekey",
		"HBASE_CONF_DIR=/etc/rekey": "HBASE_CONF_DIR=/tmp/p/etc/rekey",
		"--config=/etc/rekey/a.xml": "--config=/tmp/p/etc/rekey/a.xml",
		"/etc/rekeyx":               "/etc/rekeyx",
		"x/etc/rekey":               "x/etc/rekey",
		"/tmp/scratch":              "/tmp/p/tmp/scratch",
		"/var/run/secrets/rekey/kerberos/krb5.conf": "/tmp/p/var/run/secrets/rekey/kerberos/krb5.conf",
		"a:/etc/rekey,/tmp":                         "a:/tmp/p/etc/rekey,/tmp/p/tmp",
		"run":                                       "run",
	} {
		if got := rewritePaths(in, rw); got != want {
			t.Errorf("rewritePaths(%q) = %q, want %q", in, got, want)
		}
	}
}
