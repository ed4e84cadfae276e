package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/internal/webhook"
)

// The Webhook conversion strategy, as kube-apiserver's
// apiextensions-apiserver calls it: the objects to convert go to the
// definition's webhook in a ConversionReview (v1, or v1beta1 if that is
// the only version the definition names), with a fresh uid and the
// desired apiVersion; the answer must be a ConversionReview for that uid
// whose result is Success and whose convertedObjects are as many, in the
// same order, each in the desired apiVersion and of the same kind. A
// webhook may change an object's labels and annotations; the rest of its
// metadata is kept from the original, and a converted object with another
// name, namespace or uid is refused. Whatever goes wrong fails the
// conversion: the write stores nothing, the read answers 500.

// conversionTimeout bounds one call of a conversion webhook: kube's
// default for webhooks that configure no timeout, which conversion
// webhooks cannot.
const conversionTimeout = 30 * time.Second

// webhookConverter converts one definition's objects by calling its
// conversion webhook.
type webhookConverter struct {
	client *webhook.Client
	cc     webhook.ClientConfig
	// reviewVersions are the ConversionReview versions the definition
	// says its webhook understands, in its order of preference.
	reviewVersions []string
	crdName        string
	metrics        *metrics
}

// convertByWebhook makes a definition's resources convert by its webhook
// when its strategy is Webhook; otherwise they keep the None strategy.
func (s *Server) convertByWebhook(crd *apiextensionsv1.CustomResourceDefinition, resources []*api.Resource) {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil {
		return
	}
	convert := newWebhookConverter(s.webhooks, crd, s.metrics).convert
	for _, res := range resources {
		res.Convert = convert
		if res.Storage != nil {
			res.Storage.Convert = convert // which may not be served
		}
	}
}

// newWebhookConverter returns the converter of crd, whose strategy is
// Webhook, calling through client.
func newWebhookConverter(client *webhook.Client, crd *apiextensionsv1.CustomResourceDefinition, m *metrics) *webhookConverter {
	w := crd.Spec.Conversion.Webhook
	var cc webhook.ClientConfig
	if c := w.ClientConfig; c != nil {
		cc.CABundle = slices.Clone(c.CABundle)
		if c.URL != nil {
			cc.URL = *c.URL
		}
		if svc := c.Service; svc != nil {
			cc.Service = &webhook.Service{Namespace: svc.Namespace, Name: svc.Name}
			if svc.Path != nil {
				cc.Service.Path = *svc.Path
			}
			if svc.Port != nil {
				cc.Service.Port = *svc.Port
			}
		}
	}
	return &webhookConverter{
		client: client, cc: cc, reviewVersions: slices.Clone(w.ConversionReviewVersions),
		crdName: crd.Name, metrics: m,
	}
}

// convert returns objs in apiVersion to (group/version), in order; objects
// already there are not sent. Its errors say which kind and version the
// webhook failed to convert, as kube's do.
func (w *webhookConverter) convert(ctx context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error) {
	var send []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAPIVersion() != to {
			send = append(send, o)
		}
	}
	if len(send) == 0 {
		return slices.Clone(objs), nil
	}
	from := send[0].GroupVersionKind()
	start := time.Now()
	converted, err := w.call(ctx, send, to)
	toVersion := to
	if gv, perr := schema.ParseGroupVersion(to); perr == nil {
		toVersion = gv.Version
	}
	w.metrics.conversionLatency.WithLabelValues(w.crdName, from.Version, toVersion, strconv.FormatBool(err == nil)).
		Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %v %w", from, err)
	}
	out := make([]*unstructured.Unstructured, len(objs))
	next := 0
	for i, o := range objs {
		out[i] = o
		if o.GetAPIVersion() != to {
			out[i] = converted[next]
			next++
		}
	}
	return out, nil
}

// call sends objs to the webhook and returns them as it converted them,
// checked. Its errors complete "conversion webhook for <kind> ".
func (w *webhookConverter) call(ctx context.Context, objs []*unstructured.Unstructured, to string) ([]*unstructured.Unstructured, error) {
	uid := types.UID(uuid.NewString())
	raws := make([]runtime.RawExtension, len(objs))
	for i, o := range objs {
		raws[i] = runtime.RawExtension{Object: o}
	}
	version, review, err := w.review(uid, to, raws)
	if err != nil {
		return nil, fmt.Errorf("failed: %w", err)
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, fmt.Errorf("failed: %w", err)
	}
	answer, err := w.client.Post(ctx, w.cc, conversionTimeout, body)
	if err != nil {
		return nil, fmt.Errorf("failed: %w", err)
	}
	results, err := convertedObjects(version, uid, answer)
	if err != nil {
		return nil, fmt.Errorf("failed: %w", err)
	}
	if len(results) != len(objs) {
		return nil, fmt.Errorf("returned %d objects, expected %d", len(results), len(objs))
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, raw := range results {
		c := &unstructured.Unstructured{}
		if err := c.UnmarshalJSON(raw.Raw); err != nil {
			return nil, fmt.Errorf("returned invalid converted object at index %d: %w", i, err)
		}
		if got := c.GetAPIVersion(); got != to {
			return nil, fmt.Errorf("returned invalid converted object at index %d: invalid groupVersion (expected %s, received %s)", i, to, got)
		}
		if err := sameObject(objs[i], c); err != nil {
			return nil, fmt.Errorf("returned invalid converted object at index %d: %w", i, err)
		}
		if err := keepMetadata(objs[i], c); err != nil {
			return nil, fmt.Errorf("returned invalid metadata in object at index %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

// review is the ConversionReview to send, in the first version of the
// definition's conversionReviewVersions that minictl speaks.
func (w *webhookConverter) review(uid types.UID, to string, objs []runtime.RawExtension) (string, any, error) {
	for _, v := range w.reviewVersions {
		switch v {
		case "v1":
			return v, &apiextensionsv1.ConversionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
				Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: to, Objects: objs},
			}, nil
		case "v1beta1":
			return v, &apiextensionsv1beta1.ConversionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1beta1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
				Request:  &apiextensionsv1beta1.ConversionRequest{UID: uid, DesiredAPIVersion: to, Objects: objs},
			}, nil
		}
	}
	return "", nil, fmt.Errorf("no supported conversion review versions in %v (minictl speaks v1 and v1beta1)", w.reviewVersions)
}

// convertedObjects reads the webhook's answer, a ConversionReview of
// version, and returns its convertedObjects if it answers request uid
// with Success; else the webhook's message. As in kube, a v1beta1 answer's
// kind and uid are not checked.
func convertedObjects(version string, uid types.UID, body []byte) ([]runtime.RawExtension, error) {
	var result metav1.Status
	var objs []runtime.RawExtension
	if version == "v1" {
		var review apiextensionsv1.ConversionReview
		if err := json.Unmarshal(body, &review); err != nil {
			return nil, fmt.Errorf("the answer is not a ConversionReview: %w", err)
		}
		want := apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview")
		if got := review.GroupVersionKind(); got != want {
			return nil, fmt.Errorf("expected webhook response of %v, got %v", want, got)
		}
		r := review.Response
		if r == nil {
			return nil, errors.New("no response provided")
		}
		if r.UID != uid {
			return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, r.UID)
		}
		result, objs = r.Result, r.ConvertedObjects
	} else {
		var review apiextensionsv1beta1.ConversionReview
		if err := json.Unmarshal(body, &review); err != nil {
			return nil, fmt.Errorf("the answer is not a ConversionReview: %w", err)
		}
		r := review.Response
		if r == nil {
			return nil, errors.New("no response provided")
		}
		result, objs = r.Result, r.ConvertedObjects
	}
	if result.Status != metav1.StatusSuccess {
		if result.Message != "" {
			return nil, errors.New(result.Message)
		}
		return nil, fmt.Errorf("response.result.status was '%s', not 'Success'", result.Status)
	}
	return objs, nil
}

// sameObject checks that converted is original in another version: the
// same kind, name, namespace and uid.
func sameObject(original, converted *unstructured.Unstructured) error {
	if a, b := original.GetKind(), converted.GetKind(); a != b {
		return fmt.Errorf("invalid kind (expected %s, received %s)", a, b)
	}
	if a, b := original.GetName(), converted.GetName(); a != b {
		return fmt.Errorf("must have the same name: %s != %s", a, b)
	}
	if a, b := original.GetNamespace(), converted.GetNamespace(); a != b {
		return fmt.Errorf("must have the same namespace: %s != %s", a, b)
	}
	if a, b := original.GetUID(), converted.GetUID(); a != b {
		return fmt.Errorf("must have the same UID: %s != %s", a, b)
	}
	return nil
}

// keepMetadata gives converted the metadata of original, but for the
// labels and annotations the webhook answered, which must be valid if it
// changed them: kube's restoreObjectMeta. Any other change to metadata is
// dropped without a word, as kube drops it.
func keepMetadata(original, converted *unstructured.Unstructured) error {
	m, ok := converted.Object["metadata"]
	if !ok {
		return errors.New("missing metadata in converted object")
	}
	answered, ok := m.(map[string]any)
	if !ok {
		return fmt.Errorf("invalid metadata of type %T in converted object", m)
	}
	meta := map[string]any{}
	if om, ok := original.Object["metadata"].(map[string]any); ok {
		meta = runtime.DeepCopyJSONValue(om).(map[string]any)
	}
	for _, name := range []string{"labels", "annotations"} {
		v := answered[name]
		if v == nil {
			delete(meta, name)
			continue
		}
		got, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("invalid metadata.%s of type %T in converted object", name, v)
		}
		strs := make(map[string]string, len(got))
		for k, v := range got {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("metadata.%s[%s] must be a string, but is %T in converted object", name, k, v)
			}
			strs[k] = s
		}
		if had, _ := meta[name].(map[string]any); !sameStrings(had, strs) {
			var errs field.ErrorList
			if name == "labels" {
				errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", "labels"))
			} else {
				errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotations"))
			}
			if len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		meta[name] = got
	}
	converted.Object["metadata"] = meta
	return nil
}

// sameStrings reports whether a, a label or annotation map as decoded
// from JSON, holds exactly b.
func sameStrings(a map[string]any, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if s, ok := a[k].(string); !ok || s != v {
			return false
		}
	}
	return true
}
