package s3

import (
	"errors"
	"strings"
	"testing"
)

// TestNoCredentialsSaysWhereItLooked: with no keys in the options and
// none in the environment, the shared file or the instance's metadata,
// the dial fails with ErrNoCredentials naming every place rekey looked
// and how to give one, where it printed the SDK's chain and a metadata
// service warning.
func TestNoCredentialsSaysWhereItLooked(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/none")
	t.Setenv("AWS_CONFIG_FILE", dir+"/none")
	// No instance here: the metadata service is switched off rather than
	// waited for.
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	_, err := DialWith("somebucket", Options{Endpoint: "http://127.0.0.1:1", PathStyle: true})
	if !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("dial with no credentials: %v, want ErrNoCredentials", err)
	}
	for _, want := range []string{"fs.s3a.access.key", "AWS_ACCESS_KEY_ID", "~/.aws/credentials", "instance's role", "somebucket"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
}
