package krb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"time"

	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// kdcClockTimeout bounds the one exchange kdcClock makes with a KDC.
const kdcClockTimeout = 5 * time.Second

// kdcClock asks realm's KDC (over TCP, the first of krb5.conf's kdc lines
// that answers) what time it is: an AS request without
// preauthentication, which a KDC that requires it refuses with a
// KRB-ERROR carrying its own clock (stime, susec). Some KDCs (Kerby,
// which MiniKdc runs) answer a preauthentication timestamp outside their
// skew with PREAUTH_FAILED, the code of a wrong key; their clock tells the
// two apart.
func kdcClock(conf *config.Config, realm, name string) (time.Time, error) {
	req, err := messages.NewASReqForTGT(realm, conf, types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, name))
	if err != nil {
		return time.Time{}, err
	}
	b, err := req.Marshal()
	if err != nil {
		return time.Time{}, err
	}
	_, kdcs, err := conf.GetKDCs(realm, true)
	if err != nil {
		return time.Time{}, err
	}
	order := make([]int, 0, len(kdcs))
	for k := range kdcs {
		order = append(order, k)
	}
	sort.Ints(order)
	var last error = errors.New("no KDC")
	for _, k := range order {
		reply, err := exchangeTCP(kdcs[k], b)
		if err != nil {
			last = err
			continue
		}
		var ke messages.KRBError
		if err := ke.Unmarshal(reply); err != nil {
			return time.Time{}, fmt.Errorf("the KDC %s did not answer with an error that names its clock: %w", kdcs[k], err)
		}
		return ke.STime.Add(time.Duration(ke.Susec) * time.Microsecond), nil
	}
	return time.Time{}, last
}

// exchangeTCP sends one Kerberos message to addr over TCP (a 4-byte
// big-endian length, then the message) and reads the reply.
func exchangeTCP(addr string, msg []byte) ([]byte, error) {
	c, err := net.DialTimeout("tcp", addr, kdcClockTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(kdcClockTimeout))
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(msg)), uint32(len(msg)))
	if _, err := c.Write(append(out, msg...)); err != nil {
		return nil, err
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return nil, fmt.Errorf("the KDC %s sent a %d-byte reply", addr, size)
	}
	reply := make([]byte, size)
	if _, err := io.ReadFull(c, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// skewOf reports how far the KDC's clock is from this host's, when
// asking it works and the difference is beyond what krb5.conf allows
// (clockskew, 5 minutes by default).
func skewOf(conf *config.Config, realm, name string) (time.Duration, bool) {
	kdcNow, err := kdcClock(conf, realm, name)
	if err != nil {
		return 0, false
	}
	allowed := conf.LibDefaults.Clockskew
	if allowed <= 0 {
		allowed = 5 * time.Minute
	}
	d := time.Until(kdcNow)
	return d, d > allowed || d < -allowed
}
