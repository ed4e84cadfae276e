package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/minictl/minictl/api"
)

// mimeProtobuf is Kubernetes' protobuf encoding (api/protobuf.go).
// client-go's typed clients (and so kubectl's create namespace, scale,
// drain, ...) send request bodies in it, and ask for reads in it; minictl
// reads such bodies, and answers gets, lists, watches and the object a
// write leaves in protobuf when Accept prefers it. Errors are answered in
// JSON, which every client accepts whatever it asked for.
const mimeProtobuf = api.ProtobufMediaType

// servedScheme knows the Go types of the kinds the catalogue serves, of
// their lists, and of the other bodies requests carry (DeleteOptions,
// Scale, Binding's kin): what OpenAPI describes and what a protobuf body
// of a subresource or a delete is decoded into. Built once, never changed.
var servedScheme = sync.OnceValues(func() (*runtime.Scheme, error) {
	sc := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme, policyv1beta1.AddToScheme, coordinationv1.AddToScheme, autoscalingv1.AddToScheme, autoscalingv2.AddToScheme,
		admissionregistrationv1.AddToScheme, apiextensionsv1.AddToScheme, rbacv1.AddToScheme, certificatesv1.AddToScheme, discoveryv1.AddToScheme,
		storagev1.AddToScheme,
		authenticationv1.AddToScheme, authorizationv1.AddToScheme, networkingv1.AddToScheme, metricsv1beta1.AddToScheme, metav1.AddMetaToScheme,
	} {
		if err := add(sc); err != nil {
			return nil, err
		}
	}
	return sc, nil
})

// decodeProtobuf reads an object of res from a protobuf body, straight
// into its Go type. Protobuf has no unknown or duplicate fields to report,
// so fieldValidation does not apply, as in kube-apiserver.
func decodeProtobuf(res *api.Resource, body []byte) (api.Object, error) {
	apiVersion, kind, msg, err := api.ProtobufObject(body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a protobuf object minictl knows: %v", err))
	}
	if kind != res.Kind || apiVersion != res.APIVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s %s, but this URL serves %s (%s %s)", apiVersion, kind, res.Plural, res.APIVersion(), res.Kind))
	}
	obj := res.New()
	if err := api.UnmarshalProtobuf(msg, obj); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a valid %s in protobuf: %v", res.Kind, err))
	}
	setTypeMeta(res, obj)
	return obj, nil
}

// protobufToJSON turns a protobuf body of any kind servedScheme knows into
// the JSON of the same object, so that every write takes one path from
// there on.
func protobufToJSON(body []byte) ([]byte, error) {
	sc, err := servedScheme()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	apiVersion, kind, msg, err := api.ProtobufObject(body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a protobuf object minictl knows: %v", err))
	}
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	obj, err := sc.New(gvk)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a protobuf object minictl knows: %v", err))
	}
	if err := api.UnmarshalProtobuf(msg, obj); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a valid %s in protobuf: %v", kind, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return json.Marshal(obj)
}

// protobufOf is obj, an object of res, in protobuf with its envelope,
// which names res's apiVersion and kind whatever obj's TypeMeta says.
func protobufOf(res *api.Resource, obj api.Object) ([]byte, error) {
	return api.MarshalProtobufAs(res.APIVersion(), res.Kind, obj)
}

// writeProtobuf answers one object of res in protobuf.
func writeProtobuf(w http.ResponseWriter, res *api.Resource, obj api.Object) error {
	data, err := protobufOf(res, obj)
	return writeProtobufData(w, data, err)
}

// writeProtobufList answers a <Kind>List of n objects in protobuf; msg
// gives the i-th one's own protobuf bytes.
func writeProtobufList(w http.ResponseWriter, res *api.Resource, lm metav1.ListMeta, n int, msg func(i int) ([]byte, error)) error {
	items := make([][]byte, n)
	for i := range items {
		var err error
		if items[i], err = msg(i); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	data, err := api.ProtobufList(res.APIVersion(), res.ListKindName(), &lm, items)
	return writeProtobufData(w, data, err)
}

// writeProtobufData answers 200 with data in protobuf, unless encoding it
// failed with err.
func writeProtobufData(w http.ResponseWriter, data []byte, err error) error {
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	writeProtobufCode(w, http.StatusOK, data)
	return nil
}

func writeProtobufCode(w http.ResponseWriter, code int, data []byte) {
	w.Header().Set("Content-Type", mimeProtobuf)
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// answersProtobuf reports whether a write of res answers with the object
// in protobuf: the request's Accept prefers it, as client-go's typed
// clients (and minictl's) ask, and res has it. Every other write is
// answered in JSON: its Accept is not judged once the write is done.
func answersProtobuf(r *http.Request, res *api.Resource) bool {
	out, err := negotiateOutput(r, "update", res)
	return err == nil && out.protobuf
}

// writeWritten answers a write with obj, the object of res as the write
// left it: in protobuf when the client prefers it, else in JSON.
func writeWritten(w http.ResponseWriter, r *http.Request, res *api.Resource, code int, obj api.Object) {
	if answersProtobuf(r, res) {
		if data, err := protobufOf(res, obj); err == nil {
			writeProtobufCode(w, code, data)
			return
		}
	}
	writeJSON(w, code, obj)
}

// writeCreated answers a create, 201, with what createObject made of obj:
// obj itself when it returned no JSON (a dry run, or a create that kept
// obj), else raw, the created object's JSON.
func writeCreated(w http.ResponseWriter, r *http.Request, res *api.Resource, obj api.Object, raw []byte) {
	if raw == nil {
		writeWritten(w, r, res, http.StatusCreated, obj)
		return
	}
	writeWrittenRaw(w, r, res, http.StatusCreated, raw)
}

// writeWrittenRaw is writeWritten for an object at hand only as its JSON,
// raw: a Service, whose create writes its allocations along.
func writeWrittenRaw(w http.ResponseWriter, r *http.Request, res *api.Resource, code int, raw []byte) {
	if answersProtobuf(r, res) {
		obj := res.New()
		if err := json.Unmarshal(raw, obj); err == nil {
			writeWritten(w, r, res, code, obj)
			return
		}
	}
	writeRaw(w, code, raw)
}
