package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

// The answer to GET pods/{name}/log, as kube-apiserver's LogREST gives it:
// the Accept header is negotiated first (negotiateLog), the options of the
// query are validated (422 PodLogOptions, or 400 when
// one does not parse), the container is the one named or the pod's only
// one (400 otherwise), and the request goes on to the kubelet of the
// pod's node, at the Node's InternalIP and status.daemonEndpoints port,
// as GET /containerLogs/{namespace}/{pod}/{container}. What the kubelet
// answers comes back as text/plain, flushed as it arrives, so that
// follow=true streams; its errors become Statuses as kube-apiserver makes
// them (400 keeps the kubelet's words). A pod not on a node yet has no log:
// the answer is empty. The stream ends when the kubelet ends it, the
// client goes away or the server stops.

// defaultKubeletPort is the port asked when a Node reports none, as
// kube-apiserver's --kubelet-port.
const defaultKubeletPort = 10250

// kubeletDialTimeout bounds connecting to a kubelet, and waiting for its
// answer to start.
const kubeletDialTimeout = 10 * time.Second

// newKubeletClient is how the server reaches kubelets: plain HTTP, no
// overall timeout (a followed log lasts as long as it lasts), and no
// redirects followed, as kube-apiserver refuses them.
func newKubeletClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: kubeletDialTimeout}).DialContext,
			ResponseHeaderTimeout: kubeletDialTimeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (s *Server) servePodLog(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if ri.verb != "get" {
		return newMethodNotAllowed(r.Method, r.URL.Path)
	}
	if err := negotiateLog(r); err != nil {
		return err
	}
	opts, err := api.PodLogOptionsFromQuery(r.URL.Query())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if errs := api.ValidatePodLogOptions(opts); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, ri.name, errs)
	}
	obj, err := ri.store.get(r.Context(), ri.namespace, ri.name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	container, err := logContainer(pod, opts.Container)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	loc, err := s.kubeletLocation(r.Context(), pod.Spec.NodeName)
	if err != nil {
		return err
	}
	loc.Path = fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container)
	loc.RawQuery = api.PodLogOptionsQuery(opts).Encode()

	// The stream ends with the server, as watches do.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	resp, err := s.kubelets.Do(req)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	defer resp.Body.Close()
	if err := kubeletError(resp, pod.Name); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	streamLog(w, resp.Body, opts.Follow)
	return nil
}

// logContainer is the container whose log is asked for, as
// kube-apiserver picks it: the one named, which must be the pod's, or
// else the pod's only container.
func logContainer(pod *corev1.Pod, name string) (string, error) {
	if name != "" {
		if !hasContainer(pod, name) {
			return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
		}
		return name, nil
	}
	switch len(pod.Spec.Containers) {
	case 1:
		return pod.Spec.Containers[0].Name, nil
	case 0:
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
	}
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
}

// kubeletLocation is where the kubelet of node serves: its InternalIP and
// the port its Node reports.
func (s *Server) kubeletLocation(ctx context.Context, node string) (*url.URL, error) {
	nodes := s.serving().stores[api.Nodes]
	if nodes == nil { // a catalogue without nodes: no node is known
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, node)
	}
	obj, err := nodes.get(ctx, "", node)
	if err != nil {
		return nil, err
	}
	n := obj.(*corev1.Node)
	var host string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && host == "" {
			host = a.Address
		}
	}
	if host == "" {
		return nil, apierrors.NewInternalError(fmt.Errorf("no preferred addresses found; known addresses: %v", n.Status.Addresses))
	}
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultKubeletPort
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(port))}, nil
}

// maxKubeletErrorBytes bounds what is read of a kubelet's error answer.
const maxKubeletErrorBytes = 50000

// kubeletError is the Status for a kubelet's answer that is not a
// success, as kube-apiserver's response checker makes it; nil for a
// success.
func kubeletError(resp *http.Response, name string) error {
	if resp.StatusCode >= 200 && resp.StatusCode <= 206 {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKubeletErrorBytes))
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	switch resp.StatusCode {
	case http.StatusInternalServerError:
		return apierrors.NewInternalError(errors.New(string(body)))
	case http.StatusBadRequest:
		return apierrors.NewBadRequest(string(body))
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, "", schema.GroupResource{Resource: "pods/log"}, name, string(body), 0, false)
}

// streamLog copies a kubelet's log answer to w as it arrives, flushing
// after each read when the log is followed. Each write has its own
// deadline, as a watch's, so that the server's write timeout does not end
// a long stream and a client that stops reading does not hold it for ever.
func streamLog(w http.ResponseWriter, body io.Reader, follow bool) {
	rc := http.NewResponseController(w)
	dl := &writeDeadline{rc: rc}
	if follow {
		dl.arm()
		_ = rc.Flush()
	}
	buf := make([]byte, 32<<10)
	for {
		dl.idle() // the kubelet may be silent for long
		n, err := body.Read(buf)
		if n > 0 {
			dl.arm()
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if follow {
				_ = rc.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
