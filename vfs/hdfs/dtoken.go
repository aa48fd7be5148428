package hdfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/rekeyhq/rekey/internal/hadooprpc"
	"github.com/rekeyhq/rekey/vfs"
)

var _ vfs.TokenIssuer = (*FS)(nil)

// token renews and cancels one delegation token of an FS at its NameNode
// (vfs.TokenKeeper).
type token struct {
	h   *FS
	tok *hadooprpc.Token
}

// String describes the token without its secrets.
func (t *token) String() string { return t.tok.String() }

// DelegationToken implements vfs.TokenIssuer: it asks the NameNode for a delegation token that renewer
// may renew ("" means the logged-in principal itself). It returns nil and
// no error when the file system does not use Kerberos: such a NameNode
// issues no tokens, and none is needed. Under a token file it returns the
// file's token, which its Cancel leaves alone. Cancel the token when done.
func (h *FS) DelegationToken(ctx context.Context, renewer string) (*vfs.DelegationToken, error) {
	if h.fileToken != nil {
		return h.fileDelegationToken(), nil
	}
	if h.login == nil {
		return nil, nil
	}
	if renewer == "" {
		renewer = h.login.Principal
	}
	var tok *hadooprpc.Token
	err := h.activeNameNode(ctx, func(c *hadooprpc.Conn) error {
		var err error
		tok, err = c.GetDelegationToken(ctx, renewer)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vfs: delegation token from %s: %w", h.name, err)
	}
	tok.Service = h.tokenService
	return vfs.NewDelegationToken(tok.Identifier, tok.Password, tok.Kind, tok.Service, &token{h: h, tok: tok}), nil
}

// Renew renews the token at the NameNode and returns when it now
// expires: a token not renewed lapses after the NameNode's renew interval
// (dfs.namenode.delegation.token.renew-interval, a day by default), and
// none can be renewed past its maximum lifetime (a week by default).
func (t *token) Renew(ctx context.Context) (time.Time, error) {
	var exp time.Time
	err := t.h.activeNameNode(ctx, func(c *hadooprpc.Conn) error {
		var err error
		exp, err = c.RenewDelegationToken(ctx, t.tok)
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("vfs: renewing the delegation token of %s: %w", t.h.name, err)
	}
	return exp, nil
}

// Cancel cancels the token at the NameNode: nobody can use it after.
func (t *token) Cancel(ctx context.Context) error {
	err := t.h.activeNameNode(ctx, func(c *hadooprpc.Conn) error {
		return c.CancelDelegationToken(ctx, t.tok)
	})
	if err != nil {
		return fmt.Errorf("vfs: cancelling the delegation token of %s: %w", t.h.name, err)
	}
	return nil
}

// standby is the exception a standby NameNode answers every client call
// with.
const standby = "org.apache.hadoop.ipc.StandbyException"

// activeNameNode runs call on a fresh connection to each NameNode in turn
// until one that is not a standby answers.
func (h *FS) activeNameNode(ctx context.Context, call func(*hadooprpc.Conn) error) error {
	var errs []error
	for _, addr := range h.addrs {
		err := h.callNameNode(ctx, addr, call)
		var re *hadooprpc.RemoteError
		if err == nil || !errors.As(err, &re) || re.Class != standby {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// callNameNode dials the NameNode at addr as the login and runs call.
func (h *FS) callNameNode(ctx context.Context, addr string, call func(*hadooprpc.Conn) error) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("NameNode address %q: %w", addr, err)
	}
	// _HOST is the canonical name of the address, as Hadoop expands it.
	spn := strings.ReplaceAll(h.spn, "_HOST", canonicalHost(host))
	c, err := hadooprpc.Dial(ctx, hadooprpc.Options{Addr: addr, Login: h.login.Client, Principal: h.login.Principal, SPN: spn, Protection: h.rpcProtection})
	if err != nil {
		return err
	}
	defer c.Close()
	return call(c)
}

// tokenService is the service Hadoop's DFSClient gives the delegation
// tokens of the file system at authority: "ha-hdfs:<nameservice>" for a
// logical nameservice, else the NameNode's address, by IP unless
// hadoop.security.token.service.use_ip is false (SecurityUtil's
// buildTokenService).
func tokenService(conf hadoopconf.HadoopConf, authority string, addrs []string) string {
	if _, ha := conf["dfs.ha.namenodes."+authority]; ha && !strings.Contains(authority, ":") {
		return "ha-hdfs:" + authority
	}
	if len(addrs) == 0 {
		return authority
	}
	host, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		return addrs[0]
	}
	if strings.EqualFold(conf["hadoop.security.token.service.use_ip"], "false") {
		return net.JoinHostPort(strings.ToLower(host), port)
	}
	if ips, err := net.LookupHost(host); err == nil && len(ips) > 0 {
		host = ips[0]
	}
	return net.JoinHostPort(host, port)
}
