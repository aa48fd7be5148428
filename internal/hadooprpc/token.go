package hadooprpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// ClientProtocol is the protocol name of the NameNode's client RPC
// (HdfsConstants.CLIENT_NAMENODE_PROTOCOL_NAME), version 1.
const (
	ClientProtocol        = "org.apache.hadoop.hdfs.protocol.ClientProtocol"
	clientProtocolVersion = 1
)

// HDFSTokenKind is the kind of an HDFS delegation token.
const HDFSTokenKind = "HDFS_DELEGATION_TOKEN"

// Token is a Hadoop security token (Security.proto's TokenProto). The
// identifier and password are secrets: String leaves them out.
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	// Service names the server the token is for, as Hadoop's clients
	// select tokens: "ip:port" of a NameNode, or "ha-hdfs:<nameservice>".
	// The NameNode leaves it empty; the caller sets it.
	Service string
}

// String describes the token without its secrets.
func (t *Token) String() string {
	if t == nil {
		return "no token"
	}
	return fmt.Sprintf("%s token for %s (%d-byte identifier, password withheld)", t.Kind, t.Service, len(t.Identifier))
}

// GoString is String: %#v must not print the secrets either.
func (t *Token) GoString() string { return t.String() }

// encode encodes t as a TokenProto: identifier 1, password 2, kind 3,
// service 4 (all required).
func (t *Token) encode() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, t.Identifier)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, t.Password)
	b = appendString(b, 3, t.Kind)
	return appendString(b, 4, t.Service)
}

// decodeToken decodes a TokenProto. Its errors never quote the bytes.
func decodeToken(b []byte) (*Token, error) {
	t := &Token{}
	seen := 0
	err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			t.Identifier = append([]byte(nil), raw...)
		case 2:
			t.Password = append([]byte(nil), raw...)
		case 3:
			t.Kind = string(raw)
		case 4:
			t.Service = string(raw)
		default:
			return nil
		}
		seen |= 1 << num
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: TokenProto: %v", ErrMalformed, err)
	}
	if seen&(1<<1|1<<2|1<<3) != 1<<1|1<<2|1<<3 {
		return nil, fmt.Errorf("%w: TokenProto lacks its identifier, password or kind", ErrMalformed)
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
	req = protowire.AppendBytes(req, t.encode())
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
	req = protowire.AppendBytes(req, t.encode())
	if _, err := c.Call(ctx, "cancelDelegationToken", req); err != nil {
		if re, ok := err.(*RemoteError); ok {
			return fmt.Errorf("hadooprpc: cancelDelegationToken at %s: the NameNode answered %s", c.addr, re.Class)
		}
		return fmt.Errorf("hadooprpc: cancelDelegationToken at %s: %w", c.addr, err)
	}
	return nil
}
