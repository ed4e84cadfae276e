#!/usr/bin/env bash
# Lesson 5: scaling and rolling updates. Scale a Deployment through its
# scale subresource and with a merge patch of spec.replicas; then change
# its image and watch the old and the new ReplicaSet trade pods, never more
# than maxSurge above spec.replicas and never more than maxUnavailable
# below it.
. "$(dirname "$0")/../lib.sh"

command -v "$MINICTL" >/dev/null || {
  echo "this lesson runs minictl trace: set MINICTL to a minictl binary (make build; MINICTL=bin/minictl)" >&2
  exit 1
}

APPS=/apis/apps/v1/namespaces/default
D=$APPS/deployments/nginx
PODS=/api/v1/namespaces/default/pods
SEL='labelSelector=app%3Dnginx'

count_is() { [ "$(running nginx)" -eq "$1" ]; }
# send METHOD PATH BODY CONTENT-TYPE: print the curl line and run it.
send() {
  printf "\$ curl -s -X %s %s%s -H 'Content-Type: %s' -d '%s'\n" "$1" "$API" "$2" "$4" "$3"
  curl -sS -X "$1" -H "Content-Type: $4" "$API$2" --data-binary "$3" >"$work/out"
}
rs_of_revision() {
  get "$APPS/replicasets?$SEL" | jq -r --arg r "$1" \
    '.items[] | select(.metadata.annotations["deployment.kubernetes.io/revision"] == $r) | .metadata.name'
}
# rolled_out: the Deployment's controller has seen its newest spec and
# every replica is updated and available, with no old pod left.
rolled_out() {
  get "$D" | jq -e '.status.observedGeneration == .metadata.generation
    and .status.updatedReplicas == .spec.replicas and .status.availableReplicas == .spec.replicas
    and .status.replicas == .spec.replicas' >/dev/null
}

# Start clean, so that the lesson can be run again on the same cluster.
if [ "$(code GET "$D")" == 200 ]; then
  delete "$D" >/dev/null
  no_nginx() { [ "$(get "$PODS?$SEL" | jq '.items | length')$(get "$APPS/replicasets?$SEL" | jq '.items | length')" == 00 ]; }
  wait_for "the ReplicaSets and pods of an earlier run to go" no_nginx
fi

background "$work/trace" "$MINICTL" trace --server "$API" --object default/nginx
wait_for "minictl trace attached" trace_attached "$work/trace"

step "1. A Deployment of 2 nginx pods; each new pod must be ready 2s to count as available"
send POST "$APPS/deployments" '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx"},"spec":{"replicas":2,"minReadySeconds":2,"selector":{"matchLabels":{"app":"nginx"}},"template":{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}' application/json
jq -c '{replicas: .spec.replicas, strategy: .spec.strategy}' "$work/out"
expect "the API filled in the default strategy" "$(jq -c .spec.strategy "$work/out")" '{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}}'
expect "and keeps up to 10 old ReplicaSets, for rollbacks" "$(jq -r .spec.revisionHistoryLimit "$work/out")" 10
wait_for "2 nginx pods Running" count_is 2
wait_for "the rollout to complete" rolled_out
rs1=$(rs_of_revision 1)
expect_match "its ReplicaSet, revision 1" "$rs1" '^nginx-[a-z0-9]+$'

step "2. Scale up through the scale subresource (what kubectl scale and autoscalers use)"
echo "\$ curl -s $API$D/scale"
get "$D/scale" | tee "$work/scale" | jq -c .
expect "the scale subresource is an autoscaling/v1 Scale" "$(jq -r '.apiVersion + " " + .kind' "$work/scale")" "autoscaling/v1 Scale"
expect "spec.replicas" "$(jq -r .spec.replicas "$work/scale")" 2
expect "status.selector, as a label selector string" "$(jq -r .status.selector "$work/scale")" "app=nginx"
send PATCH "$D/scale" '{"spec":{"replicas":5}}' application/merge-patch+json
expect "the Scale now wants" "$(jq -r .spec.replicas "$work/out")" 5
expect "and so does the Deployment" "$(get "$D" | jq -r .spec.replicas)" 5
wait_for "5 nginx pods Running" count_is 5
expect "the same ReplicaSet grew: no new revision for a scale" "$(get "$APPS/replicasets/$rs1" | jq -r .spec.replicas)" 5

step "3. Scale down with a merge patch of spec.replicas"
send PATCH "$D" '{"spec":{"replicas":4}}' application/merge-patch+json
expect "the Deployment wants" "$(jq -r .spec.replicas "$work/out")" 4
wait_for "4 nginx pods Running" count_is 4
wait_for "the rollout to complete" rolled_out
expect "still one ReplicaSet" "$(get "$APPS/replicasets?$SEL" | jq -c '[.items[].metadata.name]')" "[\"$rs1\"]"

step "4. Change the image: a new ReplicaSet, and a rolling update"
echo "With 4 replicas, maxSurge 25% rounds up to 1 and maxUnavailable 25% rounds down to 1:"
echo "at most 5 pods, and at least 3 ready, at every moment."
send PATCH "$D" '{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}' application/merge-patch+json
expect "a template change moves the generation" "$(jq -r .metadata.generation "$work/out")" "$(($(jq -r .status.observedGeneration "$work/out") + 1))"
printf '\n  %-8s %-8s %-10s %s\n' "old rs" "new rs" "live pods" "ready pods"
samples=0 both=0 max_live=0 min_ready=99 last=
deadline=$((SECONDS + 90))
while :; do
  get "$APPS/replicasets?$SEL" >"$work/rs"
  get "$PODS?$SEL" >"$work/pods"
  old=$(jq --arg n "$rs1" '[.items[] | select(.metadata.name == $n) | .spec.replicas] | add // 0' "$work/rs")
  new=$(jq --arg n "$rs1" '[.items[] | select(.metadata.name != $n) | .spec.replicas] | add // 0' "$work/rs")
  live=$(jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length' "$work/pods")
  ready=$(jq '[.items[] | select(.metadata.deletionTimestamp == null)
    | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length' "$work/pods")
  samples=$((samples + 1))
  row=$(printf '  %-8s %-8s %-10s %s' "$old" "$new" "$live" "$ready")
  [ "$row" != "$last" ] && echo "$row" && last=$row
  [ $((old + new)) -le 5 ] || expect "replicas wanted by both ReplicaSets (at most 4 + maxSurge)" "$((old + new))" "≤ 5"
  [ "$live" -le 5 ] || expect "live pods (at most 4 + maxSurge)" "$live" "≤ 5"
  [ "$ready" -ge 3 ] || expect "ready pods (at least 4 - maxUnavailable)" "$ready" "≥ 3"
  [ "$old" -gt 0 ] && [ "$new" -gt 0 ] && both=$((both + 1))
  max_live=$((live > max_live ? live : max_live))
  min_ready=$((ready < min_ready ? ready : min_ready))
  if [ "$old" -eq 0 ] && rolled_out; then break; fi
  if [ $SECONDS -ge $deadline ]; then echo "  ✘ the rollout did not finish in 90s" >&2; exit 1; fi
  sleep 0.1
done
echo "$samples samples"
expect_match "the most live pods in any sample (at most 5)" "$max_live" '^[1-5]$'
expect_match "the fewest ready pods in any sample (at least 3)" "$min_ready" '^([3-9]|[1-9][0-9]+)$'
expect "samples caught both ReplicaSets holding pods at once" "$((both > 0))" 1

step "5. The end: the old ReplicaSet is kept at 0 (for a rollback), the new one has all 4"
echo "\$ curl -s '$API$APPS/replicasets?$SEL'"
get "$APPS/replicasets?$SEL" >"$work/rs"
jq -r '.items[] | [.metadata.name, .metadata.annotations["deployment.kubernetes.io/revision"], .spec.replicas, .spec.template.spec.containers[0].image] | @tsv' "$work/rs"
rs2=$(rs_of_revision 2)
expect_match "the new ReplicaSet, revision 2" "$rs2" '^nginx-[a-z0-9]+$'
expect "the old one, revision 1, wants" "$(jq --arg n "$rs1" '.items[] | select(.metadata.name == $n) | .spec.replicas' "$work/rs")" 0
expect "the new one wants" "$(jq --arg n "$rs2" '.items[] | select(.metadata.name == $n) | .spec.replicas' "$work/rs")" 4
expect "the new one runs the new image" "$(jq -r --arg n "$rs2" '.items[] | select(.metadata.name == $n) | .spec.template.spec.containers[0].image' "$work/rs")" nginx:1.28
expect "the Deployment is at revision" "$(get "$D" | jq -r '.metadata.annotations["deployment.kubernetes.io/revision"]')" 2
wait_for "4 nginx pods Running" count_is 4
expect "every live pod is the new ReplicaSet's" "$(get "$PODS?$SEL" | jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.ownerReferences[0].name] | unique')" "[\"$rs2\"]"

step "6. The timeline of the whole lesson (minictl trace --object default/nginx)"
cat "$work/trace"
has() { grep -q -E "$1" "$work/trace"; }
expect "scaling up, the Deployment controller resizes its one ReplicaSet" "$(has "deployment +default/nginx +want 5, new rs $rs1 \\([0-9]+/[0-9]+\\) → scale $rs1 to 5\$" && echo seen)" seen
expect "scaling up, the ReplicaSet controller" "$(has "replicaset +default/$rs1 +want 5, have 2 → create 3\$" && echo seen)" seen
expect "scaling down" "$(has "replicaset +default/$rs1 +want 4, have 5 → delete 1\$" && echo seen)" seen
expect "the new ReplicaSet is created with room for maxSurge" "$(has "deployment +default/nginx +new template → create rs $rs2 \\(revision 2\\), scaled to 1\$" && echo seen)" seen
expect "old scaled down while new scales up" "$(has "deployment +default/nginx +new rs $rs2 .* → scale old $rs1 to 0\$" && echo seen)" seen

printf '\nLesson 5 done: replicas is just a number to reconcile; a template change is a new ReplicaSet, rolled in within maxSurge and maxUnavailable.\n'
