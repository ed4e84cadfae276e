package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/minictl/minictl/client"
)

// TestMadeClientsCloseTheirConnections makes two clients through the
// cluster's connector and one through its token clients, has each send a
// request, and closes what they made: the server sees each connection
// closed, as the API server must when the cluster stops.
func TestMadeClientsCloseTheirConnections(t *testing.T) {
	var mu sync.Mutex
	open := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open++
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	srv.Start()
	defer srv.Close()
	openNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return open
	}

	var made madeClients
	connect := made.connector(func(string, ...string) (*client.RESTClient, error) {
		return client.New(&client.Config{Server: srv.URL})
	})
	tokens := made.tokenClients(func(client.TokenSource) (*client.RESTClient, error) {
		return client.New(&client.Config{Server: srv.URL})
	})
	var clients []*client.RESTClient
	for _, newClient := range []func() (*client.RESTClient, error){
		func() (*client.RESTClient, error) { return connect("system:kube-scheduler") },
		func() (*client.RESTClient, error) { return connect("system:node:node-1", "system:nodes") },
		func() (*client.RESTClient, error) { return tokens(nil) },
	} {
		rc, err := newClient()
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, rc)
	}
	for _, rc := range clients {
		if err := rc.Do(context.Background(), http.MethodGet, "/version", nil, "", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := openNow(); n != len(clients) {
		t.Fatalf("%d connections open after a request on each of %d clients", n, len(clients))
	}
	made.closeIdle()
	for deadline := time.Now().Add(10 * time.Second); openNow() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after the made clients closed theirs", openNow())
		}
	}
}
