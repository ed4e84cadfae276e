// Package serving bounds what one HTTP listener of minictl can hold: how
// long a connection may take to send its headers and body, to read its
// answer and to sit idle, and how many connections may be open at once.
//
// Properties:
//   - Every server built by Timeouts.Server drops a connection that stalls:
//     headers slower than ReadHeader, a request (headers and body) slower
//     than Read, an answer not written within Write, or a keep-alive
//     connection idle for Idle. A request without a body is not cut by
//     Read: net/http clears the read deadline once the body is read, so a
//     watch lives as long as it writes.
//   - Long-running answers (watches) extend their own write deadline with
//     http.ResponseController as they write; Write bounds every other one.
//   - A Budget caps the connections of every listener it wraps together,
//     so that the process keeps file descriptors for etcd. A connection
//     beyond the budget takes the place of the one that has waited longest
//     for its next request (new or idle keep-alive), so idle connections
//     cannot lock clients out; when every connection is serving a request,
//     the new one is accepted and closed at once. Either way the process
//     goes on serving the requests it holds.
//   - A Server stops without waiting for connections that never began a
//     request (net/http gives each five seconds), as it closes idle ones:
//     Run serves until its context ends, then gives the requests in
//     flight a grace and closes what is left.
package serving
