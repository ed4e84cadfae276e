package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/api"
)

// Bind binds a pod to a node, as the scheduler does: binding names the pod
// (metadata.namespace and metadata.name) and the node (target.name). It
// fails with a Conflict when the pod is already bound.
func (c *RESTClient) Bind(ctx context.Context, binding *corev1.Binding) error {
	if binding == nil {
		return errors.New("bind: nil binding")
	}
	path, err := objectPath(api.Pods, binding.Namespace, binding.Name, "binding")
	if err == nil && binding.Target.Name == "" {
		err = errors.New("target.name is required")
	}
	if err != nil {
		return fmt.Errorf("bind pod: %w", err)
	}
	b := binding.DeepCopy()
	b.Kind, b.APIVersion = "Binding", "v1"
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("bind pod %s/%s: %w", binding.Namespace, binding.Name, err)
	}
	return c.Do(ctx, http.MethodPost, path, nil, "application/json", body, nil)
}

// GetScale reads the scale subresource (autoscaling/v1 Scale) of a
// resource that serves one (Deployments, ReplicaSets).
func (c *Client[T]) GetScale(ctx context.Context, namespace, name string) (*autoscalingv1.Scale, error) {
	path, err := objectPath(c.res, namespace, name, "scale")
	if err != nil {
		return nil, fmt.Errorf("get %s scale: %w", c.res.Plural, err)
	}
	out := &autoscalingv1.Scale{}
	if err := c.rc.Do(ctx, http.MethodGet, path, nil, "", nil, out); err != nil {
		return nil, err
	}
	setScaleTypeMeta(out)
	return out, nil
}

// UpdateScale writes scale.spec.replicas through the scale subresource of the
// object scale names (metadata.namespace and metadata.name). A
// metadata.resourceVersion works as in Update.
func (c *Client[T]) UpdateScale(ctx context.Context, scale *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	if scale == nil {
		return nil, fmt.Errorf("update %s scale: nil scale", c.res.Plural)
	}
	path, err := objectPath(c.res, scale.Namespace, scale.Name, "scale")
	if err != nil {
		return nil, fmt.Errorf("update %s scale: %w", c.res.Plural, err)
	}
	cp := scale.DeepCopy()
	setScaleTypeMeta(cp)
	body, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("update %s scale: %w", c.res.Plural, err)
	}
	out := &autoscalingv1.Scale{}
	if err := c.rc.Do(ctx, http.MethodPut, path, nil, "application/json", body, out); err != nil {
		return nil, err
	}
	setScaleTypeMeta(out)
	return out, nil
}

func setScaleTypeMeta(s *autoscalingv1.Scale) {
	s.Kind, s.APIVersion = "Scale", "autoscaling/v1"
}
