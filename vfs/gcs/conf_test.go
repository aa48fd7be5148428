package gcs_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/vfs"
)

// jwtClaim returns claim of a JWT's payload ("" if tok is not one).
func jwtClaim(tok, claim string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	s, _ := m[claim].(string)
	return s
}

// TestGCSCredentials opens the emulator's bucket through gs:// URLs whose
// credentials come the two ways rekey takes them from a Hadoop client's
// setup, and checks who signed the requests the emulator received (a
// loopback proxy in front of it records the Authorization headers; the
// emulator itself checks no credentials): with core-site.xml naming only
// the API root (fs.gs.storage.root.url), the library's application
// default credentials, here GOOGLE_APPLICATION_CREDENTIALS's service
// account; with fs.gs.auth.service.account.json.keyfile, that key file's
// account, winning over GOOGLE_APPLICATION_CREDENTIALS. The service
// accounts are made up, with keys made here; their token_uri is a loopback
// token endpoint that answers an access token naming the account whose
// signed assertion it received (the library may also sign its own token,
// a JWT naming the account: either way the account is checked). Real
// Google credentials and Google's token service are not reachable here.
func TestGCSCredentials(t *testing.T) {
	g := s3test.StartGCS(t)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		iss := jwtClaim(r.PostForm.Get("assertion"), "iss")
		if iss == "" {
			http.Error(w, "no signed assertion", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "token-of-" + iss, "token_type": "Bearer", "expires_in": 3600})
	}))
	defer tokens.Close()
	var mu sync.Mutex
	var auths []string
	u, _ := url.Parse(g.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	// signer is the account a request's Authorization header names.
	signer := func(h string) string {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return ""
		}
		if s, ok := strings.CutPrefix(tok, "token-of-"); ok {
			return s
		}
		if s := jwtClaim(tok, "iss"); s != "" {
			return s
		}
		return ""
	}
	dir := t.TempDir()
	account := func(name string) (email, file string) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		email = name + "@rekey-test.iam.gserviceaccount.com"
		b, _ := json.Marshal(map[string]string{
			"type": "service_account", "project_id": "rekey-test", "private_key_id": name,
			"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
			"client_email": email, "client_id": "1", "token_uri": tokens.URL + "/token",
		})
		file = filepath.Join(dir, name+".json")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return email, file
	}
	adcEmail, adcFile := account("adc")
	keyEmail, keyFile := account("keyfile")
	conf := func(t *testing.T, extra string) {
		d := t.TempDir()
		site := `<?xml version="1.0"?>
<configuration>
  <property><name>fs.gs.storage.root.url</name><value>` + front.URL + `/</value></property>
` + extra + `</configuration>
`
		if err := os.WriteFile(filepath.Join(d, "core-site.xml"), []byte(site), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("HADOOP_CONF_DIR", d)
		t.Setenv("STORAGE_EMULATOR_HOST", "")
		// No look-ups of a metadata server or of gcloud's files: nothing
		// leaves the loopback, nothing outside the test is read.
		t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
		t.Setenv("CLOUDSDK_CONFIG", d)
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", adcFile)
	}
	opens := func(t *testing.T, want string) {
		t.Helper()
		mu.Lock()
		auths = nil
		mu.Unlock()
		loc, err := vfs.Open("gs://" + g.Bucket + "/creds")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer loc.Close()
		s3test.WriteObject(t, loc.FS, "/creds/obj", []byte("signed"))
		if got, err := vfs.ReadFile(loc.FS, "/creds/obj"); err != nil || string(got) != "signed" {
			t.Fatalf("read back %q, %v", got, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(auths) == 0 {
			t.Fatal("no request reached the emulator")
		}
		for _, h := range auths {
			if s := signer(h); s != want {
				t.Fatalf("a request signed as %q (Authorization %.40q), want %s", s, h, want)
			}
		}
		how := "a self-signed JWT"
		if strings.HasPrefix(auths[0], "Bearer token-of-") {
			how = "an access token from the account's token_uri"
		}
		t.Logf("%d requests, each with %s of %s", len(auths), how, want)
	}
	t.Run("ApplicationDefault", func(t *testing.T) {
		conf(t, "")
		opens(t, adcEmail)
	})
	t.Run("KeyFileWinsOverApplicationDefault", func(t *testing.T) {
		conf(t, `  <property><name>fs.gs.auth.type</name><value>SERVICE_ACCOUNT_JSON_KEYFILE</value></property>
  <property><name>fs.gs.auth.service.account.json.keyfile</name><value>`+keyFile+`</value></property>
`)
		opens(t, keyEmail)
	})
}
