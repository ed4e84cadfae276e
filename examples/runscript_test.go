package examples

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A lesson that breaks the rules: it starts a watcher that keeps the
// lesson's own output open, ignores SIGTERM and is stopped by no trap,
// then fails. RunScript must still come back at once with the lesson's
// output, and end the watcher.
const misbehavingLesson = `
echo "the lesson starts a watcher it will not stop"
( trap '' TERM; exec curl -sN "$API/api/v1/namespaces/default/configmaps?watch=true" ) &
echo $! >"$PIDFILE"
for _ in $(seq 100); do # until the subshell is curl (at most 5s)
  grep -qa curl "/proc/$!/cmdline" && break
  sleep 0.05
done
echo "the lesson fails"
exit 1
`

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the calling goroutine, as t.Fatalf does, without failing the real test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRunScriptEndsWhatALessonLeaves(t *testing.T) {
	t.Parallel()
	c := Up(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "lesson.sh")
	if err := os.WriteFile(script, []byte(misbehavingLesson), 0o644); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "watcher.pid")

	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunScript(r, c, script, "PIDFILE="+pidFile)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunScript still waits, 30s after the lesson exited: its watcher holds it")
	}

	for _, want := range []string{
		"exit status 1",                 // the lesson's failure
		"the lesson fails",              // its output, in full
		"leaving processes running",     // what it left behind, named
		"curl -sN " + c.URL + "/api/v1", // ... by its command line
	} {
		if !strings.Contains(r.msg, want) {
			t.Errorf("RunScript's failure does not say %q:\n%s", want, r.msg)
		}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the lesson wrote no watcher pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("the lesson's watcher (pid %d) still runs after RunScript returned", pid)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z")
}
