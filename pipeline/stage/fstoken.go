package stage

import (
	"context"
	"fmt"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/vfs"
)

// tokenSource is a staging file system that issues delegation tokens
// (vfs.HDFS); it returns none when it does not use Kerberos.
type tokenSource interface {
	DelegationToken(ctx context.Context, renewer string) (*vfs.DelegationToken, error)
}

// testFSToken, when set (tests only), sees the token a load obtained and
// returns the one to send: nil withholds it.
var testFSToken func(context.Context, *vfs.DelegationToken) *vfs.DelegationToken

// fsToken gets the delegation token the region servers move the staged
// files with, so as the caller (hbase.BulkLoadOptions): from a kerberized
// HDFS staging folder; none from other folders. done cancels it.
func (s *Sink) fsToken(ctx context.Context) (tok *hbase.FSToken, done func(), err error) {
	src, ok := s.fs.(tokenSource)
	if !ok {
		return nil, func() {}, nil
	}
	dt, err := src.DelegationToken(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("stage: bulk load: %w", err)
	}
	if dt == nil {
		return nil, func() {}, nil
	}
	done = func() {
		// A token left behind expires by itself (after a day by default);
		// failing to cancel it is not worth failing the load for.
		dt.Cancel(context.WithoutCancel(ctx))
	}
	send := dt
	if testFSToken != nil {
		send = testFSToken(ctx, dt)
	}
	if send == nil {
		return nil, done, nil
	}
	return &hbase.FSToken{Identifier: send.Identifier, Password: send.Password, Kind: send.Kind, Service: send.Service}, done, nil
}
