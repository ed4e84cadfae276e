package serving

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// testTLS is a serving certificate for 127.0.0.1 and a pool that trusts
// it (httptest's).
func testTLS(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	defer ts.Close()
	cfg := &tls.Config{Certificates: ts.TLS.Certificates, NextProtos: []string{"h2", "http/1.1"}}
	return cfg, ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}

// h2Client speaks HTTP/2 to servers pool trusts.
func h2Client(t *testing.T, pool *x509.CertPool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// slowHandler answers "ok", to /slow only once release is closed; arrived
// hears of each /slow request.
func slowHandler(arrived chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})
}

// holdRequest sends GET /slow over HTTP/2 to the TLS server at addr and
// returns once slowHandler holds it (arrived); the channel then gets the
// answer's protocol and body ("HTTP/2.0 ok"), or the error.
func holdRequest(t *testing.T, pool *x509.CertPool, addr string, arrived <-chan struct{}) <-chan string {
	t.Helper()
	client := h2Client(t, pool)
	answer := make(chan string, 1)
	go func() {
		resp, err := client.Get("https://" + addr + "/slow")
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answer <- resp.Proto + " " + string(body)
	}()
	select {
	case <-arrived:
	case a := <-answer:
		t.Fatalf("the request ended before it was held: %s", a)
	}
	return answer
}

// run runs srv on ln until ctx ends, which the test's end waits for; the
// channel has what Run returned.
func run(t *testing.T, ctx context.Context, srv *Server, ln net.Listener) <-chan error {
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(stopped)
		done <- srv.Run(ctx, ln, 30*time.Second)
	}()
	t.Cleanup(func() { <-stopped })
	return done
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// closedWithin says whether the server closed c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestRunClosesConnectionsThatNeverAsked stops two servers, a plain one
// and a TLS one serving an HTTP/2 request: the connections that never sent
// a request (plain; TLS before its hello; TLS after an HTTP/1.1
// handshake) are closed at once, not after the five seconds net/http
// gives a first request, while the HTTP/2 request in flight is answered,
// and only then does Run return.
func TestRunClosesConnectionsThatNeverAsked(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	cfg, pool := testTLS(t)

	plainLn, tlsLn := listen(t), listen(t)
	plain := Timeouts{}.Server(slowHandler(arrived, release))
	plainDone := run(t, ctx, plain, plainLn)
	secure := Timeouts{}.Server(slowHandler(arrived, release))
	secureDone := run(t, ctx, secure, tls.NewListener(tlsLn, cfg))

	unused := map[string]net.Conn{
		"plain":                     dial(t, plainLn.Addr().String()),
		"TLS without a hello":       dial(t, tlsLn.Addr().String()),
		"TLS after an HTTP/1.1 one": dial(t, tlsLn.Addr().String()),
	}
	h1 := tls.Client(unused["TLS after an HTTP/1.1 one"], &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
	if err := h1.Handshake(); err != nil {
		t.Fatal(err)
	}
	unused["TLS after an HTTP/1.1 one"] = h1

	answer := holdRequest(t, pool, tlsLn.Addr().String(), arrived)

	stop()
	for name, c := range unused {
		// net/http alone closes them only after five seconds.
		if !closedWithin(c, 3*time.Second) {
			t.Errorf("%s: the unused connection is still open", name)
		}
	}
	if err := <-plainDone; err != nil {
		t.Errorf("plain server: %v", err)
	}
	select {
	case err := <-secureDone:
		t.Fatalf("the TLS server stopped with a request in flight: %v", err)
	default:
	}
	close(release)
	if a := <-answer; a != "HTTP/2.0 ok" {
		t.Errorf("the request in flight: %q, want HTTP/2.0 ok", a)
	}
	if err := <-secureDone; err != nil {
		t.Errorf("TLS server: %v", err)
	}
}

// TestBudgetFollowsTLSConnections fills a budget of one with an HTTP/2
// connection over TLS: while it serves a request, the next connection is
// refused, and the request is answered; once it waits for the next
// request, a new connection takes its place.
func TestBudgetFollowsTLSConnections(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	b := NewBudget(1, nil)
	cfg, pool := testTLS(t)
	ln := listen(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	run(t, ctx, Timeouts{}.Server(slowHandler(arrived, release)), tls.NewListener(b.Listener(ln), cfg))
	answer := holdRequest(t, pool, ln.Addr().String(), arrived)
	waitWaiting(t, b, 0)
	if !closedWithin(dial(t, ln.Addr().String()), 5*time.Second) {
		t.Fatal("a connection beyond a budget of busy ones was let in")
	}
	close(release)
	if a := <-answer; a != "HTTP/2.0 ok" {
		t.Fatalf("the request in flight: %q, want HTTP/2.0 ok", a)
	}
	waitWaiting(t, b, 1)
	c := tls.Client(dial(t, ln.Addr().String()), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err := c.Handshake(); err != nil {
		t.Fatalf("a connection beyond a budget of an idle one: %v", err)
	}
	waitOpen(t, b, 1) // the idle one was closed for it
}
