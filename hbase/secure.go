package hbase

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/hadooptoken"
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
	// Token, when set, authenticates every connection with this HBase
	// authentication token (SASL DIGEST-MD5) instead of a login. NewClient
	// sets it from the token file a YARN container is handed
	// (HADOOP_TOKEN_FILE_LOCATION) when no Login is given and Identity has
	// no keytab.
	Token *hadooptoken.Token
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

// ready checks the settings and, without a Login, takes the HBase token
// of the process's token file for this cluster (when no keytab was given:
// a YARN container is handed one, and Hadoop's clients too use a token
// for the service when they hold one) or logs in as Identity.
func (k *Kerberos) ready(z *zkClient) error {
	if k.Login != nil || k.Token != nil {
		return k.checkPrincipals()
	}
	if !k.Identity.Explicit() {
		tok, err := tokenFromFile(z)
		if err != nil {
			return err
		}
		if tok != nil {
			k.Token = tok
			return nil
		}
	}
	if err := k.checkPrincipals(); err != nil {
		return err
	}
	l, err := k.Identity.Login()
	if err != nil {
		return fmt.Errorf("hbase: the cluster needs Kerberos: %w", err)
	}
	k.Login = l
	return nil
}

// checkPrincipals checks that the servers' principals a Kerberos login
// needs are set.
func (k *Kerberos) checkPrincipals() error {
	if k.Token == nil && k.RegionServerPrincipal == "" {
		return fmt.Errorf("hbase: Kerberos is on but the region servers' principal is not set (hbase.regionserver.kerberos.principal in hbase-site.xml)")
	}
	return nil
}

// tokenFromFile returns the HBase authentication token of the token file
// named by HADOOP_TOKEN_FILE_LOCATION for this cluster (its service is
// the cluster's id, from the hbaseid znode); nil when the variable is not
// set or the file holds no HBase token. A file that holds HBase tokens,
// none of them this cluster's, is an error: the job was handed another
// cluster's.
func tokenFromFile(z *zkClient) (*hadooptoken.Token, error) {
	path := os.Getenv(hadooptoken.TokenFileEnv)
	if path == "" {
		return nil, nil
	}
	creds, err := hadooptoken.ReadCredentialsFile(path)
	if err != nil {
		return nil, fmt.Errorf("hbase: the cluster needs Kerberos and no keytab was given, so its token is looked for in %s=%s: %w", hadooptoken.TokenFileEnv, path, err)
	}
	var held []string
	for _, t := range creds.Tokens {
		if t.Token.Kind == hadooptoken.HBaseTokenKind {
			held = append(held, t.Token.Service)
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := z.clusterID(ctx)
	if err != nil {
		return nil, err
	}
	if tok := creds.ForService(hadooptoken.HBaseTokenKind, id); tok != nil {
		return tok, nil
	}
	return nil, fmt.Errorf("hbase: the token file %s=%s holds HBase tokens for the clusters %s, not for this one (%s, the hbaseid znode): the job was handed another cluster's tokens",
		hadooptoken.TokenFileEnv, path, strings.Join(held, ", "), id)
}

// forService returns the connection's Kerberos settings for a service:
// the master's principal for MasterService, the region servers' for the
// others (as HBase's client picks them).
func (k *Kerberos) forService(service string) (*rpc.Kerberos, error) {
	if k.Token != nil {
		// One token for every server of the cluster.
		return &rpc.Kerberos{Token: k.Token, Protection: k.Protection}, nil
	}
	p := k.RegionServerPrincipal
	if service == rpc.MasterService {
		if k.MasterPrincipal == "" {
			return nil, fmt.Errorf("hbase: Kerberos is on but the master's principal is not set (hbase.master.kerberos.principal in hbase-site.xml)")
		}
		p = k.MasterPrincipal
	}
	return &rpc.Kerberos{Login: k.Login, Principal: p, Protection: k.Protection}, nil
}
