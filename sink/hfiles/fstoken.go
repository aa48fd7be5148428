package hfiles

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// tokenSource is a staging file system that issues delegation tokens
// (vfs.TokenIssuer: HDFS); it returns none when it does not use Kerberos.
type tokenSource interface {
	DelegationToken(ctx context.Context, renewer string) (*vfs.DelegationToken, error)
}

// testFSToken, when set (tests only), sees the token a load obtained and
// returns the one to send: nil withholds it.
var testFSToken func(context.Context, *vfs.DelegationToken) *vfs.DelegationToken

// testRenewAt, when set (tests only), replaces the choice of when to renew
// the token dt next, which NameNode said expires at exp.
var testRenewAt func(dt *vfs.DelegationToken, exp time.Time) time.Time

// loadToken is the delegation token a load sends with its bulk loads,
// kept valid while the load runs. A NameNode lets a token lapse after its
// renew interval (dfs.namenode.delegation.token.renew-interval, a day by
// default) unless renewed, and refuses to renew it past its maximum
// lifetime (a week by default): a load that outlives either would have
// its later regions refused. So before each region's load the token is
// renewed once half its time is gone, and replaced by a new one when
// renewing fails.
type loadToken struct {
	src tokenSource
	mu  sync.Mutex
	dt  *vfs.DelegationToken // the token sent; nil to send none
	// all holds every token obtained, cancelled when the load ends.
	all []*vfs.DelegationToken
	// next is when to renew dt; zero when it cannot be (see start).
	next time.Time
}

// fsToken gets the delegation token the region servers move the staged
// files with, so as the caller (hbase.BulkLoadOptions): from a kerberized
// HDFS staging folder; none from other folders (nil). done cancels every
// token the load obtained.
func (s *Sink) fsToken(ctx context.Context, rep sink.Reporter) (lt *loadToken, done func(), err error) {
	src, ok := s.fs.(tokenSource)
	if !ok {
		return nil, func() {}, nil
	}
	dt, err := src.DelegationToken(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("hfiles: bulk load: %w", err)
	}
	if dt == nil {
		return nil, func() {}, nil
	}
	lt = &loadToken{src: src, all: []*vfs.DelegationToken{dt}}
	done = func() {
		// A token left behind expires by itself (after a day by default);
		// failing to cancel it is not worth failing the load for.
		lt.mu.Lock()
		defer lt.mu.Unlock()
		for _, t := range lt.all {
			t.Cancel(context.WithoutCancel(ctx))
		}
	}
	send := dt
	if testFSToken != nil {
		send = testFSToken(ctx, dt)
	}
	lt.dt = send
	if send != nil {
		// Renewing at once says when the token expires. A token that
		// cannot be renewed now (the NameNode's renewer rules, say) is
		// sent as it is; the load fails, naming the token, only if it
		// outlives it.
		if exp, err := send.Renew(ctx); err != nil {
			rep.Printf("warning: hfiles: the HDFS delegation token for the bulk load cannot be renewed (%v): a load that outlives it (the NameNode's renew interval, a day by default) will have its later regions refused", err)
		} else {
			lt.next = lt.renewAt(send, exp)
		}
	}
	return lt, done, nil
}

// renewAt is when to renew dt, which expires at exp: half its time on.
func (lt *loadToken) renewAt(dt *vfs.DelegationToken, exp time.Time) time.Time {
	if testRenewAt != nil {
		return testRenewAt(dt, exp)
	}
	now := time.Now()
	return now.Add(exp.Sub(now) / 2)
}

// current renews or replaces the token when due (see loadToken) and
// returns it as HBase's request carries it; nil for none.
func (lt *loadToken) current(ctx context.Context, rep sink.Reporter) *hbase.FSToken {
	if lt == nil {
		return nil
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.dt == nil {
		return nil
	}
	if !lt.next.IsZero() && !time.Now().Before(lt.next) {
		if exp, err := lt.dt.Renew(ctx); err == nil {
			lt.next = lt.renewAt(lt.dt, exp)
		} else if dt, ferr := lt.replace(ctx); ferr != nil {
			rep.Printf("warning: hfiles: the HDFS delegation token for the bulk load could not be renewed (%v) nor replaced (%v); the load goes on with it until it lapses", err, ferr)
			lt.next = time.Time{}
		} else {
			rep.Printf("hfiles: the HDFS delegation token for the bulk load could not be renewed (%v); the load goes on with a new one", err)
			lt.dt = dt
		}
	}
	return &hbase.FSToken{Identifier: lt.dt.Identifier, Password: lt.dt.Password, Kind: lt.dt.Kind, Service: lt.dt.Service}
}

// replace gets a new token, renewed once to learn when it expires; under
// mu.
func (lt *loadToken) replace(ctx context.Context) (*vfs.DelegationToken, error) {
	dt, err := lt.src.DelegationToken(ctx, "")
	if err != nil {
		return nil, err
	}
	if dt == nil {
		return nil, fmt.Errorf("the NameNode issued no token")
	}
	lt.all = append(lt.all, dt)
	exp, err := dt.Renew(ctx)
	if err != nil {
		return nil, err
	}
	lt.next = lt.renewAt(dt, exp)
	return dt, nil
}
