package hdfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	gohdfs "github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/rekeyhq/rekey/internal/hadooprpc"
	"github.com/rekeyhq/rekey/internal/hadooptoken"
	"github.com/rekeyhq/rekey/vfs"
)

// useTokenFile sets opts up for a NameNode that requires Kerberos when no
// login was given but the process was handed its tokens, as YARN hands a
// container the tokens its client obtained at submit time (the token
// storage file named by HADOOP_TOKEN_FILE_LOCATION). The NameNode
// connection then authenticates with the file's HDFS delegation token for
// this file system (Hadoop's TOKEN method, SASL DIGEST-MD5, at
// hadoop.rpc.protection) and its calls run as the token's owner; DataNodes
// are reached with the block tokens the NameNode hands out, as under a
// Kerberos login. It reports false, with no error, when the variable is
// not set.
func (h *FS) useTokenFile(opts *gohdfs.ClientOptions, conf hadoopconf.HadoopConf) (bool, error) {
	path := os.Getenv(hadooptoken.TokenFileEnv)
	if path == "" {
		return false, nil
	}
	service := tokenService(conf, strings.TrimPrefix(h.name, "hdfs://"), h.addrs)
	creds, err := hadooptoken.ReadCredentialsFile(path)
	if err != nil {
		return false, fmt.Errorf("vfs: HDFS %s requires Kerberos and no login was given, so its delegation token is looked for in %s=%s: %w", h.name, hadooptoken.TokenFileEnv, path, err)
	}
	tok := creds.ForService(hadooprpc.HDFSTokenKind, service)
	if tok == nil {
		var held []string
		for _, t := range creds.Tokens {
			held = append(held, t.Token.Kind+" for "+t.Token.Service)
		}
		if len(held) == 0 {
			held = []string{"none"}
		}
		return false, fmt.Errorf("%w: %s (hadoop.security.authentication=kerberos), no Kerberos login was given, and the token file %s=%s holds no %s for %s (it holds: %s); give the job a keytab (security section), or have the submitting client obtain a token for this file system",
			ErrKerberos, h.name, hadooptoken.TokenFileEnv, path, hadooprpc.HDFSTokenKind, service, strings.Join(held, "; "))
	}
	id, err := hadooptoken.ParseDelegationID(tok.Identifier)
	if err != nil {
		return false, fmt.Errorf("vfs: HDFS %s: the delegation token in %s: %w", h.name, path, err)
	}
	if id.MaxMillis > 0 && time.Now().After(time.UnixMilli(id.MaxMillis)) {
		return false, fmt.Errorf("%w: %s: the delegation token in %s=%s passed its maximum lifetime at %s; resubmit the job for fresh tokens",
			ErrKerberos, h.name, hadooptoken.TokenFileEnv, path, time.UnixMilli(id.MaxMillis).UTC().Format(time.RFC3339))
	}
	protection := conf["hadoop.rpc.protection"]
	dial := opts.NamenodeDialFunc
	opts.KerberosClient = nil
	opts.User = id.Owner
	opts.NamenodeDialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return hadooprpc.DialStream(ctx, hadooprpc.Options{Addr: addr, Token: tok, Protection: protection, Dial: dial})
	}
	h.fileToken = tok
	h.tokenFile = path
	h.rpcProtection = protection
	h.tokenService = service
	return true, nil
}

// fileTokenKeeper stands for the delegation token of a token file: it was
// obtained, and is renewed and cancelled, by whoever wrote the file (the
// YARN ResourceManager renews it while the application runs and cancels
// it when the application ends). Cancelling it here would cut off the
// other tasks of the same application.
type fileTokenKeeper struct{ tok *hadooprpc.Token }

var errFileToken = errors.New("vfs: the token came from the process's token file; the client that obtained it renews it (under YARN, the ResourceManager)")

func (k fileTokenKeeper) Renew(context.Context) (time.Time, error) { return time.Time{}, errFileToken }
func (k fileTokenKeeper) Cancel(context.Context) error             { return nil }
func (k fileTokenKeeper) String() string                           { return k.tok.String() + ", from the token file" }

// fileDelegationToken is DelegationToken's answer under a token file:
// the file's token itself, which the bulk load hands to the region servers
// (a token-authenticated caller cannot get another).
func (h *FS) fileDelegationToken() *vfs.DelegationToken {
	t := h.fileToken
	return vfs.NewDelegationToken(t.Identifier, t.Password, t.Kind, t.Service, fileTokenKeeper{t})
}
