package sasl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// testKey returns a fresh random key of an AES type.
func testKey(t testing.TB, et int32) types.EncryptionKey {
	t.Helper()
	e, err := crypto.GetEtype(et)
	if err != nil {
		t.Fatal(err)
	}
	k, err := types.GenerateEncryptionKey(e)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// pair returns the initiator's and the acceptor's layers of one context.
func pair(t testing.TB, key types.EncryptionKey, acceptorSubkey, seal bool) (ini, acc *Layer) {
	t.Helper()
	ini, err := newLayer(key, true, acceptorSubkey, seal, 1000)
	if err != nil {
		t.Fatal(err)
	}
	acc, err = newLayer(key, false, acceptorSubkey, seal, 7)
	if err != nil {
		t.Fatal(err)
	}
	return ini, acc
}

func TestWrapRoundTripBothWays(t *testing.T) {
	for _, et := range []int32{etypeID.AES128_CTS_HMAC_SHA1_96, etypeID.AES256_CTS_HMAC_SHA1_96} {
		for _, seal := range []bool{false, true} {
			for _, sub := range []bool{false, true} {
				ini, acc := pair(t, testKey(t, et), sub, seal)
				for _, n := range []int{0, 1, 15, 16, 17, 1000, 70000} {
					msg := bytes.Repeat([]byte{byte(n), 'x'}, n/2+1)[:n]
					tok, err := ini.Wrap(msg)
					if err != nil {
						t.Fatal(err)
					}
					if seal && n > 8 && bytes.Contains(tok, msg) {
						t.Fatalf("etype %d: sealed token holds the payload in clear", et)
					}
					if !seal && !bytes.Contains(tok, msg) {
						t.Fatalf("etype %d: integrity token does not carry the payload in clear", et)
					}
					got, err := acc.Unwrap(tok)
					if err != nil || !bytes.Equal(got, msg) {
						t.Fatalf("etype %d seal %v sub %v n %d: acceptor unwrap: %v", et, seal, sub, n, err)
					}
					back, err := acc.Wrap(msg)
					if err != nil {
						t.Fatal(err)
					}
					got, err = ini.Unwrap(back)
					if err != nil || !bytes.Equal(got, msg) {
						t.Fatalf("etype %d seal %v sub %v n %d: initiator unwrap: %v", et, seal, sub, n, err)
					}
				}
			}
		}
	}
}

// An unsealed token must be what gokrb5's own (separately written) RFC 4121
// integrity wrap token code builds and checks, both ways.
func TestIntegrityTokensMatchGokrb5(t *testing.T) {
	key := testKey(t, etypeID.AES128_CTS_HMAC_SHA1_96)
	ini, _ := pair(t, key, false, false)
	msg := []byte("connection header and calls")
	tok, err := ini.Wrap(msg)
	if err != nil {
		t.Fatal(err)
	}
	var theirs gssapi.WrapToken
	if err := theirs.Unmarshal(tok, false); err != nil {
		t.Fatal(err)
	}
	if ok, err := theirs.Verify(key, usageInitiatorSeal); !ok {
		t.Fatalf("gokrb5 does not verify our token: %v", err)
	}
	if !bytes.Equal(theirs.Payload, msg) || theirs.SndSeqNum != 1000 {
		t.Fatalf("gokrb5 reads payload %q seq %d", theirs.Payload, theirs.SndSeqNum)
	}
	// An acceptor token built by gokrb5.
	acc := gssapi.WrapToken{Flags: flagFromAcceptor, EC: 12, SndSeqNum: 42, Payload: []byte("response")}
	if err := acc.SetCheckSum(key, usageAcceptorSeal); err != nil {
		t.Fatal(err)
	}
	b, err := acc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ini.Unwrap(b)
	if err != nil || string(got) != "response" {
		t.Fatalf("unwrap of gokrb5's token: %q %v", got, err)
	}
}

// rotate returns tok with its body rotated right by rrc and RRC set, as a
// sender using rotation (Microsoft's SSPI does) would send it.
func rotate(tok []byte, rrc int) []byte {
	out := append([]byte(nil), tok[:tokenHeaderLen]...)
	binary.BigEndian.PutUint16(out[6:8], uint16(rrc))
	body := tok[tokenHeaderLen:]
	r := rrc % len(body)
	out = append(out, body[len(body)-r:]...)
	return append(out, body[:len(body)-r]...)
}

func TestUnwrapUndoesRotation(t *testing.T) {
	for _, seal := range []bool{false, true} {
		ini, acc := pair(t, testKey(t, etypeID.AES256_CTS_HMAC_SHA1_96), false, seal)
		tok, err := acc.Wrap([]byte("rotated payload"))
		if err != nil {
			t.Fatal(err)
		}
		for _, rrc := range []int{1, 12, 28, 60, 1000} {
			got, err := ini.Unwrap(rotate(tok, rrc))
			if err != nil || string(got) != "rotated payload" {
				t.Fatalf("seal %v rrc %d: %q %v", seal, rrc, got, err)
			}
		}
	}
}

func TestUnwrapRefusesDamage(t *testing.T) {
	for _, seal := range []bool{false, true} {
		ini, acc := pair(t, testKey(t, etypeID.AES128_CTS_HMAC_SHA1_96), false, seal)
		tok, err := acc.Wrap([]byte("the payload"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range tok {
			if i == 6 || i == 7 {
				continue // RRC: a changed rotation is checked below
			}
			bad := append([]byte(nil), tok...)
			bad[i] ^= 0x20
			if _, err := ini.Unwrap(bad); !errors.Is(err, ErrBadToken) {
				t.Fatalf("seal %v: byte %d flipped: %v", seal, i, err)
			}
		}
		bad := append([]byte(nil), tok...)
		bad[7] = 3 // claims a rotation that was not done
		if _, err := ini.Unwrap(bad); !errors.Is(err, ErrBadToken) {
			t.Fatalf("seal %v: wrong RRC accepted: %v", seal, err)
		}
		if _, err := ini.Unwrap(tok[:len(tok)-1]); !errors.Is(err, ErrBadToken) {
			t.Fatalf("seal %v: truncated token accepted: %v", seal, err)
		}
		// A token this side sent, reflected back.
		own, _ := ini.Wrap([]byte("mine"))
		if _, err := ini.Unwrap(own); !errors.Is(err, ErrBadToken) {
			t.Fatalf("seal %v: reflected token accepted: %v", seal, err)
		}
	}
}

func TestPrivacyRefusesUnsealedTokens(t *testing.T) {
	key := testKey(t, etypeID.AES128_CTS_HMAC_SHA1_96)
	ini, _ := pair(t, key, false, true)
	_, plainAcc := pair(t, key, false, false)
	tok, _ := plainAcc.Wrap([]byte("in clear"))
	if _, err := ini.Unwrap(tok); err == nil || !strings.Contains(err.Error(), "not sealed") {
		t.Fatalf("unsealed token under privacy: %v", err)
	}
}

func TestWrongKeyIsRefused(t *testing.T) {
	ini, _ := pair(t, testKey(t, etypeID.AES128_CTS_HMAC_SHA1_96), false, true)
	_, other := pair(t, testKey(t, etypeID.AES128_CTS_HMAC_SHA1_96), false, true)
	tok, _ := other.Wrap([]byte("from someone else"))
	if _, err := ini.Unwrap(tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("token under another key: %v", err)
	}
}

func TestOnlyAESKeys(t *testing.T) {
	if _, err := newLayer(types.EncryptionKey{KeyType: etypeID.RC4_HMAC, KeyValue: make([]byte, 16)}, true, false, false, 0); err == nil {
		t.Fatal("RC4 key accepted")
	}
}

func TestParseProtection(t *testing.T) {
	for in, want := range map[string][]QOP{
		"":                          {Authentication},
		"privacy":                   {Privacy},
		"Integrity, authentication": {Integrity, Authentication},
		"auth-conf,auth-int,auth":   {Privacy, Integrity, Authentication},
		"privacy,privacy":           {Privacy},
	} {
		got, err := ParseProtection(in)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%q: %v %v", in, got, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%q: %v", in, got)
			}
		}
	}
	if _, err := ParseProtection("secret"); err == nil {
		t.Fatal("bad value accepted")
	}
}

// kdcless is a Login that mints service tickets with the service's own
// keytab, as a KDC would: the acceptor below checks them with gokrb5's
// service code.
type kdcless struct {
	kt     *keytab.Keytab
	cname  types.PrincipalName
	realm  string
	etype  int32
	issued int
}

func (k *kdcless) GetServiceTicket(spn string) (messages.Ticket, types.EncryptionKey, error) {
	k.issued++
	now := time.Now().UTC()
	sname := types.NewPrincipalName(nametype.KRB_NT_SRV_HST, spn)
	return messages.NewTicket(k.cname, k.realm, sname, k.realm, types.NewKrbFlags(), k.kt, k.etype, 1, now, now, now.Add(time.Hour), now.Add(time.Hour))
}

// acceptor is the server side of the exchange, as far as the tests need
// it: it checks the AP-REQ with gokrb5's service code, answers with an
// AP-REP, offers layers and reads the choice.
type acceptor struct {
	t       *testing.T
	kt      *keytab.Keytab
	offer   byte
	subkey  bool // answer with an acceptor subkey
	layer   *Layer
	chosen  byte
	peerMax int
}

func (a *acceptor) accept(tok []byte) []byte {
	var k spnego.KRB5Token
	if err := k.Unmarshal(tok); err != nil {
		a.t.Fatalf("acceptor: initial token: %v", err)
	}
	if !k.IsAPReq() {
		a.t.Fatal("acceptor: initial token is not an AP-REQ")
	}
	if ok, err := k.APReq.Verify(a.kt, 5*time.Minute, types.HostAddress{}, nil); !ok {
		a.t.Fatalf("acceptor: AP-REQ does not verify: %v", err)
	}
	auth := k.APReq.Authenticator
	fl := binary.LittleEndian.Uint32(auth.Cksum.Checksum[20:24])
	if fl&(gssapi.ContextFlagMutual|gssapi.ContextFlagInteg|gssapi.ContextFlagConf) != gssapi.ContextFlagMutual|gssapi.ContextFlagInteg|gssapi.ContextFlagConf || fl&(gssapi.ContextFlagReplay|gssapi.ContextFlagSequence) != 0 {
		a.t.Fatalf("acceptor: context flags %#x", fl)
	}
	if len(auth.SubKey.KeyValue) == 0 {
		a.t.Fatal("acceptor: no initiator subkey")
	}
	part := messages.EncAPRepPart{CTime: auth.CTime, Cusec: auth.Cusec, SequenceNumber: 99}
	key := auth.SubKey
	if a.subkey {
		key = testKey(a.t, auth.SubKey.KeyType)
		part.Subkey = key
	}
	pb, err := asn1.Marshal(part)
	if err != nil {
		a.t.Fatal(err)
	}
	ed, err := crypto.GetEncryptedData(asn1tools.AddASNAppTag(pb, 27), k.APReq.Ticket.DecryptedEncPart.Key, 12, 0)
	if err != nil {
		a.t.Fatal(err)
	}
	rb, err := asn1.Marshal(messages.APRep{PVNO: 5, MsgType: 15, EncPart: ed})
	if err != nil {
		a.t.Fatal(err)
	}
	if a.layer, err = newLayer(key, false, a.subkey, false, 99); err != nil {
		a.t.Fatal(err)
	}
	out, err := initialContextToken(tokAPRep, asn1tools.AddASNAppTag(rb, 15))
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

func (a *acceptor) offerLayers() []byte {
	tok, err := a.layer.wrap([]byte{a.offer, 0x01, 0x00, 0x00}, false)
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

func (a *acceptor) readChoice(tok []byte) {
	b, err := a.layer.unwrap(tok, false)
	if err != nil || len(b) != 4 {
		a.t.Fatalf("acceptor: choice %x: %v", b, err)
	}
	a.chosen = b[0]
	a.peerMax = int(b[1])<<16 | int(b[2])<<8 | int(b[3])
	a.layer.seal = a.chosen == byte(Privacy)
}

// exchange runs the whole mechanism against an acceptor offering offer.
func exchange(t *testing.T, want []QOP, offer byte, subkey bool) (*Mechanism, *acceptor, error) {
	realm := "EXAMPLE.COM"
	kt := keytab.New()
	if err := kt.AddEntry("hbase/localhost", realm, "service-password", time.Now(), 1, etypeID.AES128_CTS_HMAC_SHA1_96); err != nil {
		t.Fatal(err)
	}
	login := &kdcless{kt: kt, cname: types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, "rekey"), realm: realm, etype: etypeID.AES128_CTS_HMAC_SHA1_96}
	m, err := New(login, login.cname, realm, "hbase/localhost", want)
	if err != nil {
		t.Fatal(err)
	}
	acc := &acceptor{t: t, kt: kt, offer: offer, subkey: subkey}
	first, err := m.Start()
	if err != nil {
		t.Fatal(err)
	}
	resp, done, err := m.Step(acc.accept(first))
	if err != nil || done || len(resp) != 0 {
		t.Fatalf("after AP-REP: %x %v %v", resp, done, err)
	}
	resp, done, err = m.Step(acc.offerLayers())
	if err != nil {
		return m, acc, err
	}
	if !done {
		t.Fatal("not done after the layer choice")
	}
	acc.readChoice(resp)
	return m, acc, nil
}

func TestMechanismNegotiatesEachQOP(t *testing.T) {
	for _, c := range []struct {
		want   []QOP
		offer  byte
		chosen QOP
	}{
		{[]QOP{Authentication}, 1 | 2 | 4, Authentication},
		{[]QOP{Integrity}, 2, Integrity},
		{[]QOP{Privacy}, 1 | 4, Privacy},
		{[]QOP{Privacy, Integrity, Authentication}, 1 | 2, Integrity},
		{[]QOP{Authentication, Privacy}, 4, Privacy},
	} {
		for _, subkey := range []bool{false, true} {
			m, acc, err := exchange(t, c.want, c.offer, subkey)
			if err != nil {
				t.Fatalf("%v against offer %#x: %v", c.want, c.offer, err)
			}
			if m.QOP() != c.chosen || acc.chosen != byte(c.chosen) {
				t.Fatalf("%v against offer %#x: chose %v, acceptor read %#x", c.want, c.offer, m.QOP(), acc.chosen)
			}
			l := m.Layer()
			if c.chosen == Authentication {
				if l != nil || acc.peerMax != 0 {
					t.Fatalf("authentication only, but a layer (max %d)", acc.peerMax)
				}
				continue
			}
			if l == nil || l.Sealed() != (c.chosen == Privacy) || acc.peerMax != maxRecv {
				t.Fatalf("%v: layer %v, announced max %d", c.chosen, l, acc.peerMax)
			}
			if got := l.MaxPayload(); got != 65536-l.overhead() {
				t.Fatalf("max payload %d for the acceptor's 65536", got)
			}
			tok, _ := l.Wrap([]byte("ConnectionHeader"))
			if got, err := acc.layer.Unwrap(tok); err != nil || string(got) != "ConnectionHeader" {
				t.Fatalf("%v: first frame: %q %v", c.chosen, got, err)
			}
			back, _ := acc.layer.Wrap([]byte("response"))
			if got, err := l.Unwrap(back); err != nil || string(got) != "response" {
				t.Fatalf("%v: response: %q %v", c.chosen, got, err)
			}
		}
	}
}

func TestMechanismNoCommonQOP(t *testing.T) {
	_, _, err := exchange(t, []QOP{Authentication}, byte(Privacy), false)
	if !errors.Is(err, ErrNoCommonQOP) || !strings.Contains(err.Error(), "allows privacy") || !strings.Contains(err.Error(), "allows authentication") {
		t.Fatalf("got %v", err)
	}
}

func TestMechanismRefusesForeignAPRep(t *testing.T) {
	realm := "EXAMPLE.COM"
	kt := keytab.New()
	if err := kt.AddEntry("hbase/localhost", realm, "pw", time.Now(), 1, etypeID.AES128_CTS_HMAC_SHA1_96); err != nil {
		t.Fatal(err)
	}
	login := &kdcless{kt: kt, cname: types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, "rekey"), realm: realm, etype: etypeID.AES128_CTS_HMAC_SHA1_96}
	m1, _ := New(login, login.cname, realm, "hbase/localhost", []QOP{Authentication})
	m2, _ := New(login, login.cname, realm, "hbase/localhost", []QOP{Authentication})
	acc := &acceptor{t: t, kt: kt}
	t1, _ := m1.Start()
	t2, _ := m2.Start()
	rep1 := acc.accept(t1)
	_ = acc.accept(t2)
	// m2 gets the reply meant for m1: another session key, so it must not
	// decrypt, and the mutual check must fail.
	if _, _, err := m2.Step(rep1); !errors.Is(err, ErrBadToken) {
		t.Fatalf("foreign AP-REP accepted: %v", err)
	}
}

func TestExplainNamesTheFix(t *testing.T) {
	for msg, want := range map[string]string{
		"GSS initiate failed [Caused by GSSException: Failure unspecified at GSS-API level (Mechanism level: Clock skew too great (37))]": "clock",
		"GSS initiate failed [Caused by GSSException: Failure unspecified at GSS-API level (Mechanism level: Checksum failed)]":           "keytab",
		"KRB Error: (32) KRB_AP_ERR_TKT_EXPIRED Ticket expired":                                                                           "log in again",
	} {
		if got := Explain(msg); !strings.Contains(got, want) {
			t.Fatalf("%q: %q", msg, got)
		}
	}
	if got := Explain("something else"); got != "" {
		t.Fatalf("unknown message explained: %q", got)
	}
}

// BenchmarkWrap measures wrapping and unwrapping one 64 KB frame (the
// usual server buffer), with integrity and with privacy.
func BenchmarkWrap(b *testing.B) {
	for _, seal := range []bool{false, true} {
		name := "integrity"
		if seal {
			name = "privacy"
		}
		b.Run(name, func(b *testing.B) {
			ini, acc := pair(b, testKey(b, etypeID.AES256_CTS_HMAC_SHA1_96), false, seal)
			msg := bytes.Repeat([]byte("0123456789abcdef"), 4096)
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				tok, err := ini.Wrap(msg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := acc.Unwrap(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Authenticators made at once still differ in time: a server's replay
// cache would refuse a repeat.
func TestAuthenticatorTimesAreUnique(t *testing.T) {
	now := time.Now()
	seen := map[time.Time]bool{}
	for i := 0; i < 1000; i++ {
		u := uniqueTime(now)
		if seen[u] {
			t.Fatalf("time %v given twice", u)
		}
		seen[u] = true
	}
}
