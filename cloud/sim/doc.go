// Package sim is minictl's simulated cloud, and the cloud provider that
// uses it: what a real cloud would hold for a cluster, in memory, behind a
// small HTTP API that people can curl and break.
//
// Design, one line per part:
//
//   - Cloud (cloud.go): instances (machines, one per node, provider ID
//     sim://<zone>/<name>), load balancers (an IP from 192.0.2.0/24,
//     listeners, backends, tags saying whose), and a route table (pod CIDR
//     → instance, blackhole once the instance is gone). With a data dir it
//     keeps them in cloud.json, so that a restart finds them again.
//   - Handler and Serve (server.go): the HTTP API, JSON in and out, errors
//     as an Error with its status code, and the fault switch that makes the
//     cloud answer 503 or slowly for a while.
//   - Client (client.go): the API in Go, bounded by contexts and a timeout.
//   - Provider (provider.go): cloud.Interface over the Client, registered
//     as "sim"; its --cloud-config is a YAML file with the cloud's url.
//
// Properties:
//
//   - Everything is a record. Nothing is ever sent to an instance's or a
//     load balancer's address; an instance's state is what the API says it
//     is, and whoever runs a machine's node (minictl up) watches it through
//     Changed.
//   - Bad input changes nothing: a call either succeeds whole or answers
//     400 (unreadable), 404, 409 (taken), 413 or 422 (invalid, naming the
//     field) with the cloud unchanged.
//   - Every change is logged as one line that reads as what happened.
//
// It mirrors a real cloud provider and the parts of its API that
// k8s.io/cloud-provider's controllers use.
package sim
