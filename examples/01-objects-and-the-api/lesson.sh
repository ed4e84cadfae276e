#!/usr/bin/env bash
# Lesson 1: objects and the API. Create, read and list an object; watch its
# resourceVersion grow; lose a race with a stale update (409); send an
# invalid object (422); and look at the key the object is stored under in
# etcd. Run it against a cluster: `make up` in another terminal, then
#   bash examples/01-objects-and-the-api/lesson.sh
. "$(dirname "$0")/../lib.sh"

NS=/api/v1/namespaces/default
CM=$NS/configmaps

# req METHOD PATH [BODY]: print the curl line a learner types, run it, and
# keep the answer in $work/out and the HTTP status code in $status.
req() {
  local method=$1 path=$2 body=${3:-}
  if [ -n "$body" ]; then
    printf "\$ curl -s -X %s %s%s -H 'Content-Type: application/json' -d '%s'\n" "$method" "$API" "$path" "$body"
    status=$(curl -sS -o "$work/out" -w '%{http_code}' -X "$method" -H 'Content-Type: application/json' "$API$path" --data-binary "$body")
  else
    printf '$ curl -s -X %s %s%s\n' "$method" "$API" "$path"
    status=$(curl -sS -o "$work/out" -w '%{http_code}' -X "$method" "$API$path")
  fi
}
out() { jq -c "${1:-.}" "$work/out"; }
val() { jq -r "$1" "$work/out"; }

# Start clean, so that the lesson can be run again on the same cluster.
curl -sS -o /dev/null -X DELETE "$API$CM/greeting"

step "1. Create a ConfigMap: the answer is the stored object, with server-set metadata"
req POST "$CM" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting","labels":{"lesson":"01"}},"data":{"text":"hello"}}'
out '{code: '"$status"', metadata: (.metadata | {name, namespace, uid, resourceVersion, creationTimestamp})}'
expect "create answers" "$status" 201
rv1=$(val .metadata.resourceVersion)
uid=$(val .metadata.uid)
expect_match "the server gave it a resourceVersion" "$rv1" '^[0-9]+$'
expect_match "and a uid" "$uid" '^[0-9a-f-]{36}$'
expect_match "and a creationTimestamp" "$(val .metadata.creationTimestamp)" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$'

step "2. Get it back: same object, same resourceVersion"
req GET "$CM/greeting"
out '{resourceVersion: .metadata.resourceVersion, data}'
expect "get answers" "$status" 200
expect "the resourceVersion is the one create returned" "$(val .metadata.resourceVersion)" "$rv1"

step "3. List: a List has a resourceVersion of its own, the revision it was read at"
req GET "$CM?labelSelector=lesson%3D01"
out '{kind, apiVersion, listResourceVersion: .metadata.resourceVersion, items: [.items[].metadata.name]}'
expect "a list is a ConfigMapList" "$(val .kind)" ConfigMapList
expect "the selector picks our one ConfigMap" "$(out '[.items[].metadata.name]')" '["greeting"]'
listrv=$(val .metadata.resourceVersion)
expect "the list's resourceVersion is at least the item's" "$((listrv >= rv1))" 1

step "4. resourceVersion is one counter for the whole cluster (etcd's revision)"
curl -sS -o /dev/null -X DELETE "$API$CM/farewell"
req POST "$CM" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"farewell","labels":{"lesson":"01"}},"data":{"text":"bye"}}'
rv2=$(val .metadata.resourceVersion)
echo "greeting was created at $rv1, farewell at $rv2"
expect "a later write of ANY object gets a larger resourceVersion" "$((rv2 > rv1))" 1

step "5. Alice updates greeting with PUT, carrying the resourceVersion she read"
req PUT "$CM/greeting" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting","resourceVersion":"'"$rv1"'"},"data":{"text":"hello from alice"}}'
out '{resourceVersion: .metadata.resourceVersion, data}'
expect "Alice's update succeeds" "$status" 200
rv3=$(val .metadata.resourceVersion)
expect "every write moves the resourceVersion on" "$((rv3 > rv1))" 1
expect "the uid stays: same object, new version" "$(val .metadata.uid)" "$uid"
expect "PUT replaces the whole object: the labels Alice did not send are gone" "$(val '.metadata.labels // {} | length')" 0

step "6. The same PUT again changes nothing, so nothing is written"
req PUT "$CM/greeting" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting","resourceVersion":"'"$rv3"'"},"data":{"text":"hello from alice"}}'
expect "a no-op update succeeds" "$status" 200
expect "and keeps the resourceVersion" "$(val .metadata.resourceVersion)" "$rv3"

step "7. Bob read greeting at $rv1 too; his PUT carries that stale resourceVersion"
req PUT "$CM/greeting" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting","resourceVersion":"'"$rv1"'"},"data":{"text":"hello from bob"}}'
jq . "$work/out"
expect "Bob gets" "$status" 409
expect "the answer is a Status" "$(val .kind)" Status
expect "its reason" "$(val .reason)" Conflict
expect "its code" "$(val .code)" 409
expect_match "its message" "$(val .message)" 'the object has been modified; please apply your changes to the latest version and try again'
req GET "$CM/greeting"
expect "Alice's data is untouched" "$(val .data.text)" "hello from alice"
expect "and so is the resourceVersion" "$(val .metadata.resourceVersion)" "$rv3"

step "8. Bob does what every controller does on a 409: read again, apply his change, retry"
req PUT "$CM/greeting" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting","resourceVersion":"'"$rv3"'"},"data":{"text":"hello from alice and bob"}}'
expect "the retry succeeds" "$status" 200
rv4=$(val .metadata.resourceVersion)

step "9. A PUT without a resourceVersion is unconditional: the last writer wins"
req PUT "$CM/greeting" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting"},"data":{"text":"overwritten"}}'
expect "it succeeds" "$status" 200
rv5=$(val .metadata.resourceVersion)
expect "and still moves the resourceVersion" "$((rv5 > rv4))" 1

step "10. Creating a name that exists is a 409 too, with another reason"
req POST "$CM" '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting"}}'
out '{code, reason, message}'
expect "the code" "$status" 409
expect "the reason" "$(val .reason)" AlreadyExists

step "11. An invalid object is a 422, and its causes name every field to fix"
req POST "$NS/pods" '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c"}]}}'
out '{code, reason, causes: [.details.causes[] | {field, reason}]}'
expect "the code" "$status" 422
expect "the reason" "$(val .reason)" Invalid
expect "the fields in details.causes" "$(out '[.details.causes[].field]')" '["metadata.name","spec.containers[0].image"]'
expect "the cause reasons" "$(out '[.details.causes[].reason]')" '["FieldValueInvalid","FieldValueRequired"]'
expect "details name the object" "$(val '.details.kind + " " + .details.name')" "Pod Bad_Name"
expect "nothing was created (a failed request changes nothing)" "$(code GET "$NS/pods/Bad_Name")" 404

step "12. The key in etcd: /registry/<group>/<resource>/<namespace>/<name>"
etcd_given=${ETCD:+yes}
ETCD=${ETCD:-http://127.0.0.1:2379}
if ! curl -sf -o /dev/null --max-time 2 "$ETCD/version"; then
  if [ -n "$etcd_given" ]; then
    printf '  \033[31m✘\033[0m no etcd at %s, the URL ETCD names\n' "$ETCD" >&2
    exit 1
  fi
  echo "  (no etcd at $ETCD: set ETCD to the URL minictl up printed, to see this part)"
else
  key=/registry/core/configmaps/default/greeting
  # etcd's JSON gateway wants keys in base64; minictl etcd get does this for you.
  printf "\$ curl -s %s/v3/kv/range -d '{\"key\":\"%s\"}'   # base64 of %s\n" "$ETCD" "$(printf %s $key | base64 | tr -d '\n')" "$key"
  curl -sS "$ETCD/v3/kv/range" -d '{"key":"'"$(printf %s $key | base64 | tr -d '\n')"'"}' >"$work/kv"
  jq '.kvs[0] | {key: (.key | @base64d), create_revision, mod_revision, version, value_starts_with: (.value | @base64d | .[0:3])}' "$work/kv" | tee "$work/kvd"
  expect "the key" "$(jq -r .key "$work/kvd")" "$key"
  expect "the key's mod_revision is the object's resourceVersion" "$(jq -r .mod_revision "$work/kvd")" "$rv5"
  expect "its create_revision is the resourceVersion create returned" "$(jq -r .create_revision "$work/kvd")" "$rv1"
  expect "its version counts the writes: create, Alice, Bob, overwrite" "$(jq -r .version "$work/kvd")" 4
  expect "the value is protobuf: the k8s\\x00 envelope, as kube-apiserver stores built-in kinds" "$(jq -r .value_starts_with "$work/kvd")" k8s
  printf '$ minictl etcd get %s   # the value decoded, as JSON\n' "$key"
  "$MINICTL" etcd get --endpoints "$ETCD" "$key" | sed -n 2p | jq -c '{kind, apiVersion, metadata: (.metadata | {name, namespace, uid, resourceVersion}), data}' | tee "$work/stored"
  expect "the stored object has no resourceVersion: etcd keeps it as the revision" "$(jq -r .metadata.resourceVersion "$work/stored")" null
  expect "it holds the last write" "$(jq -c .data "$work/stored")" '{"text":"overwritten"}'
fi

step "13. Delete both ConfigMaps"
req DELETE "$CM/greeting"
out '{kind, status, details}'
expect "delete answers" "$status" 200
expect "greeting is gone" "$(code GET "$CM/greeting")" 404
curl -sS -o /dev/null -X DELETE "$API$CM/farewell"

printf '\nLesson 1 done: every object has a resourceVersion that is etcd'"'"'s revision, and a write that carries an old one fails.\n'
