package hadooprpc

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2/hadoopconf"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/internal/hadooptoken"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// getFileInfo asks the NameNode for the status of path and reports
// whether it exists (GetFileInfoRequestProto src 1; the response's fs 1
// is present for an existing path).
func getFileInfo(t *testing.T, c *Conn, path string) (bool, error) {
	t.Helper()
	resp, err := c.Call(context.Background(), "getFileInfo", appendString(nil, 1, path))
	if err != nil {
		return false, err
	}
	found := false
	err = fields(resp, func(num protowire.Number, typ protowire.Type, _ uint64, _ []byte) error {
		if num == 1 && typ == protowire.BytesType {
			found = true
		}
		return nil
	})
	return found, err
}

// TestSecureTokenFileAuthenticates: Hadoop's own Credentials (the
// oracle, logged in as rekey's principal) writes the HDFS delegation
// tokens of the secure cluster into a token storage file, in the current
// format and in the legacy one, as a YARN client does for its containers
// (HADOOP_TOKEN_FILE_LOCATION). This package reads back every token with
// the alias, kind, service and owner Hadoop printed; a connection with no
// Kerberos login authenticates to the NameNode with the token (TOKEN,
// DIGEST-MD5, at the cluster's hadoop.rpc.protection) and its calls run as
// the token's owner: a file status call is answered, and a delegation
// token call is refused, as the NameNode refuses it to every
// token-authenticated caller. Once Hadoop cancels the token, the NameNode
// refuses the login with it.
func TestSecureTokenFileAuthenticates(t *testing.T) {
	s := testenv.RequireSecure(t)
	conf, err := hadoopconf.Load(s.Secure.HadoopConfDir)
	if err != nil {
		t.Fatal(err)
	}
	protection := conf["hadoop.rpc.protection"]
	as := []string{"ORACLE_PRINCIPAL=" + s.Secure.ClientPrincipal, "ORACLE_KEYTAB=" + s.Secure.ClientKeytab}
	for _, format := range []string{"proto", "legacy"} {
		t.Run(format, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "container_tokens")
			out := strings.TrimSpace(string(testenv.SecureOracle(t, as, "write-credentials", file, format, "rekey")))
			creds, err := hadooptoken.ReadCredentialsFile(file)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(out, "\n")
			if len(creds.Tokens) != len(lines) {
				t.Fatalf("read %d tokens, Hadoop wrote %d:\n%s", len(creds.Tokens), len(lines), out)
			}
			var tok *Token
			for i, line := range lines {
				f := strings.Split(line, "\t")
				if len(f) != 4 {
					t.Fatalf("oracle line %q", line)
				}
				got := creds.Tokens[i]
				if got.Alias != f[0] || got.Token.Kind != f[1] || got.Token.Service != f[2] {
					t.Fatalf("token %d: alias %q, kind %q, service %q; Hadoop wrote %q", i, got.Alias, got.Token.Kind, got.Token.Service, line)
				}
				id, err := hadooptoken.ParseDelegationID(got.Token.Identifier)
				if err != nil {
					t.Fatal(err)
				}
				if id.Owner != f[3] || id.Renewer != "rekey" || id.MaxMillis <= id.IssueMillis {
					t.Fatalf("token %d identifier %+v; Hadoop says the owner is %q, renewer rekey", i, id, f[3])
				}
				if got.Token.Kind == HDFSTokenKind {
					tok = got.Token
				}
			}
			if tok == nil || creds.ForService(HDFSTokenKind, tok.Service) != tok {
				t.Fatalf("no HDFS delegation token among %q", out)
			}
			t.Logf("%s file: %s", format, tok)

			c, err := Dial(context.Background(), Options{Addr: s.NameNode, Token: tok, Protection: protection})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if (protection == "" || protection == "authentication") != (c.layer == nil) {
				t.Fatalf("hadoop.rpc.protection %q, security layer on: %v", protection, c.layer != nil)
			}
			if found, err := getFileInfo(t, c, "/"); err != nil || !found {
				t.Fatalf("getFileInfo / with the token: %v, found %v", err, found)
			}
			// Only a Kerberos (or web) login may get a token: this
			// connection is the token's, not a login's.
			_, err = c.GetDelegationToken(context.Background(), "rekey")
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "kerberos") {
				t.Fatalf("a delegation token call on a token connection: %v, want refused as not Kerberos", err)
			}

			testenv.SecureOracle(t, as, "cancel-token", file)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = Dial(ctx, Options{Addr: s.NameNode, Token: tok, Protection: protection})
			if err == nil {
				t.Fatal("the NameNode took a cancelled token")
			}
			if strings.Contains(err.Error(), string(tok.Password)) {
				t.Fatalf("the error quotes the token's password: %v", err)
			}
			t.Logf("with the cancelled token: %v", err)
		})
	}
}
