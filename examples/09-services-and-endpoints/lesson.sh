#!/usr/bin/env bash
# Lesson 9: a Service and the Endpoints the endpoint controller keeps for it.
# A Deployment with a named container port, a Service whose targetPort names
# it; the Endpoints follow scaling, readiness (broken on purpose through the
# simulated kubelet) and deletion. Run it against a cluster: `make up` in
# another terminal, then
#   bash examples/09-services-and-endpoints/lesson.sh
. "$(dirname "$0")/../lib.sh"

D=/apis/apps/v1/namespaces/default/deployments
PODS=/api/v1/namespaces/default/pods
SVC=/api/v1/namespaces/default/services
EP=/api/v1/namespaces/default/endpoints
ES=/apis/discovery.k8s.io/v1/namespaces/default/endpointslices

# endpoints: "<ready> ready, <not ready> not ready" for Endpoints default/web.
endpoints() {
  get $EP/web |
    jq -r '"\([.subsets[]?.addresses[]?] | length) ready, \([.subsets[]?.notReadyAddresses[]?] | length) not ready"'
}
# subsets: "<port>: <ready> ready, <not ready> not ready" per subset of
# Endpoints default/web, sorted by port, joined by " | ".
subsets() {
  get $EP/web | jq -r '[.subsets[]? | "\(.ports[0].port): \(.addresses // [] | length) ready, \(.notReadyAddresses // [] | length) not ready"]
    | sort | join(" | ")'
}
# pod_ips: the IPs of the live web pods, sorted, one line.
pod_ips() {
  get "$PODS?labelSelector=app%3Dweb" |
    jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .status.podIP] | sort'
}
# endpoint_ips: the IPs the Endpoints list (ready or not), sorted, one line.
endpoint_ips() {
  get $EP/web |
    jq -c '[.subsets[]? | (.addresses // []) + (.notReadyAddresses // []) | .[].ip] | sort'
}
# slice_ips: the ready addresses of the EndpointSlices of Service web,
# sorted, one line.
slice_ips() {
  get "$ES?labelSelector=kubernetes.io%2Fservice-name%3Dweb" |
    jq -c '[.items[].endpoints[]? | select(.conditions.ready) | .addresses[]] | sort'
}
# listed POD: whether POD is in the Endpoints, ready or not.
listed() {
  get $EP/web |
    jq --arg pod "$1" '[.subsets[]? | (.addresses // []) + (.notReadyAddresses // []) | .[].targetRef.name] | index($pod) != null'
}
scale() { say PATCH $D/web/scale "{\"spec\": {\"replicas\": $1}}" application/merge-patch+json >/dev/null; }

# Start clean, so that the lesson can be run again on the same cluster.
for pod in $(get "$PODS?labelSelector=app%3Dweb" | jq -r '.items[] | select(.metadata.finalizers) | .metadata.name'); do
  patch "$PODS/$pod" '{"metadata": {"finalizers": null}}' >/dev/null
done
for path in $SVC/web $SVC/nobody $D/web; do
  [ "$(code GET "$path")" != 200 ] || delete "$path" >/dev/null
done
no_web() { [ "$(get "$PODS?labelSelector=app%3Dweb" | jq '.items | length')" == 0 ]; }
wait_for "no web pods left from an earlier run" no_web

# Follow the endpoint controller's decisions, under its
# kube-controller-manager name, as `minictl trace` in a second terminal would.
background "$work/trace" "$MINICTL" trace --server "$API" --component endpoint
wait_for "minictl trace --component endpoint attached" trace_attached "$work/trace"

step "1. A Deployment whose container port is named \"http\" (8080), and a Service on port 80 → targetPort \"http\""
say POST $D '{
  "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
        "ports": [{"name": "http", "containerPort": 8080}]}]}}}}' >/dev/null
svc=$(say POST $SVC '{
  "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
  "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}')
expect "service selector" "$(jq -c .spec.selector <<<"$svc")" '{"app":"web"}'
expect "service port → targetPort" "$(jq -r '.spec.ports[0] | "\(.port) → \(.targetPort)"' <<<"$svc")" "80 → http"
wait_for "3 web pods Running and Ready" equals 3 running web

step "2. The endpoint controller wrote Endpoints web: one address per ready pod"
wait_for "Endpoints web lists 3 ready addresses" equals "3 ready, 0 not ready" endpoints
ep=$(say GET $EP/web)
jq -c '.subsets[]' <<<"$ep"
expect "Endpoints port (the named targetPort, resolved)" "$(jq -c '.subsets[0].ports' <<<"$ep")" '[{"name":"http","port":8080,"protocol":"TCP"}]'
expect "addresses are the pods' IPs" "$(endpoint_ips)" "$(pod_ips)"
expect "every address points at its pod" "$(jq '[.subsets[].addresses[] | .targetRef.kind == "Pod" and (.nodeName | startswith("node-"))] | all' <<<"$ep")" true
decided() { grep -q -E "endpoint +default/web +3 ready, 0 not ready → (create|update)" "$work/trace"; }
wait_for "the endpoint controller's decision in minictl trace --component endpoint" decided
echo "\$ $MINICTL trace --component endpoint"
grep -E "endpoint +default/web " "$work/trace"
echo "  the endpointslice controller wrote the same addresses into an EndpointSlice, as kube-proxy reads them:"
wait_for "the EndpointSlice of web lists the 3 pods, ready" equals "$(pod_ips)" slice_ips
es=$(say GET "$ES?labelSelector=kubernetes.io%2Fservice-name%3Dweb")
jq -c '.items[] | {name: .metadata.name, addressType, ports, endpoints: [.endpoints[] | {addresses, conditions, nodeName}]}' <<<"$es"
expect "slice managed by" "$(jq -r '.items[0].metadata.labels["endpointslice.kubernetes.io/managed-by"]' <<<"$es")" endpointslice-controller.k8s.io
expect "slice owned by" "$(jq -r '.items[0].metadata.ownerReferences[0] | "\(.kind)/\(.name)"' <<<"$es")" Service/web

step "3. Endpoints follow scaling"
scale 5
wait_for "5 ready addresses" equals "5 ready, 0 not ready" endpoints
expect "addresses are the pods' IPs" "$(endpoint_ips)" "$(pod_ips)"
scale 2
wait_for "2 ready addresses" equals "2 ready, 0 not ready" endpoints
wait_for "2 web pods left" equals 2 running web
expect "addresses are the pods' IPs" "$(endpoint_ips)" "$(pod_ips)"

step "4. Break one pod's readiness: it moves to notReadyAddresses"
pod=$(get "$PODS?labelSelector=app%3Dweb" | jq -r '.items[0].metadata.name')
echo "  the pod: $pod"
say PATCH "$PODS/$pod" '{"metadata": {"annotations": {"sim.minictl.io/ready": "false"}}}' application/merge-patch+json >/dev/null
wait_for "pod $pod not Ready" jqtest "$PODS/$pod" \
  'any(.status.conditions[]; .type == "Ready" and .status == "False")'
expect "pod phase (still running: not ready is not dead)" "$(get "$PODS/$pod" | jq -r .status.phase)" Running
wait_for "1 ready, 1 not ready" equals "1 ready, 1 not ready" endpoints
expect "the not-ready address is that pod" \
  "$(get $EP/web | jq -r '.subsets[].notReadyAddresses[]?.targetRef.name')" "$pod"
wait_for "Deployment availableReplicas 1" jqtest $D/web '.status.availableReplicas == 1'
expect "pods of the Deployment (none replaced)" \
  "$(get "$PODS?labelSelector=app%3Dweb" | jq '.items | length')" 2

step "5. Remove the annotation: the pod is Ready again and back in addresses"
say PATCH "$PODS/$pod" '{"metadata": {"annotations": {"sim.minictl.io/ready": null}}}' application/merge-patch+json >/dev/null
wait_for "2 ready, 0 not ready" equals "2 ready, 0 not ready" endpoints
expect "addresses are the pods' IPs" "$(endpoint_ips)" "$(pod_ips)"

step "6. Delete a pod (held by a finalizer, so we can look): a terminating pod is no endpoint"
say PATCH "$PODS/$pod" '{"metadata": {"finalizers": ["example.com/hold"]}}' application/merge-patch+json >/dev/null
say DELETE "$PODS/$pod" >/dev/null
wait_for "the pod's containers stopped (its kubelet finished it)" jqtest "$PODS/$pod" '.status.phase == "Succeeded"'
expect_match "the pod still exists, with a deletionTimestamp" \
  "$(get "$PODS/$pod" | jq -r .metadata.deletionTimestamp)" '^[0-9]{4}-'
wait_for "the replacement pod Running" equals 2 running web
wait_for "2 ready addresses, without $pod" equals "2 ready, 0 not ready" endpoints
expect "$pod listed in the Endpoints" "$(listed "$pod")" false
expect "addresses are the live pods' IPs" "$(endpoint_ips)" "$(pod_ips)"
say PATCH "$PODS/$pod" '{"metadata": {"finalizers": null}}' application/merge-patch+json >/dev/null
wait_for "pod $pod gone (404)" equals 404 code GET "$PODS/$pod"

step "7. Why name the targetPort: a rollout moves the pods from port 8080 to 9090"
echo "  the new template's pods come up not ready (as if their readiness probe failed), so the rollout"
echo "  stops half-way (maxUnavailable 0) and we can look at the mix"
say PATCH $D/web '{"spec": {"strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
  "template": {"metadata": {"annotations": {"sim.minictl.io/ready": "false"}},
    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 9090}]}]}}}}' \
  application/merge-patch+json >/dev/null
wait_for "two subsets: old pods ready on 8080, the new one not ready on 9090" \
  equals "8080: 2 ready, 0 not ready | 9090: 0 ready, 1 not ready" subsets
wait_for "the rollout waits: 1 updated replica, 2 available" jqtest $D/web \
  '.status.updatedReplicas == 1 and .status.availableReplicas == 2 and .status.replicas == 3'
expect "the Service (unchanged)" "$(get $SVC/web | jq -r '.spec.ports[0] | "\(.port) → \(.targetPort)"')" "80 → http"
echo "  now let the new pods be ready: remove the annotation from the template"
say PATCH $D/web '{"spec": {"template": {"metadata": {"annotations": null}}}}' application/merge-patch+json >/dev/null
wait_for "one subset again: 2 ready on 9090" equals "9090: 2 ready, 0 not ready" subsets
expect "addresses are the pods' IPs" "$(endpoint_ips)" "$(pod_ips)"
expect "the pods' containerPort" "$(get "$PODS?labelSelector=app%3Dweb" | jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .spec.containers[0].ports[0].containerPort] | unique')" '[9090]'

step "8. A Service that selects nothing has Endpoints with no addresses"
say POST $SVC '{
  "apiVersion": "v1", "kind": "Service", "metadata": {"name": "nobody"},
  "spec": {"selector": {"app": "nobody"}, "ports": [{"port": 80}]}}' >/dev/null
wait_for "Endpoints nobody exists" jqtest $EP/nobody 'true'
expect "Endpoints nobody subsets" "$(get $EP/nobody | jq -c '.subsets // []')" '[]'

step "9. Delete the Service: the controller deletes its Endpoints"
say DELETE $SVC/web >/dev/null
wait_for "Endpoints web gone (404)" equals 404 code GET $EP/web
expect "the pods do not care" "$(running web)" 2
