package apiserver_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSecureWatchOutlivesItsWriteDeadline keeps a watch over HTTP/2 on the
// secure port idle for longer than the deadline each of its writes gets:
// HTTP/2 turns a stream's write deadline into a timer that resets the
// stream when it fires, so a watch must lift its deadline between writes.
// The watch then still carries the next event.
func TestSecureWatchOutlivesItsWriteDeadline(t *testing.T) {
	e := startReviewEnv(t, nil)
	tr := e.client.Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = true
	tr.TLSClientConfig = tr.TLSClientConfig.Clone()
	tr.TLSClientConfig.NextProtos = nil
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// alice may watch pods.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.secureURL+"/api/v1/namespaces/default/pods?watch=true", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("watch answered %s over %s", resp.Status, resp.Proto)
	}
	time.Sleep(12 * time.Second) // past the 10 s write deadline
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"late"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
	created, err := http.Post(e.URL+"/api/v1/namespaces/default/pods", "application/json", strings.NewReader(pod))
	if err != nil {
		t.Fatal(err)
	}
	created.Body.Close()
	if created.StatusCode != http.StatusCreated {
		t.Fatalf("create: %s", created.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() {
		t.Fatalf("the watch ended while idle: %v", lines.Err())
	}
	if !strings.Contains(lines.Text(), `"late"`) || !strings.HasPrefix(lines.Text(), `{"type":"ADDED"`) {
		t.Errorf("first event %s, want the pod late ADDED", lines.Text())
	}
}
