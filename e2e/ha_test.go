package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/minitest"
)

// failoverTimeout bounds how long writes may stop after a failure: a few
// etcd election timeouts (1s) or controller-manager lease durations (3s
// with --fast), with room for a loaded test machine.
const failoverTimeout = 20 * time.Second

// etcdMember is one `minictl etcd` process.
type etcdMember struct {
	name, clientURL string
	p               *minitest.Process
}

// startEtcdCluster starts a new cluster of three `minictl etcd` members,
// as README's "Running on an etcd cluster" does, and waits until each is
// ready.
func startEtcdCluster(t *testing.T) []*etcdMember {
	t.Helper()
	members := make([]*etcdMember, 3)
	peers := make([]string, 3)
	var cluster []string
	for i := range members {
		members[i] = &etcdMember{name: fmt.Sprintf("etcd-%d", i+1), clientURL: "http://" + minitest.FreeAddr(t)}
		peers[i] = "http://" + minitest.FreeAddr(t)
		cluster = append(cluster, members[i].name+"="+peers[i])
	}
	dir := t.TempDir()
	for i, m := range members {
		m.p = minitest.Start(t, false, "etcd", "--name", m.name, "--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.clientURL, "--listen-peer-urls", peers[i],
			"--initial-cluster", strings.Join(cluster, ","))
	}
	for _, m := range members {
		eventually(t, m.name+" ready", func() (bool, string) {
			select {
			case <-m.p.Exited():
				t.Fatalf("%s exited:\n%s", m.name, m.p.Stderr)
			default:
			}
			return strings.Contains(m.p.Stdout.String(), "is ready"), m.p.Stdout.String()
		})
	}
	return members
}

// etcdLeader returns the member that leads the cluster now.
func etcdLeader(t *testing.T, members []*etcdMember) *etcdMember {
	t.Helper()
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.clientURL)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, m.clientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return m
		}
	}
	t.Fatal("no etcd member leads")
	return nil
}

// startAPIServer starts `minictl apiserver` on etcd and waits until it is
// ready.
func startAPIServer(t *testing.T, members []*etcdMember) (*minitest.Process, string) {
	t.Helper()
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.clientURL)
	}
	addr := minitest.FreeAddr(t)
	p := minitest.Start(t, false, "apiserver", "--listen", addr, "--etcd-endpoints", strings.Join(endpoints, ","))
	url := "http://" + addr
	p.WaitReady(t, url, 60*time.Second)
	return p, url
}

// leaseHolder is the identity holding the controller manager's Lease, ""
// if none.
func leaseHolder(ctx context.Context, leases *client.Client[*coordinationv1.Lease]) string {
	l, err := leases.Get(ctx, "kube-system", "kube-controller-manager")
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestEtcdClusterFailover runs minictl on a cluster of three etcd members,
// with two API servers and two controller managers (reaching the API
// servers through a load balancer, as a control-plane endpoint does).
// Under a steady load of writes through both API servers, and a watcher
// on each, it kills the etcd leader, then one API server, then the leading
// controller manager. After each failure writes carry on within the
// election and lease times; at the end no write that landed is lost, each
// watcher (the one on the dead API server resumed on the other) saw every
// change exactly once, in order, with no relist, and the controllers still
// reconcile.
func TestEtcdClusterFailover(t *testing.T) {
	if testing.Short() {
		if os.Getenv("CI") != "" {
			t.Fatal("-short skips the etcd cluster failover test, which CI must run")
		}
		t.Skip("starts an etcd cluster of three, two API servers and two controller managers")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := minitest.Context(t)
	members := startEtcdCluster(t)
	apiA, urlA := startAPIServer(t, members)
	_, urlB := startAPIServer(t, members)
	lb := newBalancer(t, strings.TrimPrefix(urlA, "http://"), strings.TrimPrefix(urlB, "http://"))
	cms := []*controllerManager{startControllerManager(t, lb.URL()), startControllerManager(t, lb.URL())}

	rc, err := client.New(&client.Config{Server: lb.URL(), Timeout: writeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	leases := client.For[*coordinationv1.Lease](rc)
	var leader, standby *controllerManager
	eventually(t, "a controller manager to take the lease", func() (bool, string) {
		holder := leaseHolder(ctx, leases)
		for i, cm := range cms {
			if cm.identity == holder {
				leader, standby = cm, cms[1-i]
			}
		}
		return leader != nil, holder
	})
	rss, pods := client.For[*appsv1.ReplicaSet](rc), client.For[*corev1.Pod](rc)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ha", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ha"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ha"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if _, err := rss.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	waitPods := func(n int) {
		eventually(t, fmt.Sprintf("%d pods of ReplicaSet ha", n), func() (bool, string) {
			got := len(livePods(t, pods, "ha"))
			return got == n, fmt.Sprint(got)
		})
	}
	waitPods(2)

	// The load: writers alternate between the API servers; a watcher on
	// each moves to the other when its own dies.
	l := newLedger(t, "ha")
	servers := configMaps(t, urlA, urlB)
	stop := make(chan struct{})
	wait := l.writers(ctx, stop, 3, 4, seed, servers)
	var stopOnce sync.Once
	stopWriters := func() { stopOnce.Do(func() { close(stop); wait() }) }
	defer stopWriters()
	watchCtx, cancelWatchers := context.WithCancel(ctx)
	defer cancelWatchers()
	logs := make([]*watchLog, len(servers))
	var wg sync.WaitGroup
	for i := range logs {
		wg.Go(func() {
			logs[i] = l.watch(watchCtx, fmt.Sprintf("on %s", servers[i].REST().Server()), watchOptions{servers: servers, first: i, seed: seed + uint64(i)})
		})
	}
	defer wg.Wait()
	defer cancelWatchers()
	l.waitAck(time.Now().Add(time.Second), failoverTimeout, "the load's start")

	// 1. The etcd leader dies: the other two elect a new one.
	etcdDead := etcdLeader(t, members)
	killed := time.Now()
	kill(t, etcdDead.p)
	t.Logf("etcd leader %s killed: writes went on after %s", etcdDead.name, l.waitAck(killed, failoverTimeout, "the etcd leader's death").Round(time.Millisecond))
	l.waitAck(time.Now().Add(time.Second), failoverTimeout, "the etcd failover")

	// 2. API server A dies: writes and A's watcher go on through B, and
	// the controller managers reconnect through the balancer.
	killed = time.Now()
	kill(t, apiA)
	t.Logf("API server %s killed: writes went on after %s", urlA, l.waitAck(killed, failoverTimeout, "an API server's death").Round(time.Millisecond))
	l.waitAck(time.Now().Add(time.Second), failoverTimeout, "the API server failover")

	// 3. The leading controller manager dies: the standby takes the lease
	// and reconciles.
	killed = time.Now()
	kill(t, leader.p)
	deadline := killed.Add(failoverTimeout)
	for leaseHolder(ctx, leases) != standby.identity {
		if time.Now().After(deadline) {
			t.Fatalf("the standby controller manager did not take the lease within %s of the leader's death", failoverTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("leading controller manager killed: the standby led after %s", time.Since(killed).Round(time.Millisecond))
	if _, err := rss.Patch(ctx, "default", "ha", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`)); err != nil {
		t.Fatal(err)
	}
	waitPods(4)
	l.waitAck(time.Now().Add(time.Second), failoverTimeout, "the controller manager failover")

	stopWriters()
	end := l.writeEnd(ctx, servers[1])
	awaitWatchers(t, &wg, cancelWatchers)
	l.report()
	l.checkStored(ctx, servers[1])
	l.checkWatch(logs, end)
	for _, log := range logs {
		t.Logf("watcher %s: %d resumes from a resourceVersion, %d on another server", log.name, log.resumes, log.moved)
		if log.gone > 0 {
			t.Errorf("watcher %s was told 410 Gone %d times: it could not resume without a relist", log.name, log.gone)
		}
	}
	if logs[0].moved == 0 {
		t.Errorf("watcher %s never moved to the other API server", logs[0].name)
	}
}
