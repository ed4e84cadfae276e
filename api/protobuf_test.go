package api

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every served kind has a protobuf encoding, and an object survives the
// envelope and a list unchanged.
func TestProtobufEveryKind(t *testing.T) {
	for _, r := range Resources() {
		obj := r.NewObject()
		if !HasProtobuf(obj) {
			t.Errorf("%s has no protobuf encoding", r.Kind)
			continue
		}
		obj.SetName("x")
		obj.SetLabels(map[string]string{"app": "web"})
		env, err := MarshalProtobuf(obj)
		if err != nil {
			t.Fatalf("%s: %v", r.Kind, err)
		}
		msg, err := ProtobufMessage(obj)
		if err != nil {
			t.Fatalf("%s: %v", r.Kind, err)
		}
		if wrapped, err := ProtobufEnvelope(r.APIVersion(), r.Kind, msg); err != nil || !bytes.Equal(env, wrapped) {
			t.Errorf("%s: MarshalProtobuf and ProtobufEnvelope disagree (%v):\n%q\n%q", r.Kind, err, env, wrapped)
		}
		apiVersion, kind, msg, err := ProtobufObject(env)
		if err != nil || apiVersion != r.APIVersion() || kind != r.Kind {
			t.Fatalf("%s: envelope says %s %s (%v)", r.Kind, apiVersion, kind, err)
		}
		back := r.NewObject()
		if err := UnmarshalProtobuf(msg, back); err != nil || !reflect.DeepEqual(back, obj) {
			t.Errorf("%s: decoded %#v (%v), want %#v", r.Kind, back, err, obj)
		}

		list, err := ProtobufList(r.APIVersion(), r.Kind+"List", &metav1.ListMeta{ResourceVersion: "7"}, [][]byte{msg, msg})
		if err != nil {
			t.Fatal(err)
		}
		_, listKind, listMsg, err := ProtobufObject(list)
		if err != nil || listKind != r.Kind+"List" {
			t.Fatalf("%s list: envelope names %q (%v)", r.Kind, listKind, err)
		}
		meta, items, err := ProtobufListItems(listMsg)
		if err != nil || meta.ResourceVersion != "7" || len(items) != 2 || string(items[1]) != string(msg) {
			t.Errorf("%s list: meta %+v, %d items (%v)", r.Kind, meta, len(items), err)
		}
	}
}

// MarshalProtobufAs writes what ProtobufEnvelope wraps, for objects whose
// lengths take one, two and three bytes to write.
func TestMarshalProtobufAsSizes(t *testing.T) {
	for _, size := range []int{0, 100, 1000, 100000} {
		obj := Pods.NewObject()
		obj.SetName("x")
		obj.SetAnnotations(map[string]string{"note": strings.Repeat("n", size)})
		env, err := MarshalProtobufAs("v1", "Pod", obj)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := ProtobufMessage(obj)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ProtobufEnvelope("v1", "Pod", msg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(env, want) {
			t.Errorf("annotation of %d bytes: MarshalProtobufAs and ProtobufEnvelope disagree", size)
		}
	}
}

// Stamping a resourceVersion into an object's protobuf gives the bytes
// the object carrying it encodes to, for every kind, whatever the
// object's size (lengths of one, two and three bytes, and lengths that
// grow by a byte when the resourceVersion goes in), from none and from
// another resourceVersion.
func TestStampProtobufResourceVersion(t *testing.T) {
	for _, r := range Resources() {
		for _, labelBytes := range []int{0, 90, 100, 105, 110, 115, 120, 16300, 16340, 16370, 70000} {
			obj := r.NewObject()
			obj.SetName("x")
			obj.SetNamespace("default")
			obj.SetLabels(map[string]string{"app": strings.Repeat("w", labelBytes)})
			for _, from := range []string{"", "7"} {
				obj.SetResourceVersion(from)
				env, err := MarshalProtobufAs(r.APIVersion(), r.Kind, obj)
				if err != nil {
					t.Fatal(err)
				}
				for _, rv := range []int64{1, 123456789012} {
					got, ok := StampProtobufResourceVersion(env, rv)
					obj.SetResourceVersion(strconv.FormatInt(rv, 10))
					want, err := MarshalProtobufAs(r.APIVersion(), r.Kind, obj)
					if err != nil {
						t.Fatal(err)
					}
					if !ok || !bytes.Equal(got, want) {
						t.Fatalf("%s, %d bytes of labels, from %q to %d: ok %v\n got %q\nwant %q", r.Kind, labelBytes, from, rv, ok, got, want)
					}
					obj.SetResourceVersion(from)
				}
			}
		}
	}
	for _, bad := range [][]byte{nil, []byte("{}"), []byte("k8s\x00"), []byte("k8s\x00\x12\x03\x0a\x01\xff"), []byte("k8s\x00\x12\x02\x12\x00")} {
		if got, ok := StampProtobufResourceVersion(bad, 5); ok {
			t.Errorf("%q stamped: %q", bad, got)
		}
	}
}
