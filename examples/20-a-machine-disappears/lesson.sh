#!/usr/bin/env bash
# Lesson 20: a machine disappears. Pods spread over three nodes, each node
# on an instance of the simulated cloud, which the cloud-node controller
# gave a provider ID and zone, region and instance-type labels. node-2's
# instance is deleted: its kubelet falls silent, the node goes NotReady,
# the cloud-node-lifecycle controller deletes the Node (DeletingNode), its
# pods go and the ReplicaSet makes them again on node-1 and node-3; the
# load balancer's backends and the route table follow. Then node-3's
# machine is only stopped: tainted node.cloudprovider.kubernetes.io/shutdown,
# not deleted; started again, the taint goes. Last, a new node-2 machine
# takes the deleted one's place.
#
# Run it against `minictl up --fast`, with CLOUD set to the cloud's URL
# from up's banner (default http://127.0.0.1:8090).
. "$(dirname "$0")/../lib.sh"

CLOUD=${CLOUD:-http://127.0.0.1:8090}
D=/apis/apps/v1/namespaces/default/deployments
SVC=/api/v1/namespaces/default/services
PODS=/api/v1/namespaces/default/pods
SHUTDOWN=node.cloudprovider.kubernetes.io/shutdown

# instance NAME: the cloud's instance named NAME, as JSON.
instance() { curl -sS "$CLOUD/v1/instances?name=$1" | jq -c '.items[0] // empty'; }
# cloud_post PATH [BODY]: POST to the cloud's API, printing the curl line.
cloud_post() {
  printf "\$ curl -s -X POST %s%s%s\n" "$CLOUD" "$1" "${2:+ -d '$2'}"
  curl -sS -X POST "$CLOUD$1" ${2:+-d "$2"} >/dev/null
}
# placement: the live spread pods' nodes, sorted, joined by ",".
placement() {
  get "$PODS?labelSelector=app%3Dspread" |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running") | .spec.nodeName] | sort | join(",")'
}
# on NODE: how many spread pods are bound to NODE, deleted or not.
on() { get "$PODS?labelSelector=app%3Dspread" | jq --arg n "$1" '[.items[] | select(.spec.nodeName == $n)] | length'; }
running_elsewhere() { placement | jq -Rr 'split(",") | map(select(. != "node-2")) | length'; }
backends() {
  curl -sS "$CLOUD/v1/loadbalancers" |
    jq -r '[.items[] | select(.tags["kubernetes.io/service-name"] == "default/spread")] | .[0].backends // [] | sort | join(",")'
}
route_targets() { curl -sS "$CLOUD/v1/routes" | jq -r '[.items[].target] | sort | join(",")'; }
ready() { get "/api/v1/nodes/$1" | jq -r '.status.conditions[] | select(.type == "Ready") | .status'; }
taints() { get "/api/v1/nodes/$1" | jq -r '[.spec.taints[]?.key] | join(",")'; }
at_exit "curl -sS -X POST '$CLOUD/v1/instances/'\$(curl -sS '$CLOUD/v1/instances?name=node-3' | jq -r '.items[0].id')/start >/dev/null 2>&1"

provider_ids() { get /api/v1/nodes | jq -r '[.items[].spec.providerID] | sort | join(",")'; }

step "1. Six pods over three nodes, each node a machine of the cloud"
wait_for "the cloud-node controller initialized every node" equals "sim://sim-a/node-1,sim://sim-a/node-2,sim://sim-a/node-3" provider_ids
get /api/v1/nodes | jq -r '.items[] | "\(.metadata.name)  \(.spec.providerID)  \(.metadata.labels["topology.kubernetes.io/zone"]) \(.metadata.labels["topology.kubernetes.io/region"]) \(.metadata.labels["node.kubernetes.io/instance-type"])"'
expect "the provider IDs the cloud-node controller set" "$(provider_ids)" "sim://sim-a/node-1,sim://sim-a/node-2,sim://sim-a/node-3"
expect "zone, region and instance type labels" \
  "$(get /api/v1/nodes/node-2 | jq -r '.metadata.labels | "\(.["topology.kubernetes.io/zone"]) \(.["topology.kubernetes.io/region"]) \(.["node.kubernetes.io/instance-type"])"')" "sim-a sim sim.small"
say POST $D '{
  "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "spread"},
  "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "spread"}},
    "template": {"metadata": {"labels": {"app": "spread"}},
      "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}' >/dev/null
say POST $SVC '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "spread"},
  "spec": {"type": "LoadBalancer", "selector": {"app": "spread"}, "ports": [{"port": 80}]}}' >/dev/null
wait_for "6 pods Running, 2 on each node" equals "node-1,node-1,node-2,node-2,node-3,node-3" placement
wait_for "the load balancer's backends: every node" equals "node-1,node-2,node-3" backends
wait_for "one route per node" equals "node-1,node-2,node-3" route_targets

step "2. node-2's machine is deleted"
old=$(instance node-2)
printf "\$ curl -s -X DELETE %s/v1/instances/%s\n" "$CLOUD" "$(jq -r .id <<<"$old")"
curl -sS -X DELETE "$CLOUD/v1/instances/$(jq -r .id <<<"$old")"
# not_ready NODE: NODE's Ready condition is not True, or NODE is gone already.
not_ready() { [ "$(ready "$1" 2>/dev/null)" != True ]; }
wait_for "node-2 not Ready (its heartbeats stopped)" not_ready node-2
wait_for "the cloud-node-lifecycle controller deleted Node node-2" equals 404 code GET /api/v1/nodes/node-2
expect "its event" "$(get /api/v1/events | jq -r '[.items[] | select(.involvedObject.kind == "Node" and .involvedObject.name == "node-2"
  and .reason == "DeletingNode") | .message] | first')" "Deleting node node-2 because it does not exist in the cloud provider"
wait_for "no pod left bound to node-2" equals 0 on node-2
wait_for "6 pods Running again, on node-1 and node-3" equals 6 running_elsewhere
expect "placement" "$(placement | tr , '\n' | sort -u | paste -sd,)" "node-1,node-3"
wait_for "the load balancer's backends follow" equals "node-1,node-3" backends
wait_for "and the route table" equals "node-1,node-3" route_targets

step "3. node-3's machine is stopped, not deleted"
cloud_post "/v1/instances/$(instance node-3 | jq -r .id)/stop"
wait_for "node-3 not Ready" equals Unknown ready node-3
wait_for "the shutdown taint" jqtest /api/v1/nodes/node-3 "[.spec.taints[]?.key] | index(\"$SHUTDOWN\") != null"
expect "the Node is still there" "$(code GET /api/v1/nodes/node-3)" 200
cloud_post "/v1/instances/$(instance node-3 | jq -r .id)/start"
wait_for "node-3 Ready again" equals True ready node-3
wait_for "the shutdown taint gone" jqtest /api/v1/nodes/node-3 "[.spec.taints[]?.key] | index(\"$SHUTDOWN\") == null"

step "4. Put things back: a new node-2 machine, and nothing of the lesson left"
cloud_post /v1/instances "$(jq -c '{name, zone, instanceType, addresses}' <<<"$old")"
wait_for "node-2 Ready again" equals True ready node-2
expect "node-2's new machine" "$(instance node-2 | jq -r '.id != '"$(jq .id <<<"$old")"'')" true
say DELETE $SVC/spread >/dev/null
say DELETE $D/spread >/dev/null
wait_for "the load balancer gone" equals "" backends
