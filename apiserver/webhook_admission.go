package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/webhook"
)

// admitWebhooks is kube's MutatingAdmissionWebhook: the mutating
// webhooks a write matches are called one after another, in the order of
// their configurations' names, and each one's JSON patch is applied before
// the next is called. A webhook whose reinvocationPolicy is IfNeeded is
// called a second time if a later webhook changed the object after it.
// The object is validated after the whole mutating half, as any other.
func (s *Server) admitWebhooks(ctx context.Context, a *attributes) error {
	if exemptFromWebhooks(a.res) {
		return nil
	}
	hooks := s.webhookHooks(true)
	if len(hooks) == 0 {
		return nil
	}
	var invoked []string          // reinvocable webhooks called so far, by uid
	reinvoke := map[string]bool{} // webhooks to call again: the object changed after them
	for round := 0; round < 2; round++ {
		for _, h := range hooks {
			if round == 1 && !reinvoke[h.uid] {
				continue
			}
			inv, err := s.shouldCall(ctx, h, a)
			if err != nil {
				return err
			}
			if inv == nil {
				continue
			}
			changed, err := s.callHook(ctx, inv, a)
			if err != nil {
				return err
			}
			if changed {
				for _, uid := range invoked {
					reinvoke[uid] = true
				}
			}
			if rp := *h.ReinvocationPolicy; round == 0 && rp != nil && *rp == admissionregistrationv1.IfNeededReinvocationPolicy {
				invoked = append(invoked, h.uid)
			}
		}
		if len(reinvoke) == 0 {
			break
		}
	}
	return nil
}

// validateWebhooks is kube's ValidatingAdmissionWebhook: the validating
// webhooks a write matches are called at once, in parallel; the write
// goes on only if every one allows it. Of several refusals, the first
// webhook's (in configuration order) is returned.
func (s *Server) validateWebhooks(ctx context.Context, a *attributes) (func(), error) {
	if exemptFromWebhooks(a.res) {
		return nil, nil
	}
	var invs []*invocation
	for _, h := range s.webhookHooks(false) {
		inv, err := s.shouldCall(ctx, h, a)
		if err != nil {
			return nil, err
		}
		if inv != nil {
			invs = append(invs, inv)
		}
	}
	errs := make([]error, len(invs))
	var wg sync.WaitGroup
	for i, inv := range invs {
		wg.Go(func() { _, errs[i] = s.callHook(ctx, inv, a) })
	}
	wg.Wait()
	return nil, firstNonNil(errs)
}

func firstNonNil(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// webhookCallError is a webhook that could not be called, or answered
// nonsense: its failurePolicy decides whether the write goes on. Its
// message is kube's ErrCallingWebhook's.
type webhookCallError struct {
	name   string
	reason error
}

func (e *webhookCallError) Error() string {
	return fmt.Sprintf("failed calling webhook %q: %v", e.name, e.reason)
}

func (e *webhookCallError) Unwrap() error { return e.reason }

// callHook calls one webhook for a and applies its answer: a mutating
// webhook's patch changes a.obj (changed reports whether it did); a
// refusal is the webhook's Status. A webhook that cannot be called fails
// the write unless its failurePolicy is Ignore. Its warnings go to the
// client.
func (s *Server) callHook(ctx context.Context, inv *invocation, a *attributes) (changed bool, err error) {
	h := inv.hook
	kind := "validating"
	if h.mutating {
		kind = "admit"
	}
	start := time.Now()
	resp, err := s.callWebhook(ctx, inv, a)
	if resp != nil {
		for _, w := range resp.Warnings {
			addWarning(ctx, w)
		}
	}
	code, rejected := http.StatusOK, false
	var callErr *webhookCallError
	switch {
	case errors.As(err, &callErr):
		// kube's code for a webhook that could not be called: the status
		// it answered, or 503 when there was none to be had.
		code = http.StatusServiceUnavailable
		var sce *webhook.StatusCodeError
		if errors.As(err, &sce) {
			code = sce.Code
		}
		if h.failurePolicy() == admissionregistrationv1.Ignore {
			s.log.Warn("admission webhook: failing open", "webhook", h.Name, "error", err)
			err = nil
			if ctx.Err() != nil {
				err = apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
			}
		} else {
			rejected = true
			s.metrics.webhookRejections.WithLabelValues(h.Name, kind, string(a.op), "calling_webhook_error", strconv.Itoa(code)).Inc()
			err = apierrors.NewInternalError(err)
		}
	case err != nil:
		rejected, code = true, 0
		s.metrics.webhookRejections.WithLabelValues(h.Name, kind, string(a.op), "apiserver_internal_error", "0").Inc()
	case !resp.Allowed:
		se := deniedBy(h.Name, resp.Result)
		rejected, code, err = true, int(se.ErrStatus.Code), se
		s.metrics.webhookRejections.WithLabelValues(h.Name, kind, string(a.op), "no_error", strconv.Itoa(code)).Inc()
	}
	s.metrics.webhookLatency.WithLabelValues(h.Name, kind, string(a.op), strconv.FormatBool(rejected)).Observe(time.Since(start).Seconds())
	if resp == nil || err != nil {
		return false, err
	}
	if len(resp.Patch) == 0 {
		return false, nil
	}
	return s.applyWebhookPatch(ctx, inv, a, resp.Patch)
}

// callWebhook sends a's AdmissionReview to the webhook and checks the
// answer is one: kube's CreateAdmissionObjects and
// VerifyAdmissionResponse. Errors that are the webhook's fault are
// *webhookCallError; a dry run the webhook cannot take is refused with
// kube's 400.
func (s *Server) callWebhook(ctx context.Context, inv *invocation, a *attributes) (*admissionv1.AdmissionResponse, error) {
	h := inv.hook
	if a.dryRun {
		if se := *h.SideEffects; se == nil || (*se != admissionregistrationv1.SideEffectClassNone && *se != admissionregistrationv1.SideEffectClassNoneOnDryRun) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.Name))
		}
	}
	review, err := s.admissionReview(inv, a)
	if err != nil {
		return nil, &webhookCallError{h.Name, fmt.Errorf("could not create admission objects: %w", err)}
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, &webhookCallError{h.Name, fmt.Errorf("could not create admission objects: %w", err)}
	}
	var timeout time.Duration
	if t := *h.TimeoutSeconds; t != nil {
		timeout = time.Duration(*t) * time.Second
	}
	out, err := s.webhooks.Post(ctx, clientConfigOf(h.ClientConfig), timeout, body)
	if err != nil {
		return nil, &webhookCallError{h.Name, fmt.Errorf("failed to call webhook: %w", err)}
	}
	resp, err := verifyAdmissionResponse(review.Request.UID, h.mutating, out)
	if err != nil {
		return nil, &webhookCallError{h.Name, fmt.Errorf("received invalid webhook response: %w", err)}
	}
	return resp, nil
}

func clientConfigOf(cc *admissionregistrationv1.WebhookClientConfig) webhook.ClientConfig {
	out := webhook.ClientConfig{CABundle: cc.CABundle}
	if cc.URL != nil {
		out.URL = *cc.URL
	}
	if svc := cc.Service; svc != nil {
		out.Service = &webhook.Service{Namespace: svc.Namespace, Name: svc.Name}
		if svc.Path != nil {
			out.Service.Path = *svc.Path
		}
		if svc.Port != nil {
			out.Service.Port = *svc.Port
		}
	}
	return out
}

// adminUser is who every request is made by until minictl authenticates
// its clients: a cluster administrator.
var adminUser = authenticationv1.UserInfo{Username: "system:admin", Groups: []string{"system:masters", "system:authenticated"}}

// admissionReview is the AdmissionReview v1 request for a, as the
// webhook's invocation sees it: its kind and resource are those it
// matched, the request's own are in requestKind and requestResource.
func (s *Server) admissionReview(inv *invocation, a *attributes) (*admissionv1.AdmissionReview, error) {
	// A mutating webhook sees a create with generateName before the name is
	// chosen, as kube's storage chooses it after mutating admission.
	hideName := inv.hook.mutating && a.op == opCreate && a.generated
	req, err := admissionRequest(inv.res, a, hideName)
	if err != nil {
		return nil, err
	}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	}, nil
}

// admissionRequest is what admission tells of a, seen as a request for
// res: to a webhook, in its AdmissionReview, and to CEL expressions, as
// their request variable.
func admissionRequest(res *api.Resource, a *attributes, hideName bool) (*admissionv1.AdmissionRequest, error) {
	name := a.name
	if hideName {
		name = ""
	}
	obj, err := encodeFor(a, a.obj, res, hideName)
	if err != nil {
		return nil, err
	}
	old, err := encodeFor(a, a.old, res, false)
	if err != nil {
		return nil, err
	}
	var opts runtime.Object
	switch dry := dryRunValues(a.dryRun); a.op {
	case opCreate:
		opts = &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{Kind: "CreateOptions", APIVersion: "meta.k8s.io/v1"}, DryRun: dry}
	case opUpdate:
		opts = &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{Kind: "UpdateOptions", APIVersion: "meta.k8s.io/v1"}, DryRun: dry}
	case opDelete:
		opts = &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "meta.k8s.io/v1"}, DryRun: dry}
	}
	gvr := func(r *api.Resource) metav1.GroupVersionResource {
		return metav1.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Plural}
	}
	gvk := func(r *api.Resource) metav1.GroupVersionKind {
		if a.subresource == "scale" {
			return metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
		}
		return metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	}
	dryRun := a.dryRun
	namespace := a.namespace
	if a.res == api.Namespaces {
		namespace = a.name // kube's attributes name a namespace's namespace as itself
	}
	return &admissionv1.AdmissionRequest{
		UID:  types.UID(uuid.NewString()),
		Kind: gvk(res), Resource: gvr(res), SubResource: a.subresource,
		RequestKind: ptrTo(gvk(a.res)), RequestResource: ptrTo(gvr(a.res)), RequestSubResource: a.subresource,
		Name: name, Namespace: namespace,
		Operation: admissionv1.Operation(a.op),
		UserInfo:  adminUser,
		Object:    obj, OldObject: old,
		DryRun:  &dryRun,
		Options: runtime.RawExtension{Object: opts},
	}, nil
}

func ptrTo[T any](v T) *T { return &v }

func dryRunValues(dry bool) []string {
	if dry {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// encodeFor is obj's JSON as a's webhooks see it: the object, or its
// autoscaling/v1 Scale for a write of the scale subresource, as kube sends.
func encodeFor(a *attributes, obj api.Object, res *api.Resource, hideName bool) (runtime.RawExtension, error) {
	if a.subresource != "scale" || obj == nil || reflect.ValueOf(obj).IsNil() {
		return encodeAs(obj, res, hideName)
	}
	sc, err := scaleOf(a.res, obj)
	if err != nil {
		return runtime.RawExtension{}, err
	}
	raw, err := json.Marshal(sc)
	return runtime.RawExtension{Raw: raw}, err
}

// encodeAs is obj's JSON as an object of res (another version of its
// resource, for an equivalent match: its apiVersion rewritten, as
// conversion with the None strategy does); without its name if hideName.
func encodeAs(obj api.Object, res *api.Resource, hideName bool) (runtime.RawExtension, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return runtime.RawExtension{}, nil
	}
	cp := obj.DeepCopyObject().(api.Object)
	cp.GetObjectKind().SetGroupVersionKind(kindOf(res))
	if hideName {
		cp.SetName("")
	}
	raw, err := json.Marshal(cp)
	return runtime.RawExtension{Raw: raw}, err
}

// verifyAdmissionResponse checks a webhook's answer as kube does: an
// AdmissionReview v1 with a response to the request that was sent, and a
// JSON patch only from a mutating webhook.
func verifyAdmissionResponse(uid types.UID, mutating bool, body []byte) (*admissionv1.AdmissionResponse, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("the answer is not an AdmissionReview: %w", err)
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s", review.APIVersion, review.Kind)
	}
	r := review.Response
	if r == nil {
		return nil, errors.New("webhook response was absent")
	}
	if r.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, r.UID)
	}
	if len(r.Patch) > 0 {
		if !mutating {
			return nil, errors.New("validating webhooks may not return patches")
		}
		if r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
			return nil, fmt.Errorf("webhook returned response.patch but not response.patchType")
		}
		if !r.Allowed {
			r.Patch = nil // a refusal changes nothing
		}
	}
	return r, nil
}

// deniedBy is a webhook's refusal as the client sees it, kube's
// ToStatusErr: the webhook's Status, at least a 400 Failure, its message
// saying which webhook refused.
func deniedBy(name string, result *metav1.Status) *apierrors.StatusError {
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	st.TypeMeta = metav1.TypeMeta{}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	denied := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = denied + ": " + st.Message
	case st.Reason != "":
		st.Message = denied + ": " + string(st.Reason)
	default:
		st.Message = denied + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// applyWebhookPatch applies a mutating webhook's JSON patch to a.obj, in
// place. The result is decoded as a's kind (fields it does not have are
// dropped), defaulted, and prepared again as the write's own object was:
// what a client may not set, a webhook may not either. A patch that does
// not apply is an internal error, as in kube.
func (s *Server) applyWebhookPatch(ctx context.Context, inv *invocation, a *attributes, patch []byte) (bool, error) {
	if a.obj == nil {
		return false, nil // a delete has no object to change
	}
	ops, err := decodeJSONPatch(patch)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("webhook %q: %w", inv.hook.Name, err))
	}
	hideName := a.op == opCreate && a.generated
	orig, err := encodeFor(a, a.obj, inv.res, hideName)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	patched, err := applyJSONPatch(ops, orig.Raw, s.maxBody)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("webhook %q: apply its patch: %w", inv.hook.Name, err))
	}
	obj, err := decodeMutated(ctx, a, patched)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("webhook %q: decode its patched object: %w", inv.hook.Name, err))
	}
	setTypeMeta(a.res, obj)
	if hideName && obj.GetName() == "" {
		obj.SetName(a.name)
	}
	identity := a.name
	if a.op == opCreate {
		identity = "" // a create may be renamed
	}
	if err := checkIdentity(a.res, obj, a.namespace, identity); err != nil {
		return false, err
	}
	s.prepareMutated(a, obj)
	if reflect.DeepEqual(obj, a.obj) {
		return false, nil
	}
	reflect.ValueOf(a.obj).Elem().Set(reflect.ValueOf(obj).Elem())
	return true, nil
}

// decodeMutated is the object a's write holds once a webhook patched
// what it was sent: the object, or, for the scale subresource, the object
// with the patched Scale's replicas.
func decodeMutated(ctx context.Context, a *attributes, patched []byte) (api.Object, error) {
	if a.subresource != "scale" {
		return decodeInto(ctx, a.res, patched, fieldIgnore)
	}
	var sc autoscalingv1.Scale
	if err := json.Unmarshal(patched, &sc); err != nil {
		return nil, err
	}
	obj := a.obj.DeepCopyObject().(api.Object)
	if err := setReplicas(a.res, obj, sc.Spec.Replicas); err != nil {
		return nil, err
	}
	return obj, nil
}

// prepareMutated does again to a webhook's result what the write did to
// the client's object before admission: defaults, the server's metadata,
// and the fields the write may not change.
func (s *Server) prepareMutated(a *attributes, obj api.Object) {
	res := a.res
	if res.Default != nil {
		res.Default(obj)
	}
	switch a.op {
	case opCreate:
		obj.SetUID(a.obj.GetUID())
		obj.SetCreationTimestamp(a.obj.GetCreationTimestamp())
		obj.SetResourceVersion(a.obj.GetResourceVersion())
		if res.PrepareForCreate != nil {
			res.PrepareForCreate(obj)
		}
	case opUpdate:
		obj.SetResourceVersion(a.old.GetResourceVersion())
		api.PrepareObjectMetaForUpdate(obj, a.old)
		switch {
		case a.mode == modeStatus:
			res.PrepareStatusUpdate(obj, a.old)
		case res.PrepareForUpdate != nil:
			res.PrepareForUpdate(obj, a.old)
		}
	}
}
