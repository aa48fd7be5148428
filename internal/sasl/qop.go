package sasl

import (
	"fmt"
	"strings"
)

// QOP is a SASL quality of protection, valued as the bit RFC 4752's
// security-layer bitmask gives it.
type QOP byte

// The three qualities of protection, as hbase.rpc.protection names them.
const (
	// Authentication: the peers prove who they are; frames go in clear.
	Authentication QOP = 1
	// Integrity: every frame carries a keyed checksum.
	Integrity QOP = 2
	// Privacy: every frame is encrypted and checksummed.
	Privacy QOP = 4
)

// String returns the name hbase.rpc.protection uses.
func (q QOP) String() string {
	switch q {
	case Authentication:
		return "authentication"
	case Integrity:
		return "integrity"
	case Privacy:
		return "privacy"
	}
	return fmt.Sprintf("QOP(%#x)", byte(q))
}

// SASLName returns the SASL qop token of q (RFC 2222): auth, auth-int
// or auth-conf, as DIGEST-MD5 names the qualities.
func (q QOP) SASLName() string {
	switch q {
	case Integrity:
		return "auth-int"
	case Privacy:
		return "auth-conf"
	}
	return "auth"
}

// ParseProtection reads hbase.rpc.protection: a comma-separated list of
// authentication, integrity and privacy (or their SASL names auth,
// auth-int and auth-conf), case-insensitive, in order of preference. An
// empty value means authentication, HBase's default.
func ParseProtection(s string) ([]QOP, error) {
	if strings.TrimSpace(s) == "" {
		return []QOP{Authentication}, nil
	}
	var out []QOP
	seen := map[QOP]bool{}
	for _, f := range strings.Split(s, ",") {
		var q QOP
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "authentication", "auth":
			q = Authentication
		case "integrity", "auth-int":
			q = Integrity
		case "privacy", "auth-conf":
			q = Privacy
		default:
			return nil, fmt.Errorf("hbase.rpc.protection: %q is not one of authentication, integrity, privacy", strings.TrimSpace(f))
		}
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	return out, nil
}

// names lists the QOPs set in the bitmask mask, for messages.
func names(mask byte) string {
	var s []string
	for _, q := range []QOP{Authentication, Integrity, Privacy} {
		if mask&byte(q) != 0 {
			s = append(s, q.String())
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// list names qs in order, for messages.
func list(qs []QOP) string {
	var m []string
	for _, q := range qs {
		m = append(m, q.String())
	}
	return strings.Join(m, ", ")
}
