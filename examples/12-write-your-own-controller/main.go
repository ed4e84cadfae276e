// Command pods-by-node is a complete controller in one file, built like
// minictl's own (and Kubernetes') controllers: informers fill a cache and
// call handlers; the handlers only enqueue a key; workers take keys off the
// queue and sync them, reading from the cache and writing the difference
// through the API.
//
// What it keeps: in every namespace with pods on nodes, a ConfigMap
// "pods-by-node" whose data maps each node to the comma-separated names of
// the namespace's pods bound to it (and not finished or being deleted).
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
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
	"github.com/minictl/minictl/informer/workqueue"
)

const (
	configMapName = "pods-by-node"
	managedBy     = "app.kubernetes.io/managed-by" // the label that marks our ConfigMaps
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "pods-by-node:", err)
		os.Exit(1)
	}
}

// controller is what the workers share: two caches to read, a client to
// write, and the queue of namespaces to look at.
type controller struct {
	pods       informer.Lister[*corev1.Pod]
	configMaps informer.Lister[*corev1.ConfigMap]
	client     *client.Client[*corev1.ConfigMap]
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

	// 1. Informers: one list+watch per resource, kept in a local cache.
	// The ConfigMap informer is filtered by the server: it sees ours only.
	factory := informer.NewSharedInformerFactory(rc, informer.FactoryOptions{})
	defer factory.Shutdown()
	pods := informer.For[*corev1.Pod](factory)
	configMaps := informer.ForWith[*corev1.ConfigMap](factory, configMapName, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + configMapName
	})
	c := &controller{
		pods:       pods.Lister(),
		configMaps: configMaps.Lister(),
		client:     client.For[*corev1.ConfigMap](rc),
		queue:      workqueue.New[string]("pods-by-node", workqueue.Options{}),
		log:        log,
	}
	defer c.queue.ShutDown()

	// 2. Handlers only enqueue. The key is the namespace: a change to any
	// pod, or to our ConfigMap, means "look at this namespace again".
	enqueue := func(obj any) {
		if key, err := informer.MetaNamespaceKeyFunc(obj); err == nil {
			namespace, _, _ := informer.SplitMetaNamespaceKey(key)
			c.queue.Add(namespace)
		}
	}
	handler := informer.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any, _ bool) { enqueue(obj) },
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
	if _, err := pods.AddEventHandler(handler); err != nil {
		return err
	}
	if _, err := configMaps.AddEventHandler(handler); err != nil {
		return err
	}

	// 3. Start the informers; act only once the caches hold everything.
	factory.Start(ctx)
	if !informer.WaitForCacheSync(ctx, pods.HasSynced, configMaps.HasSynced) {
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

// processNextWorkItem syncs one key: forgotten on success, retried with
// backoff on failure. It returns false once the queue is shut down.
func (c *controller) processNextWorkItem(ctx context.Context) bool {
	namespace, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(namespace)
	if err := c.sync(ctx, namespace); err != nil {
		c.log.Info("sync failed; will retry", "namespace", namespace, "err", err, "retries", c.queue.NumRequeues(namespace))
		c.queue.AddRateLimited(namespace)
		return true
	}
	c.queue.Forget(namespace)
	return true
}

// sync makes namespace's ConfigMap say what the pod cache says: desired
// state from one cache, observed state from the other, and a write only
// when they differ.
func (c *controller) sync(ctx context.Context, namespace string) error {
	byNode := map[string][]string{}
	for _, pod := range c.pods.ByNamespace(namespace).List(labels.Everything()) {
		finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && !finished {
			byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod.Name)
		}
	}
	want := map[string]string{}
	for node, names := range byNode {
		slices.Sort(names)
		want[node] = strings.Join(names, ",")
	}

	cur, err := c.configMaps.Get(namespace, configMapName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists := err == nil
	if exists && cur.Labels[managedBy] != "pods-by-node" {
		return nil // someone else's ConfigMap of that name: not ours to touch
	}
	var action string
	switch {
	case !exists && len(want) == 0:
		return nil // no pods, no ConfigMap: as it should be
	case !exists:
		action = "created"
		_, err = c.client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: configMapName, Labels: map[string]string{managedBy: "pods-by-node"}},
			Data:       want,
		})
		if client.IsForbidden(err) {
			return nil // the namespace is being deleted: nothing may be created in it
		}
	case len(want) == 0:
		action = "deleted (no pods on nodes)"
		err = c.client.Delete(ctx, namespace, configMapName, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion},
		})
		if client.IsNotFound(err) {
			return nil // gone already: our cache had not seen it yet
		}
	case maps.Equal(cur.Data, want):
		return nil // the usual case: nothing to do
	default:
		action = "updated"
		next := cur.DeepCopy() // never modify what the cache holds
		next.Data = want
		_, err = c.client.Update(ctx, next) // 409 Conflict if our cache was behind: retried
	}
	if err != nil {
		return fmt.Errorf("ConfigMap not %s: %w", action, err)
	}
	c.log.Info(fmt.Sprintf("%s: ConfigMap %s %v", namespace, action, want))
	return nil
}
