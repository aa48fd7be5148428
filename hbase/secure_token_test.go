package hbase

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/hadooptoken"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestSecureTokenFileClient: a client given no keytab and no ticket
// cache, but the token storage file a YARN container is handed
// (HADOOP_TOKEN_FILE_LOCATION; written by Hadoop's own Credentials with
// the HBase token HBase's own client obtained for the hbase principal),
// picks the token for this cluster by its id and works as the token's
// owner over each protection the servers allow (SASL DIGEST-MD5, with the
// integrity and privacy layers): it creates a table, writes cells whose
// batches span several wrap tokens, and reads them back; the oracle's
// dump of the table holds exactly them. A token whose password was
// altered is refused with an authentication error.
func TestSecureTokenFileClient(t *testing.T) {
	s := testenv.RequireSecure(t)
	file := filepath.Join(t.TempDir(), "container_tokens")
	out := testenv.SecureOracle(t, nil, "write-credentials", file, "proto", "yarn", "--hbase")
	if !strings.Contains(string(out), hadooptoken.HBaseTokenKind) {
		t.Fatalf("the oracle wrote no HBase token:\n%s", out)
	}
	t.Setenv(hadooptoken.TokenFileEnv, file)
	t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(t.TempDir(), "no-cache"))
	noLogin := krb.NewIdentity(krb.Options{Krb5Conf: s.Secure.Krb5Conf})
	for _, q := range allowedQOPs(t, s) {
		t.Run(q.String(), func(t *testing.T) {
			ctx := context.Background()
			c, err := NewClient(Config{ZKQuorum: s.ZKQuorum, ZNodeParent: s.ZNodeParent, OperationTimeout: time.Minute,
				Kerberos: &Kerberos{Identity: noLogin, MasterPrincipal: s.Secure.ServicePattern, RegionServerPrincipal: s.Secure.ServicePattern, Protection: []sasl.QOP{q}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() }) // after tempTable's own cleanup
			if c.cfg.Kerberos.Token == nil || c.cfg.Kerberos.Login != nil {
				t.Fatalf("the client authenticates with token %v, login %v: not the token file's", c.cfg.Kerberos.Token, c.cfg.Kerberos.Login)
			}
			table := tempTable(t, c, "secure_token_"+q.String(), nil, []byte("m"))
			var want []cell.Cell
			for i := 0; i < 200; i++ {
				v := strings.Repeat(fmt.Sprint(i%10), 1+(i*137)%40000)
				want = append(want, put(fmt.Sprintf("%c%03d", 'a'+i%26, i), "q", int64(1000+i), v))
			}
			w := c.NewWriter([]byte(table), WriterConfig{})
			if err := w.Write(ctx, want...); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			testenv.SortCells(want)
			testenv.SameCells(t, "oracle dump after puts with the token over "+q.String(), oracleCells(t, table), want)
			testenv.SameCells(t, "scan with the token over "+q.String(), scanAll(t, c, table, &Scan{MaxVersions: 10}), want)

			bad := *c.cfg.Kerberos.Token
			bad.Password = append([]byte(nil), bad.Password...)
			bad.Password[0] ^= 0xff
			f, err := NewClient(Config{ZKQuorum: s.ZKQuorum, ZNodeParent: s.ZNodeParent, OperationTimeout: 20 * time.Second, Retries: 2,
				Kerberos: &Kerberos{Token: &bad, Protection: []sasl.QOP{q}}})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = f.TableExists(ctx, table)
			var ae *rpc.AuthError
			if !errors.As(err, &ae) {
				t.Fatalf("a call with an altered token: %v, want an authentication error", err)
			}
			t.Logf("with an altered token: %v", err)
		})
	}
}
