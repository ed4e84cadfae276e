// Package podautoscaler is the horizontal pod autoscaler, as
// kube-controller-manager's horizontalpodautoscaling controller: every
// sync period it reads each HorizontalPodAutoscaler's target through its
// scale subresource, the pods the scale's selector names and their usage
// from metrics.k8s.io, and writes the replica count the metrics ask for.
//
// Design, one line per file:
//
//   - horizontal.go: the controller (Options, New, Run, one pass over all
//     autoscalers, the sync of one) and its conditions and events.
//   - replicas.go: the replica calculator (kube's replica_calculator.go).
//   - behavior.go: stabilization windows and scaling policies.
//
// A pass lists the autoscalers from the informer and reads pod metrics
// once per namespace that has any, and each group version's discovery
// once, not once per autoscaler: 200 autoscalers in one namespace cost
// one metrics request. For each autoscaler:
//
//  1. read the target's scale (AbleToScale False FailedGetScale if it has
//     none); a target scaled to zero is left alone (ScalingDisabled);
//  2. compute a proposal from every metric, the largest wins (ScalingActive
//     False FailedGetResourceMetric if none can be computed);
//  3. stabilize it over the scale-up or scale-down window (AbleToScale
//     ScaleUpStabilized / ScaleDownStabilized when a window held it),
//     bound it by the behavior's policies and by min/maxReplicas
//     (ScalingLimited);
//  4. write the scale if it changed (SuccessfulRescale), and the status.
package podautoscaler

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/clock"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/informer"
)

// Name is the controller's kube-controller-manager name.
const Name = "horizontalpodautoscaling"

// The defaults of kube-controller-manager's flags.
const (
	DefaultSyncPeriod              = 15 * time.Second
	DefaultTolerance               = 0.1
	DefaultDownscaleStabilization  = 5 * time.Minute
	DefaultCPUInitializationPeriod = 5 * time.Minute
	DefaultInitialReadinessDelay   = 30 * time.Second
)

// Options: the common ones and kube's
// --horizontal-pod-autoscaler-* flags; zero values take the defaults.
type Options struct {
	controller.Common
	SyncPeriod              time.Duration
	Tolerance               float64
	DownscaleStabilization  time.Duration
	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
}

// Controller is the horizontal pod autoscaler. Create it with New, then Run.
type Controller struct {
	opts      Options
	rc        *client.RESTClient
	hpaClient *client.Client[*autoscalingv2.HorizontalPodAutoscaler]
	hpaLister informer.Lister[*autoscalingv2.HorizontalPodAutoscaler]
	podLister informer.Lister[*corev1.Pod]
	hasSynced []func() bool
	recorder  record.EventRecorder
	log       *slog.Logger
	clock     clock.Clock

	mu sync.Mutex
	// recommendations and events are kept per autoscaler, by key, for the
	// stabilization windows and the scaling policies.
	recommendations map[string][]timestampedRecommendation
	scaleUpEvents   map[string][]timestampedScaleEvent
	scaleDownEvents map[string][]timestampedScaleEvent

	reconciliations *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	passDuration    prometheus.Gauge
}

// New returns the controller, its informers registered; nothing runs until Run.
func New(opts Options) (*Controller, error) {
	var err error
	if opts.Common, err = opts.Complete(Name); err != nil {
		return nil, err
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.Tolerance <= 0 {
		opts.Tolerance = DefaultTolerance
	}
	if opts.DownscaleStabilization <= 0 {
		opts.DownscaleStabilization = DefaultDownscaleStabilization
	}
	if opts.CPUInitializationPeriod <= 0 {
		opts.CPUInitializationPeriod = DefaultCPUInitializationPeriod
	}
	if opts.InitialReadinessDelay <= 0 {
		opts.InitialReadinessDelay = DefaultInitialReadinessDelay
	}
	hpaInformer := informer.For[*autoscalingv2.HorizontalPodAutoscaler](opts.Informers)
	podInformer := informer.For[*corev1.Pod](opts.Informers)
	c := &Controller{
		opts: opts, rc: opts.Client,
		hpaClient:       client.For[*autoscalingv2.HorizontalPodAutoscaler](opts.Client),
		hpaLister:       hpaInformer.Lister(),
		podLister:       podInformer.Lister(),
		recorder:        opts.Recorder,
		log:             opts.Logger,
		clock:           opts.Clock,
		recommendations: map[string][]timestampedRecommendation{},
		scaleUpEvents:   map[string][]timestampedScaleEvent{},
		scaleDownEvents: map[string][]timestampedScaleEvent{},
	}
	noop := informer.ResourceEventHandlerFuncs{}
	hr, err := hpaInformer.AddEventHandler(noop)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pr, err := podInformer.AddEventHandler(noop)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.hasSynced = []func() bool{hr.HasSynced, pr.HasSynced}
	if err := c.registerMetrics(opts.Metrics); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return c, nil
}

// registerMetrics: kube's horizontal_pod_autoscaler_controller_* counters
// and histograms, and the time of the last whole pass.
func (c *Controller) registerMetrics(reg prometheus.Registerer) error {
	c.reconciliations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "horizontal_pod_autoscaler_controller", Name: "reconciliations_total",
		Help: "Number of reconciliations of HPA controller. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'.",
	}, []string{"action", "error"})
	c.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "horizontal_pod_autoscaler_controller", Name: "reconciliation_duration_seconds",
		Help:    "The time(seconds) that the HPA controller takes to reconcile once.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"action", "error"})
	c.passDuration = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: "horizontal_pod_autoscaler_controller", Name: "last_pass_duration_seconds",
		Help: "The time(seconds) the last pass over every HPA took.",
	})
	if reg == nil {
		return nil
	}
	for _, m := range []prometheus.Collector{c.reconciliations, c.duration, c.passDuration} {
		if _, err := controller.Register(reg, m); err != nil {
			return err
		}
	}
	return nil
}

// Run waits for the caches, then passes over every autoscaler each sync
// period until ctx ends, workers autoscalers at a time
// (--concurrent-horizontal-pod-autoscaler-syncs).
func (c *Controller) Run(ctx context.Context, workers int) {
	c.log.Info("starting", "syncPeriod", c.opts.SyncPeriod, "workers", workers)
	if !informer.WaitForCacheSync(ctx, c.hasSynced...) {
		return
	}
	n := controller.Workers(workers)
	for {
		c.pass(ctx, n)
		if !clock.Sleep(ctx, c.clock, c.opts.SyncPeriod) {
			c.log.Info("stopped")
			return
		}
	}
}

// Pass syncs every autoscaler once, one at a time, and returns how long
// it took on the controller's clock.
func (c *Controller) Pass(ctx context.Context) time.Duration { return c.pass(ctx, 1) }

// pass reads each namespace's pod metrics once, then syncs the
// autoscalers, workers at a time.
func (c *Controller) pass(ctx context.Context, workers int) time.Duration {
	start := c.clock.Now()
	hpas := c.hpaLister.List(labels.Everything())
	metricsByNS := map[string]*podMetricsSet{}
	for _, hpa := range hpas {
		if _, ok := metricsByNS[hpa.Namespace]; !ok && ctx.Err() == nil {
			metricsByNS[hpa.Namespace] = c.podMetrics(ctx, hpa.Namespace)
		}
	}
	disc := &discovery{rc: c.rc, byPath: map[string]*resourceList{}}
	next := make(chan *autoscalingv2.HorizontalPodAutoscaler)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for hpa := range next {
				c.reconcile(ctx, hpa, metricsByNS[hpa.Namespace], disc)
			}
		})
	}
	for _, hpa := range hpas {
		if ctx.Err() != nil {
			break
		}
		next <- hpa
	}
	close(next)
	wg.Wait()
	d := c.clock.Now().Sub(start)
	c.passDuration.Set(d.Seconds())
	c.log.Debug("pass done", "autoscalers", len(hpas), "took", d)
	return d
}

// podMetricsSet is one namespace's pod metrics, or why there are none.
type podMetricsSet struct {
	pods map[string]metricsv1beta1.PodMetrics
	err  error
}

func (c *Controller) podMetrics(ctx context.Context, ns string) *podMetricsSet {
	var list metricsv1beta1.PodMetricsList
	path := "/apis/metrics.k8s.io/v1beta1/namespaces/" + url.PathEscape(ns) + "/pods"
	if err := c.rc.Do(ctx, http.MethodGet, path, nil, "", nil, &list); err != nil {
		return &podMetricsSet{err: fmt.Errorf("unable to fetch metrics from resource metrics API: %v", err)}
	}
	out := &podMetricsSet{pods: make(map[string]metricsv1beta1.PodMetrics, len(list.Items))}
	for _, m := range list.Items {
		out.pods[m.Name] = m
	}
	return out
}

// discovery is one pass's view of the API's resources: each group
// version's list is read once per pass, by whichever autoscaler needs it
// first, so that 200 autoscalers of Deployments cost one discovery
// request, and a kind installed since the last pass is found on the next.
type discovery struct {
	rc     *client.RESTClient
	mu     sync.Mutex
	byPath map[string]*resourceList
}

type resourceList struct {
	once sync.Once
	list metav1.APIResourceList
	err  error
}

func (d *discovery) resources(ctx context.Context, path string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	l := d.byPath[path]
	if l == nil {
		l = &resourceList{}
		d.byPath[path] = l
	}
	d.mu.Unlock()
	l.once.Do(func() { l.err = d.rc.Do(ctx, http.MethodGet, path, nil, "", nil, &l.list) })
	return &l.list, l.err
}

// scalePath resolves the target's kind to its resource by discovery and
// returns the path of its scale subresource.
func scalePath(ctx context.Context, disc *discovery, ns string, ref autoscalingv2.CrossVersionObjectReference) (string, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", err
	}
	base := "/apis/" + gv.String()
	if gv.Group == "" {
		base = "/api/" + gv.Version
	}
	list, err := disc.resources(ctx, base)
	if err != nil {
		return "", fmt.Errorf("unable to determine resource for scale target reference: %v", err)
	}
	plural := ""
	hasScale := map[string]bool{}
	for _, r := range list.APIResources {
		if r.Kind == ref.Kind && !strings.Contains(r.Name, "/") {
			plural = r.Name
		}
		if sub, ok := strings.CutSuffix(r.Name, "/scale"); ok {
			hasScale[sub] = true
		}
	}
	if plural == "" {
		return "", fmt.Errorf("unable to determine resource for scale target reference: no matches for kind %q in version %q", ref.Kind, gv)
	}
	if !hasScale[plural] {
		return "", fmt.Errorf("%s.%s %q has no scale subresource", plural, gv.Group, ref.Name)
	}
	return base + "/namespaces/" + url.PathEscape(ns) + "/" + plural + "/" + url.PathEscape(ref.Name) + "/scale", nil
}

// reconcile is one autoscaler's sync, as the package doc tells.
func (c *Controller) reconcile(ctx context.Context, cached *autoscalingv2.HorizontalPodAutoscaler, ms *podMetricsSet, disc *discovery) {
	start := c.clock.Now()
	action, errKind := "none", "none"
	defer func() {
		c.reconciliations.WithLabelValues(action, errKind).Inc()
		c.duration.WithLabelValues(action, errKind).Observe(c.clock.Now().Sub(start).Seconds())
	}()
	hpa := cached.DeepCopy()
	key := hpa.Namespace + "/" + hpa.Name
	now := c.clock.Now()
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}

	path, err := scalePath(ctx, disc, hpa.Namespace, hpa.Spec.ScaleTargetRef)
	var scale autoscalingv1.Scale
	if err == nil {
		err = c.rc.Do(ctx, http.MethodGet, path, nil, "", nil, &scale)
	}
	if err != nil {
		errKind = "spec"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		c.writeStatus(ctx, cached, hpa, hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas, nil, false)
		return
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := scale.Status.Replicas

	var desired int32
	var metricStatuses []autoscalingv2.MetricStatus
	reason := ""
	switch {
	case scale.Spec.Replicas == 0 && minReplicas != 0:
		desired = 0
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
		c.writeStatus(ctx, cached, hpa, current, desired, hpa.Status.CurrentMetrics, false)
		return
	case current > hpa.Spec.MaxReplicas:
		reason, desired = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas
	case current < minReplicas:
		reason, desired = "Current number of replicas below Spec.MinReplicas", minReplicas
	default:
		proposal, metricName, statuses, err := c.computeReplicasForMetrics(hpa, &scale, ms, now)
		metricStatuses = statuses
		if err != nil {
			errKind = "internal"
			c.writeStatus(ctx, cached, hpa, current, hpa.Status.DesiredReplicas, metricStatuses, false)
			return
		}
		// The reason is the metrics', whatever the normalization made of them.
		switch {
		case proposal > current:
			reason = metricName + " above target"
		case proposal < current:
			reason = "All metrics below target"
		}
		desired = c.normalize(key, hpa, minReplicas, current, proposal, now)
	}

	rescale := desired != current
	if rescale {
		scale.Spec.Replicas = desired
		if err := c.rc.Do(ctx, http.MethodPut, path, nil, "application/json", mustJSON(&scale), &scale); err != nil {
			errKind = "internal"
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err)
			setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			c.writeStatus(ctx, cached, hpa, current, hpa.Status.DesiredReplicas, metricStatuses, false)
			return
		}
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		if hpa.Spec.Behavior != nil { // only the policies read them
			c.storeScaleEvent(key, current, desired, now)
		}
		action = "scale_up"
		if desired < current {
			action = "scale_down"
		}
		c.log.Info(fmt.Sprintf("horizontalpodautoscaler %s: %d → %d replicas (%s)", key, current, desired, reason), "object", key)
	}
	c.writeStatus(ctx, cached, hpa, current, desired, metricStatuses, rescale)
}

// writeStatus writes hpa's status if it differs from cached's.
func (c *Controller) writeStatus(ctx context.Context, cached, hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, metrics []autoscalingv2.MetricStatus, rescaled bool) {
	hpa.Status.CurrentReplicas = current
	hpa.Status.DesiredReplicas = desired
	hpa.Status.CurrentMetrics = metrics
	if rescaled {
		now := metav1.NewTime(c.clock.Now())
		hpa.Status.LastScaleTime = &now
	}
	if apiequality.Semantic.DeepEqual(cached.Status, hpa.Status) {
		return
	}
	if _, err := c.hpaClient.UpdateStatus(ctx, hpa); err != nil && !apierrors.IsNotFound(err) {
		c.log.Error("cannot update status", "object", hpa.Namespace+"/"+hpa.Name, "err", err)
	}
}

// setCondition sets one condition, moving its transition time only when
// its status changes.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for i := range hpa.Status.Conditions {
		cond := &hpa.Status.Conditions[i]
		if cond.Type != t {
			continue
		}
		if cond.Status != status {
			cond.LastTransitionTime = metav1.Now()
		}
		cond.Status, cond.Reason, cond.Message = status, reason, msg
		return
	}
	hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Now(),
	})
}
