package informer

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

// ListerWatcher is what a Reflector needs from the API: one page of a list,
// and a watch. It is the consumer's interface: NewListWatch adapts a
// client.Client[T] to it, and tests wrap it to inject failures.
type ListerWatcher interface {
	// List returns one page. opts carries the Reflector's limit, continue
	// token and resourceVersion.
	List(ctx context.Context, opts metav1.ListOptions) (*Page, error)
	// Watch opens a watch from opts.ResourceVersion. The stream ends when
	// ctx is cancelled, Stop is called, or the server ends it.
	Watch(ctx context.Context, opts metav1.ListOptions) (WatchStream, error)
}

// Page is one page of a list.
type Page struct {
	Items           []api.Object
	ResourceVersion string // the list's version: watch from here
	Continue        string // non-empty: more pages follow
}

// WatchEvent is one event of a watch stream.
type WatchEvent struct {
	Type watch.EventType // Added, Modified, Deleted, Bookmark or Error
	// Object is the object after the change (its last state, for Deleted);
	// for Bookmark only its resourceVersion means anything; nil for Error.
	Object api.Object
	// Status says what went wrong, for Error only. Code 410 means the
	// requested resourceVersion is too old: relist.
	Status *metav1.Status
}

// WatchStream is an open watch.
type WatchStream interface {
	// Next blocks until the next event and returns it, or returns false
	// once the stream has ended; Err then says why.
	Next() (WatchEvent, bool)
	// Stop ends the stream and waits until its resources are released. It
	// is idempotent.
	Stop()
	// Err is nil for a clean end (Stop, a cancelled context, the server
	// closing the response) and the failure otherwise.
	Err() error
}

// NewListWatch returns the ListerWatcher of c's resource in namespace ("":
// all namespaces). tweak, if not nil, is applied to the options of every
// list and watch; it should set only the selectors, for instance
// opts.FieldSelector = "spec.nodeName=node-1", and must be the same for
// lists and watches, or the cache would not match what is watched.
func NewListWatch[T api.Object](c *client.Client[T], namespace string, tweak func(*metav1.ListOptions)) ListerWatcher {
	return &clientListWatch[T]{c: c, namespace: namespace, tweak: tweak}
}

type clientListWatch[T api.Object] struct {
	c         *client.Client[T]
	namespace string
	tweak     func(*metav1.ListOptions)
}

func (lw *clientListWatch[T]) options(opts metav1.ListOptions) metav1.ListOptions {
	if lw.tweak != nil {
		lw.tweak(&opts)
	}
	return opts
}

func (lw *clientListWatch[T]) List(ctx context.Context, opts metav1.ListOptions) (*Page, error) {
	list, err := lw.c.List(ctx, lw.namespace, lw.options(opts))
	if err != nil {
		return nil, err
	}
	page := &Page{
		Items:           make([]api.Object, len(list.Items)),
		ResourceVersion: list.ResourceVersion,
		Continue:        list.Continue,
	}
	for i, item := range list.Items {
		page.Items[i] = item
	}
	return page, nil
}

func (lw *clientListWatch[T]) Watch(ctx context.Context, opts metav1.ListOptions) (WatchStream, error) {
	w, err := lw.c.Watch(ctx, lw.namespace, lw.options(opts))
	if err != nil {
		return nil, err
	}
	return clientWatchStream[T]{w}, nil
}

// clientWatchStream reads a client.Watcher's events as WatchEvents, without
// a goroutine of its own.
type clientWatchStream[T api.Object] struct {
	w *client.Watcher[T]
}

func (s clientWatchStream[T]) Next() (WatchEvent, bool) {
	ev, ok := <-s.w.Events()
	if !ok {
		return WatchEvent{}, false
	}
	out := WatchEvent{Type: ev.Type, Status: ev.Status}
	if ev.Type != watch.Error {
		out.Object = ev.Object
	}
	return out, true
}

func (s clientWatchStream[T]) Stop()      { s.w.Stop() }
func (s clientWatchStream[T]) Err() error { return s.w.Err() }
