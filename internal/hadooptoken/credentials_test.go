package hadooptoken

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// The files below are built by hand from the two layouts Hadoop's
// Credentials writes (see readCredentialsProto and
// readCredentialsWritable); TestSecureTokenFileAuthenticates reads files
// Hadoop itself wrote.

// text is a Writable Text or byte array: a VInt length (one byte for the
// short values used here) and the bytes.
func text(s string) []byte { return append([]byte{byte(len(s))}, s...) }

func writableFile() []byte {
	b := append([]byte("HDTS"), 0)
	b = append(b, 1) // one token
	b = append(b, text("127.0.0.1:8020")...)
	b = append(b, text("ident")...)
	b = append(b, text("secret-pw")...)
	b = append(b, text(HDFSTokenKind)...)
	b = append(b, text("127.0.0.1:8020")...)
	b = append(b, 1) // one secret key
	b = append(b, text("key")...)
	b = append(b, text("value")...)
	return b
}

func protoFile() []byte {
	tok := (&Token{Identifier: []byte("ident"), Password: []byte("secret-pw"), Kind: HDFSTokenKind, Service: "ha-hdfs:ns1"}).EncodeProto()
	var kv []byte
	kv = protowire.AppendTag(kv, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "ha-hdfs:ns1")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendBytes(kv, tok)
	var sec []byte
	sec = protowire.AppendTag(sec, 1, protowire.BytesType)
	sec = protowire.AppendString(sec, "key")
	sec = protowire.AppendTag(sec, 3, protowire.BytesType)
	sec = protowire.AppendBytes(sec, []byte("value"))
	var msg []byte
	msg = protowire.AppendTag(msg, 1, protowire.BytesType)
	msg = protowire.AppendBytes(msg, kv)
	msg = protowire.AppendTag(msg, 2, protowire.BytesType)
	msg = protowire.AppendBytes(msg, sec)
	return protowire.AppendBytes(append([]byte("HDTS"), 1), msg)
}

func TestReadCredentialsBothVersions(t *testing.T) {
	for _, c := range []struct {
		name    string
		file    []byte
		service string
	}{{"writable", writableFile(), "127.0.0.1:8020"}, {"proto", protoFile(), "ha-hdfs:ns1"}} {
		creds, err := ReadCredentials(bytes.NewReader(c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(creds.Tokens) != 1 {
			t.Fatalf("%s: %d tokens", c.name, len(creds.Tokens))
		}
		tok := creds.ForService(HDFSTokenKind, c.service)
		if tok == nil || string(tok.Identifier) != "ident" || string(tok.Password) != "secret-pw" || creds.Tokens[0].Alias != c.service {
			t.Fatalf("%s: %+v", c.name, creds.Tokens[0])
		}
		if creds.ForService(HDFSTokenKind, "other:1") != nil || creds.ForService("HBASE_AUTH_TOKEN", c.service) != nil {
			t.Fatalf("%s: a token for another service or kind was returned", c.name)
		}
	}
}

// TestReadCredentialsDamaged: a file cut anywhere, with another magic or
// version, or with bytes after its end is refused, never read as fewer
// tokens.
func TestReadCredentialsDamaged(t *testing.T) {
	for _, file := range [][]byte{writableFile(), protoFile()} {
		for n := 0; n < len(file); n++ {
			if _, err := ReadCredentials(bytes.NewReader(file[:n])); !errors.Is(err, ErrCredentials) {
				t.Fatalf("version %d cut to %d of %d bytes: %v", file[4], n, len(file), err)
			}
		}
		if _, err := ReadCredentials(bytes.NewReader(append(append([]byte(nil), file...), 0))); !errors.Is(err, ErrCredentials) {
			t.Fatalf("version %d with a byte after its end: %v", file[4], err)
		}
	}
	for _, b := range [][]byte{[]byte("HDTX\x01"), []byte("HDTS\x02\x00"), append([]byte("HDTS\x00"), 100)} {
		if _, err := ReadCredentials(bytes.NewReader(b)); !errors.Is(err, ErrCredentials) {
			t.Fatalf("%q: %v", b, err)
		}
	}
}

func TestParseDelegationID(t *testing.T) {
	id := []byte{0}
	id = append(id, text("rekey@EXAMPLE.COM")...)
	id = append(id, text("rekey")...)
	id = append(id, text("")...)
	// Issue and maximum dates: VLongs of 8 magnitude bytes after a marker
	// (-120 for 8 positive bytes), then the sequence number and key id.
	id = append(id, 0x88, 0, 0, 1, 0x9a, 0, 0, 0, 1)
	id = append(id, 0x88, 0, 0, 1, 0x9b, 0, 0, 0, 2)
	id = append(id, 7, 3)
	d, err := ParseDelegationID(id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Owner != "rekey@EXAMPLE.COM" || d.Renewer != "rekey" || d.RealUser != "" || d.IssueMillis != 0x19a00000001 || d.MaxMillis != 0x19b00000002 || d.Sequence != 7 || d.MasterKey != 3 {
		t.Fatalf("%+v", d)
	}
	for n := 0; n < len(id); n++ {
		if _, err := ParseDelegationID(id[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("identifier cut to %d bytes: %v", n, err)
		}
	}
}

func FuzzReadCredentials(f *testing.F) {
	f.Add(writableFile())
	f.Add(protoFile())
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ReadCredentials(bytes.NewReader(b))
		if err == nil && c == nil {
			t.Fatal("no error and no credentials")
		}
	})
}
