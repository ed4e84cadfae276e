#!/usr/bin/env bash
# Lesson 10: ownerReferences and the garbage collector. Three Deployments side
# by side, deleted with propagationPolicy Background, Foreground and Orphan;
# the order of the deletions read from the recorded resourceVersions; orphans
# adopted by a new ReplicaSet. Run it against a cluster: `make up` in another
# terminal, then
#   bash examples/10-owners-and-garbage-collection/lesson.sh
. "$(dirname "$0")/../lib.sh"

watches=() # the background curls recording events

D=/apis/apps/v1/namespaces/default/deployments
RS=/apis/apps/v1/namespaces/default/replicasets
P=/api/v1/namespaces/default/pods

deploy() {
  say POST $D '{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "'"$1"'"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "'"$1"'"}},
      "template": {"metadata": {"labels": {"app": "'"$1"'"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}' >/dev/null
}
# count PATH APP: how many objects labelled app=APP the collection at PATH holds.
count() { get "$1?labelSelector=app%3D$2" | jq '.items | length'; }
# rs_of APP: the name of the ReplicaSet of Deployment APP.
rs_of() { get "$RS?labelSelector=app%3D$1" | jq -r '.items[0].metadata.name'; }
# deleted_rv KIND NAME-PREFIX: the resourceVersion of the last DELETED event
# recorded for objects of KIND whose name starts with NAME-PREFIX.
deleted_rv() {
  jq -s --arg kind "$1" --arg name "$2" '[.[] | select(.type == "DELETED" and .object.kind == $kind
    and (.object.metadata.name | startswith($name))) | .object.metadata.resourceVersion | tonumber] | max' "$work"/{deployments,replicasets,pods}.jsonl
}
# earlier A B: "yes (A < B)" when resourceVersion A came before B.
earlier() { if [ "$1" -lt "$2" ]; then echo "yes ($1 < $2)"; else echo "no ($1 >= $2)"; fi; }
# first_rv KIND NAME-PREFIX: the resourceVersion of the first recorded event
# in which such an object carries a deletionTimestamp (or is DELETED).
first_rv() {
  jq -s --arg kind "$1" --arg name "$2" '[.[] | select(.object.kind == $kind and (.object.metadata.name | startswith($name))
    and (.type == "DELETED" or .object.metadata.deletionTimestamp != null)) | .object.metadata.resourceVersion | tonumber] | min' "$work"/{deployments,replicasets,pods}.jsonl
}

# Start clean, so that the lesson can be run again on the same cluster.
SEL='labelSelector=app%20in%20(bg,fg,orphan)'
for pod in $(get "$P?$SEL" | jq -r '.items[] | select(.metadata.finalizers) | .metadata.name'); do
  patch "$P/$pod" '{"metadata": {"finalizers": null}}' >/dev/null
done
for path in $D/bg $D/fg $D/orphan $RS/adopter; do
  [ "$(code GET "$path")" != 200 ] || delete "$path" >/dev/null
done
for rs in $(get "$RS?$SEL" | jq -r '.items[].metadata.name'); do delete "$RS/$rs" >/dev/null; done
leftovers() { echo "$(get "$RS?$SEL" | jq '.items | length') ReplicaSets, $(get "$P?$SEL" | jq '.items | length') pods"; }
wait_for "nothing left from an earlier run" equals "0 ReplicaSets, 0 pods" leftovers

step "1. Three Deployments side by side: bg, fg and orphan, 2 pods each"
for app in bg fg orphan; do deploy $app; done
for app in bg fg orphan; do wait_for "2 $app pods Running" equals 2 running $app; done
rs=$(rs_of fg)
expect "ReplicaSet $rs's owner" "$(get "$RS/$rs" | jq -c '.metadata.ownerReferences[] | [.kind, .name, .controller, .blockOwnerDeletion]')" '["Deployment","fg",true,true]'
pod=$(get "$P?labelSelector=app%3Dfg" | jq -r '.items[0].metadata.name')
expect "pod $pod's owner" "$(get "$P/$pod" | jq -c '.metadata.ownerReferences[] | [.kind, .name, .controller, .blockOwnerDeletion]')" "[\"ReplicaSet\",\"$rs\",true,true]"
expect "the reference holds the owner's uid" "$(get "$RS/$rs" | jq -r '.metadata.ownerReferences[0].uid')" "$(get "$D/fg" | jq -r .metadata.uid)"

step "2. Record every change from now on: three watches (one etcd revision counter), and the timeline"
rv=$(get $P | jq -r .metadata.resourceVersion)
for path in $D $RS $P; do
  printf '$ %s\n' "curl -sN '$API$path?watch=true&resourceVersion=$rv' &"
  background "$work/${path##*/}.jsonl" curl -sN "$API$path?watch=true&resourceVersion=$rv"
  watches+=($!)
done
printf '$ %s\n' "curl -sN '$API/debug/timeline?component=garbagecollector' &    # or: minictl trace --component garbagecollector"
background "$work/timeline" curl -sN -D "$work/timeline.headers" "$API/debug/timeline?component=garbagecollector"
watches+=($!)
wait_for "the timeline stream to open" grep -q '^HTTP/1.1 200' "$work/timeline.headers"

step "3. Background: the owner goes at once, the garbage collector deletes its dependents after"
rs_bg=$(rs_of bg)
answer=$(say DELETE "$D/bg?propagationPolicy=Background")
expect "DELETE answer" "$(jq -c '[.kind, .status]' <<<"$answer")" '["Status","Success"]'
expect "GET deployment bg right after" "$(code GET $D/bg)" 404
wait_for "ReplicaSet $rs_bg gone" equals 404 code GET "$RS/$rs_bg"
wait_for "bg pods gone" equals 0 count $P bg

step "4. Foreground: the owner stays, marked, until its dependents are gone"
rs_fg=$(rs_of fg)
held=$(get "$P?labelSelector=app%3Dfg" | jq -r '.items[0].metadata.name')
echo "  hold pod $held with a finalizer of our own, so that the chain stops where we can look"
say PATCH "$P/$held" '{"metadata": {"finalizers": ["example.com/hold"]}}' application/merge-patch+json >/dev/null
generation=$(get $D/fg | jq .metadata.generation)
answer=$(say DELETE "$D/fg?propagationPolicy=Foreground")
expect "DELETE answer: generation (moved on, so that controllers notice)" "$(jq .metadata.generation <<<"$answer")" "$((generation + 1))"
expect "DELETE answer: the Deployment, finalizers" "$(jq -c '[.kind, .metadata.finalizers]' <<<"$answer")" '["Deployment",["foregroundDeletion"]]'
expect_match "DELETE answer: deletionTimestamp" "$(jq -r .metadata.deletionTimestamp <<<"$answer")" '^[0-9]{4}-'
wait_for "the other fg pod gone, $held left" jqtest "$P?labelSelector=app%3Dfg" "[.items[].metadata.name] == [\"$held\"]"
wait_for "ReplicaSet $rs_fg being deleted in the foreground too" jqtest "$RS/$rs_fg" \
  '.metadata.deletionTimestamp != null and .metadata.finalizers == ["foregroundDeletion"]'
expect "Deployment fg still there" "$(code GET $D/fg)" 200
expect "Deployment fg finalizers" "$(get $D/fg | jq -c .metadata.finalizers)" '["foregroundDeletion"]'
expect "pod $held: deletionTimestamp set" "$(get "$P/$held" | jq '.metadata.deletionTimestamp != null')" true
echo "  release the hold"
say PATCH "$P/$held" '{"metadata": {"finalizers": null}}' application/merge-patch+json >/dev/null
wait_for "pod $held gone" equals 404 code GET "$P/$held"
wait_for "ReplicaSet $rs_fg gone" equals 404 code GET "$RS/$rs_fg"
wait_for "Deployment fg gone" equals 404 code GET $D/fg

step "5. Orphan: the owner goes, its dependents stay and lose their reference to it"
rs_or=$(rs_of orphan)
answer=$(say DELETE "$D/orphan?propagationPolicy=Orphan")
expect "DELETE answer: finalizers" "$(jq -c .metadata.finalizers <<<"$answer")" '["orphan"]'
wait_for "Deployment orphan gone" equals 404 code GET $D/orphan
expect "ReplicaSet $rs_or still there" "$(code GET "$RS/$rs_or")" 200
expect "ReplicaSet $rs_or ownerReferences" "$(get "$RS/$rs_or" | jq -c '.metadata.ownerReferences // []')" '[]'
expect "orphan pods Running" "$(running orphan)" 2
expect "orphan pods' owner (one level down, untouched)" \
  "$(get "$P?labelSelector=app%3Dorphan" | jq -c '[.items[].metadata.ownerReferences[0].name] | unique')" "[\"$rs_or\"]"

step "6. Orphan the pods too, then let a new ReplicaSet adopt them"
say DELETE "$RS/$rs_or?propagationPolicy=Orphan" >/dev/null
wait_for "ReplicaSet $rs_or gone" equals 404 code GET "$RS/$rs_or"
expect "orphan pods Running" "$(running orphan)" 2
expect "orphan pods' ownerReferences" "$(get "$P?labelSelector=app%3Dorphan" | jq -c '[.items[].metadata.ownerReferences // []] | add')" '[]'
orphans=$(get "$P?labelSelector=app%3Dorphan" | jq -c '[.items[].metadata.name] | sort')
say POST $RS '{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "adopter"},
  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "orphan"}},
    "template": {"metadata": {"labels": {"app": "orphan"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}' >/dev/null
wait_for "both orphans adopted by ReplicaSet adopter" jqtest "$P?labelSelector=app%3Dorphan" \
  '[.items[].metadata.ownerReferences[]? | select(.controller) | .name] == ["adopter", "adopter"]'
expect "the pods (the same two: none created)" "$(get "$P?labelSelector=app%3Dorphan" | jq -c '[.items[].metadata.name] | sort')" "$orphans"
say DELETE $RS/adopter >/dev/null
wait_for "adopter's pods collected (Background is the default)" equals 0 count $P orphan

step "7. The order, read from the recorded resourceVersions (one etcd revision counter for all)"
sleep 0.5 # let the last events reach the files
kill "${watches[@]}" 2>/dev/null || true
jq -sc 'map(select(.object.metadata.labels.app // .object.metadata.name | test("^(bg|fg)")))
  | sort_by(.object.metadata.resourceVersion | tonumber)[]
  | [(.object.metadata.resourceVersion | tonumber), .type, .object.kind, .object.metadata.name,
     (if .object.metadata.deletionTimestamp then "deleting" else "" end), (.object.metadata.finalizers // [])]' "$work"/{deployments,replicasets,pods}.jsonl
echo "  Background:"
expect_match "Deployment bg deleted before its ReplicaSet" "$(earlier "$(deleted_rv Deployment bg)" "$(deleted_rv ReplicaSet "$rs_bg")")" "^yes"
expect_match "ReplicaSet deleted before its pods were touched" "$(earlier "$(deleted_rv ReplicaSet "$rs_bg")" "$(first_rv Pod "$rs_bg")")" "^yes"
echo "  Foreground:"
expect_match "Deployment fg marked before its pods were touched" "$(earlier "$(first_rv Deployment fg)" "$(first_rv Pod "$rs_fg")")" "^yes"
expect_match "pods deleted before their ReplicaSet" "$(earlier "$(deleted_rv Pod "$rs_fg")" "$(deleted_rv ReplicaSet "$rs_fg")")" "^yes"
expect_match "ReplicaSet deleted before its Deployment" "$(earlier "$(deleted_rv ReplicaSet "$rs_fg")" "$(deleted_rv Deployment fg)")" "^yes"

step "8. The garbage collector's own story (the timeline)"
jq -r '.message' "$work/timeline" | grep -E "default/(bg|fg|orphan)" | grep -v 'wait: ' | cut -c1-150
gclog() { jq -r '.message' "$work/timeline" | grep -c -- "$1" || true; }
expect "Background: ReplicaSet $rs_bg collected, its owner gone" "$(gclog "replicaset default/$rs_bg owner Deployment bg (uid [^)]*) is gone → delete")" 1
expect "Background: its 2 pods collected, their owner gone" "$(gclog "pod default/$rs_bg-[a-z0-9]* owner ReplicaSet $rs_bg (uid [^)]*) is gone → delete")" 2
expect_match "Foreground: the Deployment waits for a dependent" "$(gclog "deployment default/fg is being deleted in the foreground → wait: 1 dependent still blocks its deletion")" '^[1-9]'
expect "Foreground: the ReplicaSet deleted (in the foreground too)" "$(gclog "replicaset default/$rs_fg owner Deployment fg (uid [^)]*) is being deleted in the foreground → delete")" 1
expect "Foreground: finalizer removed, ReplicaSet then Deployment" \
  "$(jq -r '.message' "$work/timeline" | grep 'no dependents left that block its deletion → remove finalizer foregroundDeletion' | cut -d: -f1 | paste -sd' ')" \
  "replicaset default/$rs_fg deployment default/fg"
expect "Orphan: the reference removed from ReplicaSet $rs_or" "$(gclog "replicaset default/$rs_or owner Deployment default/orphan (uid [^)]*) is being deleted with propagation Orphan → remove the reference")" 1
expect "Orphan: then the finalizer" \
  "$(gclog "deployment default/orphan: \(orphaned 1 dependent\|no dependent refers to it any more\) → remove finalizer orphan")" 1
