package apiserver_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/store"
)

// startFlaky starts a server on a store whose watches can be made to fail,
// with a namespace "flaky" to write in.
func startFlaky(t *testing.T) (*testenv.Env, *flakyWatches) {
	t.Helper()
	flaky := &flakyWatches{}
	env := testenv.StartWith(t, testenv.Options{Storage: func(st *store.Store) apiserver.Storage {
		flaky.Store = st
		return flaky
	}})
	createNamespace(t, env, "flaky")
	return env, flaky
}

// TestWatchCacheRecoversWhenItsEtcdWatchFails runs the server on a real
// store whose watches can be made to fail, as an etcd watch fails when its
// member loses the leader. The watch cache then closes every watcher, so
// that clients watch again, and follows a new etcd watch, so that what is
// written afterwards reaches them and its lists stay current.
func TestWatchCacheRecoversWhenItsEtcdWatchFails(t *testing.T) {
	env, flaky := startFlaky(t)
	pods := podPath("flaky", "")
	from := get[corev1.PodList](t, env, pods).ResourceVersion
	s := watch(t, env, pods+"?watch=true&resourceVersion="+from)
	create[corev1.Pod](t, env, pods, pod("a", "", nil))
	s.expect(t, "ADDED a") // the cache's etcd watch on pods is open: it brought a

	flaky.fail("/registry/core/pods/")
	s.ended(t, waitTimeout)

	s2 := watch(t, env, pods+"?watch=true")
	b := create[corev1.Pod](t, env, pods, pod("b", "", nil))
	s2.expect(t, "ADDED a", "ADDED b")
	cached := get[corev1.PodList](t, env, pods+"?resourceVersion="+b.ResourceVersion)
	if got := podNames(cached); !slices.Equal(got, []string{"flaky/a", "flaky/b"}) {
		t.Errorf("list from the watch cache after it relisted: %v, want [flaky/a flaky/b]", got)
	}
}

// TestWatchersResumeAfterTheEtcdWatchFails: when the watch cache's etcd
// watch fails, the cache watches etcd again from where it was instead of
// listing, so a client that resumes from the last resourceVersion it saw
// is served from the window, even though etcd's revision moved on
// meanwhile: nothing to list again, nothing lost.
func TestWatchersResumeAfterTheEtcdWatchFails(t *testing.T) {
	env, flaky := startFlaky(t)
	pods := podPath("flaky", "")
	from := get[corev1.PodList](t, env, pods).ResourceVersion
	s := watch(t, env, pods+"?watch=true&resourceVersion="+from)
	a := create[corev1.Pod](t, env, pods, pod("a", "", nil))
	s.expect(t, "ADDED a")
	create[corev1.ConfigMap](t, env, cmPath("flaky", ""), configMap("moves-the-revision", nil, nil))

	flaky.fail("/registry/core/pods/")
	s.ended(t, waitTimeout)

	resumed := watch(t, env, pods+"?watch=true&resourceVersion="+a.ResourceVersion)
	create[corev1.Pod](t, env, pods, pod("b", "", nil))
	resumed.expect(t, "ADDED b")
}

// flakyWatches is a real store whose watches end with an error when told
// to; everything else is the store's.
type flakyWatches struct {
	*store.Store

	mu sync.Mutex
	// kills holds, by prefix, a channel that fail closes to end the
	// watches open on that prefix.
	kills map[string]chan struct{}
}

func (f *flakyWatches) Watch(ctx context.Context, prefix string, fromRevision int64) <-chan store.WatchEvent {
	kill := f.killSwitch(prefix)
	ctx, cancel := context.WithCancel(ctx)
	in := f.Store.Watch(ctx, prefix, fromRevision)
	out := make(chan store.WatchEvent)
	go func() {
		defer close(out)
		defer cancel() // ends the store's watch too
		for {
			var ev store.WatchEvent
			select {
			case <-kill:
				ev = store.WatchEvent{Err: errors.New("etcd watch failed on purpose")}
			case e, ok := <-in:
				if !ok {
					return
				}
				ev = e
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Err != nil {
				return
			}
		}
	}()
	return out
}

// fail ends every watch open on prefix with an error event.
func (f *flakyWatches) fail(prefix string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if kill, ok := f.kills[prefix]; ok {
		close(kill)
		delete(f.kills, prefix)
	}
}

func (f *flakyWatches) killSwitch(prefix string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kills == nil {
		f.kills = map[string]chan struct{}{}
	}
	kill, ok := f.kills[prefix]
	if !ok {
		kill = make(chan struct{})
		f.kills[prefix] = kill
	}
	return kill
}
