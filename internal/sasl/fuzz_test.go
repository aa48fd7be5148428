package sasl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/types"
)

// fuzzKey is fixed so that the corpus stays meaningful between runs.
var fuzzKey = types.EncryptionKey{KeyType: etypeID.AES128_CTS_HMAC_SHA1_96, KeyValue: []byte("0123456789abcdef")}

// FuzzUnwrap feeds arbitrary tokens to an integrity and a privacy layer.
// The property: no panic, and either an error wrapping ErrBadToken or a
// payload no longer than the token.
func FuzzUnwrap(f *testing.F) {
	for _, seal := range []bool{false, true} {
		_, acc := pair(f, fuzzKey, false, seal)
		for _, p := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("ab"), 40)} {
			tok, err := acc.Wrap(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(tok)
			f.Add(rotate(tok, 5))
		}
	}
	f.Add([]byte{0x05, 0x04, 0x01, 0xFF, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, tok []byte) {
		for _, seal := range []bool{false, true} {
			ini, err := newLayer(fuzzKey, true, false, seal, 0)
			if err != nil {
				t.Fatal(err)
			}
			payload, err := ini.Unwrap(tok)
			if err != nil {
				if !errors.Is(err, ErrBadToken) {
					t.Fatalf("error not wrapping ErrBadToken: %v", err)
				}
				continue
			}
			if len(payload) > len(tok) {
				t.Fatalf("%d-byte payload out of a %d-byte token", len(payload), len(tok))
			}
		}
	})
}
