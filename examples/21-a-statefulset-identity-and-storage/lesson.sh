#!/usr/bin/env bash
# Lesson 21: a StatefulSet, identity and storage. Three pods web-0, web-1,
# web-2 start in order, each only once the one before is Running and
# Ready; each gets a claim data-web-<i> from the claim template, which the
# simulated provisioner fills with a volume on the node the scheduler
# chose for the pod. A pod deleted comes back with its name, its claim,
# its volume and so its node. Scaled down, the set deletes web-2, then
# web-1, and keeps their claims; scaled up, the pods find them again.
# Deleting the set leaves the claims too, until they are deleted by hand
# and their volumes with them. Run it against a cluster: `make up` in
# another terminal, then
#   bash examples/21-a-statefulset-identity-and-storage/lesson.sh
. "$(dirname "$0")/../lib.sh"

if ! command -v "$MINICTL" >/dev/null; then
  echo "this lesson runs minictl trace: set MINICTL to a minictl binary (make build; MINICTL=bin/minictl)" >&2
  exit 1
fi

STS=/apis/apps/v1/namespaces/default/statefulsets
SVC=/api/v1/namespaces/default/services
PODS=/api/v1/namespaces/default/pods
PVCS=/api/v1/namespaces/default/persistentvolumeclaims
PVS=/api/v1/persistentvolumes

# pods_of: "name node uid" of every web pod not being deleted, one a line.
pods_of() {
  get "$PODS?labelSelector=app%3Dweb" | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | "\(.metadata.name) \(.spec.nodeName) \(.metadata.uid)"' | sort
}
# claims: "name phase volume" of the web claims, one a line.
claims() { get "$PVCS?labelSelector=app%3Dweb" | jq -r '.items[] | "\(.metadata.name) \(.status.phase) \(.spec.volumeName)"' | sort; }
# web_volumes: how many volumes are bound, or were, to a claim data-web-<i>.
web_volumes() { get $PVS | jq '[.items[] | select(.spec.claimRef.name // "" | startswith("data-web-"))] | length'; }
# story FILE: what a pod watch written to FILE saw, in order, each thing
# once: "web-0 added", "web-0 ready", "web-2 terminating", "web-2 gone".
story() {
  jq -rs '[.[] | .object as $p | $p.metadata.name as $n
    | if .type == "ADDED" then "\($n) added"
      elif .type == "DELETED" then "\($n) gone"
      elif $p.metadata.deletionTimestamp != null then "\($n) terminating"
      elif $p.status.phase == "Running" and any($p.status.conditions[]?; .type == "Ready" and .status == "True") then "\($n) ready"
      else empty end]
    | reduce .[] as $e ([]; if any(.[]; . == $e) then . else . + [$e] end) | join(", ")' "$1"
}

# Start clean, so that the lesson can be run again on the same cluster.
for path in $STS/web $SVC/web $PVCS/data-web-0 $PVCS/data-web-1 $PVCS/data-web-2; do
  [ "$(code GET "$path")" != 200 ] || delete "$path" >/dev/null
done
wait_for "no web pods left from an earlier run" equals "" pods_of
wait_for "no web claims or volumes left from an earlier run" equals "0" web_volumes

background "$work/trace" "$MINICTL" trace --server "$API" --component statefulset
wait_for "minictl trace attached" trace_attached "$work/trace"

step "1. A headless Service and a StatefulSet of 3, with a claim template"
background "$work/start" curl -sSN "$API$PODS?watch=true&labelSelector=app%3Dweb"
say POST $SVC '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
  "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}}' | jq -c '.spec.clusterIP'
say POST $STS '{
  "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
  "spec": {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
        "volumeMounts": [{"name": "data", "mountPath": "/usr/share/nginx/html"}]}]}},
    "volumeClaimTemplates": [{"metadata": {"name": "data"},
      "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}' |
  jq -c '.spec | {podManagementPolicy, updateStrategy, persistentVolumeClaimRetentionPolicy}'
wait_for "3 web pods Running and Ready" equals 3 running web
expect "what a watch of the pods saw, in order" "$(story "$work/start")" \
  "web-0 added, web-0 ready, web-1 added, web-1 ready, web-2 added, web-2 ready"
wait_for "the StatefulSet's status: 3 ready" jqtest $STS/web '.status.readyReplicas == 3 and .status.currentReplicas == 3'
p=$(get $PODS/web-0)
echo "  web-0's identity, set by the StatefulSet controller:"
jq -c '{hostname: .spec.hostname, subdomain: .spec.subdomain, labels: .metadata.labels}' <<<"$p" | sed 's/^/    /'
expect "web-0's hostname and subdomain" "$(jq -r '"\(.spec.hostname).\(.spec.subdomain)"' <<<"$p")" "web-0.web"
expect "web-0 mounts its own claim" "$(jq -r '.spec.volumes[] | select(.name == "data") | .persistentVolumeClaim.claimName' <<<"$p")" "data-web-0"

step "2. Each pod's claim, provisioned on the pod's node"
claims | sed 's/^/  /'
expect "3 claims, all Bound" "$(claims | awk '{print $1, $2}' | paste -sd,)" "data-web-0 Bound,data-web-1 Bound,data-web-2 Bound"
for i in 0 1 2; do
  node=$(get $PODS/web-$i | jq -r .spec.nodeName)
  pv=$(get $PVS/"$(get $PVCS/data-web-$i | jq -r .spec.volumeName)")
  expect "data-web-$i's volume is on web-$i's node" \
    "$(jq -r '.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0] | "\(.key) \(.operator) \(.values | join(","))"' <<<"$pv")" \
    "kubernetes.io/hostname In $node"
done
echo "  the volume of data-web-0:"
jq -c '{provisionedBy: .metadata.annotations["pv.kubernetes.io/provisioned-by"], class: .spec.storageClassName,
  reclaim: .spec.persistentVolumeReclaimPolicy, claim: .spec.claimRef.name, hostPath: .spec.hostPath.path}' \
  <<<"$(get $PVS/"$(get $PVCS/data-web-0 | jq -r .spec.volumeName)")" | sed 's/^/    /'
# (Events name their object by uid too: an earlier run's claim data-web-0
# was another object.)
claim_uid=$(get $PVCS/data-web-0 | jq -r .metadata.uid)
set_uid=$(get $STS/web | jq -r .metadata.uid)
expect "the claim's events, in order" \
  "$(events ".involvedObject.uid == \"$claim_uid\"" |
    jq -r 'sort_by(.firstTimestamp) | map("\(.reason) (\(.source.component))") | join(", ")')" \
  "WaitForFirstConsumer (persistentvolume-controller), ProvisioningSucceeded (persistentvolume-controller)"
expect_match "the provisioner's message" \
  "$(events ".involvedObject.uid == \"$claim_uid\" and .reason == \"ProvisioningSucceeded\"" | jq -r '.[0].message')" \
  '^Successfully provisioned volume pvc-[0-9a-f-]+ using sim\.minictl\.io/hostpath$'
expect "the StatefulSet's first events: the claim, then the pod" \
  "$(events ".involvedObject.uid == \"$set_uid\"" | jq -r 'sort_by(.firstTimestamp) | .[0:2] | map(.message) | join(" / ")')" \
  "create Claim data-web-0 Pod web-0 in StatefulSet web success / create Pod web-0 in StatefulSet web successful"

step "3. Delete web-1: it comes back with its name and its claim"
before_pod=$(get $PODS/web-1 | jq -r '"\(.metadata.uid) \(.spec.nodeName)"')
before_claim=$(get $PVCS/data-web-1 | jq -r '"\(.metadata.uid) \(.spec.volumeName)"')
say DELETE $PODS/web-1 | jq -c '.metadata | {deletionTimestamp, deletionGracePeriodSeconds}'
new_web_1() { jqtest $PODS/web-1 ".metadata.uid != \"${before_pod% *}\" and .status.phase == \"Running\" and .metadata.deletionTimestamp == null"; }
wait_for "a new web-1 Running" new_web_1
after_pod=$(get $PODS/web-1 | jq -r '"\(.metadata.uid) \(.spec.nodeName)"')
echo "  web-1 before: uid ${before_pod% *} on ${before_pod#* }; after: uid ${after_pod% *} on ${after_pod#* }"
expect "the new web-1 mounts" "$(get $PODS/web-1 | jq -r '.spec.volumes[] | select(.name == "data") | .persistentVolumeClaim.claimName')" "data-web-1"
expect "the same claim (uid and volume)" "$(get $PVCS/data-web-1 | jq -r '"\(.metadata.uid) \(.spec.volumeName)"')" "$before_claim"
expect "so the same node: the volume's node affinity allows no other" "${after_pod#* }" "${before_pod#* }"

step "4. Scale down to 1: web-2 goes, then web-1; their claims stay"
rv=$(get "$PODS?labelSelector=app%3Dweb" | jq -r .metadata.resourceVersion)
background "$work/down" curl -sSN "$API$PODS?watch=true&labelSelector=app%3Dweb&resourceVersion=$rv"
say PATCH $STS/web/scale '{"spec": {"replicas": 1}}' application/merge-patch+json | jq -c '{spec, status}'
gone() { [[ "$(story "$work/down")" == *"web-1 gone"* ]]; }
wait_for "web-1 gone" gone
expect "what a watch of the pods saw, in order" "$(story "$work/down")" \
  "web-2 terminating, web-2 gone, web-1 terminating, web-1 gone"
wait_for "the StatefulSet's status: 1 replica" jqtest $STS/web '.status.replicas == 1 and .status.readyReplicas == 1'
claims | sed 's/^/  /'
expect "every claim still Bound (whenScaled: Retain)" "$(claims | awk '{print $1, $2}' | paste -sd,)" \
  "data-web-0 Bound,data-web-1 Bound,data-web-2 Bound"
expect "data-web-1 is the same claim as before" "$(get $PVCS/data-web-1 | jq -r '"\(.metadata.uid) \(.spec.volumeName)"')" "$before_claim"

step "5. Scale up to 3: web-1 and web-2 find their claims again"
volumes_before=$(claims | paste -sd,)
say PATCH $STS/web/scale '{"spec": {"replicas": 3}}' application/merge-patch+json | jq -c '.spec'
wait_for "3 web pods Running and Ready" equals 3 running web
expect "the same claims, Bound to the same volumes" "$(claims | paste -sd,)" "$volumes_before"
for i in 1 2; do
  expect "web-$i mounts" "$(get $PODS/web-$i | jq -r '.spec.volumes[] | select(.name == "data") | .persistentVolumeClaim.claimName')" "data-web-$i"
done

step "6. What the StatefulSet controller decided (minictl trace --component statefulset)"
cat "$work/trace"
has() { grep -q -E "$1" "$work/trace"; }
expect "claim before pod" "$(has "statefulset +default/web +pod web-0 needs claim data-web-0 → create it\$" && echo seen)" seen
expect "web-2 deleted first" "$(has "statefulset +default/web +want 1, pod web-2 is beyond → delete it\$" && echo seen)" seen
expect "then web-1" "$(has "statefulset +default/web +want 1, pod web-1 is beyond → delete it\$" && echo seen)" seen

step "7. Delete the StatefulSet: the claims outlive it too"
say DELETE $STS/web >/dev/null
say DELETE $SVC/web >/dev/null
wait_for "no web pods left" equals "" pods_of
expect "the claims, still Bound (whenDeleted: Retain)" "$(claims | awk '{print $1, $2}' | paste -sd,)" \
  "data-web-0 Bound,data-web-1 Bound,data-web-2 Bound"
for i in 0 1 2; do say DELETE $PVCS/data-web-$i >/dev/null; done
wait_for "the claims gone, and their volumes with them (reclaimPolicy: Delete)" equals "0" web_volumes

printf '\nLesson 21 done: a StatefulSet gives each pod a name, an order and a claim of its own; the claim outlives the pod, so the pod that comes back finds its data.\n'
