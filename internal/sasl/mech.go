package sasl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/flags"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// Login is what a Mechanism needs of a Kerberos login: service tickets.
// gokrb5's *client.Client has it.
type Login interface {
	GetServiceTicket(spn string) (messages.Ticket, types.EncryptionKey, error)
}

// ErrNoCommonQOP is wrapped by the error of an exchange where the server
// offers none of the qualities of protection the client accepts.
var ErrNoCommonQOP = errors.New("sasl: client and server share no quality of protection")

// maxRecv is the largest token this side takes, announced to the server in
// the layer choice: the most the 3-byte field holds. The connection's own
// frame limit applies on top.
const maxRecv = 1<<24 - 1

// skew shifts the authenticator's time; only tests set it, to see what a
// server says to a client whose clock is off.
var skew time.Duration

// lastAuth is the time of the last authenticator this process made.
var lastAuth struct {
	sync.Mutex
	t time.Time
}

// uniqueTime returns t, or a microsecond after the last authenticator's
// time when t is not later: a server's replay cache refuses a second
// authenticator of the same client with the same time and microsecond,
// which connections dialled at once could otherwise have.
func uniqueTime(t time.Time) time.Time {
	lastAuth.Lock()
	defer lastAuth.Unlock()
	t = t.Truncate(time.Microsecond)
	if !t.After(lastAuth.t) {
		t = lastAuth.t.Add(time.Microsecond)
	}
	lastAuth.t = t
	return t
}

// GSS-API token ids (RFC 4121 section 4.1).
var (
	tokAPReq = []byte{0x01, 0x00}
	tokAPRep = []byte{0x02, 0x00}
	tokError = []byte{0x03, 0x00}
)

// Mechanism is the client side of one GSSAPI SASL exchange. Use it once:
// Start, then Step with each server token until done.
type Mechanism struct {
	login  Login
	cname  types.PrincipalName
	realm  string
	spn    string
	want   []QOP
	step   int
	auth   types.Authenticator
	tktKey types.EncryptionKey
	layer  *Layer // keyed once the AP-REP is checked
	chosen QOP
	// setting names the configuration key of the protections, for
	// messages; empty means hbase.rpc.protection.
	setting string
}

// Setting names the configuration key both sides read their qualities of
// protection from (hadoop.rpc.protection for Hadoop's RPC), for messages;
// the default is hbase.rpc.protection.
func (m *Mechanism) Setting(key string) { m.setting = key }

// New returns the mechanism for a client principal (cname in realm)
// talking to the service principal spn, given without its realm
// ("hbase/host.example.com"). want lists the acceptable qualities of
// protection, most preferred first.
func New(login Login, cname types.PrincipalName, realm, spn string, want []QOP) (*Mechanism, error) {
	if len(want) == 0 {
		return nil, errors.New("sasl: no quality of protection to offer")
	}
	return &Mechanism{login: login, cname: cname, realm: realm, spn: spn, want: want}, nil
}

// ForClient is New for a logged-in gokrb5 client.
func ForClient(cl *client.Client, spn string, want []QOP) (*Mechanism, error) {
	if cl == nil || cl.Credentials == nil {
		return nil, errors.New("sasl: no Kerberos login")
	}
	return New(cl, cl.Credentials.CName(), cl.Credentials.Domain(), spn, want)
}

// Start returns the initial token: the GSS-API initial context token
// (RFC 2743 section 3.1) holding an AP-REQ for the service, with mutual
// authentication, integrity and confidentiality asked for. Replay and
// sequence detection are not asked for: sequence numbers are not tracked.
func (m *Mechanism) Start() ([]byte, error) {
	if m.step != 0 {
		return nil, errors.New("sasl: Start called twice")
	}
	tkt, key, err := m.login.GetServiceTicket(m.spn)
	if err != nil {
		// The login's own errors already speak the user's terms.
		return nil, fmt.Errorf("sasl: service ticket for %s: %w", m.spn, err)
	}
	if !aesOnly(key.KeyType) {
		return nil, fmt.Errorf("sasl: the ticket for %s has session key type %d; only AES types are supported (set permitted_enctypes to aes in krb5.conf)", m.spn, key.KeyType)
	}
	auth, err := types.NewAuthenticator(m.realm, m.cname)
	if err != nil {
		return nil, fmt.Errorf("sasl: authenticator: %v", err)
	}
	t := uniqueTime(auth.CTime.Add(skew))
	auth.CTime, auth.Cusec = t, t.Nanosecond()/1000
	et, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("sasl: encryption type %d: %v", key.KeyType, err)
	}
	// An initiator subkey, as Java's initiator sends: the context key then
	// is not the ticket's session key.
	if err := auth.GenerateSeqNumberAndSubKey(key.KeyType, et.GetKeyByteSize()); err != nil {
		return nil, fmt.Errorf("sasl: subkey: %v", err)
	}
	auth.Cksum = types.Checksum{CksumType: chksumtype.GSSAPI, Checksum: gssChecksum(gssapi.ContextFlagMutual | gssapi.ContextFlagInteg | gssapi.ContextFlagConf)}
	req, err := messages.NewAPReq(tkt, key, auth)
	if err != nil {
		return nil, fmt.Errorf("sasl: AP-REQ: %v", err)
	}
	types.SetFlag(&req.APOptions, flags.APOptionMutualRequired)
	inner, err := req.Marshal()
	if err != nil {
		return nil, fmt.Errorf("sasl: AP-REQ: %v", err)
	}
	m.auth, m.tktKey, m.step = auth, key, 1
	return initialContextToken(tokAPReq, inner)
}

// gssChecksum is the authenticator checksum of RFC 4121 section 4.1.1: a
// 16-byte channel binding (none, zeros) and the context flags.
func gssChecksum(fl uint32) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b[0:4], 16)
	binary.LittleEndian.PutUint32(b[20:24], fl)
	return b
}

// initialContextToken frames a Kerberos message as RFC 2743 section 3.1
// says: [APPLICATION 0] { mech OID, token id, message }.
func initialContextToken(tokID, msg []byte) ([]byte, error) {
	oid, err := asn1.Marshal(gssapi.OIDKRB5.OID())
	if err != nil {
		return nil, fmt.Errorf("sasl: mechanism OID: %v", err)
	}
	b := append(append(oid, tokID...), msg...)
	return asn1tools.AddASNAppTag(b, 0), nil
}

// Step takes one token from the server and returns the response to send
// (possibly empty, which is still sent) and whether the exchange is done.
func (m *Mechanism) Step(challenge []byte) (response []byte, done bool, err error) {
	switch m.step {
	case 1:
		if err := m.checkAPRep(challenge); err != nil {
			return nil, false, err
		}
		m.step = 2
		// The context is established; the server speaks next, with its
		// wrapped security-layer offer.
		return []byte{}, false, nil
	case 2:
		resp, err := m.chooseLayer(challenge)
		if err != nil {
			return nil, false, err
		}
		m.step = 3
		return resp, true, nil
	}
	return nil, false, fmt.Errorf("sasl: unexpected server token at step %d", m.step)
}

// checkAPRep verifies the acceptor's reply token: an AP-REP whose
// encrypted part repeats our authenticator's time (mutual
// authentication), giving perhaps an acceptor subkey and its first
// sequence number.
func (m *Mechanism) checkAPRep(tok []byte) error {
	id, msg, err := parseContextToken(tok)
	if err != nil {
		return err
	}
	switch {
	case string(id) == string(tokError):
		var ke messages.KRBError
		if err := ke.Unmarshal(msg); err != nil {
			return fmt.Errorf("%w: server sent a Kerberos error that does not decode: %v", ErrBadToken, err)
		}
		return &KerberosError{Op: "the server rejected the AP-REQ", Err: ke}
	case string(id) != string(tokAPRep):
		return fmt.Errorf("%w: server token id %x, want an AP-REP (0200)", ErrBadToken, id)
	}
	var rep messages.APRep
	if err := rep.Unmarshal(msg); err != nil {
		return fmt.Errorf("%w: AP-REP: %v", ErrBadToken, err)
	}
	plain, err := crypto.DecryptEncPart(rep.EncPart, m.tktKey, keyusage.AP_REP_ENCPART)
	if err != nil {
		return fmt.Errorf("%w: AP-REP does not decrypt with the session key: %v", ErrBadToken, err)
	}
	var part messages.EncAPRepPart
	if err := part.Unmarshal(plain); err != nil {
		return fmt.Errorf("%w: AP-REP encrypted part: %v", ErrBadToken, err)
	}
	if !part.CTime.Equal(m.auth.CTime.Truncate(time.Second)) || part.Cusec != m.auth.Cusec {
		return fmt.Errorf("%w: AP-REP does not answer our authenticator (mutual authentication failed)", ErrBadToken)
	}
	key, acceptorSub := m.auth.SubKey, false
	if len(part.Subkey.KeyValue) > 0 {
		key, acceptorSub = part.Subkey, true
	}
	l, err := newLayer(key, true, acceptorSub, false, uint64(uint32(m.auth.SeqNumber)))
	if err != nil {
		return err
	}
	m.layer = l
	return nil
}

// parseContextToken splits a GSS-API context token into its token id and
// Kerberos message, checking the framing and the mechanism.
func parseContextToken(tok []byte) (id, msg []byte, err error) {
	var oid asn1.ObjectIdentifier
	rest, err := asn1.UnmarshalWithParams(tok, &oid, "application,explicit,tag:0")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: server token is not a GSS-API context token: %v", ErrBadToken, err)
	}
	if !oid.Equal(gssapi.OIDKRB5.OID()) {
		return nil, nil, fmt.Errorf("%w: server token is for mechanism %v, not Kerberos V5", ErrBadToken, oid)
	}
	if len(rest) < 2 {
		return nil, nil, fmt.Errorf("%w: server token has no token id", ErrBadToken)
	}
	return rest[:2], rest[2:], nil
}

// chooseLayer unwraps the server's offer (RFC 4752 section 3.1: a bitmask
// of layers and the largest token it takes), picks the first acceptable
// QOP it offers and returns the wrapped choice.
func (m *Mechanism) chooseLayer(tok []byte) ([]byte, error) {
	offer, err := m.layer.unwrap(tok, false)
	if err != nil {
		return nil, fmt.Errorf("security-layer offer: %w", err)
	}
	if len(offer) != 4 {
		return nil, fmt.Errorf("%w: security-layer offer of %d bytes, want 4", ErrBadToken, len(offer))
	}
	mask := offer[0]
	for _, q := range m.want {
		if mask&byte(q) == 0 {
			continue
		}
		m.chosen = q
		choice := []byte{byte(q), 0, 0, 0}
		if q != Authentication {
			choice[1], choice[2], choice[3] = maxRecv>>16, maxRecv>>8&0xFF, maxRecv&0xFF
			m.layer.peerMax = int(offer[1])<<16 | int(offer[2])<<8 | int(offer[3])
		}
		// RFC 4752: the choice is wrapped without confidentiality.
		return m.layer.wrap(choice, false)
	}
	key := m.setting
	if key == "" {
		key = "hbase.rpc.protection"
	}
	return nil, fmt.Errorf("%w: the server (its %s) allows %s; this client (%s) allows %s", ErrNoCommonQOP, key, names(mask), key, list(m.want))
}

// QOP returns the negotiated quality of protection, once done.
func (m *Mechanism) QOP() QOP { return m.chosen }

// Layer returns the security layer to apply to every later frame, or nil
// when the negotiated protection is authentication only.
func (m *Mechanism) Layer() *Layer {
	if m.step != 3 || m.chosen == Authentication {
		return nil
	}
	m.layer.seal = m.chosen == Privacy
	return m.layer
}
