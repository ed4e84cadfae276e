// Command informer-trace shows the journey of a change from the API server
// to a controller's reconcile, one log line per stage.
//
// Start a server (`minictl up`), then this program:
//
//	go run ./examples/informer-trace --server http://127.0.0.1:8080 --namespace default
//
// and create a pod from another terminal:
//
//	curl -X POST -H 'Content-Type: application/json' \
//	  http://127.0.0.1:8080/api/v1/namespaces/default/pods \
//	  -d '{"metadata":{"name":"web"},"spec":{"containers":[{"name":"app","image":"nginx"}]}}'
//
// Each change to pod default/web then passes, in order:
//
//	reflector received  the watch event arrived (type=ADDED; LIST for the first list)
//	deltafifo queued    the Reflector queued it as a Delta under the pod's key
//	deltafifo popped    the informer took the key's Deltas off the queue
//	indexer updated     the local cache now holds the new state
//	handler called      the event handler is told (type=OnAdd)
//	key enqueued        the handler put "default/web" into the workqueue
//	worker reconciled   a worker took the key and read the pod from the cache
//
// The handler passes only the key: the worker reads the newest state from
// the cache, so ten quick changes to one pod may cost a single reconcile.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "informer-trace:", err)
		os.Exit(1)
	}
}

// run watches pods until ctx is done or --duration has passed, logging every
// stage of every change to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	flags := flag.NewFlagSet("informer-trace", flag.ContinueOnError)
	flags.SetOutput(out)
	server := flags.String("server", client.DefaultServer, "API server URL")
	namespace := flags.String("namespace", "default", `namespace to watch ("" for all)`)
	duration := flags.Duration("duration", 0, "stop after this long (0: until interrupted)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}

	logger := slog.New(slog.NewTextHandler(out, nil))
	rc, err := client.New(&client.Config{Server: *server, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	tracer := informer.SlogTracer(logger)
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{
		Namespace: *namespace,
		Trace:     tracer,
		Logger:    logger,
	})
	defer factory.Shutdown()
	pods := informer.For[*corev1.Pod](factory)
	// The informer's own stages carry resource=pods; so do ours.
	trace := tracer.With(slog.String(informer.TraceAttrResource, "pods"))

	queue := workqueue.New[string]("informer-trace", workqueue.Options{})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		key, err := informer.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		trace(informer.StageKeyEnqueued, slog.String(informer.TraceAttrKey, key))
		queue.Add(key)
	}
	if _, err := pods.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { enqueue(obj) },
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}

	factory.Start(ctx)
	if !informer.WaitForCacheSync(ctx, pods.HasSynced) {
		return fmt.Errorf("pods cache did not sync: %w", context.Cause(ctx))
	}
	logger.Info("watching pods", "server", *server, "namespace", *namespace)

	var worker sync.WaitGroup
	worker.Go(func() {
		for {
			key, shutdown := queue.Get()
			if shutdown {
				return
			}
			reconcile(pods.Lister(), key, trace)
			queue.Done(key)
		}
	})
	<-ctx.Done()
	queue.ShutDown()
	worker.Wait()
	return nil
}

// reconcile is where a controller would compare desired and observed state;
// here it reads the pod from the cache and says what it saw.
func reconcile(pods informer.Lister[*corev1.Pod], key string, trace informer.TraceFunc) {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return // not a key we made; nothing to do
	}
	pod, err := pods.Get(namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		trace(informer.StageReconciled, slog.String(informer.TraceAttrKey, key), slog.String("observed", "deleted"))
	case err != nil:
		trace(informer.StageReconciled, slog.String(informer.TraceAttrKey, key), slog.String("error", err.Error()))
	default:
		trace(informer.StageReconciled, slog.String(informer.TraceAttrKey, key),
			slog.String(informer.TraceAttrResourceVersion, pod.ResourceVersion),
			slog.String("phase", string(pod.Status.Phase)))
	}
}
