package api

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Scale is how the scale subresource (an autoscaling/v1 Scale) sees an
// object: its desired replicas, which a write of the Scale sets, and its
// observed replicas and label selector, which it only reports.
type Scale struct {
	// Get returns spec replicas, status replicas and the selector in its
	// string form. An object whose spec replicas field does not exist yet
	// is a *NoSpecReplicasError, with the rest returned as found.
	Get func(obj Object) (spec, status int32, selector string, err error)
	// Set sets the spec replicas.
	Set func(obj Object, replicas int32) error
}

var replicaSetScale = &Scale{
	Get: func(obj Object) (int32, int32, string, error) {
		rs := obj.(*appsv1.ReplicaSet)
		return deref(rs.Spec.Replicas), rs.Status.Replicas, selectorString(rs.Spec.Selector), nil
	},
	Set: func(obj Object, n int32) error { obj.(*appsv1.ReplicaSet).Spec.Replicas = &n; return nil },
}

var replicationControllerScale = &Scale{
	Get: func(obj Object) (int32, int32, string, error) {
		rc := obj.(*corev1.ReplicationController)
		return deref(rc.Spec.Replicas), rc.Status.Replicas, labels.SelectorFromSet(rc.Spec.Selector).String(), nil
	},
	Set: func(obj Object, n int32) error { obj.(*corev1.ReplicationController).Spec.Replicas = &n; return nil },
}

var deploymentScale = &Scale{
	Get: func(obj Object) (int32, int32, string, error) {
		d := obj.(*appsv1.Deployment)
		return deref(d.Spec.Replicas), d.Status.Replicas, selectorString(d.Spec.Selector), nil
	},
	Set: func(obj Object, n int32) error { obj.(*appsv1.Deployment).Spec.Replicas = &n; return nil },
}

// NoSpecReplicasError is Scale.Get's answer for a custom object that has
// no spec replicas yet: its Scale cannot be read, but a write of its
// Scale may set them, as in kube-apiserver.
type NoSpecReplicasError struct{ Path string }

func (e *NoSpecReplicasError) Error() string {
	return fmt.Sprintf("the spec replicas field %q does not exist", e.Path)
}

func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	return s.String()
}

// customScale is a custom resource's scale subresource at the paths its
// definition names, as kube's: spec replicas must exist to read a Scale
// (NoSpecReplicasError); status replicas and the selector (a string at
// labelSelectorPath) are read when present.
func customScale(sc apiextensionsv1.CustomResourceSubresourceScale) *Scale {
	spec := replicasPath(sc.SpecReplicasPath)
	status := replicasPath(sc.StatusReplicasPath)
	var selector []string
	if sc.LabelSelectorPath != nil {
		selector = replicasPath(*sc.LabelSelectorPath)
	}
	return &Scale{
		Get: func(obj Object) (int32, int32, string, error) {
			content := obj.(*unstructured.Unstructured).Object
			n, found, err := unstructured.NestedInt64(content, spec...)
			if err != nil {
				return 0, 0, "", fmt.Errorf("the spec replicas field %q cannot be read: %w", sc.SpecReplicasPath, err)
			}
			var observed int64
			if len(status) > 0 {
				observed, _, _ = unstructured.NestedInt64(content, status...)
			}
			var sel string
			if len(selector) > 0 {
				sel, _, _ = unstructured.NestedString(content, selector...)
			}
			if !found {
				return 0, int32(observed), sel, &NoSpecReplicasError{Path: sc.SpecReplicasPath}
			}
			return int32(n), int32(observed), sel, nil
		},
		Set: func(obj Object, n int32) error {
			return unstructured.SetNestedField(obj.(*unstructured.Unstructured).Object, int64(n), spec...)
		},
	}
}

// replicasPath splits ".spec.replicas" into its fields.
func replicasPath(p string) []string {
	p = strings.TrimPrefix(p, ".")
	if p == "" {
		return nil
	}
	return strings.Split(p, ".")
}
