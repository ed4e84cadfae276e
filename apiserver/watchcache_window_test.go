package apiserver_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// TestWatchCacheWindowByCount fills the window past --default-watch-cache-size:
// a watch from any revision the window still holds is served every event
// after it, and one from a revision it dropped gets 410 Gone.
func TestWatchCacheWindowByCount(t *testing.T) {
	const size, n = 10, 25
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{WatchCacheSize: size}})
	var rvs, names []string
	for i := range n {
		cm := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap(fmt.Sprintf("cm-%02d", i), nil, nil))
		rvs, names = append(rvs, cm.ResourceVersion), append(names, cm.Name)
	}
	// The window holds the last size events: a watch can start from the
	// revision of the one before them.
	checkWindow(t, env, rvs, names, n-size-1)
}

// TestWatchCacheWindowByBytes fills the window past --watch-cache-max-bytes
// long before its count bound: it keeps only the newest events whose JSON
// fits, and answers watches from before them 410 Gone.
func TestWatchCacheWindowByBytes(t *testing.T) {
	const n, fit = 30, 10
	// Every config map has a name and data of the same length, so that
	// each event's JSON is the same size, give or take a digit of its
	// resourceVersion: the bound is set between fit and fit+1 of them.
	each := len(createRaw(t, testenv.Start(t), "cm-00", strings.Repeat("x", 1000)))
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{
		WatchCacheSize: 1000, WatchCacheMaxBytes: int64(fit*each + each/2),
	}})
	var rvs, names []string
	for i := range n {
		cm := create[corev1.ConfigMap](t, env, cmPath("default", ""), configMap(fmt.Sprintf("cm-%02d", i), nil, map[string]string{"d": strings.Repeat("x", 1000)}))
		rvs, names = append(rvs, cm.ResourceVersion), append(names, cm.Name)
	}
	checkWindow(t, env, rvs, names, n-fit-1)
}

// createRaw creates a config map with one data key and returns the JSON
// the server answered, which is the JSON its watch cache holds.
func createRaw(t *testing.T, env *testenv.Env, name, data string) []byte {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"d":%q}}`, name, data)
	resp, err := env.Client().Post(env.URL+cmPath("default", ""), jsonType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s: HTTP %d %v: %s", name, resp.StatusCode, err, raw)
	}
	return raw
}

// checkWindow watches from every one of rvs, the revisions of the events
// that created names, in order: from rvs[i] with i >= first, the watch
// gets exactly the ADDED events of names[i+1:]; from an earlier one, an
// ERROR with 410 Gone, "too old resource version".
func checkWindow(t *testing.T, env *testenv.Env, rvs, names []string, first int) {
	t.Helper()
	// A watch waits only until the cache has its own revision: make sure
	// the cache has every event first, so that the window is the one the
	// bounds leave (a list NotOlderThan the last write waits for that).
	get[corev1.ConfigMapList](t, env, cmPath("default", "")+"?resourceVersionMatch=NotOlderThan&resourceVersion="+rvs[len(rvs)-1])
	for i := range rvs {
		s := watch(t, env, cmPath("default", "")+"?watch=true&resourceVersion="+rvs[i])
		if i < first {
			ev := s.next(t)
			if ev.Type != "ERROR" {
				t.Fatalf("watch from %s (event %d, before the window): got %s, want ERROR 410", rvs[i], i, ev)
			}
			if st := ev.status(t); st.Code != http.StatusGone || !strings.Contains(st.Message, "too old resource version") {
				t.Errorf("watch from %s: ERROR %d %q, want 410 too old resource version", rvs[i], st.Code, st.Message)
			}
			s.ended(t, waitTimeout)
			continue
		}
		var want []string
		for _, name := range names[i+1:] {
			want = append(want, "ADDED "+name)
		}
		s.expect(t, want...)
		s.close()
	}
}
