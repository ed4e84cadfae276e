#!/usr/bin/env bash
# Lesson 14: extend the API. A CustomResourceDefinition teaches the API
# server a new kind: its schema (defaults, enums, bounds, a CEL rule), a
# status subresource and printer columns. The lesson creates one, uses the
# new resource with curl like any built-in one, looks at what etcd holds,
# watches it, and deletes the definition with everything made of it. Run it
# against a cluster: `make up` in another terminal, then
#   bash examples/14-extend-the-api/lesson.sh
. "$(dirname "$0")/../lib.sh"

CRDS=/apis/apiextensions.k8s.io/v1/customresourcedefinitions
CRD=$CRDS/backups.lessons.minictl.dev
GV=/apis/lessons.minictl.dev/v1
B=$GV/namespaces/default/backups

# req METHOD PATH [BODY] [CONTENT-TYPE]: print the curl line, run it, and
# keep the answer in $work/out, its headers in $work/headers and the HTTP
# status code in $status.
req() {
  local method=$1 path=$2 body=${3:-} type=${4:-application/json}
  if [ -n "$body" ]; then
    printf "\$ curl -s -X %s '%s%s' -H 'Content-Type: %s' -d '%s'\n" "$method" "$API" "$path" "$type" "$(jq -c . <<<"$body")"
    status=$(curl -sS -o "$work/out" -D "$work/headers" -w '%{http_code}' -X "$method" -H "Content-Type: $type" "$API$path" --data-binary "$body")
  else
    printf "\$ curl -s -X %s '%s%s'\n" "$method" "$API" "$path"
    status=$(curl -sS -o "$work/out" -D "$work/headers" -w '%{http_code}' -X "$method" "$API$path")
  fi
}
out() { jq -c "${1:-.}" "$work/out"; }
val() { jq -r "$1" "$work/out"; }
# backup NAME SPEC: a Backup in JSON.
backup() { echo '{"apiVersion": "lessons.minictl.dev/v1", "kind": "Backup", "metadata": {"name": "'"$1"'"}, "spec": '"$2"'}'; }
# has_events N: true once the watch wrote at least N events.
has_events() { [ "$(wc -l <"$work/watch")" -ge "$1" ]; }

# Start clean, so that the lesson can be run again on the same cluster.
if [ "$(code GET $CRD)" == 200 ]; then
  delete $CRD >/dev/null
  wait_for "the definition of an earlier run to go" equals 404 code GET $CRD
fi

step "1. Define a new kind: a CustomResourceDefinition for Backup"
definition='{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "backups.lessons.minictl.dev"},
  "spec": {"group": "lessons.minictl.dev", "scope": "Namespaced",
    "names": {"plural": "backups", "singular": "backup", "kind": "Backup", "shortNames": ["bk"]},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["schedule"],
          "properties": {
            "schedule": {"type": "string", "enum": ["hourly", "daily", "weekly"]},
            "keep": {"type": "integer", "minimum": 1, "maximum": 30, "default": 7},
            "minKeep": {"type": "integer", "minimum": 1, "default": 1}},
          "x-kubernetes-validations": [{"rule": "self.keep >= self.minKeep", "message": "keep must be at least minKeep"}]},
        "status": {"type": "object", "properties": {
          "phase": {"type": "string"}, "lastBackup": {"type": "string"}}}}}},
      "subresources": {"status": {}},
      "additionalPrinterColumns": [
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
        {"name": "Keep", "type": "integer", "jsonPath": ".spec.keep"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]}}'
req POST $CRDS "$definition"
out '{name: .metadata.name, group: .spec.group, kind: .spec.names.kind}'
expect "create answers" "$status" 201
wait_for "the definition to be Established" jqtest $CRD '.status.conditions // [] | any(.type == "Established" and .status == "True")'
req GET $CRD
out '[.status.conditions[] | {type, status, reason}]'
expect "NamesAccepted" "$(val '.status.conditions[] | select(.type == "NamesAccepted") | .status')" True
expect "the accepted names" "$(out '.status.acceptedNames | {plural, kind}')" '{"plural":"backups","kind":"Backup"}'
expect "storedVersions" "$(out .status.storedVersions)" '["v1"]'

step "2. Discovery lists the new resource, like any built-in one"
req GET $GV
# (the group may serve other kinds too: lesson 12's PodsByNode is in it)
out '[.resources[] | select(.kind == "Backup") | {name, kind, namespaced, shortNames}]'
expect "the resources of kind Backup" "$(out '[.resources[] | select(.kind == "Backup") | .name]')" '["backups","backups/status"]'
expect "backups are namespaced, short name bk" "$(out '.resources[] | select(.name == "backups") | [.namespaced, .shortNames[0]]')" '[true,"bk"]'
expect_match "with the verbs a client may use" "$(out '.resources[] | select(.name == "backups") | .verbs')" '"watch"'
expect "the group is in /apis" "$(get /apis | jq -r '.groups[] | select(.name == "lessons.minictl.dev") | .preferredVersion.groupVersion')" lessons.minictl.dev/v1

step "3. Watch backups from now on (in the background, into watch.json)"
list_rv=$(get $B | jq -r .metadata.resourceVersion)
echo "\$ curl -sN '$API$B?watch=true&resourceVersion=$list_rv' > watch.json &"
background "$work/watch" curl -sSN "$API$B?watch=true&resourceVersion=$list_rv"

step "4. Create a Backup: the schema fills in defaults and drops a field it does not know"
req POST $B "$(backup nightly '{"schedule": "daily", "colour": "blue"}')"
out '{resourceVersion: .metadata.resourceVersion, generation: .metadata.generation, spec}'
expect "create answers" "$status" 201
expect "the defaults are filled in" "$(out '.spec | {keep, minKeep}')" '{"keep":7,"minKeep":1}'
expect "the unknown field is pruned" "$(val '.spec | has("colour")')" false
expect "and the answer warns about it" "$(grep -i '^warning:' "$work/headers" | tr -d '\r')" 'Warning: 299 - "unknown field \"spec.colour\""'
rv_create=$(val .metadata.resourceVersion)
expect "a new object starts at generation" "$(val .metadata.generation)" 1
req POST "$B?fieldValidation=Strict" "$(backup strict '{"schedule": "daily", "colour": "blue"}')"
out '{code, reason, message}'
expect "with fieldValidation=Strict the unknown field is refused" "$status" 400
expect_match "the message names it" "$(val .message)" 'strict decoding error: unknown field "spec.colour"'
expect "nothing stored" "$(code GET $B/strict)" 404

step "5. The schema refuses what it does not allow: an enum, a bound, a CEL rule"
req POST $B "$(backup bad '{"schedule": "often"}')"
out '{code, reason, causes: [.details.causes[] | select(.field == "spec.schedule") | {field, reason, message}]}'
expect "a schedule outside the enum" "$status" 422
expect "the cause" "$(val '.details.causes[0] | .field + " " + .reason')" "spec.schedule FieldValueNotSupported"
req POST $B "$(backup bad '{"schedule": "daily", "keep": 31}')"
out '{code, message}'
expect "keep above the maximum" "$status" 422
expect_match "the message" "$(val .message)" 'spec.keep in body should be less than or equal to 30'
req POST $B "$(backup bad '{"schedule": "daily", "keep": 2, "minKeep": 3}')"
out '{code, reason, message}'
expect "the CEL rule refuses keep < minKeep" "$status" 422
expect "the cause is spec" "$(val '.details.causes[0].field')" spec
expect_match "with the rule's message" "$(val .message)" 'spec: Invalid value: .*keep must be at least minKeep'
expect "nothing stored" "$(code GET $B/bad)" 404

step "6. status changes only through /status; generation moves only with spec"
req PATCH $B/nightly '{"status": {"phase": "Done"}}' application/merge-patch+json
out '{resourceVersion: .metadata.resourceVersion, generation: .metadata.generation, status}'
expect "a status sent to the main resource is ignored" "$(out .status)" null
expect "so nothing was written: the resourceVersion is the create's" "$(val .metadata.resourceVersion)" "$rv_create"
req PATCH $B/nightly/status '{"status": {"phase": "Done", "lastBackup": "2026-01-01T00:00:00Z"}, "spec": {"keep": 9}}' application/merge-patch+json
out '{resourceVersion: .metadata.resourceVersion, generation: .metadata.generation, status, spec}'
expect "through /status the status is written" "$(val .status.phase)" Done
expect "but a spec sent there is ignored" "$(val .spec.keep)" 7
expect "and the generation stays" "$(val .metadata.generation)" 1
rv_status=$(val .metadata.resourceVersion)
req PATCH $B/nightly '{"spec": {"keep": 9}}' application/merge-patch+json
out '{resourceVersion: .metadata.resourceVersion, generation: .metadata.generation, spec}'
expect "a spec change moves the generation" "$(val .metadata.generation)" 2
req PATCH $B/nightly '{"metadata": {"labels": {"team": "blue"}}}' application/merge-patch+json
out '{resourceVersion: .metadata.resourceVersion, generation: .metadata.generation, labels: .metadata.labels}'
expect "a label change does not" "$(val .metadata.generation)" 2
rv_label=$(val .metadata.resourceVersion)

step "7. The Table a client (kubectl get backups) asks for shows the printer columns"
echo "\$ curl -s '$API$B' -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io'"
curl -sS "$API$B" -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' >"$work/table"
jq -c '[.columnDefinitions[].name], (.rows[].cells)' "$work/table"
expect "the columns" "$(jq -c '[.columnDefinitions[].name]' "$work/table")" '["Name","Schedule","Keep","Phase","Age"]'
expect "the row of nightly (without its Age)" "$(jq -c '.rows[0].cells[0:4]' "$work/table")" '["nightly","daily",9,"Done"]'

step "8. What etcd holds: /registry/<group>/<plural>/<namespace>/<name>"
etcd_given=${ETCD:+yes}
ETCD=${ETCD:-http://127.0.0.1:2379}
key=/registry/lessons.minictl.dev/backups/default/nightly
kv() { curl -sS "$ETCD/v3/kv/range" -d '{"key":"'"$(printf %s $key | base64 | tr -d '\n')"'"}'; }
if ! curl -sf -o /dev/null --max-time 2 "$ETCD/version"; then
  if [ -n "$etcd_given" ]; then
    printf '  \033[31m✘\033[0m no etcd at %s, the URL ETCD names\n' "$ETCD" >&2
    exit 1
  fi
  echo "  (no etcd at $ETCD: set ETCD to the URL minictl up printed, to see this part)"
else
  printf "\$ curl -s %s/v3/kv/range -d '{\"key\":\"%s\"}'   # base64 of %s\n" "$ETCD" "$(printf %s $key | base64 | tr -d '\n')" "$key"
  kv | jq '.kvs[0] | {key: (.key | @base64d), mod_revision, version, value: (.value | @base64d | fromjson | {apiVersion, kind, spec, status})}' | tee "$work/kvd"
  expect "the key" "$(jq -r .key "$work/kvd")" "$key"
  expect "its mod_revision is the object's resourceVersion" "$(jq -r .mod_revision "$work/kvd")" "$rv_label"
  expect "the stored JSON is the object as the API serves it" "$(jq -c '.value | [.apiVersion, .spec.keep, .status.phase]' "$work/kvd")" '["lessons.minictl.dev/v1",9,"Done"]'
fi

step "9. A second Backup, created and deleted: the watch sees it all"
req POST $B "$(backup hourly '{"schedule": "hourly", "keep": 24}')"
expect "create answers" "$status" 201
req DELETE $B/hourly
expect "delete answers" "$status" 200
wait_for "6 events in watch.json" has_events 6
echo "\$ jq -c '[.type, .object.metadata.name, .object.metadata.resourceVersion]' watch.json"
jq -c '[.type, .object.metadata.name, .object.metadata.resourceVersion]' "$work/watch"
expect "the events" "$(jq -s -c 'map([.type, .object.metadata.name])' "$work/watch")" \
  '[["ADDED","nightly"],["MODIFIED","nightly"],["MODIFIED","nightly"],["MODIFIED","nightly"],["ADDED","hourly"],["DELETED","hourly"]]'
expect "the status write is one of them" "$(jq -s -r '.[1].object.metadata.resourceVersion' "$work/watch")" "$rv_status"

step "10. Delete the definition: its objects go with it, then the resource itself"
req DELETE $CRD
out '{deletionTimestamp: .metadata.deletionTimestamp, finalizers: .metadata.finalizers}'
expect "the definition is marked, and a finalizer holds it" "$(out .metadata.finalizers)" '["customresourcecleanup.apiextensions.k8s.io"]'
wait_for "the definition to go" equals 404 code GET $CRD
# listed: how many resources named backups discovery lists in lessons.minictl.dev/v1.
listed() { get $GV | jq '[.resources[]? | select(.name == "backups")] | length'; }
wait_for "the resource to be no longer served" equals 404 code GET $B
wait_for "discovery to no longer list backups" equals 0 listed
wait_for "the watch to see nightly DELETED" grep -q '"DELETED".*"nightly"' "$work/watch"
jq -s -c '.[-1] | [.type, .object.metadata.name]' "$work/watch"
if [ -z "$etcd_given" ] && ! curl -sf -o /dev/null --max-time 2 "$ETCD/version"; then
  :
else
  expect "and etcd holds nothing under the key" "$(kv | jq '.kvs // [] | length')" 0
fi

printf '\nLesson 14 done: a CustomResourceDefinition made a new kind that the API server validates, defaults, stores, serves, watches and deletes like any other.\n'
