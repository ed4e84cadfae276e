package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
)

// The reasons of the Events PodControl records, Kubernetes' own.
const (
	SuccessfulCreateReason = "SuccessfulCreate"
	FailedCreateReason     = "FailedCreate"
	SuccessfulDeleteReason = "SuccessfulDelete"
	FailedDeleteReason     = "FailedDelete"
)

// PodControl creates and deletes the pods of a controller. It is the seam
// controller tests replace to see or fail the writes.
type PodControl interface {
	// CreatePod creates a pod from template in owner's namespace, named
	// "<owner name>-<random suffix>", controlled by owner through ref.
	CreatePod(ctx context.Context, template *corev1.PodTemplateSpec, owner api.Object, ref *metav1.OwnerReference) (*corev1.Pod, error)
	// DeletePod deletes the pod namespace/name on owner's behalf.
	DeletePod(ctx context.Context, namespace, name string, owner api.Object) error
}

// ClientPodControl is the PodControl that writes through the API and
// records an Event on the owner for each write: SuccessfulCreate "Created
// pod: web-x7k2p", FailedCreate "Error creating: ...", SuccessfulDelete
// "Deleted pod: web-x7k2p", FailedDelete "Error deleting: ...".
type ClientPodControl struct {
	Client   *client.Client[*corev1.Pod]
	Recorder record.EventRecorder
}

// CreatePod implements PodControl.
func (c ClientPodControl) CreatePod(ctx context.Context, template *corev1.PodTemplateSpec, owner api.Object, ref *metav1.OwnerReference) (*corev1.Pod, error) {
	pod, err := PodFromTemplate(template, owner, ref)
	if err != nil {
		return nil, err
	}
	created, err := c.Client.Create(ctx, pod)
	if err != nil {
		c.Recorder.Eventf(owner, corev1.EventTypeWarning, FailedCreateReason, "Error creating: %v", err)
		return nil, err
	}
	c.Recorder.Eventf(owner, corev1.EventTypeNormal, SuccessfulCreateReason, "Created pod: %s", created.Name)
	return created, nil
}

// DeletePod implements PodControl. A pod that is already gone is reported
// (client.IsNotFound) but gets no Event.
func (c ClientPodControl) DeletePod(ctx context.Context, namespace, name string, owner api.Object) error {
	if err := c.Client.Delete(ctx, namespace, name, metav1.DeleteOptions{}); err != nil {
		if !client.IsNotFound(err) {
			c.Recorder.Eventf(owner, corev1.EventTypeWarning, FailedDeleteReason, "Error deleting: %v", err)
		}
		return err
	}
	c.Recorder.Eventf(owner, corev1.EventTypeNormal, SuccessfulDeleteReason, "Deleted pod: %s", name)
	return nil
}

// PodFromTemplate returns the pod a controller creates from template: the
// template's labels, annotations, finalizers and spec, generateName
// "<owner name>-", in owner's namespace, with ref as its only owner
// reference.
func PodFromTemplate(template *corev1.PodTemplateSpec, owner api.Object, ref *metav1.OwnerReference) (*corev1.Pod, error) {
	if len(template.Labels) == 0 {
		return nil, errors.New("create pod: the template has no labels, so the pod could never be found again")
	}
	prefix := owner.GetName() + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) > 0 {
		prefix = owner.GetName()
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: prefix,
			Namespace:    owner.GetNamespace(),
			Labels:       maps.Clone(template.Labels),
			Annotations:  maps.Clone(template.Annotations),
			Finalizers:   append([]string(nil), template.Finalizers...),
		},
		Spec: *template.Spec.DeepCopy(),
	}
	if ref != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if pod.Namespace == "" {
		return nil, fmt.Errorf("create pod for %s: owner has no namespace", owner.GetName())
	}
	return pod, nil
}
