#!/usr/bin/env bash
# Lesson 7: deleting a namespace. Fill a namespace with a Deployment, a
# Service, a ConfigMap, a Secret and a pod that a finalizer holds; delete it;
# watch it stay Terminating while its content goes, pods first; release the
# finalizer and watch it disappear, with a second namespace untouched.
# Run it against a cluster: `make up` in another terminal, then
#   bash examples/07-namespaces/lesson.sh
. "$(dirname "$0")/../lib.sh"

watches=() # the background processes recording what happens

# deploy NS NAME REPLICAS: a Deployment whose pods are labelled app=NAME.
deploy() {
  say POST "/apis/apps/v1/namespaces/$1/deployments" '{
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "'"$2"'"},
    "spec": {"replicas": '"$3"', "selector": {"matchLabels": {"app": "'"$2"'"}},
      "template": {"metadata": {"labels": {"app": "'"$2"'"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
          "ports": [{"name": "http", "containerPort": 80}]}]}}}}' >/dev/null
}
# condition TYPE: "status reason: message" of one of shop's conditions.
condition() {
  get /api/v1/namespaces/shop | jq -r --arg t "$1" \
    '.status.conditions[]? | select(.type == $t) | "\(.status) \(.reason): \(.message)"'
}
# left RESOURCE-PATH: how many objects of a resource namespace shop still
# holds, asked cluster-wide, so that the answer does not need the namespace.
left() { get "$1?fieldSelector=metadata.namespace%3Dshop" | jq '.items | length'; }

# Start clean, so that the lesson can be run again on the same cluster.
for ns in shop staging; do
  if [ "$(code GET "/api/v1/namespaces/$ns")" == 200 ]; then
    for pod in $(get "/api/v1/namespaces/$ns/pods" | jq -r '.items[].metadata.name'); do
      patch "/api/v1/namespaces/$ns/pods/$pod" '{"metadata": {"finalizers": null}}' >/dev/null
    done
    delete "/api/v1/namespaces/$ns" >/dev/null
    wait_for "namespace $ns of an earlier run to go" equals 404 code GET "/api/v1/namespaces/$ns"
  fi
done

step "0. Follow the controllers' side of the story: the timeline (what \`minictl trace\` prints)"
printf '$ %s\n' "curl -sN '$API/debug/timeline?object=shop' &    # or: minictl trace --object shop"
background "$work/timeline" curl -sN -D "$work/timeline.headers" "$API/debug/timeline?object=shop"
watches+=($!)
wait_for "the timeline stream to open" grep -q '^HTTP/1.1 200' "$work/timeline.headers"

step "1. A new namespace is Active and carries the finalizer \"kubernetes\""
ns=$(say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}')
jq -c '{metadata: {name: .metadata.name, labels: .metadata.labels}, spec, status}' <<<"$ns"
expect "status.phase" "$(jq -r .status.phase <<<"$ns")" "Active"
expect "spec.finalizers" "$(jq -c .spec.finalizers <<<"$ns")" '["kubernetes"]'
expect "label kubernetes.io/metadata.name" "$(jq -r '.metadata.labels["kubernetes.io/metadata.name"]' <<<"$ns")" "shop"

step "2. Fill it: a Deployment, a Service, a ConfigMap, a Secret, and a pod with a finalizer"
deploy shop web 2
say POST /api/v1/namespaces/shop/services '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
  "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}}' >/dev/null
say POST /api/v1/namespaces/shop/configmaps '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
  "data": {"color": "blue"}}' >/dev/null
say POST /api/v1/namespaces/shop/secrets '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "password"},
  "stringData": {"password": "s3cret"}}' >/dev/null
say POST /api/v1/namespaces/shop/pods '{"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "audit", "finalizers": ["example.com/upload-logs"]},
  "spec": {"containers": [{"name": "audit", "image": "busybox:1.36"}]}}' >/dev/null
wait_for "2 web pods Running and Ready" equals 2 running web shop
wait_for "pod audit Running" jqtest /api/v1/namespaces/shop/pods/audit '.status.phase == "Running"'
wait_for "ServiceAccount default (the serviceaccount controller made it)" jqtest /api/v1/namespaces/shop/serviceaccounts/default 'true'
wait_for "Endpoints web with 2 addresses (the endpoint controller made it)" jqtest /api/v1/namespaces/shop/endpoints/web \
  '[.subsets[]?.addresses[]?] | length == 2'
expect "ReplicaSets in shop (the deployment controller made it)" "$(left /apis/apps/v1/replicasets)" 1

step "3. A second namespace, staging, that nobody will touch"
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "staging"}}' >/dev/null
deploy staging web 1
say POST /api/v1/namespaces/staging/configmaps '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
  "data": {"color": "green"}}' >/dev/null
wait_for "1 web pod Running in staging" equals 1 running web staging

step "4. Record what happens: watch namespace shop and its pods from now on"
rv=$(get /api/v1/namespaces | jq -r .metadata.resourceVersion)
printf '$ curl -sN %s\n' "'$API/api/v1/namespaces?watch=true&fieldSelector=metadata.name%3Dshop&resourceVersion=$rv' &"
background "$work/ns.jsonl" curl -sN "$API/api/v1/namespaces?watch=true&fieldSelector=metadata.name%3Dshop&resourceVersion=$rv"
watches+=($!)
printf '$ curl -sN %s\n' "'$API/api/v1/namespaces/shop/pods?watch=true&resourceVersion=$rv' &"
background "$work/pods.jsonl" curl -sN "$API/api/v1/namespaces/shop/pods?watch=true&resourceVersion=$rv"
watches+=($!)

step "5. DELETE the namespace: it is only marked"
ns=$(say DELETE /api/v1/namespaces/shop)
jq -c '{metadata: {deletionTimestamp: .metadata.deletionTimestamp}, spec, status}' <<<"$ns"
expect "status.phase" "$(jq -r .status.phase <<<"$ns")" "Terminating"
expect_match "metadata.deletionTimestamp" "$(jq -r .metadata.deletionTimestamp <<<"$ns")" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T'
expect "spec.finalizers (still there)" "$(jq -c .spec.finalizers <<<"$ns")" '["kubernetes"]'
expect "GET right after the DELETE" "$(code GET /api/v1/namespaces/shop)" 200

step "6. Pods go first; the audit pod's finalizer holds everything else"
wait_for "only pod audit left" jqtest /api/v1/namespaces/shop/pods '[.items[].metadata.name] == ["audit"]'
wait_for "condition NamespaceContentRemaining names 1 pod" equals \
  "True SomeResourcesRemain: Some resources are remaining: pods. has 1 resource instances" condition NamespaceContentRemaining
get /api/v1/namespaces/shop | jq -c '.status.conditions[] | {type, status, reason}'
expect "condition NamespaceFinalizersRemaining" "$(condition NamespaceFinalizersRemaining)" \
  "True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.com/upload-logs in 1 resource instances"
expect "condition NamespaceDeletionContentFailure" "$(condition NamespaceDeletionContentFailure)" \
  "False ContentDeleted: All content successfully deleted, may be waiting on finalization"
expect "condition NamespaceDeletionDiscoveryFailure" "$(condition NamespaceDeletionDiscoveryFailure)" \
  "False ResourcesDiscovered: All resources successfully discovered"
wait_for "pod audit stopped by its kubelet (phase Succeeded)" jqtest /api/v1/namespaces/shop/pods/audit '.status.phase == "Succeeded"'
audit=$(get /api/v1/namespaces/shop/pods/audit)
expect_match "audit's deletionTimestamp" "$(jq -r .metadata.deletionTimestamp <<<"$audit")" '^[0-9]{4}-'
expect "audit's finalizers" "$(jq -c .metadata.finalizers <<<"$audit")" '["example.com/upload-logs"]'
expect "ConfigMap settings (waits for the pods)" "$(code GET /api/v1/namespaces/shop/configmaps/settings)" 200
expect "Deployment web (waits for the pods)" "$(code GET /apis/apps/v1/namespaces/shop/deployments/web)" 200
expect "namespace phase" "$(get /api/v1/namespaces/shop | jq -r .status.phase)" "Terminating"
created=$(say POST /api/v1/namespaces/shop/configmaps '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}')
expect "create in a terminating namespace: code" "$(jq -r .code <<<"$created")" 403
expect_match "create in a terminating namespace: message" "$(jq -r .message <<<"$created")" 'because it is being terminated$'
expect "pods in shop (the ReplicaSet cannot replace its pods)" "$(get /api/v1/namespaces/shop/pods | jq '.items | length')" 1

step "7. Remove the audit pod's finalizer: the rest is deleted and the namespace goes"
say PATCH /api/v1/namespaces/shop/pods/audit '{"metadata": {"finalizers": null}}' application/merge-patch+json >/dev/null
wait_for "namespace shop gone (404)" equals 404 code GET /api/v1/namespaces/shop
for path in /api/v1/pods /api/v1/configmaps /api/v1/secrets /api/v1/services /api/v1/endpoints \
  /api/v1/serviceaccounts /api/v1/events /apis/apps/v1/deployments /apis/apps/v1/replicasets; do
  expect "left in shop: ${path##*/}" "$(left "$path")" 0
done
wait_for "Event Finalized about namespace shop (in namespace default)" jqtest \
  "/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DNamespace,involvedObject.name%3Dshop" \
  'any(.items[]; .reason == "Finalized" and .message == "Namespace shop is empty; removed finalizer \"kubernetes\"")'

step "8. What the watches and the timeline recorded"
sleep 0.5 # let the last events reach the files
kill "${watches[@]}" 2>/dev/null || true
# From the namespace controller's first pass on.
jq -r '"\(.time[11:23]) \(.component) \(.object // "-") \(.message)"' "$work/timeline" |
  sed -n '/^[0-9:.]* namespace shop terminating;/,$p' >"$work/trace"
grep -E '^[0-9:.]+ (namespace|replicaset) ' "$work/trace" | head -12 | cut -c1-170
expect_match "namespace controller: pods first" "$(grep -m1 -o 'left → delete 3 pods first' "$work/trace")" 'pods first'
expect_match "namespace controller: waits for the pods" "$(grep -m1 -o 'the rest waits for the pods → check again in [0-9]*s' "$work/trace")" 'check again'
expect_match "replicaset controller: tries to replace its pods" "$(grep -m1 -o 'shop/web-[a-z0-9]* want 2, have 0 → create 2' "$work/trace")" 'create 2'
expect_match "replicaset controller: and fails, again and again" "$(grep -c 'shop/web-[a-z0-9]* sync failed, will retry' "$work/trace")" '^([3-9]|[1-9][0-9]+)$'
# The gaps between those failures, in ms: the workqueue's rate limiter backs off.
gaps=$(grep 'shop/web-[a-z0-9]* sync failed, will retry' "$work/trace" | awk '{ split($1, t, ":"); ms = ((t[1] * 60 + t[2]) * 60 + t[3]) * 1000;
  if (NR > 1) printf "%d ", ms - last; last = ms }')
expect_match "the gaps between the failures grow (ms: $gaps)" \
  "$(awk '{ print ($NF > $1 + 100) ? "growing" : "flat" }' <<<"$gaps")" '^growing$'
expect_match "namespace controller: finalizes" "$(grep -m1 -o 'empty → remove finalizer "kubernetes"' "$work/trace")" 'remove finalizer'

jq -c '{type, phase: .object.status.phase, deletionTimestamp: .object.metadata.deletionTimestamp,
  finalizers: .object.spec.finalizers, conditionsTrue: [.object.status.conditions[]? | select(.status == "True") | .type]}' "$work/ns.jsonl"
expect "first namespace event" "$(jq -sc '.[0] | [.type, .object.status.phase]' "$work/ns.jsonl")" '["MODIFIED","Terminating"]'
expect "namespace events while Terminating, before the last" \
  "$(jq -s '[.[:-1][] | select(.type == "MODIFIED" and .object.status.phase == "Terminating")] | length >= 2' "$work/ns.jsonl")" true
expect "last namespace event, and its finalizers" "$(jq -sc '.[-1] | [.type, .object.spec.finalizers // []]' "$work/ns.jsonl")" '["DELETED",[]]'
jq -c '[.type, .object.metadata.name, .object.status.phase, (if .object.metadata.deletionTimestamp then "deleting" else "" end)]' "$work/pods.jsonl"
expect "pods DELETED" "$(jq -s '[.[] | select(.type == "DELETED")] | length' "$work/pods.jsonl")" 3
expect "pods ADDED after the DELETE" "$(jq -s '[.[] | select(.type == "ADDED")] | length' "$work/pods.jsonl")" 0
expect "the pod that went last" "$(jq -sr '[.[] | select(.type == "DELETED")][-1].object.metadata.name' "$work/pods.jsonl")" audit

step "9. Namespace staging is untouched; kube-system cannot be deleted at all"
expect "staging's phase" "$(get /api/v1/namespaces/staging | jq -r .status.phase)" "Active"
expect "staging's ConfigMap settings" "$(get /api/v1/namespaces/staging/configmaps/settings | jq -r .data.color)" "green"
expect "staging's web pods Running" "$(running web staging)" 1
expect "DELETE kube-system" "$(code DELETE /api/v1/namespaces/kube-system)" 403
