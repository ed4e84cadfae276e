package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// op is one request to etcd that gets one answer (every call but Watch),
// from start to done or fail. Every such request of the Store:
//   - has a deadline: its context's, or Config.RequestTimeout from start;
//   - is not sent at all while etcd is known to be down (it has answered
//     no probe for failFastAfter: see Health), failing at once with
//     ErrUnavailable;
//   - has its answer checked against the history the Store follows (see
//     observe).
type op struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	hist   *history
	floor  int64 // hist's floor when the request was sent
}

// start begins a request with ctx.
func (s *Store) start(ctx context.Context) (op, error) {
	if s.down.Load() {
		if err := s.Health(); err != nil {
			return op{}, err
		}
	}
	o := op{s: s, ctx: ctx, cancel: func() {}, hist: s.hist.Load()}
	o.floor = o.hist.floor.Load()
	if _, ok := ctx.Deadline(); !ok {
		o.ctx, o.cancel = context.WithTimeout(ctx, s.requestTimeout)
	}
	return o, nil
}

// done ends a request that etcd answered with hdr.
func (o op) done(hdr *etcdserverpb.ResponseHeader) {
	o.cancel()
	o.s.observe(o.hist, o.floor, hdr)
}

// fail ends a request that failed with err, and returns the error the
// Store's callers see: the context's error when its deadline passed or it
// was cancelled; ErrUnavailable when etcd could not be reached or could not
// serve (no leader, stopping, overloaded); ErrCompacted and
// ErrFutureRevision for a revision out of range; err otherwise.
func (o op) fail(err error) error {
	defer o.cancel()
	if ctxErr := o.ctx.Err(); ctxErr != nil {
		if errors.Is(err, ctxErr) || codeOf(err) == codes.DeadlineExceeded || codeOf(err) == codes.Canceled {
			return fmt.Errorf("%w: %v", ctxErr, err)
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w (oldest kept: %d or later)", ErrCompacted, o.s.CompactedRevision())
	case errors.Is(err, rpctypes.ErrFutureRev):
		return ErrFutureRevision
	case errors.Is(err, clientv3.ErrNoAvailableEndpoints), codeOf(err) == codes.Unavailable:
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	case codeOf(err) == codes.DeadlineExceeded:
		return fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
	}
	return err
}

// codeOf is the gRPC code of an error from etcd: rpctypes.EtcdError for
// etcd's own errors, a gRPC status for the transport's; codes.Unknown for
// anything else.
func codeOf(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}
