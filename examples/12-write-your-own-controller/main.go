// Command pods-by-node is a complete controller in one file, built like
// minictl's own (and Kubernetes') controllers: informers fill a cache and
// call handlers; the handlers only enqueue a key; workers take keys off the
// queue and sync them, reading from the cache and writing the difference
// through the API.
//
// What it reconciles: PodsByNode, a custom resource (crd.json, next to this
// file, defines it; create the CRD first). Its spec names which pods of its
// namespace to report (a label selector); the controller writes, through
// the status subresource, which node each of those pods is bound to (pods
// not finished and not being deleted), how many there are, and the spec
// generation it has acted on.
//
//	go run . --server http://127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

// The custom resource, as crd.json defines it.
const (
	group  = "lessons.minictl.dev"
	plural = "podsbynodes"
)

// PodsByNode is the Go type of the custom resource, written by hand as
// kubebuilder projects write theirs. The API server stores and serves it
// as JSON; the client and the cache hold it as unstructured.Unstructured,
// and the controller converts to this type to read and write it.
type PodsByNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodsByNodeSpec   `json:"spec,omitempty"`
	Status            PodsByNodeStatus `json:"status,omitempty"`
}

// PodsByNodeSpec is what the user wants reported.
type PodsByNodeSpec struct {
	// Selector picks the namespace's pods to report, as a label selector
	// string (app=web); empty picks them all.
	Selector string `json:"selector,omitempty"`
}

// PodsByNodeStatus is what the controller saw.
type PodsByNodeStatus struct {
	ObservedGeneration int64               `json:"observedGeneration,omitempty"`
	Pods               int                 `json:"pods"`
	Nodes              map[string][]string `json:"nodes,omitempty"` // node → sorted pod names
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "pods-by-node:", err)
		os.Exit(1)
	}
}

// controller is what the workers share: two caches to read, a client to
// write, and the queue of PodsByNode keys (namespace/name) to look at.
type controller struct {
	pods       informer.Lister[*corev1.Pod]
	podsByNode informer.Lister[api.Object]
	client     *client.Client[api.Object]
	queue      *workqueue.Queue[string]
	log        *slog.Logger
}

// run runs the controller until ctx is done or --duration has passed.
func run(ctx context.Context, args []string, out io.Writer) error {
	flags := flag.NewFlagSet("pods-by-node", flag.ContinueOnError)
	flags.SetOutput(out)
	server := flags.String("server", client.DefaultServer, "API server URL")
	workers := flags.Int("workers", 2, "keys synced at the same time")
	duration := flags.Duration("duration", 0, "stop after this long (0: until interrupted)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	log := slog.New(slog.NewTextHandler(out, nil))
	rc, err := client.New(&client.Config{Server: *server, UserAgent: "pods-by-node", Timeout: 30 * time.Second})
	if err != nil {
		return err
	}

	// 0. Find the custom resource in discovery, as kubectl does: the CRD
	// must be there first. Its objects have no Go type compiled into the
	// client, so they travel as unstructured.Unstructured.
	res, err := discover(ctx, rc)
	if err != nil {
		return err
	}

	// 1. Informers: one list+watch per resource, kept in a local cache.
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	defer factory.Shutdown()
	pods := informer.For[*corev1.Pod](factory)
	podsByNode := informer.ForResource(factory, res)
	c := &controller{
		pods:       pods.Lister(),
		podsByNode: podsByNode.Lister(),
		client:     client.ForResource(rc, res),
		queue:      workqueue.New[string]("pods-by-node", workqueue.Options{}),
		log:        log,
	}
	defer c.queue.ShutDown()

	// 2. Handlers only enqueue. A PodsByNode's change enqueues its own key;
	// a pod's change enqueues every PodsByNode of the pod's namespace: each
	// may report it (the sync decides, with the selector).
	enqueue := func(obj any) {
		if key, err := informer.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := podsByNode.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { enqueue(obj) },
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	enqueueNamespace := func(obj any) {
		key, err := informer.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		namespace, _, _ := informer.SplitMetaNamespaceKey(key)
		for _, p := range c.podsByNode.ByNamespace(namespace).List(labels.Everything()) {
			enqueue(p)
		}
	}
	if _, err := pods.AddEventHandler(informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { enqueueNamespace(obj) },
		DeleteFunc: enqueueNamespace,
	}); err != nil {
		return err
	}

	// 3. Start the informers; act only once the caches hold everything.
	factory.Start(ctx)
	if !informer.WaitForCacheSync(ctx, pods.HasSynced, podsByNode.HasSynced) {
		return fmt.Errorf("caches did not sync: %w", context.Cause(ctx))
	}
	log.Info("caches synced; starting workers", "workers", *workers)

	// 4. Workers. The queue never hands one key to two workers at once.
	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			for c.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	log.Info("stopped")
	return nil
}

// discover returns the catalogue entry of PodsByNode, as the API server's
// discovery lists it, or an error saying to create the CRD first.
func discover(ctx context.Context, rc *client.RESTClient) (*api.Resource, error) {
	served, err := rc.ServerPreferredResources(ctx)
	if err != nil {
		if _, partial := client.IsGroupDiscoveryFailed(err); !partial {
			return nil, fmt.Errorf("discovery: %w", err)
		}
	}
	for _, r := range served {
		if r.Resource.Group == group && r.Resource.Plural == plural {
			return r.Resource, nil
		}
	}
	return nil, fmt.Errorf("the server does not serve %s.%s: create the CustomResourceDefinition (crd.json) first", plural, group)
}

// processNextWorkItem syncs one key: forgotten on success, retried with
// backoff on failure. It returns false once the queue is shut down.
func (c *controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.log.Info("sync failed; will retry", "key", key, "err", err, "retries", c.queue.NumRequeues(key))
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync makes the status of the PodsByNode named by key say what the pod
// cache says: desired state from one cache, observed state from the other,
// and a write (to the status subresource) only when they differ.
func (c *controller) sync(ctx context.Context, key string) error {
	namespace, name, err := informer.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key we made: nothing to do, ever
	}
	obj, err := c.podsByNode.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // deleted: its status went with it
	}
	if err != nil {
		return err
	}
	var cur PodsByNode
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &cur); err != nil {
		return nil // the schema makes this impossible; retrying would not help
	}
	selector, err := labels.Parse(cur.Spec.Selector)
	if err != nil {
		c.log.Info(fmt.Sprintf("%s: bad selector %q, not reported", key, cur.Spec.Selector), "err", err)
		return nil // the user must fix the spec; its change enqueues us again
	}

	want := PodsByNodeStatus{ObservedGeneration: cur.Generation, Nodes: map[string][]string{}}
	for _, pod := range c.pods.ByNamespace(namespace).List(selector) {
		finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && !finished {
			want.Nodes[pod.Spec.NodeName] = append(want.Nodes[pod.Spec.NodeName], pod.Name)
			want.Pods++
		}
	}
	for _, names := range want.Nodes {
		slices.Sort(names)
	}
	if len(want.Nodes) == 0 {
		want.Nodes = nil
	}
	if sameStatus(cur.Status, want) {
		return nil // the usual case: nothing to do
	}

	// Write the status through /status, carrying the resourceVersion we
	// read: 409 Conflict if our cache was behind (then retried). Never
	// modify what the cache holds: cur is a converted copy.
	cur.Status = want
	next, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cur)
	if err != nil {
		return err
	}
	if _, err := c.client.UpdateStatus(ctx, &unstructured.Unstructured{Object: next}); err != nil {
		if client.IsNotFound(err) {
			return nil // deleted meanwhile: our cache had not seen it yet
		}
		return fmt.Errorf("status not updated: %w", err)
	}
	c.log.Info(fmt.Sprintf("%s: status updated: %d pods %v (generation %d)", key, want.Pods, want.Nodes, want.ObservedGeneration))
	return nil
}

// sameStatus reports whether two statuses say the same.
func sameStatus(a, b PodsByNodeStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && a.Pods == b.Pods &&
		maps.EqualFunc(a.Nodes, b.Nodes, slices.Equal)
}
