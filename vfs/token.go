package vfs

import (
	"context"
	"time"
)

// TokenIssuer is a file system that issues delegation tokens (HDFS with
// Kerberos: the hdfs backend's FS). Callers find it with a type
// assertion, so they need not import the backend.
type TokenIssuer interface {
	// DelegationToken asks for a token that renewer may renew ("" means
	// the logged-in principal itself); nil and no error when the file
	// system does not use Kerberos.
	DelegationToken(ctx context.Context, renewer string) (*DelegationToken, error)
}

// TokenKeeper renews and cancels a delegation token at the service that
// issued it; the backend that issued the token supplies it.
type TokenKeeper interface {
	// Renew renews the token and returns when it now expires.
	Renew(ctx context.Context) (time.Time, error)
	// Cancel cancels the token: nobody can use it after.
	Cancel(ctx context.Context) error
	// String describes the token without its secrets.
	String() string
}

// DelegationToken is a delegation token of a file system's logged-in
// principal: whoever presents it to the service acts as that principal.
// A secure HBase region server takes one with a bulk load and moves the
// caller's files with it. Identifier and Password are secrets: String
// (and %v) leaves them out; never log or print them.
type DelegationToken struct {
	Identifier []byte
	Password   []byte
	Kind       string
	// Service is the name Hadoop's clients select the token by: the
	// NameNode's "ip:port", or "ha-hdfs:<nameservice>" for an HA pair.
	Service string

	keeper TokenKeeper
}

// NewDelegationToken returns the token with its secrets and names, renewed
// and cancelled through k.
func NewDelegationToken(identifier, password []byte, kind, service string, k TokenKeeper) *DelegationToken {
	return &DelegationToken{Identifier: identifier, Password: password, Kind: kind, Service: service, keeper: k}
}

// String describes the token without its secrets.
func (t *DelegationToken) String() string {
	if t == nil {
		return "no delegation token"
	}
	return t.keeper.String()
}

// GoString is String: %#v must not print the secrets either.
func (t *DelegationToken) GoString() string { return t.String() }

// Renew renews the token and returns when it now expires: a token not
// renewed lapses after the service's renew interval (a day by default on
// HDFS), and none can be renewed past its maximum lifetime (a week).
func (t *DelegationToken) Renew(ctx context.Context) (time.Time, error) {
	return t.keeper.Renew(ctx)
}

// Cancel cancels the token: nobody can use it after.
func (t *DelegationToken) Cancel(ctx context.Context) error { return t.keeper.Cancel(ctx) }
