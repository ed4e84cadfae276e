package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minictl/minictl/internal/hostile"
	"github.com/minictl/minictl/internal/minitest"
)

// TestHostileClients throws at a real `minictl up`, limited to 1,200 open
// files, what took earlier versions down: patches and YAML built to explode
// when applied or decoded, uploads that stall, and more idle connections
// than it has descriptors. Each is answered with a 4xx or dropped; the
// process stays alive and ready, its node stays Ready, writes still work,
// and its memory comes back near where it was.
func TestHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts minictl up and opens 2,000 connections")
	}
	const fileLimit, idleConns, stalled = 1200, 2000, 100
	raiseOwnFileLimit(t, idleConns+500)
	addr := minitest.FreeAddr(t)
	p := minitest.UpWithFileLimit(t, fileLimit, addr, t.TempDir(), "--nodes", "1", "--read-timeout", "2s")
	c := &cluster{Process: p, t: t, URL: "http://" + addr}
	t.Cleanup(c.stop)
	c.WaitNodesReady(t, c.URL, 1, 60*time.Second)
	if code, _ := c.do("POST", "/api/v1/namespaces/default/configmaps", "application/json",
		`{"metadata":{"name":"target"},"data":{"k":"v"}}`); code != http.StatusCreated {
		t.Fatalf("create the target: %d", code)
	}
	rssBefore := rss(t, p)

	t.Run("bombs", func(t *testing.T) {
		bombs := []struct{ name, method, path, contentType, body string }{
			{"JSON patch copying an array into itself 30 times", "PATCH", "/api/v1/namespaces/default/configmaps/target",
				"application/json-patch+json", hostile.JSONPatchCopyBomb(30)},
			{"JSON patch of 10,001 operations", "PATCH", "/api/v1/namespaces/default/configmaps/target",
				"application/json-patch+json", "[" + strings.Repeat(`{"op":"test","path":"/metadata/name","value":"target"},`, 10000) +
					`{"op":"test","path":"/metadata/name","value":"target"}]`},
			{"merge patch nested 9,990 deep", "PATCH", "/api/v1/namespaces/default/configmaps/target",
				"application/merge-patch+json", hostile.Nested(9990)},
			{"create nested 9,990 deep", "POST", "/api/v1/namespaces/default/configmaps",
				"application/json", `{"metadata":{"name":"deep"},"x":` + hostile.Nested(9990) + `}`},
			{"YAML alias bomb", "POST", "/api/v1/namespaces/default/configmaps",
				"application/yaml", hostile.YAMLAliasBomb("laughs")},
			{"YAML list of 1.5 million items", "POST", "/api/v1/namespaces/default/configmaps",
				"application/yaml", hostile.YAMLLongList(3<<20 - 1024)},
		}
		for _, b := range bombs {
			code, status := c.do(b.method, b.path, b.contentType, b.body)
			if code < 400 || code >= 500 || field(status, "kind") != "Status" {
				t.Errorf("%s: %d %v, want a 4xx Status", b.name, code, status)
				continue
			}
			t.Logf("%s: %d %s", b.name, code, field(status, "message"))
		}
		code, cm := c.do("GET", "/api/v1/namespaces/default/configmaps/target", "", "")
		if code != http.StatusOK || field(cm, "data", "k") != "v" || len(field(cm, "data").(map[string]any)) != 1 {
			t.Errorf("the target after the bombs: %d %v", code, field(cm, "data"))
		}
	})

	t.Logf("RSS after the bombs: %d MiB", rss(t, p)>>20)

	t.Run("stalled uploads", func(t *testing.T) {
		conns := make([]net.Conn, stalled)
		for i := range conns {
			conns[i] = dialLoopback(t, addr)
			fmt.Fprintf(conns[i], "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"metadata\":", addr, 3<<20)
		}
		ready(t, c)
		// --read-timeout 2s: each is dropped, none is stored.
		for i, conn := range conns {
			if !droppedWithin(conn, 20*time.Second) {
				t.Fatalf("stalled upload %d still open after 20s", i)
			}
		}
	})

	t.Logf("RSS after the uploads: %d MiB", rss(t, p)>>20)

	t.Run("idle connections beyond the file limit", func(t *testing.T) {
		var (
			wg                sync.WaitGroup
			mu                sync.Mutex
			answered, dropped int
			held              []net.Conn
		)
		sem := make(chan struct{}, 64)
		for range idleConns {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					mu.Lock()
					dropped++
					mu.Unlock()
					return
				}
				ok := getKeepAlive(conn, addr) == nil
				mu.Lock()
				defer mu.Unlock()
				held = append(held, conn) // left open and idle
				if ok {
					answered++
				} else {
					dropped++
				}
			}()
		}
		wg.Wait()
		t.Cleanup(func() {
			for _, conn := range held {
				conn.Close()
			}
		})
		closed := 0
		for _, conn := range held {
			if droppedWithin(conn, 10*time.Millisecond) {
				closed++
			}
		}
		t.Logf("%d idle connections: %d answered, %d dropped, %d closed since; RSS %d MiB", idleConns, answered, dropped, closed, rss(t, p)>>20)
		if answered == 0 {
			t.Fatal("no connection was answered")
		}
		if open := idleConns - closed; open > fileLimit {
			t.Fatalf("%d idle connections still open to a process allowed %d files", open, fileLimit)
		}
		// With every connection the process may hold taken by an idle one,
		// clients still get in: each new connection takes an idle one's place.
		ready(t, c)
		if code, _ := c.do("POST", "/api/v1/namespaces/default/configmaps", "application/json",
			`{"metadata":{"name":"after-the-flood"}}`); code != http.StatusCreated {
			t.Fatalf("a create while idle connections fill the budget: %d", code)
		}
		if n, err := minitest.ReadyNodes(c.URL); err != nil || n != 1 {
			t.Fatalf("ready nodes while idle connections fill the budget: %d, %v", n, err)
		}
	})

	select {
	case <-p.Exited():
		t.Fatalf("minictl up exited:\n%s", p.Stderr)
	default:
	}
	ready(t, c)
	rssAfter := waitRSS(t, p, rssBefore)
	t.Logf("RSS: %d MiB before, %d MiB after", rssBefore>>20, rssAfter>>20)
}

// raiseOwnFileLimit makes sure this test process may open n files.
func raiseOwnFileLimit(t *testing.T, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Fatalf("this test opens %d connections; the hard open-file limit is %d", n, lim.Max)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
}

func dialLoopback(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// getKeepAlive sends GET /readyz on conn and reads the answer, leaving the
// connection open.
func getKeepAlive(conn net.Conn, addr string) error {
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(conn, "GET /readyz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// droppedWithin reports whether the server closes conn (answering or not)
// within d.
func droppedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	return err == nil || !os.IsTimeout(err)
}

// ready checks that /readyz answers 200 on a new connection.
func ready(t *testing.T, c *cluster) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Get(c.URL + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %s", resp.Status)
	}
}

// rss is the resident memory of p in bytes.
func rss(t *testing.T, p *minitest.Process) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// waitRSS waits up to a minute for p's resident memory to come back within
// a bound of before, and returns it: the bombs are refused before they are
// expanded, so what is left to come back is the garbage of refusing them
// and of the flood of connections. A binary built with the race detector
// keeps the shadow memory of every heap it has used, a few times the heap,
// so its bound is wider; either bound fails a leak of the size these
// requests once caused (gigabytes).
func waitRSS(t *testing.T, p *minitest.Process, before int64) int64 {
	t.Helper()
	bound := before + before/2 + 64<<20
	if minitest.RaceBuilt {
		bound = 4*before + 64<<20
	}
	deadline := time.Now().Add(time.Minute)
	for {
		now := rss(t, p)
		if now <= bound {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("RSS %d MiB a minute after the flood, want at most %d MiB (%d MiB before)", now>>20, bound>>20, before>>20)
		}
		time.Sleep(time.Second)
	}
}
