package apiserver_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minictl/minictl/apiserver"
	"github.com/minictl/minictl/internal/testenv"
)

// A client that announces a body and stalls is dropped when the read
// timeout runs out, however many do it at once, and the server goes on
// answering everyone else.
func TestStalledUploadsAreDropped(t *testing.T) {
	const readTimeout = time.Second
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{ReadTimeout: readTimeout}})
	addr := strings.TrimPrefix(env.URL, "http://")
	const uploads = 100
	conns := make([]net.Conn, uploads)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// 3 MiB announced, 1 KiB sent.
		_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"data\":\"%s",
			cmPath("default", ""), 3<<20, strings.Repeat("x", 1<<10))
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, uploads)
	for i, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(readTimeout + 10*time.Second))
			// Whatever the server says, it must then close the connection.
			if _, err := io.Copy(io.Discard, c); err != nil {
				errs <- fmt.Errorf("upload %d: not closed by the server: %v", i, err)
			}
		})
	}
	// Meanwhile the server answers.
	healthy(t, env)
	do(t, env, http.MethodGet, cmPath("default", ""), "", nil).want(t, http.StatusOK)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if d := time.Since(start); d < readTimeout/2 {
		t.Errorf("uploads dropped after %v, before the read timeout", d)
	}
	healthy(t, env)
}

// A keep-alive connection that sends nothing more is closed after the idle
// timeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{IdleTimeout: 300 * time.Millisecond}})
	c, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	got, err := io.ReadAll(c) // the answer, then EOF when the server closes
	if err != nil {
		t.Fatalf("idle connection not closed by the server: %v (read %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200") {
		t.Fatalf("answer %q", got)
	}
}

// A watch outlives the write timeout: it moves its own deadline with each
// event it writes.
func TestWatchOutlivesWriteTimeout(t *testing.T) {
	const writeTimeout = 500 * time.Millisecond
	env := testenv.StartWith(t, testenv.Options{Server: apiserver.Config{WriteTimeout: writeTimeout}})
	createNamespace(t, env, "wt")
	s := watch(t, env, cmPath("wt", "")+"?watch=true&resourceVersion="+listRV(t, env, "wt"))
	for i := range 3 {
		time.Sleep(2 * writeTimeout) // the stream is idle for longer than the timeout
		name := fmt.Sprintf("cm-%d", i)
		create[struct{}](t, env, cmPath("wt", ""), configMap(name, nil, nil))
		s.expect(t, "ADDED "+name)
	}
}
