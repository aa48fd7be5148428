package hadooptoken

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/internal/writable"
)

// TokenFileEnv names the environment variable through which YARN (and
// Hadoop's other launchers) hand a process its tokens: the path of a
// token storage file the client wrote at submit time.
const TokenFileEnv = "HADOOP_TOKEN_FILE_LOCATION"

// ErrCredentials is matched by the error of a token storage file that is
// not one: another magic, an unknown version, a record cut short.
var ErrCredentials = errors.New("hadooptoken: not a Hadoop token storage file")

// Credentials are the tokens of a Hadoop token storage file, by alias.
// Secret keys the file may also hold (opaque bytes other frameworks pass
// along) are not kept.
type Credentials struct {
	// Tokens in the file's order; an alias names one token.
	Tokens []AliasedToken
}

// AliasedToken is one token of a token storage file and the alias it is
// stored under (for HDFS delegation tokens, usually the service).
type AliasedToken struct {
	Alias string
	Token *Token
}

// ForService returns the token of kind for service, or nil. Hadoop's
// clients select a token the same way: by kind and by the service the
// server they dial is known as.
func (c *Credentials) ForService(kind, service string) *Token {
	for _, t := range c.Tokens {
		if t.Token.Kind == kind && t.Token.Service == service {
			return t.Token
		}
	}
	return nil
}

// ReadCredentialsFile reads the token storage file at path.
func ReadCredentialsFile(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hadooptoken: token file: %w", err)
	}
	defer f.Close()
	c, err := ReadCredentials(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// tokenStorageMagic opens every token storage file; one version byte
// follows: 1 for a length-delimited CredentialsProto (Hadoop 3's default),
// 0 for the older Writable form.
var tokenStorageMagic = []byte("HDTS")

const (
	tokenStorageWritable = 0
	tokenStorageProto    = 1
	// maxCredentials bounds the file: a few tokens of a few hundred bytes
	// each is what launchers write.
	maxCredentials = 16 << 20
)

// ReadCredentials reads a token storage file's bytes (Hadoop's
// Credentials.writeTokenStorageToStream, either version). Its errors never
// quote token bytes.
func ReadCredentials(r io.Reader) (*Credentials, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxCredentials+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCredentials {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrCredentials, maxCredentials)
	}
	if len(b) < len(tokenStorageMagic)+1 || !bytes.Equal(b[:len(tokenStorageMagic)], tokenStorageMagic) {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrCredentials, tokenStorageMagic)
	}
	version, body := b[len(tokenStorageMagic)], b[len(tokenStorageMagic)+1:]
	switch version {
	case tokenStorageProto:
		return readCredentialsProto(body)
	case tokenStorageWritable:
		return readCredentialsWritable(body)
	}
	return nil, fmt.Errorf("%w: version %d (known: 0 and 1)", ErrCredentials, version)
}

// readCredentialsProto reads a length-delimited CredentialsProto: tokens
// 1 and secrets 2, each a CredentialsKVProto (alias 1, token 2, secret 3).
func readCredentialsProto(b []byte) (*Credentials, error) {
	msg, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, fmt.Errorf("%w: the CredentialsProto is cut short", ErrCredentials)
	}
	if n != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the CredentialsProto", ErrCredentials, len(b)-n)
	}
	c := &Credentials{}
	err := Fields(msg, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil // secrets, and fields of later versions
		}
		var alias string
		var tok *Token
		err := Fields(raw, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case 1:
				alias = string(raw)
			case 2:
				t, err := DecodeProto(raw)
				if err != nil {
					return err
				}
				tok = t
			}
			return nil
		})
		if err != nil {
			return err
		}
		if tok == nil {
			return fmt.Errorf("the entry %q has no token", alias)
		}
		c.Tokens = append(c.Tokens, AliasedToken{Alias: alias, Token: tok})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCredentials, err)
	}
	return c, nil
}

// readCredentialsWritable reads the Writable form: a VInt count of
// tokens, each a Text alias and a Token (VInt-prefixed identifier and
// password, Text kind and service); then a VInt count of secrets, each a
// Text alias and VInt-prefixed bytes.
func readCredentialsWritable(b []byte) (*Credentials, error) {
	d := &writableReader{b: b}
	n := d.count("tokens")
	c := &Credentials{}
	for i := 0; i < n && d.err == nil; i++ {
		alias := string(d.bytes("an alias"))
		t := &Token{}
		t.Identifier = d.bytes("a token identifier")
		t.Password = d.bytes("a token password")
		t.Kind = string(d.bytes("a token kind"))
		t.Service = string(d.bytes("a token service"))
		c.Tokens = append(c.Tokens, AliasedToken{Alias: alias, Token: t})
	}
	secrets := d.count("secrets")
	for i := 0; i < secrets && d.err == nil; i++ {
		d.bytes("a secret's alias")
		d.bytes("a secret")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCredentials, d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last secret", ErrCredentials, len(d.b))
	}
	return c, nil
}

// writableReader reads Writable fields from b, keeping the first error.
type writableReader struct {
	b   []byte
	err error
}

// vint reads one VInt.
func (d *writableReader) vint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n, err := writable.ReadVLong(d.b)
	if err != nil {
		d.err = fmt.Errorf("%s: %w", what, err)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a VInt count of entries, bounded by the bytes left (each
// entry takes at least one).
func (d *writableReader) count(what string) int {
	n := d.vint("the count of " + what)
	if d.err == nil && (n < 0 || n > int64(len(d.b))) {
		d.err = fmt.Errorf("the count of %s is %d, with %d bytes left", what, n, len(d.b))
	}
	return int(n)
}

// bytes reads a VInt length and that many bytes (a Text, or a byte array
// of a Token).
func (d *writableReader) bytes(what string) []byte {
	n := d.vint("the length of " + what)
	if d.err != nil {
		return nil
	}
	if n < 0 || n > int64(len(d.b)) {
		d.err = fmt.Errorf("%s of %d bytes, with %d bytes left", what, n, len(d.b))
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

// DelegationID is what a delegation token's identifier says about
// itself (AbstractDelegationTokenIdentifier's Writable form: a version
// byte 0, then owner, renewer and real user as Text, issue and maximum
// dates as VLong milliseconds, sequence number and master key id as VInt).
type DelegationID struct {
	Owner, Renewer, RealUser string
	IssueMillis, MaxMillis   int64
	Sequence, MasterKey      int64
}

// ParseDelegationID decodes a delegation token's identifier. The owner is
// who the token authenticates as: a connection authenticated with the
// token must name the owner as its user, or the server refuses it.
func ParseDelegationID(id []byte) (*DelegationID, error) {
	if len(id) == 0 || id[0] != 0 {
		return nil, fmt.Errorf("%w: a delegation token identifier of version %v (known: 0)", ErrMalformed, firstByte(id))
	}
	d := &writableReader{b: id[1:]}
	out := &DelegationID{
		Owner:    string(d.bytes("the owner")),
		Renewer:  string(d.bytes("the renewer")),
		RealUser: string(d.bytes("the real user")),
	}
	out.IssueMillis = d.vint("the issue date")
	out.MaxMillis = d.vint("the maximum date")
	out.Sequence = d.vint("the sequence number")
	out.MasterKey = d.vint("the master key id")
	if d.err != nil {
		return nil, fmt.Errorf("%w: delegation token identifier: %v", ErrMalformed, d.err)
	}
	if out.Owner == "" {
		return nil, fmt.Errorf("%w: delegation token identifier without an owner", ErrMalformed)
	}
	return out, nil
}

// firstByte is b's first byte for a message, or "none".
func firstByte(b []byte) any {
	if len(b) == 0 {
		return "none"
	}
	return b[0]
}
