#!/usr/bin/env bash
# Lesson 6: a node dies. Six pods spread over three nodes, each node with
# its own pod CIDR. node-2 stops heartbeating: its Lease stops moving, the
# node lifecycle controller marks it Ready=Unknown after the grace period,
# taints it unreachable, and evicts its pods once their toleration runs out;
# the ReplicaSet replaces them on node-1 and node-3. Then node-2 comes back:
# Ready again, untainted, and it takes new pods again. Last, every node goes
# silent at once: the controller suspects itself and evicts nothing.
#
# Run it against `minictl up --fast` (5s grace period, 5s tolerations): on
# a cluster with the default timings the same story takes about six minutes.
. "$(dirname "$0")/../lib.sh"

APPS=/apis/apps/v1/namespaces/default
PODS=/api/v1/namespaces/default/pods
LEASES=/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases
HEARTBEAT=sim.minictl.io/heartbeat
# heal [NODE...]: remove the annotation (from every node by default).
heal() {
  local nodes=("$@")
  [ $# -gt 0 ] || nodes=(node-1 node-2 node-3)
  for n in "${nodes[@]}"; do
    patch "/api/v1/nodes/$n" "{\"metadata\":{\"annotations\":{\"$HEARTBEAT\":null}}}" >/dev/null
  done
}
at_exit 'heal 2>/dev/null' # never leave a node dead behind us

# live_pods: the hello pods not being deleted, as "name node ip" lines.
live_pods() {
  get "$PODS?labelSelector=app%3Dhello" |
    jq -r '.items[] | select(.metadata.deletionTimestamp == null) | [.metadata.name, .spec.nodeName, .status.podIP] | @tsv' | sort
}
# on NODE: how many live hello pods are bound to NODE.
on() { live_pods | awk -v n="$1" '$2 == n' | wc -l | tr -d ' '; }
count_is() { [ "$(running hello)" -eq "$1" ]; }
ready_of() { get "/api/v1/nodes/$1" | jq -r '.status.conditions[] | select(.type == "Ready") | .status'; }
ready_is() { [ "$(ready_of "$1")" == "$2" ]; }
taints_of() { get "/api/v1/nodes/$1" | jq -c '[.spec.taints[]? | .key + ":" + .effect] | sort'; }
renew_time() { get "$LEASES/$1" | jq -r .spec.renewTime; }
# ip_in_cidr IP CIDR: true when the IPv4 address IP is inside CIDR.
ip2int() { local IFS=.; read -r a b c d <<<"$1"; echo $(((a << 24) | (b << 16) | (c << 8) | d)); }
ip_in_cidr() {
  local bits=${2#*/} mask
  mask=$(((0xffffffff << (32 - bits)) & 0xffffffff))
  [ $(($(ip2int "$1") & mask)) -eq $(($(ip2int "${2%/*}") & mask)) ]
}

# Start clean, so that the lesson can be run again on the same cluster.
heal
healthy() { for n in node-1 node-2 node-3; do [ "$(ready_of $n)" == True ] && [ "$(taints_of $n)" == '[]' ] || return 1; done; }
wait_for "every node Ready and untainted" healthy
if [ "$(code GET "$APPS/deployments/hello")" == 200 ]; then
  delete "$APPS/deployments/hello" >/dev/null
  no_hello() { [ "$(get "$PODS?labelSelector=app%3Dhello" | jq '.items | length')" -eq 0 ]; }
  wait_for "the pods of an earlier run to go" no_hello
fi
for name in node-2 $(get /api/v1/namespaces/default/events | jq -r '.items[].involvedObject.name | select(startswith("hello-"))' | sort -u); do
  curl -sS -o /dev/null -X DELETE "$API/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$name"
done

# Follow the node lifecycle controller, as `minictl trace` in a second terminal would.
background "$work/trace" "$MINICTL" trace --server "$API" --component nodelifecycle

step "1. Three nodes, each with its own range of pod IPs"
echo "\$ curl -s $API/api/v1/nodes"
get /api/v1/nodes >"$work/nodes"
jq -r '.items[] | [.metadata.name, .spec.podCIDR, (.status.conditions[] | select(.type == "Ready") | "Ready=" + .status)] | @tsv' "$work/nodes"
expect "the nodes" "$(jq -r '[.items[].metadata.name] | sort | join(" ")' "$work/nodes")" "node-1 node-2 node-3"
expect "each has a /24 podCIDR cut from 10.244.0.0/16 (nodeipam)" \
  "$(jq '[.items[].spec.podCIDR | select(test("^10\\.244\\.[0-9]+\\.0/24$"))] | length' "$work/nodes")" 3
expect "no two nodes share one" "$(jq '[.items[].spec.podCIDR] | unique | length' "$work/nodes")" 3
expect "spec.podCIDRs holds the same range" "$(jq '[.items[] | select(.spec.podCIDRs == [.spec.podCIDR])] | length' "$work/nodes")" 3
cidr_of() { jq -r --arg n "$1" '.items[] | select(.metadata.name == $n) | .spec.podCIDR' "$work/nodes"; }

step "2. A Deployment of 6 pods: two on each node"
body='{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"hello"},
  "spec":{"replicas":6,"selector":{"matchLabels":{"app":"hello"}},
    "template":{"metadata":{"labels":{"app":"hello"}},"spec":{"containers":[{"name":"hello","image":"nginxdemos/hello"}]}}}}'
printf "\$ curl -s -X POST %s%s/deployments -H 'Content-Type: application/json' -d '%s'\n" "$API" "$APPS" "$body"
post "$APPS/deployments" "$body" | jq -c '{kind, name: .metadata.name, replicas: .spec.replicas}'
wait_for "6 hello pods Running and Ready" count_is 6
echo "\$ curl -s '$API$PODS?labelSelector=app%3Dhello'"
live_pods | tee "$work/before"
expect "pods per node (node-1 node-2 node-3)" "$(on node-1) $(on node-2) $(on node-3)" "2 2 2"
inside=0
while read -r name node ip; do
  ip_in_cidr "$ip" "$(cidr_of "$node")" && inside=$((inside + 1))
done <"$work/before"
expect "every pod's IP is inside its node's podCIDR" "$inside" 6
first=$(head -1 "$work/before" | cut -f1)
tol=$(get "$PODS/$first" | jq -r '.spec.tolerations[] | select(.key == "node.kubernetes.io/unreachable") | .tolerationSeconds')
echo "\$ curl -s $API$PODS/$first | jq .spec.tolerations"
get "$PODS/$first" | jq -c '.spec.tolerations[]'
expect "each pod tolerates not-ready and unreachable, NoExecute, for a while (added by the API server)" \
  "$(get "$PODS/$first" | jq -c '[.spec.tolerations[] | [.key, .operator, .effect]] | sort')" \
  '[["node.kubernetes.io/not-ready","Exists","NoExecute"],["node.kubernetes.io/unreachable","Exists","NoExecute"]]'
expect_match "for (seconds; 5 under --fast, 300 by default)" "$tol" '^(5|300)$'
victims=$(awk '$2 == "node-2" {print $1}' "$work/before" | tr '\n' ' ')
victims=${victims% }
echo "on node-2: $victims"

step "3. The heartbeat: node-2's Lease"
echo "\$ curl -s $API$LEASES/node-2"
get "$LEASES/node-2" | jq -c .spec
expect "held by node-2's kubelet, for 40s at a time" "$(get "$LEASES/node-2" | jq -c '[.spec.holderIdentity, .spec.leaseDurationSeconds]')" '["node-2",40]'
r0=$(renew_time node-2)
moved() { [ "$(renew_time node-2)" != "$r0" ]; }
wait_for "the kubelet to renew it (renewTime moves)" moved
echo "renewTime: $r0 → $(renew_time node-2)"

step "4. Stop node-2's heartbeat"
printf "\$ curl -s -X PATCH %s/api/v1/nodes/node-2 -H 'Content-Type: application/merge-patch+json' -d '%s'\n" "$API" "{\"metadata\":{\"annotations\":{\"$HEARTBEAT\":\"stop\"}}}"
patch /api/v1/nodes/node-2 "{\"metadata\":{\"annotations\":{\"$HEARTBEAT\":\"stop\"}}}" | jq -c .metadata.annotations
sleep 1 # a renewal already on its way may still land
stopped=$(renew_time node-2)
last_heartbeat=$(get /api/v1/nodes/node-2 | jq -r '.status.conditions[] | select(.type == "Ready") | .lastHeartbeatTime')
echo "renewTime: $stopped"

step "5. After the grace period: Ready=Unknown, and node-2 is tainted unreachable"
WAIT=120 wait_for "node-2 Ready=Unknown" ready_is node-2 Unknown
expect "the Lease was not renewed since" "$(renew_time node-2)" "$stopped"
echo "\$ curl -s $API/api/v1/nodes/node-2 | jq '.status.conditions'"
get /api/v1/nodes/node-2 >"$work/node2"
jq -r '.status.conditions[] | [.type, .status, .reason, .lastHeartbeatTime, .lastTransitionTime, .message] | @tsv' "$work/node2"
expect "Ready says who decided, and why" "$(jq -c '.status.conditions[] | select(.type == "Ready") | [.status, .reason, .message]' "$work/node2")" \
  '["Unknown","NodeStatusUnknown","Kubelet stopped posting node status."]'
expect "the kubelet's other conditions are Unknown too" \
  "$(jq -c '[.status.conditions[] | select(.type != "Ready" and .type != "NetworkUnavailable") | [.type, .status]] | sort' "$work/node2")" \
  '[["DiskPressure","Unknown"],["MemoryPressure","Unknown"],["PIDPressure","Unknown"]]'
# NetworkUnavailable is not the kubelet's: the cloud's route controller set
# it when node-2's pod CIDR got its route, and a silent kubelet changes
# nothing about that route.
expect "NetworkUnavailable, the route controller's, stays as it was" \
  "$(jq -c '[.status.conditions[] | select(.type == "NetworkUnavailable") | [.status, .reason]]' "$work/node2")" \
  '[["False","RouteCreated"]]'
expect "Ready's lastHeartbeatTime is still the kubelet's last" \
  "$(jq -r '.status.conditions[] | select(.type == "Ready") | .lastHeartbeatTime' "$work/node2")" "$last_heartbeat"
silence=$(jq -r --arg r "$stopped" '(.status.conditions[] | select(.type == "Ready") | .lastTransitionTime | fromdateiso8601) - ($r | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601)' "$work/node2")
expect_match "seconds from the last renewal to Unknown (at least the grace period: 5 under --fast)" "$silence" '^([5-9]|[1-9][0-9]+)$'
tainted() { [ "$(taints_of node-2)" == '["node.kubernetes.io/unreachable:NoExecute","node.kubernetes.io/unreachable:NoSchedule"]' ]; }
wait_for "node-2's taints" tainted
echo "\$ curl -s $API/api/v1/nodes/node-2 | jq -c '.spec.taints[]'"
get /api/v1/nodes/node-2 | jq -c '.spec.taints[]' | tee "$work/taints"
expect "both carry the time they were added" "$(jq -s '[.[] | select(.timeAdded != null)] | length' "$work/taints")" 2
taint_added=$(jq -rs '.[] | select(.effect == "NoExecute") | .timeAdded' "$work/taints")
echo "\$ curl -s '$API/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dnode-2'"
notready() { [ "$(events '.involvedObject.name == "node-2" and .reason == "NodeNotReady"' | jq length)" -ge 1 ]; }
wait_for "the NodeNotReady event" notready
get "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dnode-2" | jq -r '.items[] | [.reason, .message] | @tsv'
expect "the controller says so in an Event" "$(events '.involvedObject.name == "node-2" and .reason == "NodeNotReady"' | jq -r '.[0].message')" \
  "Node node-2 status is now: NodeNotReady"

step "6. Its pods are evicted once their toleration runs out, and replaced elsewhere"
gone() { [ "$(code GET "$PODS/$1")" == 404 ]; }
for v in $victims; do
  WAIT=$((tol + 60)) wait_for "$v to be evicted and gone" gone "$v"
done
wait_for "6 hello pods Running again" count_is 6
live_pods | tee "$work/after"
expect "none on node-2" "$(on node-2)" 0
expect "all on node-1 and node-3" "$(($(on node-1) + $(on node-3)))" 6
expect "the evicted pods are not among them" "$(grep -c -w -E "${victims// /|}" "$work/after" || true)" 0
expect "the 4 others kept their names, nodes and IPs" "$(comm -12 "$work/before" "$work/after" | wc -l | tr -d ' ')" 4
inside=0
while read -r name node ip; do
  ip_in_cidr "$ip" "$(cidr_of "$node")" && inside=$((inside + 1))
done <"$work/after"
expect "the replacements' IPs are inside their new nodes' podCIDRs" "$inside" 6
echo "\$ curl -s '$API/api/v1/namespaces/default/events?fieldSelector=reason%3DTaintManagerEviction'"
evicted() { [ "$(events '.reason == "TaintManagerEviction"' | jq length)" -ge 2 ]; }
wait_for "the eviction events" evicted
get "/api/v1/namespaces/default/events?fieldSelector=reason%3DTaintManagerEviction" | jq -r '.items[] | [.firstTimestamp, .message] | @tsv'
expect "one per pod of node-2" "$(events '.reason == "TaintManagerEviction"' | jq -r 'map(.message) | sort | join(", ")')" \
  "$(for v in $victims; do echo "Marking for deletion Pod default/$v"; done | LC_ALL=C sort | paste -sd, - | sed 's/,/, /g')"
late=$(events '.reason == "TaintManagerEviction"' | jq --arg t "$taint_added" --argjson s "$tol" \
  '[.[] | select((.firstTimestamp | fromdateiso8601) - ($t | fromdateiso8601) >= $s)] | length')
expect "each came at least tolerationSeconds after the taint's timeAdded" "$late" 2

step "7. The timeline of the node lifecycle controller"
echo "\$ $MINICTL trace --component nodelifecycle"
cat "$work/trace"
line() { grep -E "$1" "$work/trace" | head -1; }
expect_match "the grace period ran out" "$(line 'node-2 +no heartbeat')" 'node-2 +no heartbeat for [0-9]+s \(grace [0-9]+s\) → Ready=Unknown, taint unreachable:NoExecute$'
expect_match "NoSchedule follows the condition" "$(line 'node-2 +Ready=Unknown → taint')" 'node-2 +Ready=Unknown → taint unreachable:NoSchedule$'
for v in $victims; do
  expect_match "$v: scheduled" "$(line "$v .*tolerates")" "default/$v +\(on node-2\) tolerates unreachable for ${tol}s → evict at [0-9:]+\$"
  expect_match "$v: evicted" "$(line "$v .*time is up")" "default/$v +\(on node-2\) tolerated unreachable for ${tol}s, time is up → evict now\$"
done

step "8. node-2 comes back"
printf "\$ curl -s -X PATCH %s/api/v1/nodes/node-2 -H 'Content-Type: application/merge-patch+json' -d '%s'\n" "$API" "{\"metadata\":{\"annotations\":{\"$HEARTBEAT\":null}}}"
heal node-2
wait_for "node-2 Ready=True" ready_is node-2 True
untainted() { [ "$(taints_of node-2)" == '[]' ]; }
wait_for "node-2's taints to go" untainted
renewed() { [ "$(renew_time node-2)" != "$stopped" ]; }
wait_for "its Lease to be renewed again" renewed
expect "Ready" "$(get /api/v1/nodes/node-2 | jq -c '.status.conditions[] | select(.type == "Ready") | [.status, .reason]')" '["True","KubeletReady"]'
removed() { grep -q 'node-2 .*remove taint unreachable:NoExecute' "$work/trace" && grep -q 'node-2 .*remove taint unreachable:NoSchedule' "$work/trace"; }
wait_for "the controller's decisions in the trace" removed
grep -E 'node-2 .*remove taint' "$work/trace"
expect "nothing moved back: pods on node-2" "$(on node-2)" 0

step "9. Scale to 9: the new pods go where there is room, node-2"
printf "\$ curl -s -X PATCH %s%s/deployments/hello/scale -H 'Content-Type: application/merge-patch+json' -d '%s'\n" "$API" "$APPS" '{"spec":{"replicas":9}}'
patch "$APPS/deployments/hello/scale" '{"spec":{"replicas":9}}' | jq -c '{kind, replicas: .spec.replicas}'
wait_for "9 hello pods Running and Ready" count_is 9
live_pods | tee "$work/scaled"
expect "pods per node (node-1 node-2 node-3)" "$(on node-1) $(on node-2) $(on node-3)" "3 3 3"
inside=0
while read -r name node ip; do
  [ "$node" == node-2 ] && ip_in_cidr "$ip" "$(cidr_of node-2)" && inside=$((inside + 1))
done <"$work/scaled"
expect "node-2's new pods have IPs from node-2's podCIDR" "$inside" 3

step "10. Every node goes silent: disruption mode, no evictions"
for n in node-1 node-2 node-3; do
  printf "\$ curl -s -X PATCH %s/api/v1/nodes/%s -H 'Content-Type: application/merge-patch+json' -d '%s'\n" "$API" "$n" "{\"metadata\":{\"annotations\":{\"$HEARTBEAT\":\"stop\"}}}"
  patch "/api/v1/nodes/$n" "{\"metadata\":{\"annotations\":{\"$HEARTBEAT\":\"stop\"}}}" >/dev/null
done
all_unknown() { for n in node-1 node-2 node-3; do ready_is $n Unknown || return 1; done; }
WAIT=120 wait_for "all three Ready=Unknown" all_unknown
full() { grep -q 'every zone is in FullDisruption' "$work/trace"; }
wait_for "the controller to enter disruption mode" full
grep -E 'FullDisruption' "$work/trace"
sleep $((tol + 2)) # longer than the pods' toleration
echo "\$ curl -s $API/api/v1/nodes | jq -c '.items[] | [.metadata.name, [.spec.taints[]? | .key + \":\" + .effect]]'"
get /api/v1/nodes | jq -c '.items[] | [.metadata.name, [.spec.taints[]? | .key + ":" + .effect]]' | tee "$work/full"
expect "NoExecute taints on the nodes" "$(grep -c NoExecute "$work/full" || true)" 0
expect "NoSchedule taints (they still follow the conditions)" "$(grep -c 'unreachable:NoSchedule' "$work/full" || true)" 3
expect "live hello pods, a toleration later: none evicted" "$(live_pods | wc -l | tr -d ' ')" 9
heal
wait_for "every node Ready and untainted again" healthy
left() { grep -q 'leave FullDisruption' "$work/trace"; }
wait_for "the controller to leave disruption mode" left
expect_match "and the controller says so" "$(grep -E 'leave FullDisruption' "$work/trace" | head -1)" 'a node is Ready again → leave FullDisruption; every node gets a fresh grace period$'

printf '\nLesson 6 done: a silent node is Unknown after the grace period, tainted, and emptied after the tolerations; its work went elsewhere. The Deployment is still there to play with.\n'
