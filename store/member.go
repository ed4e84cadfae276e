package store

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// MemberConfig describes one member of an etcd cluster of several, each in
// a process of its own (`minictl etcd`), so that one can fail while the
// others keep a quorum. The fields are etcd's flags of the same names;
// every URL is both listened on and advertised.
type MemberConfig struct {
	// Name is the member's name in InitialCluster (--name).
	Name string
	// DataDir is where the member keeps its WAL and database
	// (--data-dir); restarting on the same DataDir rejoins the cluster.
	DataDir string
	// ClientURLs serve clients (--listen-client-urls); a port 0 is
	// replaced by a free port (see Member.ClientURLs).
	ClientURLs []url.URL
	// PeerURLs serve the other members (--listen-peer-urls); they must be
	// the ones InitialCluster gives Name.
	PeerURLs []url.URL
	// InitialCluster is every member of a new cluster, name=peerURL,...
	// (--initial-cluster); empty means this member alone.
	InitialCluster string
	// Existing joins a running cluster that already lists this member
	// (--initial-cluster-state=existing) instead of forming a new one.
	Existing bool
	// InitialClusterToken tells clusters started from the same
	// InitialCluster apart (--initial-cluster-token); empty means etcd's
	// "etcd-cluster".
	InitialClusterToken string
	// HeartbeatInterval and ElectionTimeout are the raft timings
	// (--heartbeat-interval, --election-timeout); 0 means etcd's 100ms and
	// 1s. A follower that hears no leader for ElectionTimeout starts an
	// election: a dead leader is replaced about that long after it died.
	HeartbeatInterval, ElectionTimeout time.Duration
	// ProgressNotifyInterval is as in Config.
	ProgressNotifyInterval time.Duration
	// Logger receives etcd's logs; nil discards them.
	Logger *slog.Logger
}

// Member is one running etcd member. It is the real etcd server
// (go.etcd.io/etcd/server/v3/embed): what a member acknowledged is in its
// WAL on disk, and a cluster of three keeps serving while any two run.
type Member struct {
	etcd      *embed.Etcd
	closeOnce sync.Once
}

// StartMember starts the member and returns without waiting: a member of a
// new cluster serves clients only once a quorum of InitialCluster runs, so
// the members must all be started before any is Ready.
func StartMember(cfg MemberConfig) (*Member, error) {
	if cfg.Name == "" || cfg.DataDir == "" {
		return nil, errors.New("store: an etcd member needs a name and a data dir")
	}
	if len(cfg.ClientURLs) == 0 || len(cfg.PeerURLs) == 0 {
		return nil, errors.New("store: an etcd member needs client and peer URLs")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clients := make([]url.URL, 0, len(cfg.ClientURLs))
	for _, u := range cfg.ClientURLs {
		r, err := resolvePort(&u)
		if err != nil {
			return nil, err
		}
		clients = append(clients, *r)
	}
	progress := cfg.ProgressNotifyInterval
	if progress == 0 {
		progress = defaultProgressNotifyInterval
	}
	ec := etcdConfig(cfg.Name, cfg.DataDir, clients, cfg.PeerURLs, progress, log)
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	}
	ec.ClusterState = embed.ClusterStateFlagNew
	if cfg.Existing {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	if cfg.InitialClusterToken != "" {
		ec.InitialClusterToken = cfg.InitialClusterToken
	}
	if cfg.HeartbeatInterval > 0 {
		ec.TickMs = uint(cfg.HeartbeatInterval.Milliseconds())
	}
	if cfg.ElectionTimeout > 0 {
		ec.ElectionMs = uint(cfg.ElectionTimeout.Milliseconds())
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("store: start etcd member %s: %w", cfg.Name, err)
	}
	return &Member{etcd: e}, nil
}

// Ready is closed once the member serves clients: it has joined a cluster
// with a leader.
func (m *Member) Ready() <-chan struct{} { return m.etcd.Server.ReadyNotify() }

// Stopped is closed when the member's server has stopped, by Close or by
// itself (removed from the cluster, a fatal disk error).
func (m *Member) Stopped() <-chan struct{} { return m.etcd.Server.StopNotify() }

// Err delivers the errors that stop the member's listeners; it is closed
// by Close.
func (m *Member) Err() <-chan error { return m.etcd.Err() }

// ClientURLs are the URLs clients reach the member at, for
// Config.Endpoints and etcdctl --endpoints.
func (m *Member) ClientURLs() []string {
	var out []string
	for _, u := range m.etcd.Config().AdvertiseClientUrls {
		out = append(out, u.String())
	}
	return out
}

// PeerURLs are the URLs the other members reach this one at.
func (m *Member) PeerURLs() []string {
	var out []string
	for _, u := range m.etcd.Config().AdvertisePeerUrls {
		out = append(out, u.String())
	}
	return out
}

// Close stops the member and returns once it is down; every write it
// acknowledged is on disk. A member that stops leaves the cluster one
// member short, not one member smaller: it rejoins when started again on
// the same DataDir. Close is idempotent.
func (m *Member) Close() {
	m.closeOnce.Do(func() {
		m.etcd.Close()
		<-m.etcd.Server.StopNotify()
	})
}

// etcdConfig is what every etcd minictl starts has in common, embedded or a
// member of a cluster.
func etcdConfig(name, dir string, clients, peers []url.URL, progress time.Duration, log *slog.Logger) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = name
	ec.Dir = dir
	ec.ListenClientUrls = clients
	ec.AdvertiseClientUrls = clients
	ec.ListenPeerUrls = peers
	ec.AdvertisePeerUrls = peers
	ec.AutoCompactionRetention = "0" // the API servers compact, like kube-apiserver
	ec.QuotaBackendBytes = quotaBackendBytes
	ec.WatchProgressNotifyInterval = progress
	ec.LogLevel = "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(log.With(slog.String("component", "etcd"))))
	return ec
}
