#!/usr/bin/env bash
# Lesson 11: two controller managers, one Lease, one leader. The cluster runs
# without a controller manager of its own (see the file "flags"):
#   minictl up --controller-manager=false        (in another terminal)
# and this script starts its own with $MINICTL (default: minictl on your
# PATH; `make build` and MINICTL=bin/minictl), and stops them at the end:
#   MINICTL=bin/minictl bash examples/11-leader-election/lesson.sh
. "$(dirname "$0")/../lib.sh"

declare -A pid # controller manager name → process id

LEASE=/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager
RS=/apis/apps/v1/namespaces/default/replicasets

# start_cm NAME: start a controller manager in the background, its output in $work/NAME.log.
start_cm() {
  printf '$ %s\n' "minictl controller-manager --fast --server $API --address 127.0.0.1:0 &    # $1"
  background "$work/$1.log" "$MINICTL" controller-manager --fast --server "$API" --address 127.0.0.1:0
  pid[$1]=$!
  wait_for "controller manager $1 (pid ${pid[$1]}) started" grep -q '^controller manager ' "$work/$1.log"
}
# identity NAME / health NAME: its identity in the Lease, and where it serves /healthz and /metrics,
# from the first line it prints: "controller manager <identity>: /healthz and /metrics on <url>".
identity() { sed -n 's/^controller manager \([^ ]*\): .*/\1/p' "$work/$1.log" | head -1; }
health() { sed -n 's/^controller manager .* on \(http[^ ]*\).*/\1/p' "$work/$1.log" | head -1; }
# is_leader NAME: its leader_election_master_status metric (1 leads, 0 waits).
is_leader() { curl -s "$(health "$1")/metrics" | sed -n 's/^leader_election_master_status{[^}]*} //p'; }
holder() { get $LEASE | jq -r '.spec.holderIdentity // ""'; }
transitions() { get $LEASE | jq -r .spec.leaseTransitions; }
replicaset() {
  say POST $RS '{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "'"$1"'"},
    "spec": {"replicas": '"$2"', "selector": {"matchLabels": {"app": "'"$1"'"}},
      "template": {"metadata": {"labels": {"app": "'"$1"'"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}' >/dev/null
}
# pods APP: every pod labelled app=APP, whatever its state.
pods() { get "/api/v1/namespaces/default/pods?labelSelector=app%3D$1" | jq '.items | length'; }
# created APP: how many pods the ReplicaSet controller says it created for
# ReplicaSet APP (its SuccessfulCreate Events about this very ReplicaSet).
created() {
  local uid
  uid=$(get "$RS/$1" | jq -r .metadata.uid)
  get "/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid%3D$uid,reason%3DSuccessfulCreate" |
    jq '[.items[].count // 1] | add // 0'
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# Start clean, so that the lesson can be run again on the same cluster. But
# only on a cluster whose controller manager, if any, is not running.
if [ "$(code GET $LEASE)" == 200 ]; then
  renewed=$(get $LEASE | jq -r '.spec.renewTime // ""')
  sleep 2
  if [ -n "$(holder)" ] && [ "$(get $LEASE | jq -r '.spec.renewTime // ""')" != "$renewed" ]; then
    echo "A controller manager is running ($(holder)): this lesson needs a cluster started with" >&2
    echo "  minictl up --controller-manager=false" >&2
    exit 1
  fi
  delete $LEASE >/dev/null # left by an earlier run
fi
for app in before after third; do
  [ "$(code GET "$RS/$app")" != 200 ] || delete "$RS/$app" >/dev/null
  for pod in $(get "/api/v1/namespaces/default/pods?labelSelector=app%3D$app" | jq -r '.items[].metadata.name'); do
    delete "/api/v1/namespaces/default/pods/$pod" >/dev/null # nobody runs the garbage collector
  done
done
no_pods() { [ "$(get "/api/v1/namespaces/default/pods?labelSelector=app%20in%20(before,after,third)" | jq '.items | length')" == 0 ]; }
wait_for "no pods left from an earlier run" no_pods

step "1. No controller manager: the API server stores what we ask, nobody acts on it"
expect "Lease kube-system/kube-controller-manager" "$(code GET $LEASE)" 404
replicaset before 2
sleep 2
expect "pods of ReplicaSet before, 2s later" "$(pods before)" 0

step "2. Record the Lease, then start two controller managers, a and b"
background "$work/lease.jsonl" curl -sN "$API/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=true&fieldSelector=metadata.name%3Dkube-controller-manager"
watch=$!
start_cm a
wait_for "a holds the Lease" equals "$(identity a)" holder
start_cm b
wait_for "b sees a lead and waits" grep -q 'another controller manager leads; waiting' "$work/b.log"
wait_for "ReplicaSet before gets its 2 pods (a's replicaset controller)" equals 2 running before

step "3. Read the Lease"
lease=$(say GET $LEASE)
echo "$lease" | jq .spec
expect "holderIdentity (a)" "$(jq -r .spec.holderIdentity <<<"$lease")" "$(identity a)"
expect "leaseTransitions" "$(jq -r .spec.leaseTransitions <<<"$lease")" 0
expect "leaseDurationSeconds (--fast)" "$(jq -r .spec.leaseDurationSeconds <<<"$lease")" 3
renewed=$(jq -r .spec.renewTime <<<"$lease")
sleep 1
expect "renewTime a second later moved on" "$(get $LEASE | jq --arg t "$renewed" '.spec.renewTime > $t')" true
expect "a: leader_election_master_status" "$(is_leader a)" 1
expect "b: leader_election_master_status" "$(is_leader b)" 0
expect "b: /healthz (waiting is healthy)" "$(curl -s "$(health b)/healthz")" ok

step "4. Kill the leader (SIGKILL: it cannot say goodbye); b takes over once the Lease expires"
killed=$(now)
printf '$ kill -KILL %s    # a\n' "${pid[a]}"
kill -KILL "${pid[a]}"
wait "${pid[a]}" 2>/dev/null || true # (quietly: bash would report the kill)
wait_for "b holds the Lease" equals "$(identity b)" holder
took=$(elapsed "$killed" "$(now)")
expect_match "seconds from the kill to the takeover (at least ~leaseDurationSeconds - a renew period)" "$took" '^([2-9]|[1-9][0-9])\.'
expect "leaseTransitions" "$(transitions)" 1
expect_match "b's log" "$(grep -o 'became leader; starting controllers' "$work/b.log")" 'became leader'
wait_for "b: leader_election_master_status 1" equals 1 is_leader b

step "5. b carries on from the cluster's state: nothing is created twice"
say PATCH $RS/before/scale '{"spec": {"replicas": 4}}' application/merge-patch+json >/dev/null
replicaset after 2
wait_for "ReplicaSet before: 4 pods Running" equals 4 running before
wait_for "ReplicaSet after: 2 pods Running" equals 2 running after
sleep 2 # a second controller acting too would show up now
expect "pods of before" "$(pods before)" 4
expect_match "a's log: the first 2" "$(grep -o 'default/before *want 2, have 0 → create 2' "$work/a.log" | head -1)" 'create 2'
expect_match "b's log: the other 2" "$(grep -o 'default/before *want 4, have 2 → create 2' "$work/b.log" | head -1)" 'create 2'
expect "b's log: creates before it led" \
  "$(sed '/became leader/q' "$work/b.log" | grep -c ' → create' || true)" 0
expect "pods of after" "$(pods after)" 2
wait_for "Events SuccessfulCreate for before: 4" equals 4 created before
expect "Events SuccessfulCreate for after" "$(created after)" 2

step "6. A graceful handover: start c, stop b with SIGTERM; b releases the Lease"
start_cm c
wait_for "c waits" grep -q 'another controller manager leads; waiting' "$work/c.log"
printf '$ kill -TERM %s    # b\n' "${pid[b]}"
kill -TERM "${pid[b]}"
wait "${pid[b]}" || true
expect_match "b's log" "$(grep -o 'released the lease' "$work/b.log")" 'released the lease'
wait_for "c holds the Lease" equals "$(identity c)" holder
expect "leaseTransitions" "$(transitions)" 2
replicaset third 1
wait_for "c's controllers work: ReplicaSet third gets its pod" equals 1 running third

step "7. The Lease's story, from the recorded watch"
kill "$watch" 2>/dev/null || true
jq -r '[.type, (.object.spec.holderIdentity // "" | if . == "" then "(nobody)" else . end),
  .object.spec.leaseTransitions, .object.spec.leaseDurationSeconds] | @tsv' "$work/lease.jsonl" | uniq -c | cut -c1-120
holders=$(jq -r '.object.spec.holderIdentity // ""' "$work/lease.jsonl" | uniq | sed 's/^$/(nobody)/' | paste -sd' ')
expect "holders, in order" "$holders" "$(identity a) $(identity b) (nobody) $(identity c)"
expect "the released record's leaseDurationSeconds" \
  "$(jq -s '[.[] | select((.object.spec.holderIdentity // "") == "")][0].object.spec.leaseDurationSeconds' "$work/lease.jsonl")" 1
# seconds: a MicroTime ("2026-11-22T15:11:26.928965Z") as seconds since 1970.
handover=$(jq -s --arg c "$(identity c)" '
  def seconds: (.[0:19] + "Z" | fromdate) + ((.[19:-1] | select(. != "") | "0" + . | tonumber) // 0);
  ([.[] | select((.object.spec.holderIdentity // "") == "")][0].object.spec.renewTime | seconds) as $released
  | ([.[] | select(.object.spec.holderIdentity == $c)][0].object.spec.acquireTime | seconds) as $taken
  | $taken - $released | . * 10 | round / 10' "$work/lease.jsonl")
expect_match "seconds from b's release to c's acquireTime: less than the old lease's 3" "$handover" '^[0-2](\.[0-9])?$'

step "8. The same mechanism elsewhere: each node's heartbeat is a Lease"
expect "Lease kube-node-lease/node-1: holderIdentity" \
  "$(get /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1 | jq -r .spec.holderIdentity)" node-1
node_renewed() { get /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1 | jq -r .spec.renewTime; }
first=$(node_renewed)
moved() { [ "$(node_renewed)" != "$first" ]; }
wait_for "its renewTime to move on (node-1's kubelet renews it)" moved
