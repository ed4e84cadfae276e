package apiserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
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

// TestProtobufWrites: a write whose Accept prefers protobuf, as client-go's
// typed clients send them, is answered with the object in protobuf, with
// the write's status code; its protobuf body or its JSON body alike. A
// client that prefers JSON gets JSON, and errors are JSON whatever was
// asked.
func TestProtobufWrites(t *testing.T) {
	env := testenv.Start(t)
	createNamespace(t, env, "pbw")
	codec, _ := protobufCodec(t)
	const accept = protobufType + ", application/json"
	write := func(method, path, contentType, accept, body string) *reply {
		t.Helper()
		return send(t, env, method, path, map[string]string{"Content-Type": contentType, "Accept": accept}, body)
	}
	// decoded is the Pod a protobuf answer carries, decoded as client-go
	// decodes it.
	decoded := func(r *reply) *corev1.Pod {
		t.Helper()
		if ct := r.header.Get("Content-Type"); ct != protobufType {
			t.Fatalf("Content-Type %q, want %q; body %s", ct, protobufType, r.body)
		}
		obj, _, err := codec.Decode(r.body, nil, nil)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			t.Fatalf("got a %T, want a Pod", obj)
		}
		return p
	}
	encoded := func(p *corev1.Pod) string {
		t.Helper()
		var b strings.Builder
		if err := codec.Encode(p, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}

	// A create in protobuf is answered in protobuf, 201, with what a get
	// then reads.
	in := pod("a", "", map[string]string{"app": "web"})
	in.APIVersion, in.Kind = "v1", "Pod"
	created := decoded(write(http.MethodPost, podPath("pbw", ""), protobufType, accept, encoded(in)).want(t, http.StatusCreated))
	stored := get[corev1.Pod](t, env, podPath("pbw", "a"))
	if created.UID == "" || created.UID != stored.UID || created.ResourceVersion != stored.ResourceVersion ||
		created.Labels["app"] != "web" || created.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("create answered uid %q rv %q labels %v, want the stored pod (uid %q rv %q)",
			created.UID, created.ResourceVersion, created.Labels, stored.UID, stored.ResourceVersion)
	}
	// ... and the same in JSON for a client that prefers JSON.
	asJSON := write(http.MethodPost, podPath("pbw", ""), protobufType, "application/json, "+protobufType, encoded(pod("b", "", nil))).want(t, http.StatusCreated)
	if ct := asJSON.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("a client that prefers JSON got %q", ct)
	}

	// An update, a status update and a patch are answered in protobuf
	// with the object as written.
	created.Labels["tier"] = "front"
	updated := decoded(write(http.MethodPut, podPath("pbw", "a"), protobufType, accept, encoded(created)).want(t, http.StatusOK))
	if updated.Labels["tier"] != "front" || updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("update answered labels %v rv %s", updated.Labels, updated.ResourceVersion)
	}
	updated.Status.Phase = corev1.PodRunning
	status := decoded(write(http.MethodPut, podPath("pbw", "a")+"/status", protobufType, accept, encoded(updated)).want(t, http.StatusOK))
	if status.Status.Phase != corev1.PodRunning {
		t.Errorf("status update answered phase %q", status.Status.Phase)
	}
	patched := decoded(write(http.MethodPatch, podPath("pbw", "a"), "application/merge-patch+json", accept, `{"metadata":{"labels":{"tier":"back"}}}`).want(t, http.StatusOK))
	if patched.Labels["tier"] != "back" {
		t.Errorf("patch answered labels %v", patched.Labels)
	}
	if now := get[corev1.Pod](t, env, podPath("pbw", "a")); now.ResourceVersion != patched.ResourceVersion {
		t.Errorf("patch answered rv %s, the pod is at %s", patched.ResourceVersion, now.ResourceVersion)
	}

	// An apply that creates the object answers 201 with it, as a create.
	applied := decoded(write(http.MethodPatch, podPath("pbw", "c")+"?fieldManager=pbw", applyType, accept,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"c"},"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}`).want(t, http.StatusCreated))
	if c := get[corev1.Pod](t, env, podPath("pbw", "c")); applied.UID != c.UID || applied.ResourceVersion != c.ResourceVersion {
		t.Errorf("apply answered uid %q rv %q, want the stored pod's %q %q", applied.UID, applied.ResourceVersion, c.UID, c.ResourceVersion)
	}

	// A delete of a pod answers with the pod.
	if gone := decoded(write(http.MethodDelete, podPath("pbw", "a"), "application/json", accept, `{}`).want(t, http.StatusOK)); gone.Name != "a" {
		t.Errorf("delete answered pod %q", gone.Name)
	}

	// Errors are a JSON Status whatever the client prefers.
	taken := write(http.MethodPost, podPath("pbw", ""), protobufType, accept, encoded(pod("b", "", nil))).want(t, http.StatusConflict)
	if ct := taken.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("an error came as %q, want application/json", ct)
	}
}
