package nodeipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controllertest"
	"github.com/minictl/minictl/informer"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv). Nodes are bare: the controller only reads their
// names and pod CIDRs.

type fixture struct {
	t     *testing.T
	rc    *client.RESTClient
	nodes *client.Client[*corev1.Node]
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rc := controllertest.Start(t).Client
	return &fixture{t: t, rc: rc, nodes: client.For[*corev1.Node](rc)}
}

// running is one controller instance.
type running struct {
	ctrl     *Controller
	recorder *record.FakeRecorder
	stop     func()
}

// start runs a controller instance with its own informers until stop (or
// the end of the test).
func (f *fixture) start(opts Options) *running {
	f.t.Helper()
	factory := informer.NewSharedInformerFactory(f.rc, informer.FactoryOptions{})
	rec := &record.FakeRecorder{}
	opts.Client, opts.Informers, opts.Recorder = f.rc, factory, rec
	opts.Logger = controllertest.Logger(f.t)
	c, err := New(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	stop := controllertest.Run(f.t, factory, 4, c)
	return &running{ctrl: c, recorder: rec, stop: stop}
}

// create creates nodes name-from .. name-(to-1), ten at a time.
func (f *fixture) create(from, to int, mutate ...func(*corev1.Node)) {
	f.t.Helper()
	var g errgroup.Group
	g.SetLimit(10)
	for i := from; i < to; i++ {
		g.Go(func() error {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i)}}
			for _, m := range mutate {
				m(node)
			}
			_, err := f.nodes.Create(ctx(f.t), node)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) delete(names []string) {
	f.t.Helper()
	var g errgroup.Group
	g.SetLimit(10)
	for _, name := range names {
		g.Go(func() error { return f.nodes.Delete(ctx(f.t), "", name, metav1.DeleteOptions{}) })
	}
	if err := g.Wait(); err != nil {
		f.t.Fatal(err)
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }

// list returns every node's pod CIDR, "" for none.
func (f *fixture) list() map[string]string {
	f.t.Helper()
	list, err := f.nodes.List(ctx(f.t), "", metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range list.Items {
		if n.Spec.PodCIDR != "" && (len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR) {
			f.t.Errorf("%s: podCIDR %q, podCIDRs %q", n.Name, n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
		out[n.Name] = n.Spec.PodCIDR
	}
	return out
}

// checkNoOverlap fails the test if two live nodes have overlapping pod
// CIDRs, or one lies outside cluster.
func checkNoOverlap(t *testing.T, cidrs map[string]string, cluster netip.Prefix) {
	t.Helper()
	var names []string
	for n, c := range cidrs {
		if c != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for i, a := range names {
		pa := netip.MustParsePrefix(cidrs[a])
		if !cluster.Contains(pa.Addr()) {
			t.Errorf("%s has %s, outside %s", a, pa, cluster)
		}
		for _, b := range names[i+1:] {
			if pb := netip.MustParsePrefix(cidrs[b]); pa.Overlaps(pb) {
				t.Errorf("%s and %s both have %s / %s", a, b, pa, pb)
			}
		}
	}
}

// waitAllAllocated waits until every live node has a pod CIDR, checking
// on every look that no two overlap.
func (f *fixture) waitAllAllocated(cluster netip.Prefix) map[string]string {
	f.t.Helper()
	var cidrs map[string]string
	controllertest.Eventually(f.t, "every node to have a podCIDR", func() (bool, string) {
		cidrs = f.list()
		checkNoOverlap(f.t, cidrs, cluster)
		var without []string
		for n, c := range cidrs {
			if c == "" {
				without = append(without, n)
			}
		}
		return len(without) == 0, fmt.Sprintf("%d of %d without: %v", len(without), len(cidrs), without)
	})
	return cidrs
}

// 200 nodes come and go in batches, never more than 60 at once, from a
// cluster CIDR of 64 ranges: no two live nodes ever share a range, and
// the ranges of deleted nodes are given again.
func TestCreationsAndDeletionsNeverOverlap(t *testing.T) {
	f := newFixture(t)
	const clusterCIDR = "10.244.0.0/18" // 64 ranges of /24
	cluster := netip.MustParsePrefix(clusterCIDR)
	r := f.start(Options{ClusterCIDR: clusterCIDR})

	next := 0
	var live []string
	create := func(n int) {
		f.create(next, next+n)
		for i := next; i < next+n; i++ {
			live = append(live, nodeName(i))
		}
		next += n
	}
	everHeld := map[string]string{} // range → a deleted node that held it
	reused := 0
	deleteOldest := func(n int) {
		cidrs := f.list()
		for _, name := range live[:n] {
			if c := cidrs[name]; c != "" {
				everHeld[c] = name
			}
		}
		f.delete(live[:n])
		live = live[n:]
	}
	steps := []struct{ create, delete int }{
		{50, 25}, {30, 40}, {45, 50}, {50, 30}, {25, 0},
	}
	for _, s := range steps {
		create(s.create)
		cidrs := f.waitAllAllocated(cluster) // the creates of this step
		for _, name := range live[len(live)-s.create:] {
			if prev, ok := everHeld[cidrs[name]]; ok {
				reused++
				t.Logf("%s got %s, which %s held before it was deleted", name, cidrs[name], prev)
			}
		}
		if len(cidrs) != len(live) {
			t.Fatalf("%d nodes, want %d", len(cidrs), len(live))
		}
		deleteOldest(s.delete)
		// Deletions interleave with the next creations: no waiting for
		// the releases.
	}
	if next != 200 {
		t.Fatalf("created %d nodes, want 200", next)
	}
	final := f.waitAllAllocated(cluster)
	if len(final) != 55 {
		t.Errorf("%d live nodes, want 55", len(final))
	}
	if reused == 0 {
		t.Error("no range of a deleted node was given again")
	}
	// The controller's own view agrees with the cluster, once it has seen
	// every deletion.
	controllertest.Eventually(t, "the controller to hold exactly the live nodes' ranges", func() (bool, string) {
		held := r.ctrl.podCIDRs()
		if len(held) != len(final) {
			return false, fmt.Sprintf("holds %d ranges, %d live nodes", len(held), len(final))
		}
		for n, p := range held {
			if final[n] != p.String() {
				return false, fmt.Sprintf("%s: holds %s, node has %q", n, p, final[n])
			}
		}
		return true, ""
	})
	for _, e := range r.recorder.Events() {
		if strings.Contains(e, "CIDRAssignmentFailed") {
			t.Errorf("event %q", e)
		}
	}
}

// A restarted controller keeps every node's range and gives new nodes
// only free ones, even those created while it was down.
func TestRestartKeepsAllocations(t *testing.T) {
	f := newFixture(t)
	cluster := netip.MustParsePrefix(DefaultClusterCIDR)
	// A node registered with a range of its own keeps it.
	f.create(0, 1, func(n *corev1.Node) { n.Spec.PodCIDR = "10.244.77.0/24" })
	first := f.start(Options{})
	f.create(1, 20)
	before := f.waitAllAllocated(cluster)
	if before[nodeName(0)] != "10.244.77.0/24" {
		t.Errorf("%s has %s, want the range it came with", nodeName(0), before[nodeName(0)])
	}
	first.stop()

	// While no controller runs: some nodes go, new ones come.
	f.delete([]string{nodeName(3), nodeName(4)})
	f.create(20, 40)

	second := f.start(Options{})
	after := f.waitAllAllocated(cluster)
	for name, cidr := range before {
		if name == nodeName(3) || name == nodeName(4) {
			continue
		}
		if after[name] != cidr {
			t.Errorf("%s: %s before the restart, %s after", name, cidr, after[name])
		}
	}
	inUse := map[string]bool{}
	for name, cidr := range before {
		if name != nodeName(3) && name != nodeName(4) {
			inUse[cidr] = true
		}
	}
	for i := 20; i < 40; i++ {
		if c := after[nodeName(i)]; inUse[c] {
			t.Errorf("%s got %s, which a node had before the restart", nodeName(i), c)
		}
	}
	for _, e := range second.recorder.Events() {
		t.Errorf("event %q", e)
	}
}

// An exhausted cluster CIDR: the node waits with a CIDRNotAvailable Event
// and gets the first range released.
func TestExhaustedClusterCIDR(t *testing.T) {
	f := newFixture(t)
	cluster := netip.MustParsePrefix("10.9.0.0/23") // two ranges
	r := f.start(Options{ClusterCIDR: cluster.String()})
	f.create(0, 2)
	before := f.waitAllAllocated(cluster)
	f.create(2, 3)
	controllertest.Eventually(t, "a CIDRNotAvailable event", func() (bool, string) {
		for _, e := range r.recorder.Events() {
			if e == "Normal CIDRNotAvailable Node node-002 status is now: CIDRNotAvailable" {
				return true, ""
			}
		}
		return false, fmt.Sprint(r.recorder.Events())
	})
	f.delete([]string{nodeName(0)})
	after := f.waitAllAllocated(cluster)
	if after[nodeName(2)] != before[nodeName(0)] {
		t.Errorf("%s got %q, want %s, released by %s", nodeName(2), after[nodeName(2)], before[nodeName(0)], nodeName(0))
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
