package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/minictl/minictl/api"
)

// admitLimitRanges is the mutating half of Kubernetes' LimitRanger for
// pods: every LimitRange of type Container in a new pod's namespace fills
// the limits (default) and requests (defaultRequest) its containers leave
// unset, and says so in the pod's kubernetes.io/limit-ranger annotation.
func (s *Server) admitLimitRanges(_ context.Context, a *attributes) error {
	pod, ok := a.obj.(*corev1.Pod)
	if a.op != opCreate || !ok {
		return nil
	}
	var set []string // what the defaults filled in, for the annotation
	for _, lr := range s.namespaceLimitRanges(pod.Namespace) {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			for i := range pod.Spec.Containers {
				c := &pod.Spec.Containers[i]
				requests, limits := applyContainerDefaults(&c.Resources, item)
				set = append(set, describeDefaults("container", c.Name, requests, limits)...)
			}
			for i := range pod.Spec.InitContainers {
				c := &pod.Spec.InitContainers[i]
				requests, limits := applyContainerDefaults(&c.Resources, item)
				set = append(set, describeDefaults("init container", c.Name, requests, limits)...)
			}
		}
	}
	if len(set) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[limitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(set, "; ")
	}
	return nil
}

// validateLimitRanges is the validating half of Kubernetes' LimitRanger
// for pods: every container of a new pod must sit within each Container
// range's min and max and within its maxLimitRequestRatio, and the sums
// over the containers within each Pod range. A pod outside a range is 403
// Forbidden, with one message per violation.
func (s *Server) validateLimitRanges(_ context.Context, a *attributes) (func(), error) {
	pod, ok := a.obj.(*corev1.Pod)
	if a.op != opCreate || !ok {
		return nil, nil
	}
	var problems []string
	for _, lr := range s.namespaceLimitRanges(pod.Namespace) {
		for _, item := range lr.Spec.Limits {
			switch item.Type {
			case corev1.LimitTypeContainer:
				for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
					problems = append(problems, checkLimits("Container", item, c.Resources.Requests, c.Resources.Limits)...)
				}
			case corev1.LimitTypePod:
				req, lim := corev1.ResourceList{}, corev1.ResourceList{}
				for _, c := range pod.Spec.Containers {
					addList(req, c.Resources.Requests)
					addList(lim, c.Resources.Limits)
				}
				problems = append(problems, checkLimits("Pod", item, req, lim)...)
			}
		}
	}
	if len(problems) > 0 {
		return nil, apierrors.NewForbidden(api.Pods.GroupResource(), pod.Name, fmt.Errorf("%s", joinProblems(problems)))
	}
	return nil, nil
}

func (s *Server) namespaceLimitRanges(namespace string) []*corev1.LimitRange {
	items, _ := s.serving().caches[api.LimitRanges].list(&filter{namespace: namespace})
	out := make([]*corev1.LimitRange, 0, len(items))
	for _, it := range items {
		out = append(out, it.object().(*corev1.LimitRange))
	}
	return out
}

// limitRangerAnnotation records on a pod what LimitRanger filled in, as
// kube-apiserver's LimitRanger does: "LimitRanger plugin set: cpu, memory
// request for container app; cpu, memory limit for container app".
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

// applyContainerDefaults fills what a container leaves unset: limits from
// default, requests from defaultRequest, or else from its own limit (as a
// LimitRange's defaultRequest defaults to its default). It returns the
// names it set.
func applyContainerDefaults(r *corev1.ResourceRequirements, item corev1.LimitRangeItem) (requests, limits []corev1.ResourceName) {
	for name, q := range item.Default {
		if _, ok := r.Limits[name]; !ok {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[name] = q.DeepCopy()
			limits = append(limits, name)
		}
	}
	for name, q := range item.DefaultRequest {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q.DeepCopy()
			requests = append(requests, name)
		}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q.DeepCopy()
			requests = append(requests, name)
		}
	}
	return requests, limits
}

// describeDefaults words what applyContainerDefaults set in one container
// as the annotation does: "cpu, memory request for container app".
func describeDefaults(kind, name string, requests, limits []corev1.ResourceName) []string {
	var out []string
	for _, set := range []struct {
		names []corev1.ResourceName
		what  string
	}{{requests, "request"}, {limits, "limit"}} {
		if len(set.names) == 0 {
			continue
		}
		names := make([]string, len(set.names))
		for i, n := range set.names {
			names[i] = string(n)
		}
		slices.Sort(names)
		out = append(out, fmt.Sprintf("%s %s for %s %s", strings.Join(names, ", "), set.what, kind, name))
	}
	return out
}

// checkLimits words each violation as kube-apiserver's LimitRanger does.
func checkLimits(kind string, item corev1.LimitRangeItem, req, lim corev1.ResourceList) []string {
	var out []string
	for _, name := range sortedNames(item.Min) {
		min := item.Min[name]
		r, hasReq := req[name]
		l, hasLim := lim[name]
		switch {
		case !hasReq:
			out = append(out, fmt.Sprintf("minimum %s usage per %s is %s.  No request is specified", name, kind, min.String()))
		case r.Cmp(min) < 0:
			out = append(out, fmt.Sprintf("minimum %s usage per %s is %s, but request is %s", name, kind, min.String(), r.String()))
		case hasLim && l.Cmp(min) < 0:
			out = append(out, fmt.Sprintf("minimum %s usage per %s is %s, but limit is %s", name, kind, min.String(), l.String()))
		}
	}
	for _, name := range sortedNames(item.Max) {
		max := item.Max[name]
		l, hasLim := lim[name]
		r, hasReq := req[name]
		switch {
		case !hasLim:
			out = append(out, fmt.Sprintf("maximum %s usage per %s is %s.  No limit is specified", name, kind, max.String()))
		case l.Cmp(max) > 0:
			out = append(out, fmt.Sprintf("maximum %s usage per %s is %s, but limit is %s", name, kind, max.String(), l.String()))
		case hasReq && r.Cmp(max) > 0:
			out = append(out, fmt.Sprintf("maximum %s usage per %s is %s, but request is %s", name, kind, max.String(), r.String()))
		}
	}
	for _, name := range sortedNames(item.MaxLimitRequestRatio) {
		ratio := item.MaxLimitRequestRatio[name]
		l, hasLim := lim[name]
		r, hasReq := req[name]
		if !hasLim || !hasReq || r.IsZero() {
			continue
		}
		// Compare l/r with ratio exactly: l*1000 <= ratio*r*1000 in milli-units.
		lm, rm, ratioMilli := l.MilliValue(), r.MilliValue(), ratio.MilliValue()
		if lm*1000 > ratioMilli*rm {
			actual := resource.NewMilliQuantity(lm*1000/rm, resource.DecimalSI)
			out = append(out, fmt.Sprintf("%s max limit to request ratio per %s is %s, but provided ratio is %s", name, kind, ratio.String(), actual.String()))
		}
	}
	return out
}

func addList(sum, add corev1.ResourceList) {
	for name, q := range add {
		cur := sum[name]
		cur.Add(q)
		sum[name] = cur
	}
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for n := range list {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func joinProblems(p []string) string {
	if len(p) == 1 {
		return p[0]
	}
	return "[" + strings.Join(p, ", ") + "]"
}
