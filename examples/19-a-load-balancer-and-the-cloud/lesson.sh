#!/usr/bin/env bash
# Lesson 19: a LoadBalancer Service and the cloud controller. A Deployment
# and a Service of type LoadBalancer: the API server gives it a cluster IP
# and a node port, the EndpointSlice controller its endpoints, and the
# service controller of the cloud controller manager a load balancer in
# the simulated cloud, with one listener per port and every node as a
# backend. A machine added to the cloud joins the backends; the cloud's
# API failing delays a change to the ports, it never loses the load
# balancer; deleting the Service deletes it. The route controller keeps
# one route per node's pod CIDR.
#
# Run it against `minictl up --fast`, with CLOUD set to the cloud's URL
# from up's banner (default http://127.0.0.1:8090).
. "$(dirname "$0")/../lib.sh"

CLOUD=${CLOUD:-http://127.0.0.1:8090}
D=/apis/apps/v1/namespaces/default/deployments
SVC=/api/v1/namespaces/default/services
ES=/apis/discovery.k8s.io/v1/namespaces/default/endpointslices

# cloud PATH: GET the cloud's API, printing the curl line on stderr.
cloud() {
  printf "\$ curl -s %s%s\n" "$CLOUD" "$1" >&2
  curl -sS "$CLOUD$1"
}
# lb: the load balancer of Service default/web, "" when there is none.
lb() {
  curl -sS "$CLOUD/v1/loadbalancers" |
    jq -c '[.items[] | select(.tags["kubernetes.io/service-name"] == "default/web")] | .[0] // empty'
}
# backends: the web load balancer's backends, sorted, joined by ",".
backends() { lb | jq -r '.backends | sort | join(",")'; }
# listeners: the web load balancer's listeners, "PROTO/port→nodePort".
listeners() { lb | jq -r '[.listeners[] | "\(.protocol)/\(.port)→\(.nodePort)"] | join(",")'; }
nodes_sorted() { get /api/v1/nodes | jq -r '[.items[].metadata.name] | sort | join(",")'; }
ready_pods() {
  get "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb" |
    jq '[.items[] | select(.status.conditions[]? | .type == "Ready" and .status == "True")] | length'
}
at_exit 'curl -sS -X DELETE "$CLOUD/v1/faults" >/dev/null 2>&1'

step "1. A Deployment and a Service of type LoadBalancer"
say POST $D '{
  "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
        "ports": [{"name": "http", "containerPort": 8080}]}]}}}}' >/dev/null
svc=$(say POST $SVC '{
  "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
  "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
    "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}')
expect_match "a cluster IP from 10.96.0.0/12" "$(jq -r .spec.clusterIP <<<"$svc")" '^10\.(9[6-9]|10[0-9]|11[01])\.[0-9]+\.[0-9]+$'
nodeport=$(jq -r '.spec.ports[0].nodePort' <<<"$svc")
expect_match "a node port from 30000-32767" "$nodeport" '^3[0-2][0-9]{3}$'
wait_for "2 web pods Ready" equals 2 ready_pods
wait_for "an EndpointSlice with 2 ready endpoints" jqtest "$ES?labelSelector=kubernetes.io%2Fservice-name%3Dweb" \
  '[.items[].endpoints[]? | select(.conditions.ready)] | length == 2'

step "2. The service controller made a load balancer and published its IP"
wait_for "status.loadBalancer.ingress" jqtest $SVC/web '.status.loadBalancer.ingress[0].ip != null'
svc=$(get $SVC/web)
ip=$(jq -r '.status.loadBalancer.ingress[0].ip' <<<"$svc")
expect_match "the load balancer's IP, from the cloud's pool" "$ip" '^192\.0\.2\.[0-9]+$'
expect "the finalizer that holds the Service until its load balancer is gone" \
  "$(jq -c .metadata.finalizers <<<"$svc")" '["service.kubernetes.io/load-balancer-cleanup"]'
expect "events" "$(events '.involvedObject.name == "web" and .involvedObject.kind == "Service"' |
  jq -r '[.[].reason | select(. == "EnsuringLoadBalancer" or . == "EnsuredLoadBalancer")] | unique | join(",")')" \
  "EnsuredLoadBalancer,EnsuringLoadBalancer"
cloud /v1/loadbalancers | jq -c '.items[] | {name, ip, listeners, backends}'
expect "the cloud's load balancer has the same IP" "$(lb | jq -r .ip)" "$ip"
expect "one listener: port 80 to the node port" "$(listeners)" "TCP/80→$nodeport"
expect "every node a backend" "$(backends)" "$(nodes_sorted)"

step "3. The route controller: one route per node's pod CIDR"
cloud /v1/routes | jq -c '.items[] | {destinationCIDR, target}'
expect "routes follow the nodes' pod CIDRs" \
  "$(curl -sS "$CLOUD/v1/routes" | jq -r '[.items[] | "\(.target)=\(.destinationCIDR)"] | sort | join(",")')" \
  "$(get /api/v1/nodes | jq -r '[.items[] | "\(.metadata.name)=\(.spec.podCIDR)"] | sort | join(",")')"
expect "every node's NetworkUnavailable" "$(get /api/v1/nodes | jq -r '[.items[].status.conditions[] |
  select(.type == "NetworkUnavailable") | "\(.status)/\(.reason)"] | unique | join(",")')" "False/RouteCreated"

step "4. A machine joins: node-4 boots, registers, and becomes a backend"
printf "\$ curl -s -X POST %s/v1/instances -d '{\"name\":\"node-4\"}'\n" "$CLOUD"
curl -sS -X POST "$CLOUD/v1/instances" -d '{"name":"node-4"}' | jq -c '{id, name, providerID, state}'
wait_for "node-4 Ready" jqtest /api/v1/nodes/node-4 '.status.conditions[] | select(.type == "Ready") | .status == "True"'
wait_for "node-4 among the load balancer's backends" equals "node-1,node-2,node-3,node-4" backends
expect "backends" "$(backends)" "node-1,node-2,node-3,node-4"

step "5. The cloud fails while the ports change: the controller retries, the load balancer stays"
printf "\$ curl -s -X PUT %s/v1/faults -d '{\"mode\":\"unavailable\",\"duration\":\"10s\"}'\n" "$CLOUD"
curl -sS -X PUT "$CLOUD/v1/faults" -d '{"mode":"unavailable","duration":"10s"}' >/dev/null
svc=$(say PATCH $SVC/web '{"spec":{"ports":[{"name":"http","port":80,"targetPort":"http"},
  {"name":"alt","port":8080,"targetPort":"http"}]}}' application/strategic-merge-patch+json)
wait_for "a SyncLoadBalancerFailed Warning" jqtest /api/v1/namespaces/default/events \
  '[.items[] | select(.involvedObject.name == "web" and .reason == "SyncLoadBalancerFailed" and .type == "Warning")] | length > 0'
code=$(curl -sS -o /dev/null -w '%{http_code}' "$CLOUD/v1/loadbalancers")
expect "meanwhile the cloud's API answers" "$code" 503
expect "and the Service keeps its load balancer's IP" "$(get $SVC/web | jq -r '.status.loadBalancer.ingress[0].ip')" "$ip"
alt=$(get $SVC/web | jq -r '.spec.ports[] | select(.name == "alt") | .nodePort')
wait_for "the retry, after the fault, adds the new listener" equals "TCP/80→$nodeport,TCP/8080→$alt" listeners
expect "the same load balancer, the same IP" "$(lb | jq -r .ip)" "$ip"

step "6. Delete the Service: the load balancer goes, then the Service"
say DELETE $SVC/web >/dev/null
wait_for "no load balancer for default/web" equals "" lb
wait_for "Service web gone" equals 404 code GET $SVC/web
say DELETE $D/web >/dev/null

step "7. Put things back: node-4's machine deleted, its Node removed by the cloud-node-lifecycle controller"
id=$(curl -sS "$CLOUD/v1/instances?name=node-4" | jq -r '.items[0].id')
printf "\$ curl -s -X DELETE %s/v1/instances/%s\n" "$CLOUD" "$id"
curl -sS -X DELETE "$CLOUD/v1/instances/$id"
wait_for "Node node-4 deleted" equals 404 code GET /api/v1/nodes/node-4
