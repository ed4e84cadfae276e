package apiserver

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/store"
)

// TestUpdateFromAStaleGuess drives resourceStore.update from a cached
// object that etcd has moved past, as the watch cache's copy may be a
// moment behind: every outcome must be the one a fresh read from etcd
// gives, and the guess must cost nothing but a second try.
func TestUpdateFromAStaleGuess(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cache := &guessCache{}
	rs := newResourceStore(api.ConfigMaps, st, cache, 0, nil, newMetrics(prometheus.NewRegistry()))

	cm := &corev1.ConfigMap{Data: map[string]string{"v": "1"}}
	cm.Name, cm.Namespace = "c", "default"
	raw, err := rs.create(ctx, cm)
	if err != nil {
		t.Fatal(err)
	}
	// The guess: the object as created, at the revision it was created at.
	stale, err := decodeFromStorage(api.ConfigMaps, raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	staleRV, _ := strconv.ParseInt(stale.GetResourceVersion(), 10, 64)
	set := func(v string) updateFunc {
		return func(cur api.Object) (api.Object, error) {
			cur.(*corev1.ConfigMap).Data["v"] = v
			return cur, nil
		}
	}
	// etcd moves on to v=2, which the guess does not know.
	if _, err := rs.update(ctx, "default", "c", false, set("2")); err != nil {
		t.Fatal(err)
	}
	cache.guess = func(string) *cachedObject {
		return &cachedObject{obj: stale.DeepCopyObject().(api.Object), rv: staleRV, raw: raw}
	}

	t.Run("the write conflicts: fn runs again on etcd's object", func(t *testing.T) {
		var saw []string
		got, err := rs.update(ctx, "default", "c", false, func(cur api.Object) (api.Object, error) {
			data := cur.(*corev1.ConfigMap).Data
			saw = append(saw, data["v"])
			data["v"] += "+3"
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"1", "2"}; len(saw) != 2 || saw[0] != want[0] || saw[1] != want[1] {
			t.Fatalf("fn saw v = %q, want %q (the guess, then etcd's)", saw, want)
		}
		if v := got.(*corev1.ConfigMap).Data["v"]; v != "2+3" {
			t.Fatalf("updated v = %q, want 2+3", v)
		}
	})
	t.Run("nothing to change in the guess: etcd decides", func(t *testing.T) {
		// The guess has v=1 already; etcd has 2+3, so setting 1 writes.
		got, err := rs.update(ctx, "default", "c", false, set("1"))
		if err != nil {
			t.Fatal(err)
		}
		kv, err := st.Get(ctx, rs.key("default", "c"))
		if err != nil {
			t.Fatal(err)
		}
		if got.GetResourceVersion() != strconv.FormatInt(kv.Revision, 10) {
			t.Fatalf("answered resourceVersion %s, etcd holds %d", got.GetResourceVersion(), kv.Revision)
		}
		stored, _ := decodeFromStorage(api.ConfigMaps, kv.Value, kv.Revision)
		if v := stored.(*corev1.ConfigMap).Data["v"]; v != "1" {
			t.Fatalf("etcd holds v = %q, want 1", v)
		}
	})
	t.Run("fn refuses the guess: it runs again on etcd's object", func(t *testing.T) {
		calls := 0
		_, err := rs.update(ctx, "default", "c", false, func(cur api.Object) (api.Object, error) {
			calls++
			if cur.(*corev1.ConfigMap).Data["v"] == "1" && calls == 1 {
				return nil, errors.New("refused")
			}
			return cur, nil
		})
		if err != nil || calls != 2 {
			t.Fatalf("update = %v after %d call(s) of fn, want success after 2", err, calls)
		}
	})
	t.Run("the object is gone: NotFound, as a fresh read says", func(t *testing.T) {
		if _, err := st.Delete(ctx, rs.key("default", "c"), 0); err != nil {
			t.Fatal(err)
		}
		_, err := rs.update(ctx, "default", "c", false, set("4"))
		if !apierrors.IsNotFound(err) {
			t.Fatalf("update of a deleted object = %v, want NotFound", err)
		}
	})
}

// guessCache stands in for the watch cache of TestUpdateFromAStaleGuess:
// its current object is guess's answer (nothing while guess is nil), and
// it ignores offers.
type guessCache struct {
	guess func(key string) *cachedObject
}

func (c *guessCache) current(key string) *cachedObject {
	if c.guess == nil {
		return nil
	}
	return c.guess(key)
}

func (c *guessCache) offer(string, *offered) (withdraw func()) { return func() {} }

// TestUpdateFromACurrentGuess: when fn changes nothing in a cached object
// that etcd confirms is current (same revision, same bytes), nothing is
// written, the answer is at that revision, and fn runs once: a fresh read
// would give fn the same object.
func TestUpdateFromACurrentGuess(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cache := &guessCache{}
	rs := newResourceStore(api.ConfigMaps, st, cache, 0, nil, newMetrics(prometheus.NewRegistry()))
	cm := &corev1.ConfigMap{Data: map[string]string{"v": "1"}}
	cm.Name, cm.Namespace = "c", "default"
	setTypeMeta(api.ConfigMaps, cm) // as every object the server writes
	raw, err := rs.create(ctx, cm)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := st.Get(ctx, rs.key("default", "c"))
	if err != nil {
		t.Fatal(err)
	}
	rv := kv.Revision
	current, err := decodeFromStorage(api.ConfigMaps, kv.Value, rv)
	if err != nil {
		t.Fatal(err)
	}
	cache.guess = func(string) *cachedObject {
		return &cachedObject{obj: current.DeepCopyObject().(api.Object), rv: rv, raw: raw}
	}
	before, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := rs.update(ctx, "default", "c", false, func(cur api.Object) (api.Object, error) {
		calls++
		cur.(*corev1.ConfigMap).Data["v"] = "1"
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("fn ran %d times, want once", calls)
	}
	if got.GetResourceVersion() != strconv.FormatInt(rv, 10) {
		t.Errorf("answered resourceVersion %s, want %d", got.GetResourceVersion(), rv)
	}
	if now, err := st.Revision(ctx); err != nil || now != before {
		t.Errorf("etcd at revision %d (%v) after an update that changed nothing, want %d", now, err, before)
	}
}
