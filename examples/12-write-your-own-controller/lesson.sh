#!/usr/bin/env bash
# Lesson 12: run your own controller (main.go, next to this script) and watch
# it keep a ConfigMap "pods-by-node" true in every namespace as pods come and
# go. Run it against a cluster: `make up` in another terminal, then
#   bash examples/12-write-your-own-controller/lesson.sh
. "$(dirname "$0")/../lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
# show_log STATUS: when the lesson failed, what the controller said.
show_log() {
  if [ "$1" -ne 0 ] && [ -f "$work/controller.log" ]; then
    echo "--- the controller's log:"
    cat "$work/controller.log"
  fi
}
at_exit 'show_log $status'

A=/api/v1/namespaces/team-a
D=/apis/apps/v1/namespaces/team-a/deployments
CM=$A/configmaps/pods-by-node

# expected NS: what the ConfigMap of NS should hold, computed from the pods
# the API server has (node → sorted, comma-separated names), as sorted JSON.
expected() {
  get "/api/v1/namespaces/$1/pods" | jq -Sc '[.items[]
      | select(.spec.nodeName != null and .metadata.deletionTimestamp == null
               and .status.phase != "Succeeded" and .status.phase != "Failed")]
    | group_by(.spec.nodeName) | map({key: .[0].spec.nodeName, value: ([.[].metadata.name] | sort | join(","))})
    | from_entries'
}
# actual NS: what the ConfigMap of NS holds ("absent" when there is none).
actual() {
  local answer
  answer=$(get "/api/v1/namespaces/$1/configmaps/pods-by-node")
  if [ "$(jq -r .code <<<"$answer")" == 404 ]; then echo absent; else jq -Sc '.data // {}' <<<"$answer"; fi
}
# follows NS: the ConfigMap of NS says what the pods say.
follows() { [ "$(actual "$1")" == "$(expected "$1")" ]; }
# listed NS: how many pods the ConfigMap of NS lists, and which.
listed() { actual "$1" | jq -r '[.[] | split(",")[]] | "\(length): \(sort | join(" "))"'; }
# web_pods: how many live web pods team-a has, and which.
web_pods() {
  get "$A/pods?labelSelector=app%3Dweb" |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | "\(length): \(sort | join(" "))"'
}
scale() { say PATCH $D/web/scale "{\"spec\": {\"replicas\": $1}}" application/merge-patch+json >/dev/null; }
pods_total() { get "$A/pods?labelSelector=app%3Dweb" | jq '.items | length'; }

# Start clean, so that the lesson can be run again on the same cluster.
for ns in team-a team-b; do
  if [ "$(code GET "/api/v1/namespaces/$ns")" == 200 ]; then
    delete "/api/v1/namespaces/$ns" >/dev/null
    wait_for "namespace $ns of an earlier run to go" equals 404 code GET "/api/v1/namespaces/$ns"
  fi
done
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}' >/dev/null

step "1. Build the controller and start it (it stops by itself after 5 minutes, or at the end of this script)"
printf '$ %s\n' "go run . --server $API    # here: go build, then run the binary"
(cd "$here" && go build -o "$work/pods-by-node" .)
background "$work/controller.log" "$work/pods-by-node" --server "$API" --duration 5m
controller=$!
wait_for "its caches synced" grep -q 'caches synced; starting workers' "$work/controller.log"
expect "ConfigMap team-a/pods-by-node before any pod" "$(actual team-a)" absent

step "2. A Deployment of 3: the ConfigMap appears, one key per node"
say POST $D '{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}' >/dev/null
wait_for "3 web pods Running" equals 3 running web team-a
wait_for "the ConfigMap follows the pods" follows team-a
say GET $CM | jq -c '{labels: .metadata.labels, data}'
expect "pods listed (3)" "$(listed team-a)" "$(web_pods)"
expect "label app.kubernetes.io/managed-by" "$(get $CM | jq -r '.metadata.labels["app.kubernetes.io/managed-by"]')" pods-by-node
expect "the controller's log: creations" "$(grep -c 'team-a: ConfigMap created' "$work/controller.log")" 1

step "3. Scale up to 6, then down to 2: the ConfigMap follows"
scale 6
wait_for "6 web pods Running" equals 6 running web team-a
wait_for "the ConfigMap follows the pods" follows team-a
expect "pods listed (6)" "$(listed team-a)" "$(web_pods)"
scale 2
wait_for "2 web pods left" equals 2 pods_total
wait_for "the ConfigMap follows the pods" follows team-a
expect "pods listed (2)" "$(listed team-a)" "$(web_pods)"
expect_match "the controller's log: updates" "$(grep -c 'team-a: ConfigMap updated' "$work/controller.log")" '^([2-9]|[1-9][0-9]+)$'

step "4. Delete a pod: it leaves the list, its replacement joins"
victim=$(get "$A/pods?labelSelector=app%3Dweb" | jq -r '.items[0].metadata.name')
say DELETE "$A/pods/$victim" >/dev/null
wait_for "pod $victim gone" equals 404 code GET "$A/pods/$victim"
wait_for "2 web pods Running again" equals 2 running web team-a
wait_for "the ConfigMap follows the pods" follows team-a
expect "pods listed (2, without $victim)" "$(listed team-a)" "$(web_pods)"

step "5. Someone edits the ConfigMap, then deletes it: the controller puts it back"
say PATCH $CM '{"data": {"node-9": "ghost"}}' application/merge-patch+json >/dev/null
wait_for "the edit undone" follows team-a
say DELETE $CM >/dev/null
wait_for "the ConfigMap back" follows team-a
expect "pods listed (2)" "$(listed team-a)" "$(web_pods)"
expect "the controller's log: creations" "$(grep -c 'team-a: ConfigMap created' "$work/controller.log")" 2

step "6. Another namespace gets its own ConfigMap"
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}' >/dev/null
say POST /api/v1/namespaces/team-b/pods '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "labels": {"app": "solo"}},
  "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}' >/dev/null
wait_for "pod team-b/solo Running" equals 1 running solo team-b
wait_for "ConfigMap team-b/pods-by-node follows its pods" follows team-b
expect "team-b's ConfigMap" "$(listed team-b)" "1: solo"
expect "team-a's ConfigMap (still its own 2 pods)" "$(listed team-a)" "$(web_pods)"

step "7. Scale to 0: no pods, no ConfigMap"
scale 0
wait_for "no web pods" equals 0 pods_total
wait_for "ConfigMap team-a/pods-by-node deleted" equals absent actual team-a
expect "the controller's log: deletions" "$(grep -c 'team-a: ConfigMap deleted' "$work/controller.log")" 1
expect "team-b's ConfigMap untouched" "$(listed team-b)" "1: solo"

step "8. A ConfigMap of that name that is not ours is left alone"
say POST $A/configmaps '{"apiVersion": "v1", "kind": "ConfigMap",
  "metadata": {"name": "pods-by-node"}, "data": {"note": "mine"}}' >/dev/null
scale 1
wait_for "1 web pod Running" equals 1 running web team-a
sleep 1 # give the controller every chance to (wrongly) overwrite it
expect "the ConfigMap's data" "$(actual team-a)" '{"note":"mine"}'

step "9. Stop the controller: SIGTERM, and it shuts its queue and workers down"
printf '$ kill -TERM %s\n' "$controller"
kill -TERM "$controller"
status=0
wait "$controller" || status=$?
expect "its exit status" "$status" 0
expect_match "its last words" "$(tail -1 "$work/controller.log")" 'msg=stopped'
echo "  its whole story:"
sed 's/^time=[^ ]* level=INFO msg=/  /' "$work/controller.log" | cut -c1-150
