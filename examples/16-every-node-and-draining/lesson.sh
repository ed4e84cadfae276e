#!/usr/bin/env bash
# Lesson 16: a pod on every node, and draining a node. A DaemonSet puts one
# pod on each node, and one on a node that joins later; a node tainted
# NoExecute loses its daemon pod. Then the voluntary side of disruption: a
# PodDisruptionBudget, the eviction subresource that respects it (429 when
# an eviction would break it), and draining a node by hand the way
# `kubectl drain` does it: cordon, then evict. Run it against a cluster:
# `make up` in another terminal, then
#   bash examples/16-every-node-and-draining/lesson.sh
. "$(dirname "$0")/../lib.sh"

DS=/apis/apps/v1/namespaces/default/daemonsets
D=/apis/apps/v1/namespaces/default/deployments
PDB=/apis/policy/v1/namespaces/default/poddisruptionbudgets
PODS=/api/v1/namespaces/default/pods
NODES=/api/v1/nodes

# placement APP: "node: count" of APP's live pods, by node, on one line.
placement() {
  get "$PODS?labelSelector=app%3D$1" | jq -c '[.items[] | select(.metadata.deletionTimestamp == null)
    | .spec.nodeName // "unscheduled"] | group_by(.) | map("\(.[0]): \(length)")'
}
# evict POD: POST an Eviction for POD; prints the HTTP status code.
evict() {
  code POST "$PODS/$1/eviction" "{\"apiVersion\": \"policy/v1\", \"kind\": \"Eviction\", \"metadata\": {\"name\": \"$1\"}}"
}
pods_on() { get "$PODS?labelSelector=app%3D$1&fieldSelector=spec.nodeName%3D$2" | jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name'; }

# Start clean, so that the lesson can be run again on the same cluster.
for path in $DS/agent $D/web $PDB/web $NODES/node-4; do
  [ "$(code GET "$path")" != 200 ] || delete "$path" >/dev/null
done
patch $NODES/node-1 '{"spec": {"unschedulable": null}}' >/dev/null
no_pods() { [ "$(get "$PODS?labelSelector=app%20in%20(agent,web)" | jq '.items | length')" == 0 ]; }
wait_for "no agent or web pods left from an earlier run" no_pods

step "1. A DaemonSet: one agent pod on each of the 3 nodes"
say POST $DS '{
  "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
  "spec": {"selector": {"matchLabels": {"app": "agent"}},
    "template": {"metadata": {"labels": {"app": "agent"}},
      "spec": {"containers": [{"name": "agent", "image": "registry.example.com/agent:1.0"}]}}}}' |
  jq -c '.spec.updateStrategy'
wait_for "3 agent pods Running" equals 3 running agent
expect "one per node" "$(placement agent)" '["node-1: 1","node-2: 1","node-3: 1"]'
wait_for "status: 3 desired, 3 ready" jqtest $DS/agent '.status.desiredNumberScheduled == 3 and .status.numberReady == 3'
pod=$(pods_on agent node-1)
p=$(get "$PODS/$pod")
echo "  how the DaemonSet pinned $pod to node-1 (the scheduler still binds it):"
jq -c '.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms' <<<"$p" | sed 's/^/    /'
expect "pinned with matchFields metadata.name" "$(jq -r '.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values[0]' <<<"$p")" node-1
expect "tolerates a not-ready and an unreachable node" \
  "$(jq -c '[.spec.tolerations[] | select(.effect == "NoExecute") | .key] | sort' <<<"$p")" '["node.kubernetes.io/not-ready","node.kubernetes.io/unreachable"]'
expect "for ever (no tolerationSeconds)" "$(jq '[.spec.tolerations[] | select(.tolerationSeconds != null)] | length' <<<"$p")" 0
expect "and is placed on a node under pressure or cordoned" \
  "$(jq -c '[.spec.tolerations[] | select(.effect == "NoSchedule") | .key] | sort' <<<"$p")" \
  '["node.kubernetes.io/disk-pressure","node.kubernetes.io/memory-pressure","node.kubernetes.io/pid-pressure","node.kubernetes.io/unschedulable"]'

step "2. A fourth node joins: it gets its agent pod"
background "$work/node-4" "$MINICTL" kubelet --server "$API" --name node-4 --fast
at_exit "curl -s -X DELETE '$API$NODES/node-4' >/dev/null"
wait_for "node-4 Ready" jqtest $NODES/node-4 'any(.status.conditions[]; .type == "Ready" and .status == "True")'
wait_for "4 agent pods Running" equals 4 running agent
expect "one per node" "$(placement agent)" '["node-1: 1","node-2: 1","node-3: 1","node-4: 1"]'

step "3. Taint node-4 NoExecute: the agent does not tolerate it, and its pod goes"
say PATCH $NODES/node-4 '{"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}' application/merge-patch+json >/dev/null
wait_for "3 agent pods" equals '["node-1: 1","node-2: 1","node-3: 1"]' placement agent
wait_for "status: 3 desired" jqtest $DS/agent '.status.desiredNumberScheduled == 3'

step "4. A Deployment of 3 web pods, and a budget that keeps all 3 available"
say POST $D '{
  "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["node-4"]}]}]}}},
        "containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}' >/dev/null
wait_for "3 web pods Running" equals 3 running web
say POST $PDB '{
  "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
  "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}}' >/dev/null
wait_for "the disruption controller's status: 3 healthy, 0 disruptions allowed" jqtest $PDB/web \
  '.status.currentHealthy == 3 and .status.desiredHealthy == 3 and .status.disruptionsAllowed == 0'
get $PDB/web | jq -c '.status | {currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed, conditions: [.conditions[] | {type, status, reason}]}'

step "5. Drain node-1 by hand, as kubectl drain does: cordon, then evict"
say PATCH $NODES/node-1 '{"spec": {"unschedulable": true}}' application/merge-patch+json >/dev/null
expect "node-1 cordoned" "$(get $NODES/node-1 | jq .spec.unschedulable)" true
wait_for "node-1 tainted unschedulable:NoSchedule by the node lifecycle controller" jqtest $NODES/node-1 \
  'any(.spec.taints[]?; .key == "node.kubernetes.io/unschedulable" and .effect == "NoSchedule")'
victim=$(pods_on web node-1 | head -1)
[ -n "$victim" ] || { victim=$(pods_on web node-2 | head -1); echo "  (no web pod on node-1; evicting $victim instead)"; }
echo "\$ curl -s -X POST $API$PODS/$victim/eviction -d '{\"apiVersion\": \"policy/v1\", \"kind\": \"Eviction\", \"metadata\": {\"name\": \"$victim\"}}'"
answer=$(post "$PODS/$victim/eviction" "{\"apiVersion\": \"policy/v1\", \"kind\": \"Eviction\", \"metadata\": {\"name\": \"$victim\"}}")
jq -c '{code, reason, message, details}' <<<"$answer"
expect "an eviction that would break the budget" "$(jq .code <<<"$answer")" 429
expect_match "the refusal names the budget" "$(jq -r '.details.causes[0].message' <<<"$answer")" 'web'
expect "the pod is untouched" "$(get "$PODS/$victim" | jq -r '.metadata.deletionTimestamp // "not deleted"')" "not deleted"

step "6. Make room: a fourth replica, and the budget allows one disruption"
say PATCH $D/web/scale '{"spec": {"replicas": 4}}' application/merge-patch+json >/dev/null
wait_for "1 disruption allowed" jqtest $PDB/web '.status.disruptionsAllowed == 1'
expect "eviction of $victim" "$(evict "$victim")" 201
wait_for "$victim gone or going" jqtest "$PODS?fieldSelector=metadata.name%3D$victim" '[.items[] | select(.metadata.deletionTimestamp == null)] | length == 0'
wait_for "4 web pods Running again, none of them on the cordoned node-1" equals 4 running web
expect "web pods on node-1" "$(pods_on web node-1 | wc -l)" 0
expect "the DaemonSet's agent stays on node-1 (it tolerates unschedulable; drain skips it)" "$(pods_on agent node-1 | wc -l)" 1

step "7. Uncordon node-1 and clean up"
say PATCH $NODES/node-1 '{"spec": {"unschedulable": null}}' application/merge-patch+json >/dev/null
wait_for "node-1's unschedulable taint removed" jqtest $NODES/node-1 \
  'all(.spec.taints[]?; .key != "node.kubernetes.io/unschedulable")'
for path in $PDB/web $D/web $DS/agent; do delete "$path" >/dev/null; done
wait_for "no agent or web pods left" no_pods
