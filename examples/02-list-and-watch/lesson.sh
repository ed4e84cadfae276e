#!/usr/bin/env bash
# Lesson 2: list and watch. A list gives the state and the resourceVersion
# it was read at; a watch from that resourceVersion streams every change
# after it, one JSON event per line of a chunked response. Resuming from
# the last resourceVersion seen gets exactly the events missed; a
# resourceVersion whose history etcd has compacted away gets 410 Gone, and
# the client lists again.
#
# Steps 9 and 10 (the README's part 5) need a cluster that compacts often. By hand:
#   go run ./cmd/minictl up --etcd-compaction-interval=5s
# (the tests read the same flag from the file "flags" next to this script).
. "$(dirname "$0")/../lib.sh"

CM=/api/v1/namespaces/default/configmaps
SEL='labelSelector=lesson%3D02'
ALL='labelSelector=lesson%20in%20(02,elsewhere)' # what this lesson creates
pids=()

# lines FILE: how many events a watch wrote to FILE so far.
lines() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }
has_lines() { [ "$(lines "$1")" -ge "$2" ]; }
# event_lines FILE: one compact line per event: type, name, resourceVersion.
event_lines() { jq -c '[.type, .object.metadata.name, .object.metadata.resourceVersion]' "$1"; }

# Start clean, so that the lesson can be run again on the same cluster.
curl -sS -o /dev/null -X DELETE "$API$CM?$ALL"

step "1. List: the current state, and the resourceVersion it was read at"
echo "\$ curl -s '$API$CM?$SEL'"
get "$CM?$SEL" >"$work/list"
jq -c '{kind, resourceVersion: .metadata.resourceVersion, items: [.items[].metadata.name]}' "$work/list"
list_rv=$(jq -r .metadata.resourceVersion "$work/list")
expect "nothing labelled lesson=02 yet" "$(jq '.items | length' "$work/list")" 0

metric() { get /metrics | awk -v m="$1{resource=\"configmaps\"}" '$1 == m {print $2}'; }
others=$(metric apiserver_registered_watchers) # the cluster's own watchers of configmaps

step "2. Watch from the list's resourceVersion, in the background, into a file"
echo "\$ curl -sN '$API$CM?watch=true&$SEL&resourceVersion=$list_rv' > watch.json &"
background "$work/watch" curl -sSN -D "$work/headers" "$API$CM?watch=true&$SEL&resourceVersion=$list_rv"
pids+=($!)
# and, to see the other side of a selector, a second watch of lesson=elsewhere
background "$work/elsewhere" curl -sSN "$API$CM?watch=true&labelSelector=lesson%3Delsewhere&resourceVersion=$list_rv"
pids+=($!)
wait_for "the watch to answer" test -s "$work/headers"
tr -d '\r' <"$work/headers" | grep -i -E '^(HTTP|content-type|transfer-encoding)'
expect "the watch answers" "$(head -1 "$work/headers" | tr -d '\r' | awk '{print $2}')" 200
expect "with JSON" "$(tr -d '\r' <"$work/headers" | grep -i '^content-type' | awk '{print $2}')" application/json
expect "as a chunked stream" "$(tr -d '\r' <"$work/headers" | grep -i '^transfer-encoding' | awk '{print tolower($2)}')" chunked

step "3. Write while the watch is open: create, patch, leave the selector, delete"
write POST "$CM" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"colour","labels":{"lesson":"02"}},"data":{"v":"red"}}'
rv_create=$rv
write PATCH "$CM/colour" '{"data":{"v":"green"}}' application/merge-patch+json
rv_patch=$rv
write POST "$CM" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shape","labels":{"lesson":"02"}},"data":{"v":"round"}}'
rv_shape=$rv
write PATCH "$CM/shape" '{"metadata":{"labels":{"lesson":"elsewhere"}}}' application/merge-patch+json
rv_leave=$rv
printf '$ curl -s -X DELETE %s%s/colour\n' "$API" "$CM"
delete "$CM/colour" | jq -c '{kind, status}'
wait_for "5 events in the file" has_lines "$work/watch" 5

step "4. Read the file: one JSON event per line, in resourceVersion order"
echo "\$ jq -c '[.type, .object.metadata.name, .object.metadata.resourceVersion]' watch.json"
event_lines "$work/watch" | tee "$work/events"
expect "the event types" "$(jq -s -c 'map(.type)' "$work/watch")" '["ADDED","MODIFIED","ADDED","DELETED","DELETED"]'
expect "the objects" "$(jq -s -c 'map(.object.metadata.name)' "$work/watch")" '["colour","colour","shape","shape","colour"]'
expect "ADDED carries the create's resourceVersion" "$(jq -s -r '.[0].object.metadata.resourceVersion' "$work/watch")" "$rv_create"
expect "MODIFIED carries the patch's" "$(jq -s -r '.[1].object.metadata.resourceVersion' "$work/watch")" "$rv_patch"
expect "MODIFIED carries the new state" "$(jq -s -r '.[1].object.data.v' "$work/watch")" green
expect "shape left the selector: DELETED for this watch, at the patch's resourceVersion" "$(jq -s -r '.[3].object.metadata.resourceVersion' "$work/watch")" "$rv_leave"
expect "yet shape still exists" "$(code GET "$CM/shape")" 200
wait_for "the lesson=elsewhere watch to see shape" has_lines "$work/elsewhere" 1
expect "and a watch of lesson=elsewhere got it as ADDED, at the same resourceVersion" \
  "$(jq -s -c 'map([.type, .object.metadata.name, .object.metadata.resourceVersion])' "$work/elsewhere")" "[[\"ADDED\",\"shape\",\"$rv_leave\"]]"
expect "the resourceVersions only grow" "$(jq -s '[.[].object.metadata.resourceVersion | tonumber] | . == sort and (unique | length) == length' "$work/watch")" true
expect "DELETED carries the last state of the object" "$(jq -s -r '.[4].object.data.v' "$work/watch")" green
last=$(jq -s -r '.[-1].object.metadata.resourceVersion' "$work/watch")
kill "${pids[0]}" "${pids[1]}" 2>/dev/null || true
echo "The connection drops. The last resourceVersion this client saw: $last"

step "5. While nobody watches, two more writes happen"
write POST "$CM" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"missed","labels":{"lesson":"02"}},"data":{"v":"1"}}'
m1=$rv
write PATCH "$CM/missed" '{"data":{"v":"2"}}' application/merge-patch+json
m2=$rv

step "6. Resume from the last resourceVersion seen: exactly the missed events"
echo "\$ curl -sN '$API$CM?watch=true&$SEL&resourceVersion=$last&timeoutSeconds=2'"
curl -sSN "$API$CM?watch=true&$SEL&resourceVersion=$last&timeoutSeconds=2" >"$work/resumed"
event_lines "$work/resumed"
expect "the missed events, and nothing else" "$(jq -s -c 'map([.type, .object.metadata.name, .object.metadata.resourceVersion])' "$work/resumed")" \
  "[[\"ADDED\",\"missed\",\"$m1\"],[\"MODIFIED\",\"missed\",\"$m2\"]]"

step "7. A watch without a resourceVersion starts with the current state, as ADDED events"
echo "\$ curl -sN '$API$CM?watch=true&$SEL&timeoutSeconds=1'"
curl -sSN "$API$CM?watch=true&$SEL&timeoutSeconds=1" >"$work/fresh"
event_lines "$work/fresh"
expect "one synthetic ADDED per object that exists now" "$(jq -s -c 'map([.type, .object.metadata.name])' "$work/fresh")" '[["ADDED","missed"]]'

step "8. Three watchers, one etcd watch: the watch cache fans out"
for i in 1 2 3; do
  background /dev/null curl -sSN "$API$CM?watch=true&$SEL&resourceVersion=$m2"
  pids+=($!)
done
watchers_at_least() { [ "$(metric apiserver_registered_watchers)" -ge "$1" ]; }
wait_for "our 3 watches (and the cluster's own $others) to be registered" watchers_at_least $((others + 3))
echo "\$ curl -s $API/metrics | grep 'configmaps' | grep -E 'registered_watchers|etcd_watches'"
get /metrics | grep -E '^(apiserver_registered_watchers|minictl_etcd_watches)\{resource="configmaps"\}'
expect "etcd watches for configmaps" "$(metric minictl_etcd_watches)" 1

step "9. Compaction: etcd forgets old revisions, and a watch from one gets 410"
write POST "$CM" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"old-news","labels":{"lesson":"02"}},"data":{"v":"1"}}'
old=$rv
echo "Remember $old, and wait for the API server to compact etcd past it (--etcd-compaction-interval)."
gone() {
  gone_status=$(curl -sSN -o "$work/gone" -w '%{http_code}' "$API$CM?watch=true&$SEL&resourceVersion=$old&timeoutSeconds=1")
  [ "$(head -1 "$work/gone" | jq -r .type 2>/dev/null)" = ERROR ] # (jq 1.6's -e is true on empty input)
}
deadline=$((SECONDS + 40))
until gone; do
  if [ $SECONDS -ge $deadline ]; then
    echo "  ✘ resourceVersion $old is still in the history after 40s: start the cluster with" >&2
    echo "    go run ./cmd/minictl up --etcd-compaction-interval=5s   (see README.md)" >&2
    exit 1
  fi
  sleep 1
done
echo "\$ curl -sN '$API$CM?watch=true&$SEL&resourceVersion=$old'"
jq . "$work/gone"
expect "the watch itself answers (the error is in the stream)" "$gone_status" 200
expect "one event, and the stream ends" "$(lines "$work/gone")" 1
expect "the event type" "$(jq -r .type "$work/gone")" ERROR
expect "its object is a Status" "$(jq -r .object.kind "$work/gone")" Status
expect "with code" "$(jq -r .object.code "$work/gone")" 410
expect "and reason" "$(jq -r .object.reason "$work/gone")" Expired
expect_match "saying" "$(jq -r .object.message "$work/gone")" "^too old resource version: $old \\([0-9]+\\)$"
oldest=$(jq -r .object.message "$work/gone" | sed -E 's/.*\(([0-9]+)\)$/\1/')
expect "in brackets, the oldest resourceVersion a watch may still start from: newer than $old" "$((oldest > old))" 1
echo "\$ curl -s '$API$CM?$SEL&resourceVersion=$old&resourceVersionMatch=Exact'"
get "$CM?$SEL&resourceVersion=$old&resourceVersionMatch=Exact" >"$work/exact"
jq -c '{code, reason}' "$work/exact"
expect "a list at that exact revision is gone too" "$(jq -r .code "$work/exact")" 410

step "10. The client relists, and watches from the new list's resourceVersion"
echo "\$ curl -s '$API$CM?$SEL'"
get "$CM?$SEL" >"$work/relist"
jq -c '{resourceVersion: .metadata.resourceVersion, items: [.items[].metadata.name]}' "$work/relist"
expect "the list has today's state" "$(jq -c '[.items[].metadata.name]' "$work/relist")" '["missed","old-news"]'
new_rv=$(jq -r .metadata.resourceVersion "$work/relist")
echo "\$ curl -sN '$API$CM?watch=true&$SEL&resourceVersion=$new_rv' > watch.json &"
background "$work/rewatch" curl -sSN "$API$CM?watch=true&$SEL&resourceVersion=$new_rv"
pids+=($!)
write PATCH "$CM/old-news" '{"data":{"v":"2"}}' application/merge-patch+json
wait_for "the new watch to see the change" has_lines "$work/rewatch" 1
event_lines "$work/rewatch"
expect "the watch works again" "$(jq -s -c 'map([.type, .object.metadata.name, .object.metadata.resourceVersion])' "$work/rewatch")" \
  "[[\"MODIFIED\",\"old-news\",\"$rv\"]]"

curl -sS -o /dev/null -X DELETE "$API$CM?$ALL"
printf '\nLesson 2 done: list, then watch from the list'"'"'s resourceVersion; resume from the last one seen; relist on 410.\n'
