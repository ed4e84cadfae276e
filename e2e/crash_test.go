package e2e

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// durableUpArgs are the flags of the `minictl up` that the durability tests kill
// and restart: the API server, etcd and the scheduler, with no nodes and no
// controller manager, so that it starts in about a second and only the
// writers write.
var durableUpArgs = []string{"--nodes", "0", "--controller-manager=false"}

// startUp starts `minictl up` on addr and dir without waiting for it.
func startUp(t *testing.T, addr, dir string, extra ...string) *minitest.Process {
	t.Helper()
	return minitest.StartUp(t, addr, dir, append(slices.Clone(durableUpArgs), extra...)...)
}

// kill sends SIGKILL and waits until the process is gone.
func kill(t *testing.T, p *minitest.Process) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
}

// TestCrashRestart kills `minictl up` with SIGKILL at random moments, now
// and then before it is even ready, while writers create, update and
// delete, and restarts it on the same data dir, 20 times. Every write that
// was acknowledged is there at the end (and none that was not, unless its
// answer was lost and it landed), and every write was acknowledged at a
// higher resourceVersion than every write acknowledged before it was sent.
func TestCrashRestart(t *testing.T) {
	const cycles = 20
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx := minitest.Context(t)
	addr, dir := minitest.FreeAddr(t), t.TempDir()
	url := "http://" + addr

	p := startUp(t, addr, dir)
	p.WaitReady(t, url, 60*time.Second)
	l := newLedger(t, "crash")
	servers := configMaps(t, url)
	stop := make(chan struct{})
	wait := l.writers(ctx, stop, 4, 5, seed, servers)
	var stopOnce sync.Once
	stopWriters := func() { stopOnce.Do(func() { close(stop); wait() }) }
	defer stopWriters()

	for range cycles {
		l.waitAck(time.Now(), 30*time.Second, "the restart")
		time.Sleep(rand.N(300 * time.Millisecond))
		kill(t, p)
		if rng.IntN(4) == 0 {
			// Kill it again while etcd replays its log or the API server
			// starts.
			p = startUp(t, addr, dir)
			time.Sleep(rand.N(time.Second))
			kill(t, p)
		}
		p = startUp(t, addr, dir)
		p.WaitReady(t, url, 60*time.Second)
	}
	l.waitAck(time.Now(), 30*time.Second, "the last restart")
	stopWriters()
	l.report()
	if n := l.acked.Load(); n < cycles {
		t.Errorf("only %d writes acknowledged over %d restarts", n, cycles)
	}
	check, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l.checkStored(check, servers[0])
}
