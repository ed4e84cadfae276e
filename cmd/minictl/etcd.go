package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/minictl/minictl/store"
)

// runEtcd runs one member of an etcd cluster, for `minictl apiserver
// --etcd-endpoints` when one machine is not enough: three of them make a
// cluster that keeps serving while any two run. The flags are named as
// etcd's, which advertises what these listen on: the etcd binary takes a
// member's place given also --advertise-client-urls and
// --initial-advertise-peer-urls.
func runEtcd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("etcd")
	name := fs.String("name", "default", "the member's name, as --initial-cluster names it")
	dataDir := fs.String("data-dir", "", "directory for the member's WAL and database (default: <name>.etcd in minictl's data directory); restarting on it rejoins the cluster")
	clientURLs := fs.String("listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to serve clients on (and to advertise); port 0 picks a free one")
	peerURLs := fs.String("listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to serve the other members on (and to advertise)")
	cluster := fs.String("initial-cluster", "", "every member of a new cluster, name=peer-url,... (default: this member alone)")
	state := fs.String("initial-cluster-state", "new", "new: form a new cluster; existing: join a running one that lists this member")
	token := fs.String("initial-cluster-token", "etcd-cluster", "tells clusters started from the same --initial-cluster apart")
	heartbeat := fs.Uint("heartbeat-interval", 100, "milliseconds between the leader's heartbeats")
	election := fs.Uint("election-timeout", 1000, "milliseconds a follower waits for the leader before it starts an election")
	var lf logFlags
	lf.bind(fs)
	if err := parseFlags(ctx, fs, args); err != nil {
		return err
	}
	if *state != "new" && *state != "existing" {
		return fmt.Errorf("--initial-cluster-state must be new or existing, not %q", *state)
	}
	clients, err := parseURLs("--listen-client-urls", *clientURLs)
	if err != nil {
		return err
	}
	peers, err := parseURLs("--listen-peer-urls", *peerURLs)
	if err != nil {
		return err
	}
	if *dataDir == "" {
		*dataDir = filepath.Join(defaultDataDir(), *name+".etcd")
	}
	log, err := lf.logger(stderr, nil)
	if err != nil {
		return err
	}
	m, err := store.StartMember(store.MemberConfig{
		Name: *name, DataDir: *dataDir, ClientURLs: clients, PeerURLs: peers,
		InitialCluster: *cluster, Existing: *state == "existing", InitialClusterToken: *token,
		HeartbeatInterval: time.Duration(*heartbeat) * time.Millisecond,
		ElectionTimeout:   time.Duration(*election) * time.Millisecond,
		Logger:            log,
	})
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(stdout, "etcd member %s: clients on %s, peers on %s, data in %s\n",
		*name, strings.Join(m.ClientURLs(), ","), strings.Join(m.PeerURLs(), ","), *dataDir)
	ready := m.Ready()
	for {
		select {
		case <-ready:
			fmt.Fprintf(stdout, "etcd member %s is ready\n", *name)
			ready = nil
		case err := <-m.Err():
			return fmt.Errorf("etcd member %s: %w", *name, err)
		case <-m.Stopped():
			return errors.New("etcd member " + *name + " stopped")
		case <-ctx.Done():
			return nil
		}
	}
}

func parseURLs(flagName, list string) ([]url.URL, error) {
	var out []url.URL
	for _, s := range splitList(list) {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Scheme != "http" {
			return nil, fmt.Errorf("%s: %q is not an http:// URL (members speak plain HTTP: keep them on loopback or a private network)", flagName, s)
		}
		out = append(out, *u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no URL given", flagName)
	}
	return out, nil
}
