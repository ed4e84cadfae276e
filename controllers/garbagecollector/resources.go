package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/informer"
)

// informerFuncs gives, for every served resource, its shared informer from
// the factory. The factory is generic over the Go type, which only the
// compiler can pick, hence one line per kind; a test checks that every
// resource in api.Resources() has its line.
var informerFuncs = map[*api.Resource]func(*informer.SharedInformerFactory) *informer.SharedInformer{
	api.Namespaces:      sharedInformer[*corev1.Namespace],
	api.Pods:            sharedInformer[*corev1.Pod],
	api.Nodes:           sharedInformer[*corev1.Node],
	api.Services:        sharedInformer[*corev1.Service],
	api.Endpoints:       sharedInformer[*corev1.Endpoints],
	api.ConfigMaps:      sharedInformer[*corev1.ConfigMap],
	api.Secrets:         sharedInformer[*corev1.Secret],
	api.ServiceAccounts: sharedInformer[*corev1.ServiceAccount],
	api.Events:          sharedInformer[*corev1.Event],
	api.ResourceQuotas:  sharedInformer[*corev1.ResourceQuota],
	api.LimitRanges:     sharedInformer[*corev1.LimitRange],
	api.Leases:          sharedInformer[*coordinationv1.Lease],
	api.ReplicaSets:     sharedInformer[*appsv1.ReplicaSet],
	api.Deployments:     sharedInformer[*appsv1.Deployment],
}

func sharedInformer[T api.Object](f *informer.SharedInformerFactory) *informer.SharedInformer {
	return informer.For[T](f).SharedInformer
}

// resourceFor finds the served resource of an ownerReference's apiVersion
// and kind; nil when minictl serves no such kind.
func resourceFor(apiVersion, kind string) *api.Resource {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil
	}
	for _, r := range api.Resources() {
		if r.Group == gv.Group && r.Version == gv.Version && r.Kind == kind {
			return r
		}
	}
	return nil
}

// objects reads and writes objects of any served resource: the part of a
// dynamic client the garbage collector needs.
type objects struct {
	rc *client.RESTClient
}

// get reads an object live from the API server.
func (o objects) get(ctx context.Context, res *api.Resource, namespace, name string) (api.Object, error) {
	out := res.New()
	if err := o.rc.Do(ctx, http.MethodGet, client.ResourcePath(res, namespace, name), nil, "", nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// delete deletes ref with the given propagation policy, on condition that
// it still has ref's uid and resourceVersion rv (a changed or recreated
// object is a Conflict). Pods get their default grace period.
func (o objects) delete(ctx context.Context, ref objectRef, rv string, policy metav1.DeletionPropagation) error {
	uid := ref.uid
	opts := metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	}
	body, err := json.Marshal(&opts)
	if err != nil {
		return err
	}
	return o.rc.Do(ctx, http.MethodDelete, client.ResourcePath(ref.res, ref.namespace, ref.name), nil, "application/json", body, nil)
}

// patchMetadata merge-patches metadata fields of obj, on condition that it
// is still at obj's resourceVersion (a Conflict otherwise).
func (o objects) patchMetadata(ctx context.Context, ref objectRef, rv string, fields map[string]any) error {
	meta := map[string]any{"resourceVersion": rv}
	for k, v := range fields {
		meta[k] = v
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	return o.rc.Do(ctx, http.MethodPatch, client.ResourcePath(ref.res, ref.namespace, ref.name), nil,
		string(types.MergePatchType), body, nil)
}

// withoutOwners returns obj's ownerReferences minus those to uids, as a
// merge patch wants it: nil (remove the field) when none are left.
func withoutOwners(obj api.Object, uids map[types.UID]bool) []metav1.OwnerReference {
	var keep []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if !uids[ref.UID] {
			keep = append(keep, ref)
		}
	}
	return keep
}

// withoutFinalizer returns obj's finalizers minus f; nil when none are
// left.
func withoutFinalizer(obj api.Object, f string) []string {
	var keep []string
	for _, x := range obj.GetFinalizers() {
		if x != f {
			keep = append(keep, x)
		}
	}
	return keep
}

func hasFinalizer(obj api.Object, f string) bool {
	for _, x := range obj.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

// validName reports whether name can be one path segment. An owner
// reference's name is not checked by the API server, and a name with a
// slash would address some other URL; no object can have such a name, so
// such an owner is simply absent.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/%")
}

// kindOf names an object's kind in log lines: "pod", "replicaset".
func kindOf(res *api.Resource) string {
	if res == nil {
		return "object"
	}
	return res.Singular
}

// describeOwner names an owner reference in log lines: "ReplicaSet web
// (uid 1234)".
func describeOwner(ref metav1.OwnerReference) string {
	return fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
}
