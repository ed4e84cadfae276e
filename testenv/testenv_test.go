package testenv_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minictl/minictl/client"
	"github.com/minictl/minictl/internal/etcdtest"
	"github.com/minictl/minictl/testenv"
)

// TestStartServesTheAPI: with no option, Start gives an API server that
// answers on both listeners, and the admin's credentials work on the
// secure port while an unknown client is anonymous and refused.
func TestStartServesTheAPI(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	rc := env.Client()
	if _, err := client.For[*corev1.Namespace](rc).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	admin, err := client.New(&client.Config{Server: env.URL, CAData: env.CAData, CertData: env.CertData, KeyData: env.KeyData})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.For[*corev1.Namespace](admin).Get(ctx, "", "a"); err != nil {
		t.Fatalf("admin on the secure port: %v", err)
	}
	anonymous, err := client.New(&client.Config{Server: env.URL, CAData: env.CAData})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.For[*corev1.Namespace](anonymous).Get(ctx, "", "a"); client.StatusCode(err) != http.StatusForbidden {
		t.Fatalf("anonymous get: want 403 Forbidden, got %v", err)
	}
}

// TestKubeconfigFile: the kubeconfig Start writes is one minictl's own
// client loads, and it reaches the secure port as the admin.
func TestKubeconfigFile(t *testing.T) {
	env := testenv.Start(t)
	cfg, err := client.LoadKubeconfig(env.KubeconfigPath, "")
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	if cfg.Server != env.URL {
		t.Fatalf("kubeconfig server = %q, want %q", cfg.Server, env.URL)
	}
	rc, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.For[*corev1.Namespace](rc).Get(context.Background(), "", "default"); err != nil {
		t.Fatalf("get namespace default with the kubeconfig: %v", err)
	}
}

// TestAddUser: a user added with AddUser is authenticated as that name
// and those groups, and RBAC decides what it may do: nothing at first,
// what a binding grants afterwards.
func TestAddUser(t *testing.T) {
	env := testenv.Start(t)
	u := env.AddUser("alice", "developers")
	httpc := tlsClient(t, env.CAData, u.CertData, u.KeyData)

	// SelfSubjectReview says who the server thinks we are.
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	resp, err := httpc.Post(env.URL+"/apis/authentication.k8s.io/v1/selfsubjectreviews", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(data, &review); err != nil || review.Status.UserInfo.Username != "alice" {
		t.Fatalf("SelfSubjectReview: %s (%v)", data, err)
	}
	if !contains(review.Status.UserInfo.Groups, "developers") {
		t.Fatalf("alice's groups = %v, want developers among them", review.Status.UserInfo.Groups)
	}

	get := func() int {
		resp, err := httpc.Get(env.URL + "/api/v1/namespaces/default/pods")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusForbidden {
		t.Fatalf("alice lists pods before any binding: %d, want 403", code)
	}
	// view would do, but it is an aggregated role, filled by a
	// controller this Env does not run: a role of the test's own.
	role := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"pod-reader"},
		"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch"]}]}`
	admin := func(path, body string) {
		t.Helper()
		resp, err := http.Post(env.InsecureURL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	admin("/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
	binding := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"developers-view"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"pod-reader"},
		"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"developers"}]}`
	admin("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
	deadline := time.Now().Add(10 * time.Second)
	for get() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("alice still may not list pods after the group is bound to view")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tlsClient(t *testing.T, ca, cert, key []byte) *http.Client {
	t.Helper()
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// BenchmarkStart is Start to ready with the API server alone.
func BenchmarkStart(b *testing.B) { benchmarkStart(b) }

// BenchmarkStartWithControllers is Start to ready with every controller,
// the scheduler and three Ready nodes.
func BenchmarkStartWithControllers(b *testing.B) {
	benchmarkStart(b, testenv.WithControllers(), testenv.WithScheduler(), testenv.WithNodes(3))
}

// benchmarkStart times Start alone (Stop is outside the timer) and
// reports the median besides Go's mean: one slow start on a busy machine
// moves the mean a lot, the median little.
func benchmarkStart(b *testing.B, opts ...testenv.Option) {
	var times []time.Duration
	for b.Loop() {
		t0 := time.Now()
		env := testenv.Start(b, opts...)
		times = append(times, time.Since(t0))
		b.StopTimer()
		env.Stop()
		b.StartTimer()
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/float64(time.Millisecond), "median-ms")
}

// BenchmarkIdleEnvHeap reports the live heap one idle Env with every
// controller, the scheduler and three nodes holds, a few seconds after
// Start, as the difference of the heap in use before and after.
func BenchmarkIdleEnvHeap(b *testing.B) {
	for b.Loop() {
		before := liveHeap()
		env := testenv.Start(b, testenv.WithControllers(), testenv.WithScheduler(), testenv.WithNodes(3))
		b.StopTimer()
		time.Sleep(3 * time.Second) // at rest: the controllers' first syncs are over
		b.ReportMetric(float64(liveHeap()-before)/(1<<20), "heap-MB")
		env.Stop()
		b.StartTimer()
	}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestWithoutEmbeddedEtcd: the objects go to the etcd the test gives, and
// are still there for a second Env on the same etcd after the first has
// stopped.
func TestWithoutEmbeddedEtcd(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx := context.Background()
	first := testenv.Start(t, testenv.WithoutEmbeddedEtcd(etcd.URL))
	if _, err := client.For[*corev1.Namespace](first.Client()).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}); err != nil {
		t.Fatal(err)
	}
	first.Stop()
	second := testenv.Start(t, testenv.WithoutEmbeddedEtcd(etcd.URL))
	if _, err := client.For[*corev1.Namespace](second.Client()).Get(ctx, "", "kept"); err != nil {
		t.Fatalf("namespace kept, made through the first Env, in the second: %v", err)
	}
}
