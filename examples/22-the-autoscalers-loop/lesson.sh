#!/usr/bin/env bash
# Lesson 22: the autoscaler's loop. A Deployment whose pods request CPU,
# and a HorizontalPodAutoscaler at 50% of it. Every sync period the
# autoscaler reads the pods' usage from the resource metrics API
# (metrics.k8s.io), compares it with their requests, and writes the
# replica count the ratio asks for through the Deployment's scale
# subresource. Push the simulated usage up: it doubles the Deployment, as
# far as maxReplicas allows. Bring it down: it sees the drop at once, but
# holds the replicas for the scale-down stabilization window, then lets
# them go. Run it against a cluster: `make up` (or `minictl up --fast`)
# in another terminal, then
#   bash examples/22-the-autoscalers-loop/lesson.sh
. "$(dirname "$0")/../lib.sh"

D=/apis/apps/v1/namespaces/default/deployments
HPA=/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers
PODS=/api/v1/namespaces/default/pods
METRICS=/apis/metrics.k8s.io/v1beta1/namespaces/default/pods
USAGE=sim.minictl.io/cpu-usage

# usage: each php-apache pod's CPU usage as metrics.k8s.io reports it, sorted.
usage() { get "$METRICS?labelSelector=app%3Dphp-apache" | jq -c '[.items[].containers[0].usage.cpu] | sort'; }
# set_usage QUANTITY: the usage the simulated kubelet reports for every live php-apache pod.
set_usage() {
  local pod
  for pod in $(get "$PODS?labelSelector=app%3Dphp-apache" | jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name'); do
    say PATCH "$PODS/$pod" "{\"metadata\": {\"annotations\": {\"$USAGE\": \"$1\"}}}" application/merge-patch+json >/dev/null
  done
}
# hpa_status: what kubectl describe hpa shows, in one line.
hpa_status() {
  get $HPA/php-apache | jq -c '.status | {currentReplicas, desiredReplicas,
    cpu: (.currentMetrics[0].resource.current.averageUtilization // null),
    conditions: [.conditions[]? | "\(.type)=\(.status) \(.reason)"]}'
}
# condition TYPE: the reason of the autoscaler's condition TYPE.
condition() { get $HPA/php-apache | jq -r --arg t "$1" '.status.conditions[]? | select(.type == $t) | .reason'; }
# targets: the TARGETS column of kubectl get hpa, from the API's Table.
targets() {
  curl -sS -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' "$API$HPA/php-apache" |
    jq -r '(.columnDefinitions | map(.name) | index("Targets")) as $i | .rows[0].cells[$i]'
}
# rescales: the autoscaler's SuccessfulRescale messages, oldest first.
rescales() {
  events ".involvedObject.uid == \"$uid\" and .reason == \"SuccessfulRescale\"" | jq -c 'sort_by(.firstTimestamp) | map(.message)'
}
replicas() { get $D/php-apache | jq .spec.replicas; }
live() { get "$PODS?labelSelector=app%3Dphp-apache" | jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length'; }

# Start clean, so that the lesson can be run again on the same cluster.
for path in $HPA/php-apache $D/php-apache; do
  [ "$(code GET "$path")" != 200 ] || delete "$path" >/dev/null
done
wait_for "no php-apache pods left from an earlier run" equals 0 live

step "1. A Deployment of 2 pods, each requesting 200m CPU"
say POST $D '{
  "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "php-apache"},
  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "php-apache"}},
    "template": {"metadata": {"labels": {"app": "php-apache"}},
      "spec": {"containers": [{"name": "php-apache", "image": "registry.k8s.io/hpa-example",
        "resources": {"requests": {"cpu": "200m"}}}]}}}}' >/dev/null
wait_for "2 php-apache pods Running" equals 2 running php-apache
echo "\$ curl -s '$API$METRICS?labelSelector=app%3Dphp-apache'"
wait_for "metrics.k8s.io to report both pods, idle: a tenth of their request" equals '["20m","20m"]' usage
expect "each pod's usage" "$(usage)" '["20m","20m"]'

step "2. An autoscaler: 50% of the request, between 2 and 4 pods, a 20s scale-down window"
hpa=$(say POST $HPA '{
  "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "php-apache"},
  "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "php-apache"},
    "minReplicas": 2, "maxReplicas": 4,
    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 20}}}}')
uid=$(jq -r .metadata.uid <<<"$hpa")
jq -c .spec.behavior <<<"$hpa"
expect "the scale-up rules the API server filled in" "$(jq -c '.spec.behavior.scaleUp' <<<"$hpa")" \
  '{"stabilizationWindowSeconds":0,"selectPolicy":"Max","policies":[{"type":"Pods","value":4,"periodSeconds":15},{"type":"Percent","value":100,"periodSeconds":15}]}'
expect "and scale-down's policy" "$(jq -c '.spec.behavior.scaleDown.policies' <<<"$hpa")" '[{"type":"Percent","value":100,"periodSeconds":15}]'
wait_for "the autoscaler's first reading: 10% of the request" jqtest $HPA/php-apache '.status.currentMetrics[0].resource.current.averageUtilization == 10'
hpa_status
expect "ScalingActive" "$(condition ScalingActive)" ValidMetricFound
expect "ScalingLimited (10% asks for 1 pod; minReplicas is 2)" "$(condition ScalingLimited)" TooFewReplicas
expect "desiredReplicas" "$(get $HPA/php-apache | jq .status.desiredReplicas)" 2
expect "TARGETS, as kubectl get hpa shows it" "$(targets)" "cpu: 10%/50%"

step "3. The load goes up: each pod now uses all it requests"
set_usage 200m
wait_for "metrics.k8s.io to report 200m for both pods" jqtest "$METRICS?labelSelector=app%3Dphp-apache" \
  '[.items[].containers[0].usage.cpu | select(. == "200m")] | length == 2'
wait_for "the autoscaler to double php-apache" jqtest $HPA/php-apache '.status.desiredReplicas == 4'
expect "the Deployment's replicas, written through its scale subresource" "$(replicas)" 4
# A pass that read the rise half-way (a rate measured across the patch)
# may have asked for 3 first; the last word is 4.
expect "the event" "$(rescales | jq -r '.[-1]')" "New size: 4; reason: cpu resource utilization (percentage of request) above target"
wait_for "4 php-apache pods Running" equals 4 running php-apache
wait_for "the autoscaler to read the two new, idle pods too" jqtest $HPA/php-apache \
  '.status.currentReplicas == 4 and .status.currentMetrics[0].resource.current.averageUtilization == 55'
hpa_status
expect "TARGETS" "$(targets)" "cpu: 55%/50%"
expect "ScalingLimited (55% asks for 5 pods; maxReplicas is 4)" "$(condition ScalingLimited)" TooManyReplicas
expect "the Deployment's replicas" "$(replicas)" 4

step "4. The load drops: the autoscaler sees it, and the window holds the replicas"
set_usage 20m
wait_for "metrics.k8s.io to report 20m for every pod" equals '["20m","20m","20m","20m"]' usage
wait_for "the autoscaler to read 10% and hold (ScaleDownStabilized)" jqtest $HPA/php-apache \
  '.status.currentMetrics[0].resource.current.averageUtilization == 10 and any(.status.conditions[]; .type == "AbleToScale" and .reason == "ScaleDownStabilized")'
hpa_status
get $HPA/php-apache | jq -r '.status.conditions[] | select(.type == "AbleToScale") | "  AbleToScale: \(.message)"'
expect "desiredReplicas, inside the window" "$(get $HPA/php-apache | jq .status.desiredReplicas)" 4
expect "the Deployment's replicas, inside the window" "$(replicas)" 4

step "5. The window passes: back to 2"
wait_for "the autoscaler to scale php-apache down" jqtest $HPA/php-apache '.status.desiredReplicas == 2'
expect "the Deployment's replicas" "$(replicas)" 2
events=$(rescales)
jq -r '.[] | "  event: \(.)"' <<<"$events"
expect "the last" "$(jq -r '.[-1]' <<<"$events")" "New size: 2; reason: All metrics below target"
# A pass that read the drop half-way (one scrape after the patch, the rate
# between two points straddles it) left a recommendation of 3 in the
# window: then the autoscaler steps 4 → 3 → 2, as the window lets go of
# the 5s, then of the 3.
steps=$(jq -r 'map(capture("New size: (?<n>[0-9]+); reason: (?<why>.*)") | "\(.n) \(if (.why | endswith("above target")) then "up" else "down" end)")
  | (map(select(endswith("up"))) | .[-1]) + ", " + (map(select(endswith("down"))) | join(", "))' <<<"$events")
expect_match "the last scale-up, then every scale-down" "$steps" '^4 up, (3 down, )?2 down$'
expect "ScalingLimited (10% asks for 1 pod; minReplicas is 2)" "$(condition ScalingLimited)" TooFewReplicas
held=$(events ".involvedObject.uid == \"$uid\" and .reason == \"SuccessfulRescale\"" |
  jq '(map(select(.message | endswith("above target")) | .firstTimestamp | fromdateiso8601) | max) as $up
    | (map(select(.message | endswith("below target")) | .firstTimestamp | fromdateiso8601) | min) - $up')
expect_match "seconds from the scale-up to the first scale-down (the 20s window, and the time the drop took to show)" "$held" '^(19|[2-9][0-9])$'
wait_for "2 php-apache pods left" equals 2 live

step "6. Clean up"
for path in $HPA/php-apache $D/php-apache; do delete "$path" >/dev/null; done
wait_for "no php-apache pods left" equals 0 live
