package apiserver

import (
	"encoding/json"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// mimeProtobuf is Kubernetes' protobuf encoding. client-go's typed clients
// (and so kubectl's create namespace, scale, drain, ...) send request
// bodies in it; minictl reads them, and always answers in JSON, which
// every client accepts.
const mimeProtobuf = "application/vnd.kubernetes.protobuf"

// protobufDecoder decodes the "k8s\x00" envelope into the Go type its
// apiVersion and kind name; built once, it is never changed.
var protobufDecoder = sync.OnceValues(func() (*protobuf.Serializer, error) {
	sc := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, coordinationv1.AddToScheme, autoscalingv1.AddToScheme, metav1.AddMetaToScheme,
	} {
		if err := add(sc); err != nil {
			return nil, err
		}
	}
	return protobuf.NewSerializer(sc, sc), nil
})

// protobufToJSON turns a protobuf body into the JSON of the same object,
// so that every write takes one path from there on.
func protobufToJSON(body []byte) ([]byte, error) {
	dec, err := protobufDecoder()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj, gvk, err := dec.Decode(body, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a protobuf object minictl knows: %v", err))
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	return json.Marshal(obj)
}
