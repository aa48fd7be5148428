package hadooprpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/internal/hadooptoken"
)

// ClientProtocol is the protocol name of the NameNode's client RPC
// (HdfsConstants.CLIENT_NAMENODE_PROTOCOL_NAME), version 1.
const (
	ClientProtocol        = "org.apache.hadoop.hdfs.protocol.ClientProtocol"
	clientProtocolVersion = 1
)

// HDFSTokenKind is the kind of an HDFS delegation token.
const HDFSTokenKind = hadooptoken.HDFSTokenKind

// Token is a Hadoop security token (hadooptoken.Token).
type Token = hadooptoken.Token

// decodeToken decodes a TokenProto.
func decodeToken(b []byte) (*Token, error) {
	t, err := hadooptoken.DecodeProto(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return t, nil
}

// GetDelegationToken asks the NameNode for a delegation token of the
// logged-in principal that renewer may renew
// (ClientNamenodeProtocol.getDelegationToken). The token's Service is left
// as the NameNode sent it (empty); set it before handing the token on.
func (c *Conn) GetDelegationToken(ctx context.Context, renewer string) (*Token, error) {
	req := appendString(nil, 1, renewer) // GetDelegationTokenRequestProto.renewer
	resp, err := c.Call(ctx, "getDelegationToken", req)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: getDelegationToken from %s: %w", c.addr, err)
	}
	return decodeTokenResponse(resp)
}

// decodeTokenResponse reads a GetDelegationTokenResponseProto (token 1,
// optional: absent when the NameNode runs without security).
func decodeTokenResponse(resp []byte) (*Token, error) {
	var tok []byte
	found := false
	err := fields(resp, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if num == 1 && typ == protowire.BytesType {
			tok, found = raw, true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: GetDelegationTokenResponseProto: %v", ErrMalformed, err)
	}
	if !found {
		return nil, fmt.Errorf("hadooprpc: the NameNode issued no delegation token (it issues them only with hadoop.security.authentication=kerberos)")
	}
	return decodeToken(tok)
}

// RenewDelegationToken renews t at the NameNode
// (ClientNamenodeProtocol.renewDelegationToken) and returns when it now
// expires. Only the token's renewer may renew it, and never past its
// maximum lifetime (dfs.namenode.delegation.token.max-lifetime, a week by
// default): the NameNode refuses then, and a new token is needed.
func (c *Conn) RenewDelegationToken(ctx context.Context, t *Token) (time.Time, error) {
	var req []byte // RenewDelegationTokenRequestProto.token
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, t.EncodeProto())
	resp, err := c.Call(ctx, "renewDelegationToken", req)
	if err != nil {
		if re, ok := err.(*RemoteError); ok {
			return time.Time{}, fmt.Errorf("hadooprpc: renewDelegationToken at %s: the NameNode answered %s", c.addr, re.Class)
		}
		return time.Time{}, fmt.Errorf("hadooprpc: renewDelegationToken at %s: %w", c.addr, err)
	}
	return decodeRenewResponse(resp)
}

// decodeRenewResponse reads a RenewDelegationTokenResponseProto: the new
// expiry time in milliseconds since the epoch, field 1 (required).
func decodeRenewResponse(resp []byte) (time.Time, error) {
	var ms uint64
	found := false
	err := fields(resp, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
		if num == 1 && typ == protowire.VarintType {
			ms, found = v, true
		}
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: RenewDelegationTokenResponseProto: %v", ErrMalformed, err)
	}
	if !found {
		return time.Time{}, fmt.Errorf("%w: RenewDelegationTokenResponseProto has no newExpiryTime", ErrMalformed)
	}
	return time.UnixMilli(int64(ms)), nil
}

// CancelDelegationToken cancels t at the NameNode
// (ClientNamenodeProtocol.cancelDelegationToken): nobody can use it after.
// The error names the exception class only: the NameNode's message quotes
// the token's identifier.
func (c *Conn) CancelDelegationToken(ctx context.Context, t *Token) error {
	var req []byte // CancelDelegationTokenRequestProto.token
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, t.EncodeProto())
	if _, err := c.Call(ctx, "cancelDelegationToken", req); err != nil {
		if re, ok := err.(*RemoteError); ok {
			return fmt.Errorf("hadooprpc: cancelDelegationToken at %s: the NameNode answered %s", c.addr, re.Class)
		}
		return fmt.Errorf("hadooprpc: cancelDelegationToken at %s: %w", c.addr, err)
	}
	return nil
}
