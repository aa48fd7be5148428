package hdfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"os"
	"strings"
	"time"

	gohdfs "github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/internal/hadooprpc"
	"github.com/rekeyhq/rekey/internal/hadooptoken"
	"github.com/rekeyhq/rekey/internal/krb"
)

// kerberize sets opts up for a NameNode that requires Kerberos: the login
// of id (which logs in now, if it has not yet), the NameNode's service principal from
// dfs.namenode.kerberos.principal, and NameNode addresses by canonical
// host name, which is what _HOST stands for.
func (h *FS) kerberize(opts *gohdfs.ClientOptions, conf hadoopconf.HadoopConf, id *krb.Identity) error {
	if id == nil {
		return fmt.Errorf("%w: %s (hadoop.security.authentication=kerberos in %s), and no Kerberos login was given (hdfs.Options.Kerberos, vfs.Options.Kerberos; pipeline and verify take it from the job's security section)", ErrKerberos, h.name, confDir())
	}
	login, err := id.Login()
	if err != nil {
		return fmt.Errorf("vfs: HDFS %s requires Kerberos (hadoop.security.authentication=kerberos in %s): %w", h.name, confDir(), err)
	}
	spn := conf["dfs.namenode.kerberos.principal"]
	if spn == "" {
		return fmt.Errorf("vfs: HDFS %s requires Kerberos, but the Hadoop configuration (%s) names no dfs.namenode.kerberos.principal (the NameNode's principal, from the cluster's hdfs-site.xml)", h.name, confDir())
	}
	// gokrb5 takes the service principal without its realm.
	spn, _, _ = strings.Cut(spn, "@")
	opts.KerberosClient = login.Client
	opts.KerberosServicePrincipleName = spn
	opts.Addresses, opts.NamenodeDialFunc = canonicalNamenodes(opts.Addresses, opts.NamenodeDialFunc)
	h.login = login
	h.spn = spn
	h.rpcProtection = conf["hadoop.rpc.protection"]
	h.tokenService = tokenService(conf, strings.TrimPrefix(h.name, "hdfs://"), h.addrs)
	return nil
}

// canonicalNamenodes returns the NameNode addresses with each host
// replaced by its canonical name, and a dialler that connects to the
// address as configured. The HDFS client expands _HOST in the NameNode's
// principal with the host of the address it dials, while Hadoop expands
// it with the lowercased canonical name of the address (a NameNode at
// 127.0.0.1 is user/localhost, not user/127.0.0.1): giving the client the
// canonical names makes its expansion Hadoop's.
func canonicalNamenodes(addrs []string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) ([]string, func(ctx context.Context, network, addr string) (net.Conn, error)) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	configured := map[string]string{}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			out[i] = a
			continue
		}
		c := net.JoinHostPort(canonicalHost(host), port)
		configured[c] = a
		out[i] = c
	}
	return out, func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := configured[addr]; ok {
			addr = a
		}
		return dial(ctx, network, addr)
	}
}

// canonicalHost is Java's InetAddress.getCanonicalHostName, lowercased:
// the name the host's first address resolves back to, else the host as
// written.
func canonicalHost(host string) string {
	ips, err := net.LookupHost(host)
	if err != nil || len(ips) == 0 {
		return strings.ToLower(host)
	}
	names, err := net.LookupAddr(ips[0])
	if err != nil || len(names) == 0 {
		return strings.ToLower(host)
	}
	return strings.ToLower(strings.TrimSuffix(names[0], "."))
}

// confDir names where the Hadoop configuration came from, for messages.
func confDir() string {
	if d := os.Getenv("HADOOP_CONF_DIR"); d != "" {
		return "HADOOP_CONF_DIR=" + d
	}
	if d := os.Getenv("HADOOP_HOME"); d != "" {
		return "HADOOP_HOME=" + d
	}
	return "no HADOOP_CONF_DIR set"
}

// simpleRefused is the NameNode's answer to a client that did not
// authenticate with Kerberos ("SIMPLE authentication is not enabled.
// Available:[TOKEN, KERBEROS]").
const simpleRefused = "SIMPLE authentication is not enabled"

// simpleRefusal returns ErrKerberos, in the user's terms, when err is a
// NameNode refusing this client because it did not use Kerberos; else
// nil. The HDFS client misreads that refusal (an answer to a call it never
// made: "unexpected sequence number"), or its write meets the closed
// connection first, which looks like a NameNode going away: so at the
// first such error a client without Kerberos asks the NameNode itself.
func (h *FS) simpleRefusal(op, name string, err error) error {
	if h.login != nil || h.fileToken != nil {
		return nil
	}
	m := err.Error()
	if !strings.Contains(m, simpleRefused) {
		if !strings.Contains(m, outOfTurn) && !nameNodeDown(err, true) {
			return nil
		}
		h.probe.Do(func() { h.probed, _ = probeSimple(h.addrs) })
		if !strings.Contains(h.probed, simpleRefused) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s answered %q to %s %s: the Hadoop configuration (%s) does not say hadoop.security.authentication=kerberos; point HADOOP_CONF_DIR at the cluster's client configuration",
		ErrKerberos, h.name, simpleRefused, op, name, confDir())
}

// outOfTurn is the HDFS client's error for an answer whose call id it
// did not expect.
const outOfTurn = "unexpected sequence number"

// probeSimple opens a connection to each NameNode as a client without
// Kerberos and returns the NameNode's error message when it refuses one:
// a secure NameNode answers the connection header at once with a fatal
// RPC response (RpcResponseHeaderProto, errorMsg in field 5) and closes.
func probeSimple(addrs []string) (string, bool) {
	for _, a := range addrs {
		if m, ok := probeOne(a); ok {
			return m, true
		}
	}
	return "", false
}

func probeOne(addr string) (string, bool) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", false
	}
	defer c.Close()
	if c.SetDeadline(time.Now().Add(5*time.Second)) != nil {
		return "", false
	}
	// "hrpc", RPC version 9, service class 0, auth protocol 0 (none).
	if _, err := c.Write([]byte{'h', 'r', 'p', 'c', 9, 0, 0}); err != nil {
		return "", false
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return "", false
	}
	n := binary.BigEndian.Uint32(size[:])
	if n == 0 || n > 1<<16 {
		return "", false
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return "", false
	}
	hdr, k := protowire.ConsumeBytes(b)
	if k < 0 {
		return "", false
	}
	m := protoBytes(hdr, 5)
	return string(m), len(m) > 0
}

// explain puts a NameNode operation's final error in the user's terms:
// Kerberos the client did not configure, a Kerberos failure, a path the
// logged-in principal may not read. Other errors come back unchanged.
func (h *FS) explain(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if e := h.simpleRefusal(op, name, err); e != nil {
		return e
	}
	if h.fileToken != nil && strings.Contains(err.Error(), hadooprpc.LoginRefused) {
		return fmt.Errorf("%w: %s refused the delegation token of %s=%s (cancelled, past its lifetime, or another cluster's; a resubmitted job gets fresh tokens): %w",
			ErrKerberos, h.name, hadooptoken.TokenFileEnv, h.tokenFile, err)
	}
	if h.login == nil {
		return err
	}
	if errors.Is(err, iofs.ErrPermission) {
		return &PermissionError{Op: op, Path: h.name + name, Principal: h.login.Principal, Err: err}
	}
	return krb.ExplainService(err, h.login, h.spn, "the NameNode of "+h.name)
}

// PermissionError is an HDFS operation the logged-in principal may not do.
// It matches fs.ErrPermission (errors.Is).
type PermissionError struct {
	Op, Path, Principal string
	Err                 error
}

// Error names the path, the principal and the two ways out.
func (e *PermissionError) Error() string {
	return fmt.Sprintf("vfs: permission denied: %s may not %s %s (%v). "+
		"Secure HBase keeps hbase.rootdir's data and archive directories at mode 700 for its own user: either run as the hbase principal (--keytab and --principal), "+
		"or grant %s read access with HDFS ACLs (hdfs dfs -setfacl -R -m user:%s:r-x on the snapshot's directories and the store files it references, "+
		"plus default:user:%s:r-x so that files HBase writes later inherit it)",
		e.Principal, e.Op, e.Path, e.Err, e.Principal, shortName(e.Principal), shortName(e.Principal))
}

// shortName is the HDFS user a principal maps to under Hadoop's DEFAULT
// auth_to_local rule: its first component (rekey/host@R is rekey).
func shortName(principal string) string {
	name, _, _ := strings.Cut(principal, "@")
	name, _, _ = strings.Cut(name, "/")
	return name
}

// Unwrap returns the client's error (fs.ErrPermission underneath).
func (e *PermissionError) Unwrap() error { return e.Err }
