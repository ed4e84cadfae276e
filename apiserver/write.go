package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/api"
)

// dryRun reports whether a write is a dry run: whether it has a dryRun
// parameter, whose one valid value, All, checkDryRun has made sure of.
func dryRun(r *http.Request) bool { return len(r.URL.Query()["dryRun"]) > 0 }

// checkDryRun refuses dryRun values other than All, as kube-apiserver
// does: 422 Invalid, naming the write's options kind (CreateOptions,
// UpdateOptions, PatchOptions or DeleteOptions).
func checkDryRun(optionsKind string, values []string) error {
	for _, v := range values {
		if v != metav1.DryRunAll {
			return apierrors.NewInvalid(schemaGroupKindOf(metav1.GroupName, optionsKind), "", field.ErrorList{
				field.NotSupported(field.NewPath("dryRun"), values, []string{metav1.DryRunAll}),
			})
		}
	}
	return nil
}

// checkIdentity makes the namespace and name of an object a client sent
// (a body, or the result of a patch) agree with the request's; an empty
// namespace takes the request's. name is empty for a create, whose object
// names itself.
func checkIdentity(res *api.Resource, obj api.Object, namespace, name string) error {
	if res.Namespaced {
		switch obj.GetNamespace() {
		case "":
			obj.SetNamespace(namespace)
		case namespace:
		default:
			return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", obj.GetNamespace(), namespace))
		}
	}
	if name != "" && obj.GetName() != name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), name))
	}
	return nil
}

func (s *Server) serveCreate(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if ri.terminating {
		err := apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb)
		err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
		return err
	}
	obj, err := s.decodeObject(r, ri.res)
	if err != nil {
		return err
	}
	if err := checkIdentity(ri.res, obj, ri.namespace, ""); err != nil {
		return err
	}
	raw, err := s.createObject(r.Context(), ri.store, obj, createOptions{dry: dryRun(r), keep: answersProtobuf(r, ri.res), manager: managerOrUserAgent(r)})
	if err != nil {
		return err
	}
	writeCreated(w, r, ri.res, obj, raw)
	return nil
}

// createOptions say how a create is made and recorded.
type createOptions struct {
	dry bool
	// keep: the caller answers with obj itself, so the watch cache is
	// given a copy and obj gets the written resourceVersion; createObject
	// then returns no JSON (a Service, whose write allocates, aside).
	keep bool
	// manager is recorded in managedFields as the creator (an Update
	// entry); "" records nothing, for an apply, whose entry is already
	// there.
	manager string
}

// createObject is the path of every create: server-set metadata,
// defaults, managedFields, mutating admission, validation, validating
// admission, then a write that fails if the name is taken. Unless dry or
// keep, it returns the created object's JSON and obj belongs to the watch
// cache (see resourceStore.create); a dry run leaves obj as it would have
// been created.
func (s *Server) createObject(ctx context.Context, rs *resourceStore, obj api.Object, o createOptions) ([]byte, error) {
	res, dry := rs.res, o.dry
	rvSet := resourceVersionSet(obj)
	api.PrepareObjectMetaForCreate(obj, time.Now())
	generated := obj.GetName() == "" && obj.GetGenerateName() != ""
	if generated {
		obj.SetName(generateName(obj.GetGenerateName()))
	}
	if res.Default != nil {
		res.Default(obj)
	}
	if res.PrepareForCreate != nil {
		res.PrepareForCreate(obj)
	}
	setRequester(ctx, obj)
	if err := s.confirmRBACWrite(ctx, res, obj, nil); err != nil {
		return nil, err
	}
	if o.manager != "" {
		fm, err := rs.fields()
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		obj = recordCreate(fm, res, obj, o.manager)
	}
	a := &attributes{op: opCreate, res: res, namespace: obj.GetNamespace(), name: obj.GetName(), obj: obj, dryRun: dry, generated: generated}
	if err := s.admit(ctx, a); err != nil {
		return nil, err
	}
	if err := validate(res, obj, nil); err != nil {
		return nil, err
	}
	release, err := s.validateAdmission(ctx, a)
	if err != nil {
		return nil, err
	}
	svc, allocates := obj.(*corev1.Service)
	allocates = allocates && res == api.Services && s.allocating()
	if dry {
		defer release()
		if allocates {
			if _, err := s.createService(ctx, rs, svc, true); err != nil {
				return nil, err
			}
		}
		return nil, rs.asStored(ctx, obj)
	}
	if rvSet {
		release()
		return nil, errResourceVersionSetOnCreate
	}
	for attempt := 0; ; attempt++ {
		var raw []byte
		var err error
		switch {
		case allocates:
			raw, err = s.createService(ctx, rs, svc, false)
		case o.keep:
			err = rs.createKept(ctx, obj)
		default:
			raw, err = rs.create(ctx, obj)
		}
		if err == nil {
			return raw, nil
		}
		if !generated || !isAlreadyExists(err) || attempt == 8 {
			release()
			return nil, err
		}
		obj.SetName(generateName(obj.GetGenerateName()))
	}
}

// errResourceVersionSetOnCreate refuses a create whose object carries a
// resourceVersion: it was probably read from the server and sent back by
// mistake. kube-apiserver's storage refuses it at the write, after
// admission and validation, with this message and a 500 without a reason;
// so does minictl, to the letter. A dry run is not refused.
var errResourceVersionSetOnCreate = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status:  metav1.StatusFailure,
	Code:    http.StatusInternalServerError,
	Message: "resourceVersion should not be set on objects to be created",
}}

// resourceVersionSet reports whether obj carries a resourceVersion, as
// kube-apiserver sees it: a number other than 0 (anything else is
// dropped).
func resourceVersionSet(obj api.Object) bool {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return err == nil && rv != 0
}

// generateName appends five random characters to a generateName prefix,
// from the alphabet Kubernetes uses (no vowels, no look-alike digits).
func generateName(prefix string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	const maxPrefix = 63 - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	b := []byte(prefix)
	for range 5 {
		b = append(b, alphabet[rand.N(len(alphabet))])
	}
	return string(b)
}

// validate runs the metadata checks every kind gets and the kind's own;
// with old, an update's too (what may not change, and no new finalizers on
// an object being deleted).
func validate(res *api.Resource, obj, old api.Object) error {
	errs := api.ValidateObjectMeta(res, obj)
	if res.ValidateObject != nil {
		errs = append(errs, res.ValidateObject(obj, old)...)
	}
	if res.Validate != nil {
		errs = append(errs, res.Validate(obj)...)
	}
	if old != nil {
		errs = append(errs, api.ValidateObjectMetaUpdate(obj, old)...)
		if res.ValidateUpdate != nil {
			errs = append(errs, res.ValidateUpdate(obj, old)...)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schemaGroupKind(res), obj.GetName(), errs)
	}
	return nil
}

// updateMode says which part of an object a write may change.
type updateMode int

const (
	modeMain     updateMode = iota // PUT/PATCH of the object: everything but status
	modeScale                      // the scale subresource: as modeMain, seen by admission as a Scale
	modeStatus                     // the status subresource: only status
	modeApproval                   // a CertificateSigningRequest's approval: only its Approved and Denied conditions
	modeInternal                   // binding and finalize: the server changes a field clients may not
)

// updateOptions say what an update may change and how it is recorded.
type updateOptions struct {
	mode updateMode
	dry  bool
	// subresource is the one written ("status", "scale"), "" for the
	// object itself: managedFields entries name it.
	subresource string
	// manager is recorded in managedFields for what the update changes
	// (an Update entry); "" records nothing: an internal write, or an
	// apply, whose next records its Apply entry itself.
	manager string
}

// updateObject is the path of every update: the next state is computed
// from the current one by next, the client's resourceVersion and uid (if
// any) must still be current, server-set metadata is carried over
// (api.PrepareObjectMetaForUpdate), the generation moves when the spec
// does, managedFields record the writer, and the result passes admission
// and validation before the compare-and-swap write. An object whose
// deletion only waited for this change (no finalizers left) is then
// removed.
func (s *Server) updateObject(ctx context.Context, rs *resourceStore, namespace, name string, o updateOptions, next updateFunc) (api.Object, error) {
	res, mode, dry := rs.res, o.mode, o.dry
	// Admission may reserve something for the write (an update that adds
	// to an object's usage, a Service turned LoadBalancer, is charged to
	// its quotas like a create). It is reserved again by each write attempt
	// and given back if the attempt loses the compare-and-swap or the
	// update fails.
	release := func() {}
	defer func() { release() }()
	// A Service's update reserves the cluster IP and node ports it gains
	// before the write, and gives back those it lost after (servicealloc.go).
	allocates := res == api.Services && (mode == modeMain || mode == modeScale) && s.allocating()
	var lastOld api.Object
	out, err := rs.update(ctx, namespace, name, dry, func(cur api.Object) (api.Object, error) {
		release()
		release = func() {}
		old := cur.DeepCopyObject().(api.Object)
		obj, err := next(cur)
		if err != nil {
			return nil, err
		}
		if rv := obj.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
			return nil, errConflict(res, name)
		}
		// A uid in the body is a precondition, as in kube-apiserver: it
		// names the object the client meant, not a new value.
		if uid := obj.GetUID(); uid != "" {
			if err := checkPreconditions(res, old, &metav1.Preconditions{UID: &uid}); err != nil {
				return nil, err
			}
		}
		obj.SetResourceVersion(old.GetResourceVersion())
		api.PrepareObjectMetaForUpdate(obj, old)
		if res.Default != nil {
			res.Default(obj)
		}
		// PrepareForUpdate keeps status out of main-resource writes and
		// moves the generation on when the spec changed; a status write
		// keeps everything but the status and the metadata.
		switch {
		case (mode == modeMain || mode == modeScale) && res.PrepareForUpdate != nil:
			res.PrepareForUpdate(obj, old)
		case mode == modeStatus:
			res.PrepareStatusUpdate(obj, old)
		case mode == modeApproval:
			api.PrepareCSRForApprovalUpdate(obj, old)
		}
		if mode == modeInternal {
			return obj, nil
		}
		if err := s.confirmRBACWrite(ctx, res, obj, old); err != nil {
			return nil, err
		}
		if o.manager != "" {
			fm, err := rs.fields()
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			obj = recordUpdate(fm.forSubresource(o.subresource), res, old, obj, o.manager)
		}
		a := &attributes{op: opUpdate, res: res, namespace: namespace, name: name, obj: obj, old: old, mode: mode, dryRun: dry}
		switch mode {
		case modeStatus:
			a.subresource = "status"
		case modeScale:
			a.subresource = "scale"
		case modeApproval:
			a.subresource = "approval"
		}
		if err := s.admit(ctx, a); err != nil {
			return nil, err
		}
		if err := validate(res, obj, old); err != nil {
			return nil, err
		}
		if release, err = s.validateAdmission(ctx, a); err != nil {
			return nil, err
		}
		if allocates {
			admitted := release
			given, err := s.reserveForUpdate(ctx, obj.(*corev1.Service), old.(*corev1.Service), dry)
			if err != nil {
				return nil, err
			}
			release = func() { given(); admitted() }
			lastOld = old
		}
		return obj, nil
	})
	if err != nil {
		return nil, err
	}
	release = func() {} // written: what admission reserved stands
	if allocates && !dry && lastOld != nil {
		s.releaseUpdated(ctx, out.(*corev1.Service), lastOld.(*corev1.Service))
	}
	if !dry && readyToRemove(out) {
		if _, err := rs.remove(ctx, out); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, err
		}
	}
	return out, nil
}

// readyToRemove reports whether an object being deleted waits for nothing
// more: no finalizers and no grace period left to run.
func readyToRemove(obj api.Object) bool {
	if obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
		return false
	}
	if g := obj.GetDeletionGracePeriodSeconds(); g != nil && *g > 0 {
		return false
	}
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return false
	}
	return true
}

func (s *Server) serveUpdate(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	obj, err := s.decodeObject(r, ri.res)
	if err != nil {
		return err
	}
	if err := checkIdentity(ri.res, obj, ri.namespace, ri.name); err != nil {
		return err
	}
	o := updateOptions{mode: modeMain, dry: dryRun(r), manager: managerOrUserAgent(r)}
	out, err := s.updateObject(r.Context(), ri.store, ri.namespace, ri.name, o, func(api.Object) (api.Object, error) {
		return obj.DeepCopyObject().(api.Object), nil
	})
	if err != nil {
		return err
	}
	writeWritten(w, r, ri.res, http.StatusOK, out)
	return nil
}

var patchMediaTypes = []string{
	string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType),
}

// customPatchMediaTypes are those of a kind without a Go type: a strategic
// merge patch needs the type's patch strategies, which a custom resource's
// schema does not give, so kube-apiserver refuses it there.
var customPatchMediaTypes = []string{string(types.JSONPatchType), string(types.MergePatchType)}

// patchMediaTypesOf are the patch media types res takes (server-side apply
// aside).
func patchMediaTypesOf(res *api.Resource) []string {
	if res.Schema != nil {
		return customPatchMediaTypes
	}
	return patchMediaTypes
}

// readPatch reads a patch body and returns the function that applies it to
// an object's JSON. The function's errors are a Status when the patch is
// refused for what it is (malformed, or past a limit), and plain errors
// when it does not apply to the object, which patchFailed turns into a
// Status.
func (s *Server) readPatch(r *http.Request, dataStruct any) (func(orig []byte) ([]byte, error), error) {
	mt := mediaType(r)
	if r.Header.Get("Content-Type") == "" {
		return nil, newUnsupportedMediaType("", patchMediaTypes)
	}
	if _, custom := dataStruct.(*unstructured.Unstructured); custom && types.PatchType(mt) == types.StrategicMergePatchType {
		return nil, newUnsupportedMediaType(mt, append(slices.Clone(customPatchMediaTypes), string(types.ApplyYAMLPatchType)))
	}
	body, err := readBody(r, s.maxBody)
	if err != nil {
		return nil, err
	}
	switch types.PatchType(mt) {
	case types.MergePatchType, types.JSONPatchType, types.StrategicMergePatchType:
		if err := checkNesting("the patch", body); err != nil {
			return nil, err
		}
	}
	switch types.PatchType(mt) {
	case types.MergePatchType:
		if !json.Valid(body) {
			return nil, apierrors.NewBadRequest("the merge patch is not valid JSON")
		}
		return func(orig []byte) ([]byte, error) {
			out, err := mergePatch(orig, body)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			return out, nil
		}, nil
	case types.JSONPatchType:
		p, err := decodeJSONPatch(body)
		if err != nil {
			return nil, err
		}
		return func(orig []byte) ([]byte, error) {
			return applyJSONPatch(p, orig, s.maxBody)
		}, nil
	case types.StrategicMergePatchType:
		if !json.Valid(body) {
			return nil, apierrors.NewBadRequest("the strategic merge patch is not valid JSON")
		}
		return func(orig []byte) ([]byte, error) {
			out, err := strategicMergePatch(orig, body, dataStruct)
			return out, strategicMergePatchError(err)
		}, nil
	}
	if types.PatchType(mt) == types.ApplyYAMLPatchType || types.PatchType(mt) == types.ApplyCBORPatchType {
		return nil, errServerSideApply(mt)
	}
	return nil, newUnsupportedMediaType(mt, patchMediaTypes)
}

// strategicMergePatchError classifies a strategic merge patch's error as
// kube-apiserver does: a malformed patch is a 400 BadRequest; one that
// does not apply is left to patchFailed.
func strategicMergePatchError(err error) error {
	switch err {
	case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys,
		mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
		return apierrors.NewBadRequest(err.Error())
	}
	return err
}

// errServerSideApply answers a server-side apply where minictl does not
// serve one: the scale subresource.
func errServerSideApply(mt string) *apierrors.StatusError {
	se := newUnsupportedMediaType(mt, patchMediaTypes)
	se.ErrStatus.Message = fmt.Sprintf("server-side apply (%s) of the scale subresource is not supported by minictl; "+
		"apply to the object's spec.replicas, or use a merge, JSON or strategic merge patch; accepted media types are %v", mt, patchMediaTypes)
	return se
}

// patchFailed answers a patch that does not apply to the object it names
// (a JSON patch's test that fails, a path the object does not have): 422
// Invalid, with the object's name and kind, and the reason as the cause on
// the field "patch". kube-apiserver answers these with a 422 whose
// message and details say nothing of the reason. A Status (a malformed
// patch, a limit) passes as it is.
func patchFailed(gk schema.GroupKind, name string, err error) error {
	var se *apierrors.StatusError
	if err == nil || errors.As(err, &se) {
		return err
	}
	return apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("patch"), field.OmitValueType{}, err.Error())})
}

// patchObject applies a patch to the current object and decodes the result;
// fields the kind does not have are treated as fv says.
func patchObject(ctx context.Context, res *api.Resource, cur api.Object, apply func([]byte) ([]byte, error), fv fieldValidation) (api.Object, error) {
	orig, err := marshalObject(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	patched, err := apply(orig)
	if err != nil {
		return nil, patchFailed(schemaGroupKind(res), cur.GetName(), err)
	}
	obj, err := decodeInto(ctx, res, patched, fv)
	if err != nil {
		return nil, err
	}
	if err := checkIdentity(res, obj, cur.GetNamespace(), cur.GetName()); err != nil {
		return nil, err
	}
	return obj, nil
}

func (s *Server) servePatch(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	fv, err := writeOptions(r)
	if err != nil {
		return err
	}
	if isApply(r) {
		return s.serveApply(w, r, ri, "", fv)
	}
	if _, err := patchOptions(r); err != nil {
		return err
	}
	apply, err := s.readPatch(r, ri.res.New())
	if err != nil {
		return err
	}
	o := updateOptions{mode: modeMain, dry: dryRun(r), manager: managerOrUserAgent(r)}
	out, err := s.updateObject(r.Context(), ri.store, ri.namespace, ri.name, o, func(cur api.Object) (api.Object, error) {
		return patchObject(r.Context(), ri.res, cur, apply, fv)
	})
	if err != nil {
		return err
	}
	writeWritten(w, r, ri.res, http.StatusOK, out)
	return nil
}
