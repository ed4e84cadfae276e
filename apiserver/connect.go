package apiserver

import (
	"fmt"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// connection is one of a pod's connections to its containers, as
// kube-apiserver serves it: the kind and verbs discovery lists, and what
// it would reach, which minictl's refusal names.
type connection struct {
	kind    string
	verbs   []string
	refusal string
}

// connections are a pod's connections, by subresource: the one list
// routing (isConnect), discovery and serveConnect read.
var connections = map[string]connection{
	"attach":      {"PodAttachOptions", []string{"create", "get"}, "no process to attach to"},
	"exec":        {"PodExecOptions", []string{"create", "get"}, "no process to exec into"},
	"portforward": {"PodPortForwardOptions", []string{"create", "get"}, "no process listening to forward to"},
	"proxy":       {"PodProxyOptions", []string{"create", "delete", "get", "patch", "update"}, "no process serving to proxy to"},
}

// isConnect reports whether sub is one of a pod's connections.
func isConnect(sub string) bool {
	_, ok := connections[sub]
	return ok
}

// serveConnect answers pods/{name}/exec, attach, portforward and proxy.
// kube-apiserver upgrades such a request to a stream to the kubelet (or
// proxies it to the pod), which reaches a process in one of the pod's
// containers. minictl's containers are simulated and run no process, so
// once the pod is known to exist (404 otherwise) and the container asked
// for is one of its own (kube-apiserver's 400 otherwise), the answer is a
// 400 BadRequest Status that says so. kubectl prints its message: "error:
// unable to upgrade connection: minictl's containers are simulated: ..."
// (over SPDY, as older kubectl does, "Error from server (BadRequest): ...").
func (s *Server) serveConnect(r *http.Request, ri *requestInfo) error {
	obj, err := ri.store.get(r.Context(), ri.namespace, ri.name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	if c := r.URL.Query().Get("container"); c != "" && !hasContainer(pod, c) {
		return apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", c, pod.Name))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("minictl's containers are simulated: pod %q has %s", pod.Name, connections[ri.subresource].refusal))
}

func hasContainer(pod *corev1.Pod, name string) bool {
	is := func(c corev1.Container) bool { return c.Name == name }
	return slices.ContainsFunc(pod.Spec.Containers, is) || slices.ContainsFunc(pod.Spec.InitContainers, is) ||
		slices.ContainsFunc(pod.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return c.Name == name })
}
