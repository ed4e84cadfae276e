package apiserver_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"

	"github.com/minictl/minictl/internal/testenv"
)

const protobufType = "application/vnd.kubernetes.protobuf"

// protobufCodec decodes what kube-apiserver sends in protobuf, with
// apimachinery's own serializers (the ones client-go uses).
func protobufCodec(t *testing.T) (*protobuf.Serializer, *protobuf.RawSerializer) {
	t.Helper()
	sc := runtime.NewScheme()
	if err := corev1.AddToScheme(sc); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(sc, corev1.SchemeGroupVersion)
	return protobuf.NewSerializer(sc, sc), protobuf.NewRawSerializer(sc, sc)
}

// TestProtobufReads checks gets, lists and watches in protobuf, as
// client-go's typed clients ask for them (protobuf preferred, JSON
// accepted), decoded by apimachinery as client-go decodes them.
func TestProtobufReads(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "pb")
	a := create[corev1.Pod](t, env, podPath("pb", ""), pod("a", "", map[string]string{"app": "web"}))
	b := create[corev1.Pod](t, env, podPath("pb", ""), pod("b", "", nil))
	codec, raw := protobufCodec(t)
	const accept = protobufType + ",application/json"
	// resourceVersion=0 reads whatever the watch cache has: make sure it
	// has both pods first (a list NotOlderThan b's write waits for that).
	fresh := "?resourceVersionMatch=NotOlderThan&resourceVersion=" + b.ResourceVersion
	getAccept(t, env, podPath("pb", "")+fresh, accept).want(t, http.StatusOK)

	t.Run("get", func(t *testing.T) {
		for _, q := range []string{"", "?resourceVersion=0"} {
			r := getAccept(t, env, podPath("pb", "a")+q, accept).want(t, http.StatusOK)
			if ct := r.header.Get("Content-Type"); ct != protobufType {
				t.Fatalf("Content-Type %q, want %q", ct, protobufType)
			}
			obj, _, err := codec.Decode(r.body, nil, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			p, ok := obj.(*corev1.Pod)
			if !ok || p.Name != "a" || p.UID != a.UID || p.ResourceVersion != a.ResourceVersion || p.Labels["app"] != "web" {
				t.Errorf("got %#v, want pod a as created", obj)
			}
		}
	})

	t.Run("list", func(t *testing.T) {
		for _, q := range []string{"", "?resourceVersion=0", fresh, "?labelSelector=app%3Dweb"} {
			r := getAccept(t, env, podPath("pb", "")+q, accept).want(t, http.StatusOK)
			obj, _, err := codec.Decode(r.body, nil, nil)
			if err != nil {
				t.Fatalf("list%s: decode: %v", q, err)
			}
			l, ok := obj.(*corev1.PodList)
			if !ok || l.ResourceVersion == "" {
				t.Fatalf("list%s: got %#v", q, obj)
			}
			want := []string{"pb/a", "pb/b"}
			if q == "?labelSelector=app%3Dweb" {
				want = want[:1]
			}
			if got := podNames(l); len(got) != len(want) || got[0] != "pb/a" || l.Items[0].Spec.Containers[0].Image != "nginx:1.27" {
				t.Errorf("list%s: items %v, want %v", q, got, want)
			}
		}
	})

	t.Run("watch", func(t *testing.T) {
		list := get[corev1.PodList](t, env, podPath("pb", ""))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet,
			env.URL+podPath("pb", "")+"?watch=true&allowWatchBookmarks=true&resourceVersion="+list.ResourceVersion, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != protobufType+";stream=watch" {
			t.Fatalf("Content-Type %q", ct)
		}
		c := create[corev1.Pod](t, env, podPath("pb", ""), pod("c", "", nil))
		do(t, env, http.MethodDelete, podPath("pb", "a"), "", nil).want(t, http.StatusOK)

		// Frames are length-prefixed WatchEvents whose object is an
		// object with its envelope, as client-go reads them.
		frames := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(resp.Body), raw)
		var got []string
		for len(got) < 2 {
			var ev metav1.WatchEvent
			if _, _, err := frames.Decode(nil, &ev); err != nil {
				if err == io.EOF {
					t.Fatalf("stream ended after %v", got)
				}
				t.Fatalf("decode frame after %v: %v", got, err)
			}
			obj, _, err := codec.Decode(ev.Object.Raw, nil, nil)
			if err != nil {
				t.Fatalf("decode %s object: %v", ev.Type, err)
			}
			p := obj.(*corev1.Pod)
			if ev.Type == "BOOKMARK" {
				continue
			}
			got = append(got, ev.Type+" "+p.Name)
			if p.Name == "c" && p.ResourceVersion != c.ResourceVersion {
				t.Errorf("ADDED c at %s, want %s", p.ResourceVersion, c.ResourceVersion)
			}
		}
		if got[0] != "ADDED c" || got[1] != "DELETED a" {
			t.Errorf("events %v, want [ADDED c DELETED a]", got)
		}
	})

	t.Run("a watch that cannot start says why in protobuf", func(t *testing.T) {
		old := a.ResourceVersion
		if err := env.Store.Compact(t.Context(), revision(t, env)); err != nil {
			t.Fatalf("compact: %v", err)
		}
		req, _ := http.NewRequest(http.MethodGet, env.URL+podPath("pb", "")+"?watch=true&resourceVersion="+old, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		frames := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(resp.Body), raw)
		var ev metav1.WatchEvent
		if _, _, err := frames.Decode(nil, &ev); err != nil {
			t.Fatalf("decode frame: %v", err)
		}
		obj, _, err := codec.Decode(ev.Object.Raw, nil, nil)
		if err != nil {
			t.Fatalf("decode %s object: %v", ev.Type, err)
		}
		if st, ok := obj.(*metav1.Status); ev.Type != "ERROR" || !ok || st.Code != http.StatusGone {
			t.Errorf("got %s %#v, want ERROR with a 410 Status", ev.Type, obj)
		}
	})
}
