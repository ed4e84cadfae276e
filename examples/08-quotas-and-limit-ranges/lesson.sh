#!/usr/bin/env bash
# Lesson 8: quotas and limit ranges. A namespace gets a ResourceQuota (at
# most 3 pods, 1 CPU of requests, 1Gi of memory limits) and a LimitRange
# (default requests and limits for containers, at most 1 CPU each). The
# resourcequota controller keeps status.used true; the API server's
# admission fills in defaults, refuses what is too big and what would go
# over the quota. A finished pod stops counting; a Deployment that wants
# more than the quota allows gets FailedCreate events.
. "$(dirname "$0")/../lib.sh"

NS=team-a
BASE=/api/v1/namespaces/$NS
PODS=$BASE/pods
QUOTA=$BASE/resourcequotas/compute
APPS=/apis/apps/v1/namespaces/$NS

used() { get "$QUOTA" | jq -c '.status.used'; }
used_is() { [ "$(used)" == "$1" ]; }
phase_is() { [ "$(get "$PODS/$1" | jq -r .status.phase)" == "$2" ]; }
# pod NAME [SPEC-EXTRA]: a pod of one container "app" without resources.
pod() {
  echo "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$1\"},\"spec\":{${2:+$2,}\"containers\":[{\"name\":\"app\",\"image\":\"nginx\"}]}}"
}
# create NAME BODY: POST a pod, print the curl and the answer's code and
# message; the answer is kept in $work/NAME.
create() {
  printf "\$ curl -s -X POST %s%s -H 'Content-Type: application/json' -d '%s'\n" "$API" "$PODS" "$2"
  curl -sS -o "$work/$1" -w '%{http_code}' -X POST -H 'Content-Type: application/json' "$API$PODS" --data-binary "$2" >"$work/$1.code"
  jq -c '{kind, code, message}' "$work/$1"
}

# Start clean, so that the lesson can be run again on the same cluster.
if [ "$(code GET "/api/v1/namespaces/$NS")" == 200 ]; then
  delete "/api/v1/namespaces/$NS" >/dev/null
  ns_gone() { [ "$(code GET "/api/v1/namespaces/$NS")" == 404 ]; }
  wait_for "namespace $NS of an earlier run to go" ns_gone
fi

# Follow the timeline of the namespace, as `minictl trace` in a second terminal would.
background "$work/trace" "$MINICTL" trace --server "$API" --namespace "$NS"
wait_for "minictl trace attached" trace_attached "$work/trace"

step "1. A namespace with a ResourceQuota"
post /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$NS\"}}" | jq -c '{kind, name: .metadata.name}'
body='{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"compute"},
  "spec":{"hard":{"pods":"3","requests.cpu":"1","limits.memory":"1Gi"}}}'
printf "\$ curl -s -X POST %s%s/resourcequotas -H 'Content-Type: application/json' -d '%s'\n" "$API" "$BASE" "$body"
post "$BASE/resourcequotas" "$body" | tee "$work/quota" | jq -c '{kind, name: .metadata.name, spec, status}'
expect "the API server stores it without a status" "$(jq -c .status "$work/quota")" '{}'
measured() { [ "$(get "$QUOTA" | jq -c '.status.used // empty')" != "" ]; }
wait_for "the resourcequota controller to measure it" measured
echo "\$ curl -s $API$QUOTA | jq .status"
get "$QUOTA" | jq -c .status
expect "status.hard mirrors spec.hard" "$(get "$QUOTA" | jq -c '.status.hard == .spec.hard')" true
expect "status.used: nothing used yet" "$(used)" '{"limits.memory":"0","pods":"0","requests.cpu":"0"}'

step "2. A pod that says nothing about resources is refused"
create bare "$(pod bare)"
expect "code" "$(cat "$work/bare.code")" 403
expect "message" "$(jq -r .message "$work/bare")" \
  'pods "bare" is forbidden: failed quota: compute: must specify limits.memory for: app; requests.cpu for: app'

step "3. A LimitRange: defaults for containers, and a maximum"
body='{"apiVersion":"v1","kind":"LimitRange","metadata":{"name":"defaults"},
  "spec":{"limits":[{"type":"Container",
    "default":{"cpu":"500m","memory":"256Mi"},
    "defaultRequest":{"cpu":"250m","memory":"128Mi"},
    "max":{"cpu":"1"}}]}}'
printf "\$ curl -s -X POST %s%s/limitranges -H 'Content-Type: application/json' -d '%s'\n" "$API" "$BASE" "$body"
post "$BASE/limitranges" "$body" | jq -c '{kind, name: .metadata.name}'
# Admission reads LimitRanges from the API server's watch cache, which
# follows etcd a moment behind.
wait_for "the LimitRange in the API server's cache" jqtest "$BASE/limitranges?resourceVersion=0" '.items | length == 1'

step "4. The same pod is now admitted, with the defaults"
create app-1 "$(pod app-1)"
expect "code" "$(cat "$work/app-1.code")" 201
expect "its container's resources" "$(jq -c '.spec.containers[0].resources' "$work/app-1")" \
  '{"limits":{"cpu":"500m","memory":"256Mi"},"requests":{"cpu":"250m","memory":"128Mi"}}'
expect "LimitRanger says what it set" "$(jq -r '.metadata.annotations["kubernetes.io/limit-ranger"]' "$work/app-1")" \
  'LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app'
expect "status.used moved at once (admission charged it)" "$(used)" '{"limits.memory":"256Mi","pods":"1","requests.cpu":"250m"}'

step "5. A pod over the LimitRange's maximum is refused"
create too-big "$(pod too-big | jq -c '.spec.containers[0].resources = {"limits":{"cpu":"2"}}')"
expect "code" "$(cat "$work/too-big.code")" 403
expect "message" "$(jq -r .message "$work/too-big")" 'pods "too-big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
expect "status.used did not move" "$(used)" '{"limits.memory":"256Mi","pods":"1","requests.cpu":"250m"}'

step "6. Two more pods fill the quota"
create app-2 "$(pod app-2)"
expect "code" "$(cat "$work/app-2.code")" 201
create task "$(pod task '"restartPolicy":"Never"')"
expect "code" "$(cat "$work/task.code")" 201
expect "status.used" "$(used)" '{"limits.memory":"768Mi","pods":"3","requests.cpu":"750m"}'
wait_for "task Running" phase_is task Running

step "7. The 4th pod is refused"
create app-3 "$(pod app-3)"
expect "code" "$(cat "$work/app-3.code")" 403
expect "reason" "$(jq -r .reason "$work/app-3")" Forbidden
expect "message" "$(jq -r .message "$work/app-3")" \
  'pods "app-3" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=3, limited: pods=3'
expect "and there is no such pod" "$(code GET "$PODS/app-3")" 404

step "8. A pod that finishes stops counting"
printf "\$ curl -s -X PATCH %s%s/task -H 'Content-Type: application/merge-patch+json' -d '%s'\n" "$API" "$PODS" '{"metadata":{"annotations":{"sim.minictl.io/exit-code":"0"}}}'
patch "$PODS/task" '{"metadata":{"annotations":{"sim.minictl.io/exit-code":"0"}}}' | jq -c '{name: .metadata.name, annotations: .metadata.annotations}'
wait_for "task Succeeded" phase_is task Succeeded
get "$PODS/task" | jq -c '{phase: .status.phase, state: .status.containerStatuses[0].state}'
wait_for "the controller to take it off status.used" used_is '{"limits.memory":"512Mi","pods":"2","requests.cpu":"500m"}'
expect "status.used" "$(used)" '{"limits.memory":"512Mi","pods":"2","requests.cpu":"500m"}'
expect "the pod is still there" "$(code GET "$PODS/task")" 200
create app-3 "$(pod app-3)"
expect "so app-3 now fits" "$(cat "$work/app-3.code")" 201
expect "status.used" "$(used)" '{"limits.memory":"768Mi","pods":"3","requests.cpu":"750m"}'

step "9. A deleted pod gives its share back"
printf '$ curl -s -X DELETE %s%s/app-3\n' "$API" "$PODS"
delete "$PODS/app-3" | jq -c '{name: .metadata.name, deletionTimestamp: .metadata.deletionTimestamp}'
wait_for "status.used to go down" used_is '{"limits.memory":"512Mi","pods":"2","requests.cpu":"500m"}'
expect "status.used" "$(used)" '{"limits.memory":"512Mi","pods":"2","requests.cpu":"500m"}'
echo "\$ $MINICTL trace --namespace $NS   (the resourcequota controller's lines)"
grep -E 'resourcequota +team-a/compute' "$work/trace"
expect_match "the controller's first measure" "$(grep -E 'resourcequota +team-a/compute' "$work/trace" | head -1)" \
  'team-a/compute +hard limits.memory none→1Gi, pods none→3, requests.cpu none→1; used limits.memory none→0 \(hard 1Gi\), pods none→0 \(hard 3\), requests.cpu none→0 \(hard 1\)$'
expect "its writes after that: the finished pod, the deleted pod (never the charges admission made)" \
  "$(grep -E 'resourcequota +team-a/compute +used ' "$work/trace" | sed -E 's/.*team-a\/compute +//' | sort -u)" \
  'used limits.memory 768Mi→512Mi (hard 1Gi), pods 3→2 (hard 3), requests.cpu 750m→500m (hard 1)'

step "10. A Deployment that wants more than the quota allows"
body='{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
  "spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},
    "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}'
printf "\$ curl -s -X POST %s%s/deployments -H 'Content-Type: application/json' -d '%s'\n" "$API" "$APPS" "$body"
post "$APPS/deployments" "$body" | jq -c '{kind, name: .metadata.name, replicas: .spec.replicas}'
failed() { [ "$(events '.reason == "FailedCreate"' "$NS" | jq length)" -ge 1 ]; }
wait_for "a FailedCreate event" failed
web_running() { [ "$(running web "$NS")" -eq "$1" ]; }
wait_for "1 web pod Running" web_running 1
rs=$(get "$APPS/replicasets?labelSelector=app%3Dweb" | jq -r '.items[0].metadata.name')
echo "\$ curl -s '$API$BASE/events?fieldSelector=reason%3DFailedCreate'"
get "$BASE/events?fieldSelector=reason%3DFailedCreate" | jq -r '.items[] | [.type, .involvedObject.name, .count, .message] | @tsv'
expect_match "the ReplicaSet could not create the rest" "$(events '.reason == "FailedCreate"' "$NS" | jq -r '.[0] | [.type, .involvedObject.kind, .involvedObject.name] | join(" ")')" "^Warning ReplicaSet $rs\$"
expect_match "and says why" "$(events '.reason == "FailedCreate"' "$NS" | jq -r '.[0].message')" \
  "^Error creating: pods \"$rs-[a-z0-9]{5}\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=3, limited: pods=3\$"
echo "\$ curl -s $API$APPS/replicasets/$rs | jq -c '.status | {replicas, conditions}'"
get "$APPS/replicasets/$rs" | jq -c '.status | {replicas, conditions}'
expect "its status counts 1 of 3" "$(get "$APPS/replicasets/$rs" | jq -c '[.spec.replicas, .status.replicas]')" '[3,1]'
expect "and carries the failure" "$(get "$APPS/replicasets/$rs" | jq -c '[.status.conditions[] | select(.type == "ReplicaFailure") | [.status, .reason]]')" '[["True","FailedCreate"]]'
retried() { [ "$(grep -cE "replicaset +$NS/$rs +sync failed, will retry" "$work/trace")" -ge 2 ]; }
wait_for "the ReplicaSet controller to retry" retried
grep -E "replicaset +$NS/$rs" "$work/trace" | head -6
combined() { [ "$(events '.reason == "FailedCreate" and (.message | startswith("(combined from similar events)"))' "$NS" | jq length)" -ge 1 ]; }
wait_for "the event recorder to combine the repeats" combined
events '.reason == "FailedCreate" and (.message | startswith("(combined"))' "$NS" | jq -r '.[] | [.type, .reason, .count, .message] | @tsv'
expect_match "into one Event, with the latest message" \
  "$(events '.reason == "FailedCreate" and (.message | startswith("(combined"))' "$NS" | jq -r '.[0].message')" \
  "^\(combined from similar events\): Error creating: pods \"$rs-[a-z0-9]{5}\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=3, limited: pods=3\$"

step "11. Make room: the ReplicaSet's next retry succeeds"
for p in app-1 app-2; do
  printf '$ curl -s -X DELETE %s%s/%s\n' "$API" "$PODS" "$p"
  delete "$PODS/$p" >/dev/null
done
wait_for "3 web pods Running" web_running 3
expect "status.used: the 3 web pods" "$(used)" '{"limits.memory":"768Mi","pods":"3","requests.cpu":"750m"}'
expect "the ReplicaSet has its 3" "$(get "$APPS/replicasets/$rs" | jq -c '[.spec.replicas, .status.replicas]')" '[3,3]'
expect "the finished task is still there, and still not counted" "$(get "$PODS/task" | jq -r .status.phase)" Succeeded

printf '\nLesson 8 done: the quota is checked at admission, measured by a controller; the LimitRange fills in what pods leave out. Namespace %s is still there to play with.\n' "$NS"
