package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/serving"
	"github.com/minictl/minictl/kubelet/containerlog"
)

// DefaultPort is the port a kubelet serves its API on (kubelet's --port).
const DefaultPort = 10250

// shutdownTimeout bounds how long the kubelet's server waits for requests
// in flight once Run's context ends; followers of logs end with it.
const shutdownTimeout = 5 * time.Second

// listen opens the kubelet's listener on its node address and the port of
// Options (0: any free one), and remembers the port for the Node's
// daemonEndpoints.
func (k *Kubelet) listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(k.opts.Address, strconv.Itoa(k.opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: listen: %w", k.name, err)
	}
	k.port = int32(ln.Addr().(*net.TCPAddr).Port)
	return ln, nil
}

// serve answers the kubelet's API on ln until ctx ends, then shuts the
// server down: requests in flight, log followers among them, have their
// contexts ended with ctx.
func (k *Kubelet) serve(ctx context.Context, ln net.Listener) {
	srv := serving.NewServer(&http.Server{
		Handler:           k.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(k.log.Handler(), slog.LevelWarn),
	})
	k.log.Info("serving /containerLogs, /metrics/resource and /healthz on http://"+ln.Addr().String(), slog.String("object", k.name))
	if err := srv.Run(ctx, ln, shutdownTimeout); err != nil {
		k.log.Error("kubelet server stopped", slog.String("object", k.name), slog.Any("err", err))
	}
}

// handler is the kubelet's API, the part a simulated node has: the logs of
// its containers, their resource usage and its health.
func (k *Kubelet) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.serveContainerLogs)
	mux.HandleFunc("GET /metrics/resource", k.serveResourceMetrics)
	return mux
}

// serveContainerLogs answers GET /containerLogs/{namespace}/{pod}/{container}
// as a kubelet does: the query is a PodLogOptions, the pod is one this node
// runs, the container one of its own whose status says it has run; the
// answer is its log as text, streamed with follow. Errors are plain text,
// with the kubelet's codes and words.
func (k *Kubelet) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	query := r.URL.Query()
	// "tail" is an older spelling of tailLines; "all" is no tail.
	if tail := query.Get("tail"); tail != "" {
		query.Set("tailLines", tail)
		if tail == "all" {
			query.Del("tailLines")
		}
	}
	opts, err := api.PodLogOptionsFromQuery(query)
	if err != nil {
		writeError(w, `{"message": "Unable to decode query."}`, http.StatusBadRequest)
		return
	}
	if errs := api.ValidatePodLogOptions(opts); len(errs) > 0 {
		writeError(w, `{"message": "Invalid request."}`, http.StatusUnprocessableEntity)
		return
	}
	pod, err := k.podLister.Get(namespace, name)
	if err != nil {
		writeError(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !podHasContainer(pod, container) {
		writeError(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	if err := containerLogStatus(pod.Name, k.podStatus(pod), container, opts.Previous); err != nil {
		writeError(w, err.Error(), http.StatusBadRequest)
		return
	}
	read := containerlog.Options{
		Previous:   opts.Previous,
		Follow:     opts.Follow,
		Timestamps: opts.Timestamps,
		TailLines:  opts.TailLines,
		LimitBytes: opts.LimitBytes,
	}
	switch {
	case opts.SinceSeconds != nil:
		read.Since = k.clock.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	case opts.SinceTime != nil:
		read.Since = opts.SinceTime.Time
	}
	out := &logResponse{w: w}
	if !opts.Previous {
		// The answer is 200 from here on: say so now, so that a follower
		// of a container that prints nothing yet knows it is connected.
		out.Flush()
	}
	err = k.logs.Read(r.Context(), pod.UID, container, read, out)
	if errors.Is(err, containerlog.ErrNoPreviousRun) && !out.started {
		writeError(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, name), http.StatusBadRequest)
	}
}

// writeError answers with msg as plain text and code, as the kubelet's
// API writes its errors (with no newline after it).
func writeError(w http.ResponseWriter, msg string, code int) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

// logResponse is a log answer: 200 and text/plain from its first write or
// flush, and flushed after each batch of lines, so that a follower sees
// them as they come.
type logResponse struct {
	w       http.ResponseWriter
	started bool
}

func (l *logResponse) start() {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", "text/plain")
		l.w.WriteHeader(http.StatusOK)
	}
}

func (l *logResponse) Write(p []byte) (int, error) {
	l.start()
	return l.w.Write(p)
}

func (l *logResponse) Flush() {
	l.start()
	_ = http.NewResponseController(l.w).Flush()
}

func podHasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// containerLogStatus says, as the kubelet's validateContainerLogStatus
// does, why container of pod podName has no log to read, from status: nil
// when it runs or has run (or, with previous, ran before its current
// run). A pod the kubelet has not started yet is waiting in
// ContainerCreating.
func containerLogStatus(podName string, status *corev1.PodStatus, container string, previous bool) error {
	var cs *corev1.ContainerStatus
	for _, list := range [][]corev1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses, status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == container {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		if status.Phase == corev1.PodPending || status.Phase == "" {
			return fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, podName)
		}
		return fmt.Errorf("container %q in pod %q is not available", container, podName)
	}
	last := cs.LastTerminationState.Terminated
	lastKnown := last != nil && last.ContainerID != ""
	switch state := cs.State; {
	case previous:
		if !lastKnown {
			return fmt.Errorf("previous terminated container %q in pod %q not found", container, podName)
		}
	case state.Running != nil:
	case state.Terminated != nil:
		if state.Terminated.ContainerID == "" && !lastKnown {
			return fmt.Errorf("container %q in pod %q is terminated", container, podName)
		}
	case last != nil:
		if !lastKnown {
			return fmt.Errorf("container %q in pod %q is terminated", container, podName)
		}
	case state.Waiting != nil:
		switch reason := state.Waiting.Reason; reason {
		case "ErrImagePull":
			return fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", container, podName)
		case "ImagePullBackOff":
			return fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", container, podName)
		default:
			return fmt.Errorf("container %q in pod %q is waiting to start: %s", container, podName, reason)
		}
	default:
		return fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", container, podName)
	}
	return nil
}
