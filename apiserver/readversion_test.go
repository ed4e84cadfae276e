package apiserver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
	"github.com/minictl/minictl/store"
)

// TestReadsFromTheFuture asks for states at a resourceVersion etcd has
// not reached. Kubernetes answers each with 504 Timeout "Too large
// resource version", the cause ResourceVersionTooLarge and a second to
// wait; nothing says where etcd keeps its keys. Reads the watch cache
// serves wait for it first (three seconds), so the cases run in parallel.
func TestReadsFromTheFuture(t *testing.T) {
	env := testenv.Start(t)
	create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cm", nil, nil))
	future := revision(t, env) + 1000
	token := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"v":"meta.k8s.io/v1","rv":%d,"start":"cm"}`, future))
	f := fmt.Sprint(future)

	for _, tc := range []struct{ name, path string }{
		{"list Exact", cmPath("default", "") + "?" + query("resourceVersion", f, "resourceVersionMatch", "Exact")},
		{"list Exact, one page", cmPath("default", "") + "?" + query("resourceVersion", f, "resourceVersionMatch", "Exact", "limit", "1")},
		{"list with a continue token", cmPath("default", "") + "?" + query("limit", "1", "continue", token)},
		{"list NotOlderThan, one page", cmPath("default", "") + "?" + query("resourceVersion", f, "resourceVersionMatch", "NotOlderThan", "limit", "1")},
		{"list NotOlderThan", cmPath("default", "") + "?" + query("resourceVersion", f, "resourceVersionMatch", "NotOlderThan")},
		{"list not older than", cmPath("default", "") + "?" + query("resourceVersion", f)},
		{"get", cmPath("default", "cm") + "?" + query("resourceVersion", f)},
		{"get past the largest revision", cmPath("default", "cm") + "?" + query("resourceVersion", "18446744073709551615")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := do(t, env, http.MethodGet, tc.path, "", nil).wantStatus(t, http.StatusGatewayTimeout, metav1.StatusReasonTimeout)
			if !strings.HasPrefix(st.Message, "Timeout: Too large resource version: ") || strings.Contains(st.Message, "/registry") {
				t.Errorf("message %q, want Kubernetes' %q", st.Message, "Timeout: Too large resource version: N, current: M")
			}
			if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge ||
				st.Details.RetryAfterSeconds != 1 {
				t.Errorf("details %+v, want the cause %s and retryAfterSeconds 1", st.Details, metav1.CauseTypeResourceVersionTooLarge)
			}
		})
	}
}

// TestGetHonoursResourceVersion checks a single-object get against
// Kubernetes' semantics: no resourceVersion reads etcd; "0" may be any
// state and comes from the watch cache; N is a state not older than N,
// also from the watch cache, once it has seen N.
func TestGetHonoursResourceVersion(t *testing.T) {
	gets := &countingGets{}
	env := testenv.StartWith(t, testenv.Options{Storage: func(st *store.Store) apiserver.Storage {
		gets.Store = st
		return gets
	}})
	cm := cmPath("default", "cm")
	first := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap("cm", nil, map[string]string{"v": "1"}))
	second := patch[corev1.ConfigMap](t, env, cm, mergePatch, `{"data":{"v":"2"}}`)

	t.Run("none reads etcd", func(t *testing.T) {
		before := gets.of(cm)
		if got := get[corev1.ConfigMap](t, env, cm); got.ResourceVersion != second.ResourceVersion {
			t.Errorf("resourceVersion %s, want the latest %s", got.ResourceVersion, second.ResourceVersion)
		}
		if gets.of(cm) != before+1 {
			t.Errorf("etcd gets of the key: %d, want %d", gets.of(cm), before+1)
		}
	})
	// resourceVersion=0 may read a cache that has not yet seen the
	// create, as in Kubernetes: it goes last, once reading at N has waited
	// for the cache to see the latest write.
	for _, v := range []string{first.ResourceVersion, second.ResourceVersion, "0"} {
		t.Run("resourceVersion="+v+" reads the watch cache", func(t *testing.T) {
			before := gets.of(cm)
			got := get[corev1.ConfigMap](t, env, cm+"?resourceVersion="+v)
			if v != "0" && rv(t, got.ResourceVersion) < rv(t, v) {
				t.Errorf("resourceVersion %s, older than the %s asked for", got.ResourceVersion, v)
			}
			if gets.of(cm) != before {
				t.Errorf("etcd gets of the key: %d, want %d: the get did not come from the watch cache", gets.of(cm), before)
			}
		})
	}
	t.Run("a write is seen by a get at its resourceVersion", func(t *testing.T) {
		third := patch[corev1.ConfigMap](t, env, cm, mergePatch, `{"data":{"v":"3"}}`)
		if got := get[corev1.ConfigMap](t, env, cm+"?resourceVersion="+third.ResourceVersion); got.Data["v"] != "3" {
			t.Errorf("data %v at resourceVersion %s, want v=3", got.Data, third.ResourceVersion)
		}
	})
	t.Run("a deleted object is not found", func(t *testing.T) {
		do(t, env, http.MethodDelete, cm, "", nil).want(t, http.StatusOK)
		do(t, env, http.MethodGet, cm+"?resourceVersion="+fmt.Sprint(revision(t, env)), "", nil).
			wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	})
	t.Run("a resourceVersion that is not a number", func(t *testing.T) {
		st := do(t, env, http.MethodGet, cm+"?resourceVersion=abc", "", nil).wantStatus(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		if !strings.Contains(st.Message, `"abc"`) {
			t.Errorf("message %q does not name the value", st.Message)
		}
	})
}

// countingGets is a real store that counts the Gets of each key.
type countingGets struct {
	*store.Store
	mu sync.Mutex
	n  map[string]*atomic.Int64
}

func (c *countingGets) Get(ctx context.Context, key string) (*store.KeyValue, error) {
	c.counter(key).Add(1)
	return c.Store.Get(ctx, key)
}

func (c *countingGets) counter(key string) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]*atomic.Int64{}
	}
	if c.n[key] == nil {
		c.n[key] = &atomic.Int64{}
	}
	return c.n[key]
}

// of is how many Gets the object at an API path (…/namespaces/ns/configmaps/name) had.
func (c *countingGets) of(path string) int64 {
	parts := strings.Split(path, "/")
	ns, name := parts[len(parts)-3], parts[len(parts)-1]
	return c.counter("/registry/core/configmaps/" + ns + "/" + name).Load()
}
