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
	// Transform, if set, is every informer's transform (client-go's
	// WithTransform): for instance StripManagedFields, in a process
	// whose controllers never read managedFields.
	Transform TransformFunc
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
//   - Subscribe is how a controller follows a resource that may stop being
//     served (a custom resource): it adds a handler to the resource's one
//     informer, and Close takes the handler away again. An informer that
//     only subscriptions asked for stops, and is forgotten, when its last
//     subscription closes; one asked for by For or ForResource runs on.
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
	// kept is set once For or ForResource handed the informer out: it then
	// runs for the factory's life. Otherwise subscriptions counts who
	// holds it, and the last one to close stops it.
	kept          bool
	subscriptions int
	// stop ends the informer's Run; done is closed once Run has returned.
	// Both are set by Start.
	stop context.CancelFunc
	done chan struct{}
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
	e.kept = true
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
	e.kept = true
	return e.dynamicInformer(res)
}

func (e *factoryEntry) dynamicInformer(res *api.Resource) *Informer[api.Object] {
	if e.dynamic == nil {
		e.dynamic = &Informer[api.Object]{SharedInformer: e.shared, resource: res.GroupResource()}
	}
	return e.dynamic
}

// Subscription is one handler's hold on the factory's informer of a
// resource; see Subscribe.
type Subscription struct {
	// Informer is the resource's informer, seen as ForResource sees it.
	Informer *Informer[api.Object]
	reg      *HandlerRegistration
	close    func()
	once     sync.Once
}

// HasSynced reports whether the informer has synced and the handler has
// handled the initial list (HandlerRegistration.HasSynced).
func (s *Subscription) HasSynced() bool { return s.reg.HasSynced() }

// Close removes the handler, and stops the informer if nothing else holds
// it. It returns once the handler is called no more and, if it stopped the
// informer, once the informer's Run has returned. Closing twice does
// nothing.
func (s *Subscription) Close() { s.once.Do(s.close) }

// Subscribe adds h to the factory's informer of res, creating the informer
// on first use; the next Start runs it if it is not running. Subscribe is
// for resources that may stop being served: Close the subscription then,
// and the informer stops with its last subscription unless For or
// ForResource handed it out too.
func (f *SharedInformerFactory) Subscribe(res *api.Resource, h ResourceEventHandler) (*Subscription, error) {
	f.mu.Lock()
	k := informerKey{res: res}
	e := f.entryLocked(res, "", nil)
	reg, err := e.shared.AddEventHandler(h)
	if err != nil {
		f.mu.Unlock()
		return nil, fmt.Errorf("subscribe to %s: %w", res.GroupResource(), err)
	}
	e.subscriptions++
	inf := e.dynamicInformer(res)
	f.mu.Unlock()

	return &Subscription{Informer: inf, reg: reg, close: func() {
		e.shared.RemoveEventHandler(reg)
		f.mu.Lock()
		e.subscriptions--
		last := e.subscriptions == 0 && !e.kept && f.informers[k] == e
		if last {
			delete(f.informers, k)
		}
		stop, done := e.stop, e.done
		f.mu.Unlock()
		if last && stop != nil {
			stop()
			<-done
		}
	}}, nil
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
		Transform:    f.opts.Transform,
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
		if e.stop != nil {
			continue
		}
		ectx, stop := context.WithCancel(ctx)
		e.stop, e.done = stop, make(chan struct{})
		f.running.Go(func() {
			defer close(e.done)
			e.shared.Run(ectx)
		})
	}
}

// WaitForCacheSync waits until every started informer has synced, or ctx is
// done, and reports each one's HasSynced by name ("pods",
// "deployments.apps", "pods[node=node-1]").
func (f *SharedInformerFactory) WaitForCacheSync(ctx context.Context) map[string]bool {
	f.mu.Lock()
	var started []*SharedInformer
	for _, e := range f.informers {
		if e.stop != nil {
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
