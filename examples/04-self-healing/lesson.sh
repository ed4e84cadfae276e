#!/usr/bin/env bash
# Lesson 4: self-healing. Create a Deployment of 3 redis pods; the
# Deployment controller makes a ReplicaSet, the ReplicaSet controller makes
# the pods, the scheduler puts them on nodes and the kubelets run them.
# Delete a pod: the ReplicaSet controller notices it has 2 of 3 and makes a
# new one. The Events and the timeline tell the story.
. "$(dirname "$0")/../lib.sh"

command -v "$MINICTL" >/dev/null || {
  echo "this lesson runs minictl trace: set MINICTL to a minictl binary (make build; MINICTL=bin/minictl)" >&2
  exit 1
}

APPS=/apis/apps/v1/namespaces/default
PODS=/api/v1/namespaces/default/pods

pods_json() { get "$PODS?labelSelector=app%3Dredis" >"$work/pods"; }
# names: the live (not being deleted) redis pods' names, sorted, on one line.
names() {
  get "$PODS?labelSelector=app%3Dredis" |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | sort | join(" ")'
}
count_is() { [ "$(running redis)" -eq "$1" ]; }
gone() { [ "$(code GET "$PODS/$1")" == 404 ]; }

# Start clean, so that the lesson can be run again on the same cluster: the
# same template gives the same ReplicaSet name, so its old events go too.
if [ "$(code GET "$APPS/deployments/redis")" == 200 ]; then
  for name in redis $(get "$APPS/replicasets?labelSelector=app%3Dredis" | jq -r '.items[].metadata.name'); do
    curl -sS -o /dev/null -X DELETE "$API/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$name"
  done
  delete "$APPS/deployments/redis" >/dev/null
  no_redis() { [ "$(get "$PODS?labelSelector=app%3Dredis" | jq '.items | length')$(get "$APPS/replicasets?labelSelector=app%3Dredis" | jq '.items | length')" == 00 ]; }
  wait_for "the ReplicaSet and pods of an earlier run to go" no_redis
fi

# Follow the timeline from here on, as `minictl trace` in a second terminal would.
background "$work/trace" "$MINICTL" trace --server "$API" --object default/redis
# The kubelets' lines name their node, not the pod: follow them apart.
background "$work/ktrace" "$MINICTL" trace --server "$API" --component kubelet
wait_for "minictl trace attached" trace_attached "$work/trace"
wait_for "minictl trace --component kubelet attached" trace_attached "$work/ktrace"

step "1. Create a Deployment: 3 replicas of redis"
body='{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"redis"},
  "spec":{"replicas":3,"selector":{"matchLabels":{"app":"redis"}},
    "template":{"metadata":{"labels":{"app":"redis"}},"spec":{"containers":[{"name":"redis","image":"redis:7"}]}}}}'
printf "\$ curl -s -X POST %s%s/deployments -H 'Content-Type: application/json' -d '%s'\n" "$API" "$APPS" "$body"
post "$APPS/deployments" "$body" | jq -c '{kind, name: .metadata.name, replicas: .spec.replicas}'

step "2. The Deployment controller creates a ReplicaSet it owns"
has_rs() { [ "$(get "$APPS/replicasets?labelSelector=app%3Dredis" | jq '.items | length')" -eq 1 ]; }
wait_for "a ReplicaSet for redis" has_rs
echo "\$ curl -s '$API$APPS/replicasets?labelSelector=app%3Dredis'"
get "$APPS/replicasets?labelSelector=app%3Dredis" | jq '.items[0]' >"$work/rs"
jq -c '{name: .metadata.name, replicas: .spec.replicas, owner: .metadata.ownerReferences[0] | {kind, name, controller}}' "$work/rs"
rs=$(jq -r .metadata.name "$work/rs")
expect_match "its name is the Deployment's plus a hash of the pod template" "$rs" '^redis-[a-z0-9]+$'
expect "its template hash is also a label of the ReplicaSet and its pods" "$(jq -r '.spec.template.metadata.labels["pod-template-hash"]' "$work/rs")" "${rs#redis-}"
expect "it wants 3 replicas" "$(jq -r .spec.replicas "$work/rs")" 3
expect "its controlling owner is" "$(jq -c '.metadata.ownerReferences[] | select(.controller) | [.kind, .name]' "$work/rs")" '["Deployment","redis"]'

step "3. The ReplicaSet creates 3 pods; the scheduler binds them; the kubelets run them"
wait_for "3 redis pods Running and Ready" count_is 3
echo "\$ curl -s '$API$PODS?labelSelector=app%3Dredis'"
pods_json
jq -r '.items[] | [.metadata.name, .spec.nodeName, .status.phase, .status.podIP] | @tsv' "$work/pods"
expect "every pod is owned by the ReplicaSet" "$(jq -c '[.items[].metadata.ownerReferences[] | select(.controller) | .name] | unique' "$work/pods")" "[\"$rs\"]"
expect "every pod is on a node" "$(jq '[.items[] | select(.spec.nodeName | test("^node-[0-9]+$"))] | length' "$work/pods")" 3
expect_match "every pod's name is the ReplicaSet's plus a random suffix" "$(names)" "^($rs-[a-z0-9]{5} ?){3}$"
before=$(names)

step "4. Delete one pod"
victim=${before%% *}
printf '$ curl -s -X DELETE %s%s/%s\n' "$API" "$PODS" "$victim"
delete "$PODS/$victim" >"$work/deleted"
jq -c '{name: .metadata.name, deletionTimestamp: .metadata.deletionTimestamp, deletionGracePeriodSeconds: .metadata.deletionGracePeriodSeconds}' "$work/deleted"
expect "a pod on a node is deleted gracefully: it gets a grace period" "$(jq -r .metadata.deletionGracePeriodSeconds "$work/deleted")" 30
expect_match "and a deletionTimestamp (when the grace period ends)" "$(jq -r .metadata.deletionTimestamp "$work/deleted")" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T'
wait_for "$victim to be gone (the kubelet stops it, then it is removed)" gone "$victim"
wait_for "3 redis pods Running again" count_is 3
after=$(names)
echo "before: $before"
echo "after:  $after"
expect "the deleted pod is not among them" "$(grep -c -w "$victim" <<<"$after" || true)" 0
new=$(comm -13 <(tr ' ' '\n' <<<"$before") <(tr ' ' '\n' <<<"$after"))
expect_match "one new pod, with a new name, took its place" "$new" "^$rs-[a-z0-9]{5}$"
expect "the two others were left alone" "$(comm -12 <(tr ' ' '\n' <<<"$before") <(tr ' ' '\n' <<<"$after") | wc -l | tr -d ' ')" 2

step "5. The Events tell the same story"
echo "\$ curl -s '$API/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$rs'"
four_creates() { [ "$(events ".involvedObject.name == \"$rs\" and .reason == \"SuccessfulCreate\"" | jq length)" -eq 4 ]; }
wait_for "4 SuccessfulCreate events on the ReplicaSet" four_creates
get "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$rs" |
  jq -r '.items[] | [.type, .reason, .involvedObject.kind + "/" + .involvedObject.name, .message] | @tsv'
expect "the ReplicaSet created each of the 4 pods once" "$(events ".involvedObject.name == \"$rs\" and .reason == \"SuccessfulCreate\"" | jq -c 'map(.message) | sort')" \
  "$(for p in $before $new; do echo "Created pod: $p"; done | jq -R . | jq -s -c sort)"
echo "\$ curl -s '$API/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dredis'"
scaled() { [ "$(events '.involvedObject.kind == "Deployment" and .involvedObject.name == "redis"' | jq length)" -ge 1 ]; }
wait_for "the Deployment's event" scaled
events '.involvedObject.kind == "Deployment" and .involvedObject.name == "redis"' | jq -r '.[] | [.type, .reason, .message] | @tsv'
expect "the Deployment scaled its ReplicaSet up" "$(events '.involvedObject.kind == "Deployment" and .involvedObject.name == "redis"' | jq -r '.[0] | .reason + ": " + .message')" \
  "ScalingReplicaSet: Scaled up replica set $rs from 0 to 3"
echo "\$ curl -s '$API/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$new'"
scheduled() { [ "$(events ".involvedObject.name == \"$new\" and .reason == \"Scheduled\"" | jq length)" -eq 1 ]; }
wait_for "the new pod's Scheduled event" scheduled
node=$(get "$PODS/$new" | jq -r .spec.nodeName)
expect "the scheduler says where the new pod went" "$(events ".involvedObject.name == \"$new\" and .reason == \"Scheduled\"" | jq -r '.[0] | .source.component + ": " + .message')" \
  "default-scheduler: Successfully assigned default/$new to $node"

kubelet_events() { events ".involvedObject.name == \"$1\" and .source.component == \"kubelet\"" | jq -c 'map(.reason) | sort'; }
started() { [ "$(kubelet_events "$new")" == '["Created","Pulled","Started"]' ]; }
wait_for "the kubelet's events for the new pod" started
expect "the kubelet ran the new pod" "$(kubelet_events "$new")" '["Created","Pulled","Started"]'
expect "and stopped the deleted one" "$(kubelet_events "$victim" | jq -c 'map(select(. == "Killing"))')" '["Killing"]'

step "6. The timeline: what minictl trace showed while we worked"
heal="replicaset +default/$rs +want 3, have 2 → create 1"
healed() { grep -q -E "$heal" "$work/trace"; }
wait_for "the ReplicaSet controller's decision in the trace" healed
echo "\$ $MINICTL trace --object default/redis"
cat "$work/trace"
expect_match "the decision that healed the set" "$(grep -E "$heal" "$work/trace")" "^[0-9:.]+ +$heal\$"
expect_match "the scheduler placed the new pod" "$(grep -E "scheduler +default/$new " "$work/trace")" "→ bind to $node\$"
ran() { grep -q -E "kubelet +default/$new +\\(on $node\\) Pending → Running" "$work/ktrace"; }
wait_for "the kubelet's line in minictl trace --component kubelet" ran
echo "\$ $MINICTL trace --component kubelet"
grep -E "default/($victim|$new) " "$work/ktrace"
expect_match "the kubelet of $node ran the new pod" "$(grep -E "kubelet +default/$new " "$work/ktrace" | tail -1)" "\\(on $node\\) Pending → Running \\(ip [0-9.]+\\)\$"
expect_match "and the victim's kubelet stopped it" "$(grep -E "kubelet +default/$victim .*deleted" "$work/ktrace")" "deleted → containers stopped, pod removed\$"

printf '\nLesson 4 done: desired state (3) vs observed state (2) → the controller acts. The Deployment is still there to play with.\n'
