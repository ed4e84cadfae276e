package resourcequota

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/api"
	"github.com/minictl/minictl/api/quota"
	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/client/record"
	"github.com/minictl/minictl/controllers/internal/controller"
	"github.com/minictl/minictl/controllers/internal/controllertest"
)

// These tests run the controller against a real API server on a real etcd
// (internal/testenv). No scheduler or kubelet runs: pods stay Pending, a
// delete removes them at once, and a test that needs a pod to finish plays
// the kubelet with UpdateStatus.

const ns = "team-a"

// fixture is a real API server with the controller running against it.
type fixture struct {
	rc     *client.RESTClient
	c      *Controller
	quotas *client.Client[*corev1.ResourceQuota]
	pods   *client.Client[*corev1.Pod]
	logs   *logBuffer
}

// run starts an API server with namespace team-a, and the controller on it
// with two workers and the given resync period; both stop when the test
// ends.
func run(t *testing.T, resync time.Duration) *fixture {
	t.Helper()
	return runWith(t, resync, nil)
}

// runWith is run with the API server serving the catalogue resources
// (nil: api.Resources()); the controller finds them through discovery.
func runWith(t *testing.T, resync time.Duration, resources api.Catalogue) *fixture {
	t.Helper()
	env := controllertest.StartWith(t, controllertest.Options{ClientTimeout: 20 * time.Second, Resources: resources})
	rc := env.Client
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := client.For[*corev1.Namespace](rc).Create(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{t: t}
	t.Cleanup(logs.close)
	c, err := New(Options{
		Common: controller.Common{
			Client: rc, Informers: env.Informers, Recorder: &record.FakeRecorder{},
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		},
		ResyncPeriod: resync,
	})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Run(t, env.Informers, 2, c)
	return &fixture{
		rc: rc, c: c, logs: logs,
		quotas: client.For[*corev1.ResourceQuota](rc),
		pods:   client.For[*corev1.Pod](rc),
	}
}

// watching reports whether the controller has opened an informer of r's
// group, version and plural.
func (f *fixture) watching(r *api.Resource) bool {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for res := range f.c.sources {
		if res.GroupVersion() == r.GroupVersion() && res.Plural == r.Plural {
			return true
		}
	}
	return false
}

// createQuota creates quota name in team-a with spec.hard.
func (f *fixture) createQuota(t *testing.T, name string, hard corev1.ResourceList) *corev1.ResourceQuota {
	t.Helper()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
	got, err := f.quotas.Create(t.Context(), q)
	if err != nil {
		t.Fatalf("create quota %s: %v", name, err)
	}
	return got
}

// waitForUsed waits until quota name's status.used is exactly want (by
// value, and printed as want prints), and status.hard equals spec.hard.
func (f *fixture) waitForUsed(t *testing.T, name string, want corev1.ResourceList) *corev1.ResourceQuota {
	t.Helper()
	var last *corev1.ResourceQuota
	controllertest.Eventually(t, fmt.Sprintf("quota %s used %s", name, quota.Format(want)), func() (bool, string) {
		q, err := f.quotas.Get(t.Context(), ns, name)
		if err != nil {
			return false, err.Error()
		}
		last = q
		got := fmt.Sprintf("hard %s, used %s (spec.hard %s)",
			quota.Format(q.Status.Hard), quota.Format(q.Status.Used), quota.Format(q.Spec.Hard))
		return quota.Equals(q.Status.Hard, q.Spec.Hard) && quota.Format(q.Status.Used) == quota.Format(want), got
	})
	return last
}

// podSpec is a pod in team-a with one container per requests/limits pair.
func podSpec(name string, resources ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for i, r := range resources {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "busybox", Resources: r,
		})
	}
	return p
}

func res(requests, limits corev1.ResourceList) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: requests, Limits: limits}
}

// list builds a ResourceList from name, quantity pairs.
func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// logBuffer keeps the controller's log lines and shows them with t.Log
// until the test ends.
type logBuffer struct {
	mu     sync.Mutex
	t      *testing.T
	lines  []string
	closed bool
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	line := strings.TrimSuffix(string(p), "\n")
	b.lines = append(b.lines, line)
	if !b.closed {
		b.t.Log(line)
	}
	return len(p), nil
}

func (b *logBuffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
}

// has reports whether some line contains every one of s.
func (b *logBuffer) has(s ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if allIn(l, s) {
			return true
		}
	}
	return false
}

func allIn(line string, s []string) bool {
	for _, x := range s {
		if !strings.Contains(line, x) {
			return false
		}
	}
	return true
}
