package hdfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/hadooptoken"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// TestSecureTokenFileOnly: a process given no Kerberos login but the
// token storage file a YARN client writes for its containers
// (HADOOP_TOKEN_FILE_LOCATION; here written by Hadoop's own Credentials,
// the oracle, logged in as the cluster's hbase principal) works on the
// kerberized HDFS as the token's owner: it writes a file of several
// blocks' worth through the DataNodes (at the cluster's data transfer
// protection, with the block tokens the NameNode hands out), reads it
// back by positional reads and a stream, lists and removes it. The bulk
// load is handed the file's token itself, which is never cancelled here
// (the ResourceManager renews and cancels it). Once the token is
// cancelled, a new dial fails at once, naming the refusal.
func TestSecureTokenFileOnly(t *testing.T) {
	s := testenv.RequireSecure(t)
	t.Setenv("HADOOP_CONF_DIR", s.Secure.HadoopConfDir)
	file := filepath.Join(t.TempDir(), "container_tokens")
	testenv.SecureOracle(t, nil, "write-credentials", file, "proto", "yarn")
	t.Setenv(hadooptoken.TokenFileEnv, file)

	h, err := DialWith(s.NameNode, Options{NameNodeWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.fileToken == nil || h.login != nil {
		t.Fatalf("dialled with token %v, login %v: not the token file's", h.fileToken, h.login)
	}
	dir := fmt.Sprintf("/user/user/rekey-token-file-%d", time.Now().UnixNano())
	if err := h.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	defer h.RemoveAll(dir)
	data := make([]byte, 700<<10+3)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	w, err := h.Create(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := h.Open(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(data))
	if n, err := f.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt: %d of %d bytes, %v, or other bytes", n, len(data), err)
	}
	st, err := f.(vfs.Streamer).Stream(12345)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(st)
	st.Close()
	if err != nil || !bytes.Equal(all, data[12345:]) {
		t.Fatalf("stream: %d bytes, %v, or other bytes", len(all), err)
	}
	fis, err := h.ReadDir(dir)
	if err != nil || len(fis) != 1 || fis[0].Size() != int64(len(data)) {
		t.Fatalf("ReadDir: %v, %v", fis, err)
	}

	ctx := context.Background()
	dt, err := h.DelegationToken(ctx, "")
	if err != nil || dt == nil || !bytes.Equal(dt.Identifier, h.fileToken.Identifier) {
		t.Fatalf("DelegationToken under a token file: %v, %v; want the file's token", dt, err)
	}
	if _, err := dt.Renew(ctx); err == nil {
		t.Error("the file's token was renewed: that is the ResourceManager's")
	}
	if err := dt.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	// Cancel above must have left the token alone: a new connection
	// still authenticates with it.
	if _, err := h.Stat(dir + "/f"); err != nil {
		t.Fatalf("after the load's Cancel: %v", err)
	}

	testenv.SecureOracle(t, nil, "cancel-token", file)
	begin := time.Now()
	_, err = DialWith(s.NameNode, Options{NameNodeWait: 20 * time.Second})
	if err == nil {
		t.Fatal("dialled with a cancelled token")
	}
	if took := time.Since(begin); took > 15*time.Second {
		t.Errorf("a cancelled token took %v to refuse: it was waited on as an absent NameNode", took)
	}
	if !strings.Contains(err.Error(), "InvalidToken") {
		t.Errorf("the error does not name the refusal: %v", err)
	}
	t.Logf("with the cancelled token: %v", err)
}
