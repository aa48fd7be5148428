package hbase

import (
	"fmt"
	"strings"

	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
)

// Kerberos says how to authenticate to a kerberized cluster
// (hbase.security.authentication=kerberos): every connection runs SASL
// GSSAPI with the server's principal and the protection given.
type Kerberos struct {
	// Login is the Kerberos login to authenticate as, when the caller has
	// made one; else Identity logs in at NewClient. With neither, NewClient
	// fails: there is no process-wide login to fall back on (pipeline and
	// verify build the Identity from the job's security section).
	Login *krb.Login
	// Identity is who to log in as when Login is nil.
	Identity *krb.Identity
	// MasterPrincipal is hbase.master.kerberos.principal and
	// RegionServerPrincipal hbase.regionserver.kerberos.principal, e.g.
	// "hbase/_HOST@EXAMPLE.COM"; _HOST stands for each server's host name.
	MasterPrincipal       string
	RegionServerPrincipal string
	// Protection is hbase.rpc.protection, most preferred first; empty
	// means authentication.
	Protection []sasl.QOP
}

// kerberosFromSite returns the security settings of hbase-site.xml's
// properties, or nil when hbase.security.authentication is not kerberos.
func kerberosFromSite(props map[string]string, path string) (*Kerberos, error) {
	switch strings.ToLower(props["hbase.security.authentication"]) {
	case "", "simple":
		return nil, nil
	case "kerberos":
	default:
		return nil, fmt.Errorf("hbase: %s: hbase.security.authentication=%q: rekey speaks simple and kerberos", path, props["hbase.security.authentication"])
	}
	qops, err := sasl.ParseProtection(props["hbase.rpc.protection"])
	if err != nil {
		return nil, fmt.Errorf("hbase: %s: %w", path, err)
	}
	return &Kerberos{
		MasterPrincipal:       props["hbase.master.kerberos.principal"],
		RegionServerPrincipal: props["hbase.regionserver.kerberos.principal"],
		Protection:            qops,
	}, nil
}

// ready checks the settings and, without a Login, logs in as Identity.
func (k *Kerberos) ready() error {
	if k.RegionServerPrincipal == "" {
		return fmt.Errorf("hbase: Kerberos is on but the region servers' principal is not set (hbase.regionserver.kerberos.principal in hbase-site.xml)")
	}
	if k.Login != nil {
		return nil
	}
	l, err := k.Identity.Login()
	if err != nil {
		return fmt.Errorf("hbase: the cluster needs Kerberos: %w", err)
	}
	k.Login = l
	return nil
}

// forService returns the connection's Kerberos settings for a service:
// the master's principal for MasterService, the region servers' for the
// others (as HBase's client picks them).
func (k *Kerberos) forService(service string) (*rpc.Kerberos, error) {
	p := k.RegionServerPrincipal
	if service == rpc.MasterService {
		if k.MasterPrincipal == "" {
			return nil, fmt.Errorf("hbase: Kerberos is on but the master's principal is not set (hbase.master.kerberos.principal in hbase-site.xml)")
		}
		p = k.MasterPrincipal
	}
	return &rpc.Kerberos{Login: k.Login, Principal: p, Protection: k.Protection}, nil
}
