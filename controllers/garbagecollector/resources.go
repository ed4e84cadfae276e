package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/client"
)

// resourceFor finds, in the catalogue c, the resource of an
// ownerReference's apiVersion and kind; nil when c has no such kind. The
// catalogue holds each group's preferred version only; a reference through
// another version of the same group and kind names the same objects, and
// resolves to it, as kube's REST mapper resolves every served version.
func resourceFor(c api.Catalogue, apiVersion, kind string) *api.Resource {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil
	}
	if res, ok := c.ForKind(gv.WithKind(kind)); ok {
		return res
	}
	for _, res := range c {
		if res.Group == gv.Group && res.Kind == kind {
			return res
		}
	}
	return nil
}

// objects reads and writes objects of any resource of the catalogue, by
// descriptor: the part of a dynamic client the garbage collector needs.
type objects struct {
	rc *client.RESTClient
}

// get reads an object live from the API server.
func (o objects) get(ctx context.Context, res *api.Resource, namespace, name string) (api.Object, error) {
	return client.ForResource(o.rc, res).Get(ctx, namespace, name)
}

// delete deletes ref with the given propagation policy, on condition that
// it still has ref's uid and resourceVersion rv (a changed or recreated
// object is a Conflict). Pods get their default grace period.
func (o objects) delete(ctx context.Context, ref objectRef, rv string, policy metav1.DeletionPropagation) error {
	uid := ref.uid
	return client.ForResource(o.rc, ref.res).Delete(ctx, ref.namespace, ref.name, metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
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
	_, err = client.ForResource(o.rc, ref.res).Patch(ctx, ref.namespace, ref.name, types.MergePatchType, body)
	return err
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
