package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Errors the caller branches on; compare with errors.Is.
var (
	// ErrNotFound: the key is absent.
	ErrNotFound = errors.New("store: key not found")
	// ErrExists: Create found the key already present.
	ErrExists = errors.New("store: key already exists")
	// ErrConflict: Update or Delete found the key at another revision than
	// the expected one.
	ErrConflict = errors.New("store: revision conflict")
	// ErrCompacted: the requested revision is older than the oldest one
	// etcd still keeps.
	ErrCompacted = errors.New("store: revision compacted")
	// ErrFutureRevision: the requested revision has not been written yet.
	ErrFutureRevision = errors.New("store: revision is in the future")
	// ErrUnavailable: etcd cannot be reached, or cannot serve now (it has
	// no leader, is stopping, or is overloaded); see Health. A write that
	// failed with it may still have been applied.
	ErrUnavailable = errors.New("store: etcd is unavailable")
	// ErrHistoryReset: etcd no longer has the history a revision came
	// from: it was wiped and started empty, restored from an older backup,
	// or is another cluster. Revisions read before mean nothing now; a
	// caller that keeps state by revision must read everything again.
	ErrHistoryReset = errors.New("store: etcd's history was replaced")
)

// Config says which etcd to use and how to look after it.
type Config struct {
	// DataDir is the embedded etcd's data directory; used when Endpoints is
	// empty. Reopening the same DataDir keeps all data and revisions.
	DataDir string
	// Endpoints are the client URLs of an external etcd; empty means start
	// an embedded etcd.
	Endpoints []string
	// ClientURL is the embedded etcd's client URL, e.g.
	// "http://127.0.0.1:2379". Empty, or port 0, means a free loopback port.
	ClientURL string
	// CompactionInterval is the period of the compaction loop: 0 means 5m,
	// negative means never compact periodically.
	CompactionInterval time.Duration
	// ProgressNotifyInterval is how often the embedded etcd sends progress
	// notifications to idle watches: 0 means 5s. etcd keeps this setting
	// per process, so the last embedded etcd started sets it for all. An
	// external etcd keeps its own setting.
	ProgressNotifyInterval time.Duration
	// RequestTimeout is the deadline of every request to etcd whose
	// context has none (kube-apiserver's --request-timeout): 0 means 60s.
	// Watches have none.
	RequestTimeout time.Duration
	// Logger receives the store's and etcd's logs; nil discards them.
	Logger *slog.Logger
	// UnsafeNoFsync makes the embedded etcd skip fsync (etcd's
	// --unsafe-no-fsync): a crash of the machine may lose the last
	// writes. Only for data that dies with the process anyway, such as a
	// test's cluster, where fsync is most of the cost of a write.
	UnsafeNoFsync bool
}

const (
	defaultCompactionInterval     = 5 * time.Minute
	defaultProgressNotifyInterval = 5 * time.Second
	defaultRequestTimeout         = time.Minute
	// quotaBackendBytes is the embedded etcd's database size limit:
	// etcd's recommended default, plenty for a learning cluster.
	quotaBackendBytes = 2 << 30
	startTimeout      = 30 * time.Second
	dialTimeout       = 5 * time.Second
	// startAttempts bounds retries when a port we picked as free was taken
	// by someone else before etcd could listen on it.
	startAttempts = 3
	// keepaliveTime and keepaliveTimeout are how often the client pings
	// an external etcd on an idle connection, and how long it waits for
	// the answer before it drops the connection and dials again
	// (kube-apiserver's values): a connection to an etcd that stopped
	// answering does not hang for ever.
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	// maxReconnectDelay caps the wait between attempts to reconnect to an
	// external etcd (gRPC's default grows to two minutes), so that the
	// Store is back within seconds of etcd's return.
	maxReconnectDelay = 2 * time.Second
)

// Store is an open etcd: embedded or external. Its methods are safe for
// concurrent use.
type Store struct {
	log            *slog.Logger
	client         *clientv3.Client
	etcd           *embed.Etcd // nil when the etcd is external
	endpoints      []string
	requestTimeout time.Duration

	compacted atomic.Int64 // see CompactedRevision
	// hist is the etcd history the Store follows (see history); histMu
	// serialises replacing it.
	hist   atomic.Pointer[history]
	histMu sync.Mutex
	// unhealthy is why the latest probe failed; nil when it answered.
	unhealthy atomic.Pointer[error]
	// down is set once etcd has not answered for failFastAfter: requests
	// then fail at once (see Health). Only the health loop writes it.
	down atomic.Bool

	// stop ends the compaction loop; loops waits for it. etcdErrsDone is
	// closed when the embedded etcd's error logger has returned, after etcd
	// closed.
	stop         context.CancelFunc
	loops        sync.WaitGroup
	etcdErrsDone chan struct{}

	watches watches // see Watch and RequestProgress
	leases  leases  // see CreateExpiring

	closeOnce sync.Once
	closeErr  error
}

// Open starts an embedded etcd in cfg.DataDir, or dials cfg.Endpoints, and
// starts the compaction loop. It returns once etcd serves requests.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{log: log, requestTimeout: cfg.RequestTimeout}
	if s.requestTimeout <= 0 {
		s.requestTimeout = defaultRequestTimeout
	}

	endpoints := cfg.Endpoints
	if len(endpoints) == 0 {
		e, err := startEmbedded(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		s.etcd = e
		s.etcdErrsDone = make(chan struct{})
		go s.logEtcdErrors()
		for _, u := range e.Config().AdvertiseClientUrls {
			endpoints = append(endpoints, u.String())
		}
	}
	s.endpoints = endpoints

	if s.etcd != nil {
		// In the same process, the client calls the etcd server's gRPC
		// service functions directly: the same requests and answers,
		// without encoding them or crossing a socket.
		s.client = v3client.New(s.etcd.Server)
	} else {
		client, err := clientv3.New(clientv3.Config{
			Endpoints:            endpoints,
			DialTimeout:          dialTimeout,
			DialKeepAliveTime:    keepaliveTime,
			DialKeepAliveTimeout: keepaliveTimeout,
			DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxReconnectDelay},
				MinConnectTimeout: dialTimeout,
			})},
			Logger: newZapLogger(log),
		})
		if err != nil {
			return nil, fmt.Errorf("store: dial %v: %w", endpoints, err)
		}
		s.client = client
	}

	// One read proves the etcd answers and starts the history the Store
	// follows; more tell where compaction stands.
	if err := s.learnHistory(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open %v: %w", endpoints, err)
	}
	if err := s.learnCompacted(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open %v: %w", endpoints, err)
	}

	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.loops.Go(func() { s.healthLoop(bg) })
	interval := cfg.CompactionInterval
	if interval == 0 {
		interval = defaultCompactionInterval
	}
	if interval > 0 {
		s.loops.Go(func() { s.compactLoop(bg, interval) })
	}
	log.Info("store open", slog.Any("endpoints", endpoints), slog.Bool("embedded", s.etcd != nil))
	return s, nil
}

// learnHistory reads once from etcd and follows the history it shows.
func (s *Store) learnHistory(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	resp, err := s.client.Get(ctx, healthKey)
	if err != nil {
		return err
	}
	s.hist.Store(newHistory(resp.Header))
	return nil
}

// Close shuts the store down, in this order:
//  1. stop the compaction and health loops and wait for them;
//  2. close the client, which ends every watch (their channels deliver a
//     final error event, then close);
//  3. stop the embedded etcd, if any, and wait until it is down; every
//     write it acknowledged is on disk.
//
// Close is idempotent; later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.stop()
		}
		s.loops.Wait()
		if s.client != nil {
			if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
				s.closeErr = fmt.Errorf("store: close client: %w", err)
			}
		}
		s.closeEtcd()
		if s.etcdErrsDone != nil {
			<-s.etcdErrsDone
		}
		s.log.Info("store closed")
	})
	return s.closeErr
}

// closeEtcd stops the embedded etcd, if any; it returns when etcd is down.
func (s *Store) closeEtcd() {
	if s.etcd == nil {
		return
	}
	s.etcd.Close()
	<-s.etcd.Server.StopNotify()
}

// Endpoints returns the etcd client URLs, e.g. for etcdctl --endpoints.
func (s *Store) Endpoints() []string {
	return append([]string(nil), s.endpoints...)
}

// PeerURLs are the embedded etcd's peer URLs: a free loopback port, since
// a single member has no peers to be found by; nil when the store is a
// client of an etcd it did not start.
func (s *Store) PeerURLs() []string {
	if s.etcd == nil {
		return nil
	}
	var out []string
	for _, u := range s.etcd.Config().ListenPeerUrls {
		out = append(out, u.String())
	}
	return out
}

// logEtcdErrors logs what the embedded etcd reports after it started; it
// returns when etcd has closed.
func (s *Store) logEtcdErrors() {
	defer close(s.etcdErrsDone)
	for err := range s.etcd.Err() {
		s.log.Error("embedded etcd", slog.Any("err", err))
	}
}

// startEmbedded starts an etcd member named "minictl" in cfg.DataDir, listening
// on loopback, and waits until it serves clients.
func startEmbedded(ctx context.Context, cfg Config, log *slog.Logger) (*embed.Etcd, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("store: embedded etcd needs a DataDir")
	}
	clientURL := cfg.ClientURL
	if clientURL == "" {
		clientURL = "http://127.0.0.1:0"
	}
	wantClient, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("store: client url %q: %w", clientURL, err)
	}
	progress := cfg.ProgressNotifyInterval
	if progress == 0 {
		progress = defaultProgressNotifyInterval
	}

	for attempt := 1; ; attempt++ {
		client, err := resolvePort(wantClient)
		if err != nil {
			return nil, err
		}
		peer, err := resolvePort(&url.URL{Scheme: "http", Host: "127.0.0.1:0"})
		if err != nil {
			return nil, err
		}
		ec := embedConfig(cfg.DataDir, *client, *peer, progress, log)
		ec.UnsafeNoFsync = cfg.UnsafeNoFsync
		e, err := startEtcd(ctx, ec)
		if err == nil {
			log.Debug("embedded etcd ready", slog.String("client", client.String()), slog.String("peer", peer.String()), slog.String("dir", cfg.DataDir))
			return e, nil
		}
		// A port we picked was free a moment ago; someone may have taken it.
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == startAttempts {
			return nil, err
		}
		log.Debug("embedded etcd: port taken, retrying", slog.Any("err", err))
	}
}

func embedConfig(dir string, client, peer url.URL, progress time.Duration, log *slog.Logger) *embed.Config {
	ec := etcdConfig("minictl", dir, []url.URL{client}, []url.URL{peer}, progress, log)
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ClusterState = embed.ClusterStateFlagNew
	// A single member has no one to hold an election against: short ticks
	// make it leader in milliseconds instead of about a second.
	ec.TickMs = 10
	ec.ElectionMs = 100
	// etcd keeps the last entries of its raft log in memory (5,000 by
	// default) so that a slow follower can catch up without a snapshot, and
	// every 100 applied entries it copies them into a new slice. A single
	// member has no follower: keeping 100 saves every write about 3.7 KB of
	// allocation (BenchmarkServeCreate) and the garbage collector's time.
	ec.SnapshotCatchUpEntries = 100
	return ec
}

// startEtcd starts etcd and waits until it is ready, failed, or the
// deadline passed; on failure nothing is left running.
func startEtcd(ctx context.Context, ec *embed.Config) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("store: start embedded etcd in %s: %w", ec.Dir, err)
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err = <-e.Err():
	case <-timer.C:
		err = fmt.Errorf("not ready after %s", startTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.Close()
	return nil, fmt.Errorf("store: start embedded etcd in %s: %w", ec.Dir, err)
}

// resolvePort returns u with port 0 (or no port) replaced by a port that is
// free on u's host right now.
func resolvePort(u *url.URL) (*url.URL, error) {
	if p := u.Port(); p != "" && p != "0" {
		return u, nil
	}
	host := u.Hostname()
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("store: find a free port on %s: %w", host, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("store: find a free port on %s: %w", host, err)
	}
	out := *u
	out.Host = net.JoinHostPort(host, strconv.Itoa(port))
	return &out, nil
}
