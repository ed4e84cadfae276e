package metricsserver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// DefaultResolution is how often kubelets are scraped (metrics-server's
// --metric-resolution).
const DefaultResolution = 15 * time.Second

// Options is what a Server needs.
type Options struct {
	// Nodes returns the nodes whose kubelets to scrape.
	Nodes func(ctx context.Context) ([]*corev1.Node, error)
	// Resolution is how often every kubelet is scraped; 0 is
	// DefaultResolution.
	Resolution time.Duration
	// Client reaches the kubelets; nil is a client of the Server's own.
	Client *http.Client
	// Logger tells of failed scrapes; nil discards.
	Logger *slog.Logger
}

// Server scrapes kubelets and answers with their nodes' and pods' usage.
// See the package doc.
type Server struct {
	opts Options
	log  *slog.Logger

	// mu guards store, which each scrape replaces.
	mu    sync.RWMutex
	store storage
}

// New returns a Server that scrapes once Run is called.
func New(opts Options) *Server {
	if opts.Resolution <= 0 {
		opts.Resolution = DefaultResolution
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: opts.Resolution}).DialContext,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     3 * opts.Resolution,
		}}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{opts: opts, log: opts.Logger, store: storage{resolution: opts.Resolution}}
}

// Resolution is how often the Server scrapes.
func (s *Server) Resolution() time.Duration { return s.opts.Resolution }

// Run scrapes every kubelet at once, then every resolution, until ctx
// ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Resolution)
	defer t.Stop()
	for {
		s.scrapeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scrapeAll scrapes every node at once and stores what came back.
func (s *Server) scrapeAll(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, s.opts.Resolution*9/10)
	defer cancel()
	nodes, err := s.opts.Nodes(sctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("metrics-server: list nodes", slog.Any("err", err))
		}
		return
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		batches = make(map[string]*nodeBatch, len(nodes))
	)
	for _, n := range nodes {
		wg.Go(func() {
			b, err := scrape(sctx, s.opts.Client, n)
			if err != nil {
				if ctx.Err() == nil { // not stopping
					s.log.Warn("metrics-server: failed to scrape node", slog.String("node", n.Name), slog.Any("err", err))
				}
				return
			}
			mu.Lock()
			batches[n.Name] = b
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopping: what was kept stays
	}
	s.mu.Lock()
	s.store.store(batches)
	s.mu.Unlock()
}

// NodeMetrics is node's usage, false if there is none yet.
func (s *Server) NodeMetrics(node *corev1.Node) (*metricsv1beta1.NodeMetrics, bool) {
	s.mu.RLock()
	u, ok := s.store.node(node.Name)
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		TypeMeta: metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "NodeMetrics"},
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name, Labels: node.Labels, CreationTimestamp: metav1.NewTime(time.Now()),
		},
		Timestamp: metav1.NewTime(u.timestamp),
		Window:    metav1.Duration{Duration: u.window},
		Usage:     u.resources,
	}, true
}

// PodMetrics is the usage of pod's containers, false if there is none
// yet or the pod is not Running.
func (s *Server) PodMetrics(pod *corev1.Pod) (*metricsv1beta1.PodMetrics, bool) {
	if pod.Status.Phase != corev1.PodRunning {
		return nil, false
	}
	s.mu.RLock()
	containers, u, ok := s.store.pod(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	slices.SortFunc(containers, func(a, b containerUsage) int { return strings.Compare(a.name, b.name) })
	pm := &metricsv1beta1.PodMetrics{
		TypeMeta: metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "PodMetrics"},
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, CreationTimestamp: metav1.NewTime(time.Now()),
		},
		Timestamp:  metav1.NewTime(u.timestamp),
		Window:     metav1.Duration{Duration: u.window},
		Containers: []metricsv1beta1.ContainerMetrics{},
	}
	for _, c := range containers {
		pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c.name, Usage: c.resources})
	}
	return pm, true
}
