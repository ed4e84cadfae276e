package examples

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/minictl/minictl/internal/minitest"
)

// The timeline lines lesson 4's README shows are the ones minictl up
// prints. Times and generated names differ from run to run, so both are
// masked, and the padding that aligns the columns (which depends on the
// length of the names) is collapsed to one space.
var (
	clockRE = regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d{3}\b`)
	redisRE = regexp.MustCompile(`\bredis-[a-z0-9]{6,10}(-[a-z0-9]{5})?\b`)
	spaceRE = regexp.MustCompile(` {2,}`)
)

// mask makes one timeline line comparable across runs:
// "15:04:05.000  replicaset  default/redis-5cbc7c67cb  want 3, ..." becomes
// "HH:MM:SS.mmm replicaset default/redis-<hash> want 3, ...".
func mask(line string) string {
	line = clockRE.ReplaceAllString(line, "HH:MM:SS.mmm")
	line = redisRE.ReplaceAllStringFunc(line, func(s string) string {
		if strings.Count(s, "-") == 2 {
			return "redis-<hash>-<id>"
		}
		return "redis-<hash>"
	})
	return spaceRE.ReplaceAllString(strings.TrimRight(line, "\n"), " ")
}

// story returns the masked timeline lines of the given components about
// objects whose name starts with prefix, in the order they were printed.
func story(output, prefix string, components ...string) []string {
	var out []string
	for line := range strings.Lines(output) {
		f := strings.Fields(mask(line))
		if len(f) < 3 || f[0] != "HH:MM:SS.mmm" || !slices.Contains(components, f[1]) {
			continue
		}
		if f[2] == prefix || strings.HasPrefix(f[2], prefix+"-") {
			out = append(out, mask(line))
		}
	}
	return out
}

// TestTimeline runs lesson 4 and checks, line for line, that minictl up
// prints what the README shows about the Deployment and its ReplicaSet.
// Only the deployment and replicaset controllers' lines are compared: the
// scheduler and kubelet lines interleave with them in no fixed order.
func TestTimeline(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("04-self-healing/README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := story(string(readme), "default/redis", "deployment", "replicaset")
	if len(want) != 3 {
		t.Fatalf("the README's timeline has %d deployment and replicaset lines about default/redis, want 3 (two creating, one healing):\n%s",
			len(want), strings.Join(want, "\n"))
	}
	c := Up(t)
	RunScript(t, c, "04-self-healing/lesson.sh")

	got := story(c.Stderr.String(), "default/redis", "deployment", "replicaset")
	// The ReplicaSet controller may log its first decision before the
	// Deployment controller, which logs once its create has returned, so
	// the two creation lines may come in either order; the healing comes
	// after both.
	sorted := func(lines []string) []string { return slices.Sorted(slices.Values(lines)) }
	ok := len(got) == len(want) && slices.Equal(sorted(got[:2]), sorted(want[:2])) && slices.Equal(got[2:], want[2:])
	if !ok {
		t.Errorf("the timeline of default/redis:\n got:\n  %s\nwant (the first two in any order):\n  %s\n--- minictl up:\n%s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "), c.Stderr)
	}
}

// TestTrace checks what lesson 4 promises of `minictl trace`: attached to a
// running cluster, it shows the ReplicaSet controller's decision within
// moments of a pod's deletion. The bound is generous; the measured delay is
// logged.
func TestTrace(t *testing.T) {
	t.Parallel()
	c := Up(t)
	trace := minitest.Command(t, "trace", "--server", c.URL, "--namespace", "default")
	stdout, err := trace.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &minitest.Buffer{}
	trace.Stderr = stderr
	if err := trace.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		_ = trace.Process.Kill()
		_ = trace.Wait()
	})
	type arrival struct {
		at   time.Time
		line string
	}
	lines := make(chan arrival, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- arrival{time.Now(), sc.Text()}:
			case <-done:
				return
			}
		}
	}()
	// next waits up to d for a line that matches re.
	next := func(re *regexp.Regexp, d time.Duration) (arrival, bool) {
		timeout := time.After(d)
		for {
			select {
			case a, ok := <-lines:
				if !ok {
					t.Fatalf("minictl trace ended: %s", stderr.String())
				}
				if re.MatchString(mask(a.line)) {
					return a, true
				}
			case <-timeout:
				return arrival{}, false
			}
		}
	}

	// minictl trace says on stderr when it follows the timeline.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "minictl trace: following"); {
		if time.Now().After(deadline) {
			t.Fatalf("minictl trace did not attach in 30s: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	do(t, c, "POST", "/apis/apps/v1/namespaces/default/deployments", `{"apiVersion":"apps/v1","kind":"Deployment",
	  "metadata":{"name":"redis"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"redis"}},
	  "template":{"metadata":{"labels":{"app":"redis"}},"spec":{"containers":[{"name":"redis","image":"redis:7"}]}}}}`, http.StatusCreated)
	var pods []corev1.Pod
	deadline := time.Now().Add(60 * time.Second)
	for pods = runningRedis(t, c); len(pods) != 3; pods = runningRedis(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("no 3 running redis pods after 60s:\n%s", c.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	heal := regexp.MustCompile(`^HH:MM:SS.mmm replicaset default/redis-<hash> want 3, have 2 → create 1$`)
	deleted := time.Now()
	do(t, c, "DELETE", "/api/v1/namespaces/default/pods/"+pods[0].Name, "", http.StatusOK)
	a, ok := next(heal, 5*time.Second)
	if !ok {
		t.Fatalf("minictl trace did not show %q within 5s of deleting %s\n--- minictl up:\n%s", heal, pods[0].Name, c.Stderr)
	}
	t.Logf("pod deleted → trace line arrived after %v: %s", a.at.Sub(deleted).Round(time.Millisecond), a.line)
	if decided, err := lineTime(a.line, deleted); err == nil {
		t.Logf("the controller decided %v after the delete; the line reached minictl trace %v later",
			decided.Sub(deleted).Round(time.Millisecond), a.at.Sub(decided).Round(time.Millisecond))
	}
}

// lineTime reads the clock at the start of a timeline line as a time near
// ref (the line carries no date).
func lineTime(line string, ref time.Time) (time.Time, error) {
	clock, err := time.ParseInLocation("15:04:05.000", strings.Fields(line)[0], time.Local)
	if err != nil {
		return time.Time{}, err
	}
	ref = ref.Local()
	t := time.Date(ref.Year(), ref.Month(), ref.Day(), clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), time.Local)
	switch {
	case t.Sub(ref) > 12*time.Hour:
		t = t.AddDate(0, 0, -1)
	case ref.Sub(t) > 12*time.Hour:
		t = t.AddDate(0, 0, 1)
	}
	return t, nil
}

// do sends one request to the cluster and fails the test unless it
// answers want.
func do(t *testing.T, c *Cluster, method, path, body string, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, c.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return b
}

// runningRedis returns the redis pods that are Running and Ready and not
// being deleted.
func runningRedis(t *testing.T, c *Cluster) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := json.Unmarshal(do(t, c, "GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dredis", "", http.StatusOK), &list); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out
}
