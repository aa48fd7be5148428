package hadooptoken

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The kinds of the tokens rekey uses.
const (
	// HDFSTokenKind is the kind of an HDFS delegation token.
	HDFSTokenKind = "HDFS_DELEGATION_TOKEN"
	// HBaseTokenKind is the kind of an HBase authentication token, whose
	// service is the cluster's id.
	HBaseTokenKind = "HBASE_AUTH_TOKEN"
)

// ErrMalformed is matched by the error of a token or token identifier
// that does not decode.
var ErrMalformed = errors.New("hadooptoken: malformed token")

// Token is a Hadoop security token (Security.proto's TokenProto). The
// identifier and password are secrets: String leaves them out.
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	// Service names the server the token is for, as Hadoop's clients
	// select tokens: "ip:port" of a NameNode, or "ha-hdfs:<nameservice>";
	// an HBase cluster's id. A NameNode leaves it empty in the token it
	// issues; the caller sets it.
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

// EncodeProto encodes t as a TokenProto: identifier 1, password 2, kind
// 3, service 4 (all required).
func (t *Token) EncodeProto() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, t.Identifier)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, t.Password)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, t.Kind)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendString(b, t.Service)
}

// DecodeProto decodes a TokenProto. Its errors never quote the bytes.
func DecodeProto(b []byte) (*Token, error) {
	t := &Token{}
	seen := 0
	err := Fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
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

// Fields calls f for each varint and length-delimited field of the
// protobuf message b, in order, and skips the others.
func Fields(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.VarintType || typ == protowire.BytesType {
			if err := f(num, typ, v, raw); err != nil {
				return err
			}
		}
	}
	return nil
}
