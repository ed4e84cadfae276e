// Package examples runs every lesson the way a learner does: a fresh
// `minictl up --fast`, then the lesson's script with curl and jq. A lesson
// whose README promises something the cluster does not do fails here, so
// the course cannot silently rot.
package examples

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/minictl once per test run and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "minictl-lessons-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "minictl")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/minictl").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Cluster is one `minictl up --fast` for one lesson.
type Cluster struct {
	URL    string
	Stderr *syncBuffer // the timeline minictl up prints
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Up starts a fresh cluster and stops it when the test ends.
func Up(t testing.TB, extra ...string) *Cluster {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"up", "--fast", "--listen", addr, "--data-dir", t.TempDir(),
		"--etcd-client-url", "http://127.0.0.1:0", "--controller-manager-address", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(Binary(t), args...)
	c := &Cluster{URL: "http://" + addr, Stderr: &syncBuffer{}}
	cmd.Stdout = c.Stderr
	cmd.Stderr = c.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(c.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("minictl up exited:\n%s", c.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("minictl up not ready:\n%s", c.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Lessons start from a cluster whose nodes are Ready.
	deadline = time.Now().Add(60 * time.Second)
	for !nodesReady(c.URL) {
		if time.Now().After(deadline) {
			t.Fatalf("nodes not ready:\n%s", c.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

func nodesReady(url string) bool {
	out, err := exec.Command("bash", "-c", `curl -s `+url+`/api/v1/nodes | jq -e '[.items[] | select(any(.status.conditions[]; .type=="Ready" and .status=="True"))] | length >= 3'`).CombinedOutput()
	return err == nil && bytes.Contains(out, []byte("true"))
}

var etcdLine = regexp.MustCompile(`(?m)^\s*etcd:\s+(\S+)`)

// EtcdURL is the embedded etcd's client URL, as `minictl up` printed it
// ("" if it has not yet). Lessons get it as $ETCD, to look at the keys.
func (c *Cluster) EtcdURL() string {
	if m := etcdLine.FindStringSubmatch(c.Stderr.String()); m != nil {
		return strings.Split(m[1], ",")[0]
	}
	return ""
}

// LessonFlags reads the optional file "flags" next to a lesson's script:
// extra `minictl up` flags that lesson needs (for example
// --etcd-compaction-interval=5s), separated by white space; a line that
// starts with # is a comment.
func LessonFlags(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "flags"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		flags = append(flags, strings.Fields(line)...)
	}
	return flags
}

// RunScript runs a lesson script against c and returns its output; the
// test fails if the script does.
func RunScript(t testing.TB, c *Cluster, script string, env ...string) string {
	t.Helper()
	cmd := exec.Command("bash", script)
	base := []string{"API=" + c.URL, "MINICTL=" + Binary(t), "NO_COLOR=1"}
	if etcd := c.EtcdURL(); etcd != "" {
		base = append(base, "ETCD="+etcd)
	}
	cmd.Env = append(append(os.Environ(), base...), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s failed: %v\n--- lesson output:\n%s\n--- minictl up:\n%s", script, err, out, c.Stderr)
	}
	return string(out)
}

// TestLessons runs every examples/NN-*/lesson.sh against its own cluster,
// started with the extra flags of the lesson's "flags" file, if any.
func TestLessons(t *testing.T) {
	scripts, err := filepath.Glob("[0-9][0-9]-*/lesson.sh")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(scripts)
	if len(scripts) == 0 {
		t.Skip("no lessons yet")
	}
	for _, script := range scripts {
		t.Run(filepath.Dir(script), func(t *testing.T) {
			t.Parallel()
			c := Up(t, LessonFlags(t, filepath.Dir(script))...)
			RunScript(t, c, script)
		})
	}
}
