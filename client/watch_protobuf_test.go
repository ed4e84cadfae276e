package client

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/minictl/minictl/api"
)

// protobufFrame is one watch event as a server writes it in protobuf.
func protobufFrame(t *testing.T, typ watch.EventType, obj runtime.Object) string {
	t.Helper()
	env, err := api.MarshalProtobuf(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(api.ProtobufWatchFrame(string(typ), env))
}

func protobufWatcher(t *testing.T, stream string) *Watcher[*corev1.ConfigMap] {
	t.Helper()
	res, _ := api.ForObject(&corev1.ConfigMap{})
	ctx, cancel := context.WithCancel(context.Background())
	w := newWatcher[*corev1.ConfigMap](ctx, cancel, res, io.NopCloser(strings.NewReader(stream)), true)
	t.Cleanup(w.Stop)
	return w
}

func configMapAt(name, rv string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: rv},
		Data:       data,
	}
}

func TestWatchProtobufStream(t *testing.T) {
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 5 (13)"}
	stream := protobufFrame(t, watch.Added, configMapAt("a", "10", map[string]string{"k": "v1"})) +
		protobufFrame(t, watch.Modified, configMapAt("a", "11", map[string]string{"k": "v2"})) +
		protobufFrame(t, watch.Bookmark, configMapAt("", "12", nil)) +
		protobufFrame(t, watch.Deleted, configMapAt("a", "13", map[string]string{"k": "v2"})) +
		protobufFrame(t, watch.Error, gone)
	w := protobufWatcher(t, stream)
	evs := collect(t, w.Events())
	if w.Err() != nil {
		t.Errorf("Err() = %v after a clean end", w.Err())
	}
	want := []struct {
		typ  watch.EventType
		rv   string
		data string
	}{{watch.Added, "10", "v1"}, {watch.Modified, "11", "v2"}, {watch.Bookmark, "12", ""}, {watch.Deleted, "13", "v2"}}
	if len(evs) != len(want)+1 {
		t.Fatalf("got %d events, want %d", len(evs), len(want)+1)
	}
	for i, w := range want {
		obj := evs[i].Object
		if evs[i].Type != w.typ || obj == nil || obj.ResourceVersion != w.rv || obj.Data["k"] != w.data || obj.Kind != "ConfigMap" {
			t.Errorf("event %d: %s %+v, want %s at %s with k=%q", i, evs[i].Type, obj, w.typ, w.rv, w.data)
		}
	}
	if err := evs[4].Err(); !IsGone(err) || !strings.Contains(err.Error(), "too old resource version") {
		t.Errorf("error event Err() = %v, want IsGone", err)
	}
}

func TestWatchProtobufStreamBroken(t *testing.T) {
	first := protobufFrame(t, watch.Added, configMapAt("a", "10", nil))
	second := protobufFrame(t, watch.Modified, configMapAt("a", "11", nil))
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, api.MaxProtobufFrame+1)
	testBrokenStreams(t, protobufWatcher, []brokenStream{
		{"cut inside a frame", first + second[:len(second)-3], 1, "decode", io.ErrUnexpectedEOF},
		{"cut inside a length", first + second[:2], 1, "decode", io.ErrUnexpectedEOF},
		{"a length no frame can have", first + string(huge), 1, "larger than", nil},
		{"not a WatchEvent", first + "\x00\x00\x00\x03\xff\xff\xff", 1, "decode", nil},
		{"object without the envelope", string(api.ProtobufWatchFrame("ADDED", []byte("{}"))), 0, "k8s\\x00", nil},
		{"unknown type", first + string(api.ProtobufWatchFrame("EXPLODED", []byte("k8s\x00"))), 1, `unknown event type "EXPLODED"`, nil},
	})
}

// A protobuf list is read item by item; one of another kind is refused.
func TestListProtobuf(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "x"}}
	msg, err := api.ProtobufMessage(pod)
	if err != nil {
		t.Fatal(err)
	}
	list := func(kind string) func(http.ResponseWriter, *http.Request) {
		body, err := api.ProtobufList("v1", kind, &metav1.ListMeta{ResourceVersion: "9"}, [][]byte{msg, msg})
		if err != nil {
			t.Fatal(err)
		}
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", api.ProtobufMediaType)
			_, _ = w.Write(body)
		}
	}
	srv := newFakeServer(t, list("PodList"))
	got, err := For[*corev1.Pod](newTestClient(t, Config{Server: srv.URL})).List(context.Background(), "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "9" || len(got.Items) != 2 || got.Items[1].Name != "a" || got.Items[1].Kind != "Pod" {
		t.Errorf("list = %+v", got)
	}
	wrong := newFakeServer(t, list("ConfigMapList"))
	if _, err := For[*corev1.Pod](newTestClient(t, Config{Server: wrong.URL})).List(context.Background(), "", metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "ConfigMapList") {
		t.Errorf("a ConfigMapList read as pods: %v", err)
	}
}
