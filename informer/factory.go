package informer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

// FactoryOptions configures a SharedInformerFactory. The zero value is
// usable.
type FactoryOptions struct {
	// DefaultResync is every informer's default handler resync period;
	// 0 means none.
	DefaultResync time.Duration
	// Namespace limits every informer to one namespace; "" means all.
	Namespace string
	// Trace, if set, is given to every informer, with the resource added
	// to each line; TraceActive, if set, switches it (see
	// SharedInformerOptions).
	Trace       TraceFunc
	TraceActive func() bool
	// Logger receives every informer's story. Nil means discard.
	Logger *slog.Logger
	// Reflector tunes every informer's Reflector (tests shorten the watch
	// timeout and the backoff here).
	Reflector ReflectorOptions
}

// SharedInformerFactory hands out one informer per resource (and per
// filter key) to every controller of a process, so that a resource is
// listed and watched once, however many controllers read it.
//
// Properties:
//
//   - For[T] returns the same *Informer[T] every time: one Reflector, one
//     watch and one cache per resource.
//   - ForResource shares that informer: a resource asked for by type and
//     by descriptor is listed and watched once, and its cache holds the
//     same objects either way (of the kind's Go type where it has one).
//   - Start starts every informer requested so far that is not running;
//     informers requested later start with the next Start.
//   - Shutdown stops every informer the factory started and waits for all
//     their goroutines; Start does nothing after it.
type SharedInformerFactory struct {
	rc   *client.RESTClient
	opts FactoryOptions

	// mu guards the fields below.
	mu        sync.Mutex
	informers map[informerKey]*factoryEntry
	cancels   []context.CancelFunc // one per Start call
	shutdown  bool
	running   sync.WaitGroup // informers' Run calls
}

// informerKey names one informer: a resource, and the key of a filtered
// informer ("" for the unfiltered one).
type informerKey struct {
	res *api.Resource
	key string
}

type factoryEntry struct {
	shared  *SharedInformer
	typed   any                   // the *Informer[T] For returned; nil until asked
	dynamic *Informer[api.Object] // the one ForResource returned; nil until asked
	started bool
}

// NewSharedInformerFactory returns a factory whose informers talk through
// rc.
func NewSharedInformerFactory(rc *client.RESTClient, opts FactoryOptions) *SharedInformerFactory {
	return &SharedInformerFactory{rc: rc, opts: opts, informers: map[informerKey]*factoryEntry{}}
}

// For returns the factory's informer of T's resource, creating it on first
// use. It panics when T is not a served resource, as client.For does.
func For[T api.Object](f *SharedInformerFactory) *Informer[T] {
	return ForWith[T](f, "", nil)
}

// ForWith returns a filtered informer of T's resource, named by key: tweak
// sets its selectors, for instance
//
//	informer.ForWith[*corev1.Pod](f, "node=node-1", func(o *metav1.ListOptions) {
//		o.FieldSelector = "spec.nodeName=node-1"
//	})
//
// The first call for a key creates the informer with its tweak; later calls
// with the same key return it and ignore their tweak. Key "" is For's
// unfiltered informer.
func ForWith[T api.Object](f *SharedInformerFactory, key string, tweak func(*metav1.ListOptions)) *Informer[T] {
	var zero T
	res, ok := api.ForObject(zero)
	if !ok {
		panic(fmt.Sprintf("informer.For: %T is not a served resource", zero))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(res, key, tweak)
	if inf, ok := e.typed.(*Informer[T]); ok {
		return inf
	}
	inf := &Informer[T]{SharedInformer: e.shared}
	e.typed = inf
	return inf
}

// ForResource returns the factory's informer of res, any resource the
// server serves, creating it on first use: the informer For returns for
// res's Go type, if it has one, seen through objects of type api.Object.
// Its cache holds what res.New makes (unstructured.Unstructured for a kind
// without a Go type), and its Lister's NotFound errors name res by group
// and plural, as client-go's dynamic listers do.
func ForResource(f *SharedInformerFactory, res *api.Resource) *Informer[api.Object] {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(res, "", nil)
	if e.dynamic == nil {
		e.dynamic = &Informer[api.Object]{SharedInformer: e.shared, resource: res.GroupResource()}
	}
	return e.dynamic
}

// entryLocked returns the entry of res's informer named by key, creating
// the informer, with tweak, if there is none. Every informer lists and
// watches through a client by descriptor, which decodes into res.New: the
// Go type where there is one, so For and ForResource share the cache.
func (f *SharedInformerFactory) entryLocked(res *api.Resource, key string, tweak func(*metav1.ListOptions)) *factoryEntry {
	k := informerKey{res: res, key: key}
	if e, ok := f.informers[k]; ok {
		return e
	}
	name := res.GroupResource().String()
	if key != "" {
		name += "[" + key + "]"
	}
	shared := NewSharedInformer(NewListWatch(client.ForResource(f.rc, res), f.opts.Namespace, tweak), SharedInformerOptions{
		Name:         name,
		ResyncPeriod: f.opts.DefaultResync,
		Trace:        f.opts.Trace.With(slog.String(TraceAttrResource, name)),
		TraceActive:  f.opts.TraceActive,
		Logger:       f.opts.Logger,
		Reflector:    f.opts.Reflector,
	})
	e := &factoryEntry{shared: shared}
	f.informers[k] = e
	return e
}

// Start runs every informer requested so far that is not running yet, each
// in its own goroutine, until ctx is done or Shutdown. It does not wait for
// them to sync; see WaitForCacheSync.
func (f *SharedInformerFactory) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	f.cancels = append(f.cancels, cancel)
	for _, e := range f.informers {
		if e.started {
			continue
		}
		e.started = true
		f.running.Go(func() { e.shared.Run(ctx) })
	}
}

// WaitForCacheSync waits until every started informer has synced, or ctx is
// done, and reports each one's HasSynced by name ("pods",
// "deployments.apps", "pods[node=node-1]").
func (f *SharedInformerFactory) WaitForCacheSync(ctx context.Context) map[string]bool {
	f.mu.Lock()
	var started []*SharedInformer
	for _, e := range f.informers {
		if e.started {
			started = append(started, e.shared)
		}
	}
	f.mu.Unlock()

	synced := make(map[string]bool, len(started))
	for _, inf := range started {
		synced[inf.Name()] = WaitForCacheSync(ctx, inf.HasSynced)
	}
	return synced
}

// Shutdown stops every informer the factory started and returns once they
// have all returned. Later Starts do nothing.
func (f *SharedInformerFactory) Shutdown() {
	f.mu.Lock()
	f.shutdown = true
	for _, cancel := range f.cancels {
		cancel()
	}
	f.mu.Unlock()
	f.running.Wait()
}
