#!/usr/bin/env bash
# Lesson 12: write your own controller (main.go, next to this script) for a
# custom resource of your own, PodsByNode (crd.json): its spec says which
# pods of its namespace to report, and the controller keeps its status true,
# through the status subresource, as pods come and go. Run it against a
# cluster: `make up` in another terminal, then
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

CRD=/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podsbynodes.lessons.minictl.dev
A=/api/v1/namespaces/team-a
D=/apis/apps/v1/namespaces/team-a/deployments
PBN=/apis/lessons.minictl.dev/v1/namespaces/team-a/podsbynodes
WEB=$PBN/web

# expected NS SELECTOR: what the status of a PodsByNode of NS with SELECTOR
# should say, computed from the pods the API server has (node → sorted
# names, and how many), as sorted JSON.
expected() {
  get "/api/v1/namespaces/$1/pods?labelSelector=$(jq -rn --arg s "$2" '$s | @uri')" | jq -Sc '[.items[]
      | select(.spec.nodeName != null and .metadata.deletionTimestamp == null
               and .status.phase != "Succeeded" and .status.phase != "Failed")]
    | {pods: length,
       nodes: (group_by(.spec.nodeName) | map({key: .[0].spec.nodeName, value: ([.[].metadata.name] | sort)}) | from_entries)}'
}
# actual NS NAME: what the status of PodsByNode NS/NAME says, in the same shape.
actual() {
  get "/apis/lessons.minictl.dev/v1/namespaces/$1/podsbynodes/$2" | jq -Sc '{pods: .status.pods, nodes: (.status.nodes // {})}'
}
# follows NS NAME: the status of NS/NAME says what the pods its selector picks say.
follows() {
  local selector
  selector=$(get "/apis/lessons.minictl.dev/v1/namespaces/$1/podsbynodes/$2" | jq -r '.spec.selector // ""')
  [ "$(actual "$1" "$2")" == "$(expected "$1" "$selector")" ]
}
# observed NS NAME: the status's observedGeneration and the object's generation.
observed() { get "/apis/lessons.minictl.dev/v1/namespaces/$1/podsbynodes/$2" | jq -r '"\(.status.observedGeneration) of \(.metadata.generation)"'; }
# listed NS NAME: how many pods the status lists, and which.
listed() { actual "$1" "$2" | jq -r '[.nodes[][]] | "\(length): \(sort | join(" "))"'; }
# web_pods: how many live web pods team-a has, and which.
web_pods() {
  get "$A/pods?labelSelector=app%3Dweb" |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | "\(length): \(sort | join(" "))"'
}
scale() { say PATCH $D/web/scale "{\"spec\": {\"replicas\": $1}}" application/merge-patch+json >/dev/null; }
pods_total() { get "$A/pods?labelSelector=app%3Dweb" | jq '.items | length'; }
updates() { grep -c "$1: status updated" "$work/controller.log" || true; }

# Start clean, so that the lesson can be run again on the same cluster.
for ns in team-a team-b; do
  if [ "$(code GET "/api/v1/namespaces/$ns")" == 200 ]; then
    delete "/api/v1/namespaces/$ns" >/dev/null
    wait_for "namespace $ns of an earlier run to go" equals 404 code GET "/api/v1/namespaces/$ns"
  fi
done
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}' >/dev/null

step "1. Define the custom resource: the CRD in crd.json (lesson 14 tells all about CRDs)"
if [ "$(code GET $CRD)" == 200 ]; then
  echo "  (the CRD of an earlier run is still there)"
else
  say POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$(cat "$here/crd.json")" | jq -c '{name: .metadata.name, kind: .spec.names.kind}'
fi
wait_for "the CRD to be Established" jqtest $CRD '.status.conditions // [] | any(.type == "Established" and .status == "True")'
expect "discovery lists podsbynodes" "$(get /apis/lessons.minictl.dev/v1 | jq -c '[.resources[] | select(.kind == "PodsByNode") | .name]')" '["podsbynodes","podsbynodes/status"]'

step "2. Build the controller and start it (it stops by itself after 5 minutes, or at the end of this script)"
printf '$ %s\n' "go run . --server $API    # here: go build, then run the binary"
(cd "$here" && go build -o "$work/pods-by-node" .)
background "$work/controller.log" "$work/pods-by-node" --server "$API" --duration 5m
controller=$!
wait_for "its caches synced" grep -q 'caches synced; starting workers' "$work/controller.log"

step "3. Ask for a report: a PodsByNode for the pods labelled app=web"
say POST $PBN '{"apiVersion": "lessons.minictl.dev/v1", "kind": "PodsByNode",
  "metadata": {"name": "web"}, "spec": {"selector": "app=web"}}' | jq -c '{spec, status}'
wait_for "the controller to write its status" jqtest $WEB '.status.observedGeneration == 1'
say GET $WEB | jq -c '{generation: .metadata.generation, status}'
expect "no such pod yet" "$(listed team-a web)" "0: "

step "4. A Deployment of 3: the status lists them, node by node"
say POST $D '{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}' >/dev/null
wait_for "3 web pods Running" equals 3 running web team-a
wait_for "the status follows the pods" follows team-a web
say GET $WEB | jq -c .status
expect "pods listed (3)" "$(listed team-a web)" "$(web_pods)"
expect "status.pods" "$(get $WEB | jq .status.pods)" 3

step "5. Scale up to 6, then down to 2: the status follows"
scale 6
wait_for "6 web pods Running" equals 6 running web team-a
wait_for "the status follows the pods" follows team-a web
expect "pods listed (6)" "$(listed team-a web)" "$(web_pods)"
scale 2
wait_for "2 web pods left" equals 2 pods_total
wait_for "the status follows the pods" follows team-a web
expect "pods listed (2)" "$(listed team-a web)" "$(web_pods)"
expect_match "the controller's log: status updates" "$(updates team-a/web)" '^([3-9]|[1-9][0-9]+)$'

step "6. Delete a pod: it leaves the list, its replacement joins"
victim=$(get "$A/pods?labelSelector=app%3Dweb" | jq -r '.items[0].metadata.name')
say DELETE "$A/pods/$victim" >/dev/null
wait_for "pod $victim gone" equals 404 code GET "$A/pods/$victim"
wait_for "2 web pods Running again" equals 2 running web team-a
wait_for "the status follows the pods" follows team-a web
expect "pods listed (2, without $victim)" "$(listed team-a web)" "$(web_pods)"

step "7. The status is the controller's: a status sent to the object is ignored, one sent to /status undone"
rv=$(get $WEB | jq -r .metadata.resourceVersion)
say PATCH $WEB '{"status": {"pods": 99}}' application/merge-patch+json | jq -c '{resourceVersion: .metadata.resourceVersion, pods: .status.pods}'
expect "nothing written: the resourceVersion stays" "$(get $WEB | jq -r .metadata.resourceVersion)" "$rv"
say PATCH $WEB/status '{"status": {"pods": 99, "nodes": {"node-9": ["ghost"]}}}' application/merge-patch+json | jq -c .status
wait_for "the edit undone" follows team-a web
expect "pods listed (2)" "$(listed team-a web)" "$(web_pods)"

step "8. Change the spec: the report follows, and observedGeneration says which spec it is about"
say PATCH $WEB '{"spec": {"selector": "app=web,tier=front"}}' application/merge-patch+json | jq -c '{generation: .metadata.generation, spec}'
wait_for "the status follows the new selector" follows team-a web
expect "no web pod is tier=front" "$(listed team-a web)" "0: "
expect "observedGeneration" "$(observed team-a web)" "2 of 2"
say PATCH $WEB '{"spec": {"selector": "app=web"}}' application/merge-patch+json >/dev/null
wait_for "the status follows the selector again" follows team-a web
expect "pods listed (2)" "$(listed team-a web)" "$(web_pods)"
expect "observedGeneration" "$(observed team-a web)" "3 of 3"

step "9. Another namespace, another PodsByNode: no selector, every pod"
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}' >/dev/null
say POST /api/v1/namespaces/team-b/pods '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "labels": {"app": "solo"}},
  "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}' >/dev/null
say POST /apis/lessons.minictl.dev/v1/namespaces/team-b/podsbynodes '{"apiVersion": "lessons.minictl.dev/v1", "kind": "PodsByNode",
  "metadata": {"name": "all"}, "spec": {}}' | jq -c .spec
wait_for "pod team-b/solo Running" equals 1 running solo team-b
wait_for "team-b/all follows its pods" follows team-b all
expect "team-b/all" "$(listed team-b all)" "1: solo"
expect "team-a/web (still its own 2 pods)" "$(listed team-a web)" "$(web_pods)"

step "10. Scale to 0: an empty report"
scale 0
wait_for "no web pods" equals 0 pods_total
wait_for "the status follows the pods" follows team-a web
expect "status" "$(get $WEB | jq -c '.status | {pods, nodes}')" '{"pods":0,"nodes":null}'
expect "team-b/all untouched" "$(listed team-b all)" "1: solo"

step "11. The Table (kubectl get podsbynodes) shows the CRD's printer columns"
echo "\$ curl -s '$API/apis/lessons.minictl.dev/v1/podsbynodes' -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io'"
curl -sS "$API/apis/lessons.minictl.dev/v1/podsbynodes" -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' >"$work/table"
jq -c '[.columnDefinitions[].name], (.rows[].cells)' "$work/table"
expect "the rows, without Age" "$(jq -c '[.rows[].cells[0:3]] | sort' "$work/table")" '[["all","",1],["web","app=web",0]]'

step "12. Stop the controller: SIGTERM, and it shuts its queue and workers down"
printf '$ kill -TERM %s\n' "$controller"
kill -TERM "$controller"
status=0
wait "$controller" || status=$?
expect "its exit status" "$status" 0
expect_match "its last words" "$(tail -1 "$work/controller.log")" 'msg=stopped'
echo "  its whole story:"
sed 's/^time=[^ ]* level=INFO msg=/  /' "$work/controller.log" | cut -c1-150
