package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
)

// serveStatus answers the status subresource: reads return the whole
// object; writes change the status and the metadata, and nothing else
// (api.Resource.PrepareStatusUpdate, in updateObject).
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	return s.servePart(w, r, ri, "status", modeStatus)
}

// servePart answers a subresource that is a view of the whole object of
// which writes change only one part (mode): reads return the object, and
// a PUT or a PATCH (apply included) is an update of that part.
func (s *Server) servePart(w http.ResponseWriter, r *http.Request, ri *requestInfo, subresource string, mode updateMode) error {
	var next updateFunc
	switch r.Method {
	case http.MethodGet:
		return s.serveGet(w, r, ri)
	case http.MethodPut:
		obj, err := s.decodeObject(r, ri.res)
		if err != nil {
			return err
		}
		if err := checkIdentity(ri.res, obj, ri.namespace, ri.name); err != nil {
			return err
		}
		next = func(api.Object) (api.Object, error) { return obj.DeepCopyObject().(api.Object), nil }
	case http.MethodPatch:
		fv, err := writeOptions(r)
		if err != nil {
			return err
		}
		if isApply(r) {
			return s.serveApply(w, r, ri, subresource, fv)
		}
		if _, err := patchOptions(r); err != nil {
			return err
		}
		apply, err := s.readPatch(r, ri.res.New())
		if err != nil {
			return err
		}
		next = func(cur api.Object) (api.Object, error) { return patchObject(r.Context(), ri.res, cur, apply, fv) }
	default:
		return newMethodNotAllowed(r.Method, r.URL.Path)
	}
	o := updateOptions{mode: mode, dry: dryRun(r), subresource: subresource, manager: managerOrUserAgent(r)}
	out, err := s.updateObject(r.Context(), ri.store, ri.namespace, ri.name, o, next)
	if err != nil {
		return err
	}
	writeWritten(w, r, ri.res, http.StatusOK, out)
	return nil
}

// readBodyInto decodes the body of a subresource's request, in any of
// the media types the server reads, into v, a kind's Go type; a body that
// is not one is a 400 naming the kind.
func (s *Server) readBodyInto(r *http.Request, kind string, v any) error {
	body, err := readBody(r, s.maxBody)
	if err != nil {
		return err
	}
	data, err := s.toJSON(mediaType(r), body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the body is not a valid %s: %v", kind, err))
	}
	return nil
}

// scaleOf is the autoscaling/v1 Scale view of obj, a res (see
// api.Resource.Scale). A Scale that cannot be read is an internal error,
// as in kube-apiserver.
func scaleOf(res *api.Resource, obj api.Object) (*autoscalingv1.Scale, error) {
	sc, err := readScale(res, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return sc, nil
}

// unsetReplicas stands for spec replicas that do not exist yet in a Scale
// about to be patched: a patch must set them (kube-apiserver's sentinel).
const unsetReplicas = math.MinInt32

// readScale is obj's Scale and Get's error, which may be a
// *api.NoSpecReplicasError with the rest of the Scale filled in.
func readScale(res *api.Resource, obj api.Object) (*autoscalingv1.Scale, error) {
	spec, status, selector, err := res.Scale.Get(obj)
	if _, missing := err.(*api.NoSpecReplicasError); err != nil && !missing {
		return nil, err
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
			ResourceVersion: obj.GetResourceVersion(), CreationTimestamp: obj.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}, err
}

// setReplicas sets obj's desired replicas through its Scale.
func setReplicas(res *api.Resource, obj api.Object, n int32) error {
	if err := res.Scale.Set(obj, n); err != nil {
		return apierrors.NewInternalError(err)
	}
	return nil
}

// serveScale answers the scale subresource: the object's replica count
// seen and changed through an autoscaling/v1 Scale.
func (s *Server) serveScale(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	rs := ri.store
	var next updateFunc
	switch r.Method {
	case http.MethodGet:
		out, err := negotiateValue(r)
		if err != nil {
			return err
		}
		obj, err := rs.get(r.Context(), ri.namespace, ri.name)
		if err != nil {
			return err
		}
		sc, err := scaleOf(ri.res, obj)
		if err != nil {
			return err
		}
		return out.writeValue(w, sc)
	case http.MethodPut:
		var want autoscalingv1.Scale
		if err := s.readBodyInto(r, "Scale", &want); err != nil {
			return err
		}
		if want.Name != "" && want.Name != ri.name {
			return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, ri.name))
		}
		next = func(cur api.Object) (api.Object, error) {
			if err := setReplicas(ri.res, cur, want.Spec.Replicas); err != nil {
				return nil, err
			}
			cur.SetResourceVersion(want.ResourceVersion) // a precondition, if set
			return cur, nil
		}
	case http.MethodPatch:
		if _, err := patchOptions(r); err != nil {
			return err
		}
		apply, err := s.readPatch(r, &autoscalingv1.Scale{})
		if err != nil {
			return err
		}
		next = func(cur api.Object) (api.Object, error) {
			sc, err := readScale(ri.res, cur)
			var missing *api.NoSpecReplicasError
			switch {
			case errors.As(err, &missing):
				sc.Spec.Replicas = unsetReplicas // the patch must set them
			case err != nil:
				return nil, apierrors.NewInternalError(err)
			}
			orig, _ := json.Marshal(sc)
			patched, err := apply(orig)
			if err != nil {
				return nil, patchFailed(schemaGroupKindOf(autoscalingv1.GroupName, "Scale"), ri.name, err)
			}
			var want autoscalingv1.Scale
			if err := json.Unmarshal(patched, &want); err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the patched Scale is not valid: %v", err))
			}
			if missing != nil && want.Spec.Replicas == unsetReplicas {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the spec replicas field %q cannot be empty", missing.Path))
			}
			if err := setReplicas(ri.res, cur, want.Spec.Replicas); err != nil {
				return nil, err
			}
			return cur, nil
		}
	default:
		return newMethodNotAllowed(r.Method, r.URL.Path)
	}
	o := updateOptions{mode: modeScale, dry: dryRun(r), subresource: "scale", manager: managerOrUserAgent(r)}
	out, err := s.updateObject(r.Context(), rs, ri.namespace, ri.name, o, next)
	if err != nil {
		return err
	}
	sc, err := scaleOf(ri.res, out)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

// serveBinding assigns a pod to a node, as the scheduler does: once, and
// never a pod that is being deleted.
func (s *Server) serveBinding(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if r.Method != http.MethodPost {
		return newMethodNotAllowed(r.Method, r.URL.Path) // a binding is only ever created
	}
	var b corev1.Binding
	if err := s.readBodyInto(r, "Binding", &b); err != nil {
		return err
	}
	if b.Name != "" && b.Name != ri.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the binding (%s) does not match the pod on the URL (%s)", b.Name, ri.name))
	}
	if b.Target.Name == "" {
		return apierrors.NewInvalid(schemaGroupKindOf("", "Binding"), ri.name, nil)
	}
	_, err := s.updateObject(r.Context(), s.serving().stores[api.Pods], ri.namespace, ri.name, updateOptions{mode: modeInternal, dry: dryRun(r)}, func(cur api.Object) (api.Object, error) {
		pod := cur.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(api.Pods.GroupResource(), pod.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(api.Pods.GroupResource(), pod.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(api.Pods.GroupResource(), pod.Name, fmt.Errorf("the binding's UID %s does not match the pod's %s", b.UID, pod.UID))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))})
		return pod, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, successStatus(nil))
	return nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// serveFinalize sets a namespace's spec.finalizers: the namespace
// controller removes "kubernetes" once the namespace is empty, and the
// namespace then goes.
func (s *Server) serveFinalize(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if r.Method != http.MethodPut {
		return newMethodNotAllowed(r.Method, r.URL.Path) // finalize is update-only, as in Kubernetes
	}
	obj, err := s.decodeObject(r, ri.res)
	if err != nil {
		return err
	}
	if err := checkIdentity(ri.res, obj, ri.namespace, ri.name); err != nil {
		return err
	}
	want := obj.(*corev1.Namespace).Spec.Finalizers
	out, err := s.updateObject(r.Context(), ri.store, "", ri.name, updateOptions{mode: modeInternal, dry: dryRun(r)}, func(cur api.Object) (api.Object, error) {
		cur.SetResourceVersion(obj.GetResourceVersion())
		cur.(*corev1.Namespace).Spec.Finalizers = want
		return cur, nil
	})
	if err != nil {
		return err
	}
	writeWritten(w, r, ri.res, http.StatusOK, out)
	return nil
}
