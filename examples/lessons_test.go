// Package examples runs every lesson the way a learner does: a fresh
// `minictl up --fast`, then the lesson's script with curl and jq. A lesson
// whose README promises something the cluster does not do fails here, so
// the course cannot silently rot.
package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/minitest"
)

// Binary is the built minictl; lessons get it as $MINICTL.
func Binary(t testing.TB) string { return minitest.Binary(t) }

// Cluster is one `minictl up --fast` for one lesson.
type Cluster struct {
	URL     string
	DataDir string           // its --data-dir: the pki and the admin kubeconfig are there
	Stderr  *minitest.Buffer // what minictl up prints: its timeline
}

// Up starts a fresh cluster and stops it when the test ends; it returns
// once the three nodes are Ready, where every lesson starts.
func Up(t testing.TB, extra ...string) *Cluster {
	t.Helper()
	addr := minitest.FreeAddr(t)
	dataDir := t.TempDir()
	args := []string{"--fast"}
	for _, a := range extra {
		// A lesson's flags may name files in the cluster's data dir.
		args = append(args, strings.ReplaceAll(a, "$DATA_DIR", dataDir))
	}
	p := minitest.Up(t, true, addr, dataDir, args...)
	c := &Cluster{URL: "http://" + addr, DataDir: dataDir, Stderr: p.Stdout}
	p.WaitNodesReady(t, c.URL, 3, 60*time.Second)
	return c
}

var (
	etcdLine   = regexp.MustCompile(`(?m)^\s*etcd:\s+(\S+)`)
	secureLine = regexp.MustCompile(`(?m)^\s*secure API:\s+(\S+)`)
	cloudLine  = regexp.MustCompile(`(?m)^\s*cloud:\s+(http://\S+)`)
)

// CloudURL is the simulated cloud's URL from minictl up's banner, "" when
// it runs none.
func (c *Cluster) CloudURL() string {
	if m := cloudLine.FindStringSubmatch(c.Stderr.String()); m != nil {
		return m[1]
	}
	return ""
}

// SecureURL is the secure port's URL, as `minictl up` printed it ("" if
// it has not yet). Lessons get it as $SECURE.
func (c *Cluster) SecureURL() string {
	if m := secureLine.FindStringSubmatch(c.Stderr.String()); m != nil {
		return m[1]
	}
	return ""
}

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
// starts with # is a comment. $DATA_DIR stands for the cluster's data dir
// (--audit-log-path=$DATA_DIR/audit.log).
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

// RunScript runs a lesson script against c and returns its output. The
// test fails, with the script's output and what minictl up printed, if the
// script fails, leaves a process running behind it, or is still running
// when the test's deadline nears: minitest.RunGroup runs it in a process
// group of its own, with its output in a file, and ends the whole group
// when the script exits, so no child can keep the test waiting.
func RunScript(t testing.TB, c *Cluster, script string, env ...string) string {
	t.Helper()
	etcd := c.EtcdURL()
	if etcd == "" {
		t.Fatalf("minictl up printed no etcd URL (lesson 1 reads etcd there):\n%s", c.Stderr)
	}
	cmd := exec.Command("bash", script)
	base := []string{"API=" + c.URL, "MINICTL=" + Binary(t), "NO_COLOR=1", "ETCD=" + etcd,
		"SECURE=" + c.SecureURL(), "DATA_DIR=" + c.DataDir, "CLOUD=" + c.CloudURL()}
	cmd.Env = append(append(os.Environ(), base...), env...)
	out, err := minitest.RunGroup(minitest.Context(t), cmd)
	if err != nil {
		// The lesson's last lines close the report too: what failed is
		// then where a long report's end is read.
		t.Fatalf("%s failed: %v\n--- lesson output:\n%s\n--- minictl up:\n%s\n--- %s failed (%v); its last lines:\n%s",
			script, err, out, c.Stderr, script, err, lastLines(string(out), 8))
	}
	return string(out)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestMain(m *testing.M) { os.Exit(minitest.Main(m)) }

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
