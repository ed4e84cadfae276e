#!/usr/bin/env bash
# Lesson 15: work that finishes. A Job runs pods to completion within its
# parallelism; failures are retried with a growing back-off until the
# backoffLimit; a pod failure policy ends a Job at the first fatal exit; an
# Indexed Job gives each pod its index; a CronJob starts Jobs on a schedule
# and, with concurrencyPolicy Forbid, never two at once. The simulated
# kubelet runs what the containers' commands say (sleep, echo, exit), and
# what they echo is their log. Run it against a cluster: `make up` in
# another terminal, then
#   bash examples/15-work-that-finishes/lesson.sh
. "$(dirname "$0")/../lib.sh"

JOBS=/apis/batch/v1/namespaces/default/jobs
CJ=/apis/batch/v1/namespaces/default/cronjobs
PODS=/api/v1/namespaces/default/pods

# job NAME SPEC: a Job whose one container, "main", runs the shell script
# SCRIPT (the second argument); SPEC (the third) is merged into its spec.
job() {
  jq -n --arg name "$1" --arg script "$2" --argjson spec "$3" '{
    apiVersion: "batch/v1", kind: "Job", metadata: {name: $name},
    spec: ({template: {spec: {restartPolicy: "Never",
      containers: [{name: "main", image: "busybox:1.36", command: ["sh", "-c", $script]}]}}} * $spec)}'
}
# condition JOB TYPE: "True" when the Job has condition TYPE True.
condition() { get "$JOBS/$1" | jq -r --arg t "$2" '[.status.conditions[]? | select(.type == $t) | .status][0] // "none"'; }
# pods_of JOB: the phases of the Job's pods, sorted, on one line.
pods_of() { get "$PODS?labelSelector=job-name%3D$1" | jq -c '[.items[].status.phase] | sort'; }

# Start clean, so that the lesson can be run again on the same cluster.
for path in $CJ/tick $JOBS/count $JOBS/flaky $JOBS/fatal $JOBS/indexed; do
  [ "$(code GET "$path")" != 200 ] || delete "$path" "propagationPolicy=Background" >/dev/null
done
no_jobs() { [ "$(get "$JOBS" | jq '.items | length')" == 0 ] && [ "$(get "$PODS?labelSelector=batch.kubernetes.io%2Fjob-name" | jq '.items | length')" == 0 ]; }
wait_for "no Jobs or Job pods left from an earlier run" no_jobs

step "1. A Job of 5 completions, 2 at a time; each pod echoes, sleeps a second and exits 0"
# Every change to the Job's pods, from now on, for counting later how many ran at once.
background "$work/watch" curl -sN "$API$PODS?watch=true&labelSelector=job-name%3Dcount"
say POST $JOBS "$(job count 'echo counting; sleep 1; exit 0' '{"completions": 5, "parallelism": 2}')" | jq -c '.spec | {completions, parallelism, backoffLimit, completionMode, selector}'
wait_for "Job count Complete" equals True condition count Complete
j=$(say GET $JOBS/count)
jq -c '.status | {succeeded, failed, active, startTime, completionTime}' <<<"$j"
expect "succeeded" "$(jq .status.succeeded <<<"$j")" 5
expect "pods" "$(pods_of count)" '["Succeeded","Succeeded","Succeeded","Succeeded","Succeeded"]'
expect "conditions" "$(jq -c '[.status.conditions[] | select(.status == "True") | .type]' <<<"$j")" '["SuccessCriteriaMet","Complete"]'
most=$(jq -s 'reduce .[] as $e ({phase: {}, most: 0};
  .phase[$e.object.metadata.name] = $e.object.status.phase
  | .most = ([.most, ([.phase[] | select(. == "Pending" or . == "Running")] | length)] | max)) | .most' "$work/watch")
expect "most pods active at once, replayed from a watch (parallelism 2)" "$([ "$most" -le 2 ] && [ "$most" -ge 1 ] && echo "at most 2")" "at most 2"
pod=$(get "$PODS?labelSelector=job-name%3Dcount" | jq -r '.items[0].metadata.name')
expect "the tracking finalizer is gone once a pod is counted" "$(get "$PODS/$pod" | jq -c '.metadata.finalizers // []')" '[]'
echo "\$ curl -s $API$PODS/$pod/log"
get "$PODS/$pod/log"
expect "what the container echoed is its log" "$(get "$PODS/$pod/log" | grep -c '^counting$')" 1

step "2. A Job whose pods exit 1, backoffLimit 2: three tries, each after a longer back-off, then Failed"
say POST $JOBS "$(job flaky 'echo trying; exit 1' '{"backoffLimit": 2}')" >/dev/null
wait_for "Job flaky Failed" equals True condition flaky Failed
j=$(get $JOBS/flaky)
jq -c '.status.conditions[] | {type, status, reason, message}' <<<"$j"
expect "failed pods" "$(jq .status.failed <<<"$j")" 3
expect "reason" "$(jq -r '.status.conditions[] | select(.type == "Failed") | .reason' <<<"$j")" BackoffLimitExceeded
expect "pods" "$(pods_of flaky)" '["Failed","Failed","Failed"]'
echo "  the pods' exit codes and when each was created (the gaps are the back-off):"
get "$PODS?labelSelector=job-name%3Dflaky" | jq -r '.items | sort_by(.metadata.creationTimestamp)[] |
  "    \(.metadata.creationTimestamp)  \(.metadata.name)  exit \(.status.containerStatuses[0].state.terminated.exitCode)"'
# The gaps between the creations: at least the back-off, which doubles (1s then 2s under --fast, 10s then 20s by default).
gaps=$(get "$PODS?labelSelector=job-name%3Dflaky" | jq -c '[.items[].metadata.creationTimestamp | fromdate] | sort | [.[1] - .[0], .[2] - .[1]]')
expect "the second try waited at least 1s, the third at least 2s" "$(jq -r 'if .[0] >= 1 and .[1] >= 2 then "yes" else "no: \(.)" end' <<<"$gaps")" yes

step "3. A pod failure policy: exit code 42 means the work can never succeed; fail the Job at once"
say POST $JOBS "$(job fatal 'echo bad input; exit 42' '{"backoffLimit": 6,
  "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]}}')" >/dev/null
wait_for "Job fatal Failed" equals True condition fatal Failed
j=$(get $JOBS/fatal)
expect "reason" "$(jq -r '.status.conditions[] | select(.type == "Failed") | .reason' <<<"$j")" PodFailurePolicy
expect "failed pods (no retry)" "$(jq .status.failed <<<"$j")" 1
jq -r '.status.conditions[] | select(.type == "Failed") | "  message: \(.message)"' <<<"$j"

step "4. An Indexed Job: each pod gets its index, in an annotation and in \$JOB_COMPLETION_INDEX"
say POST $JOBS "$(job indexed 'echo "I am index $JOB_COMPLETION_INDEX"' '{"completions": 3, "parallelism": 3, "completionMode": "Indexed"}')" >/dev/null
wait_for "Job indexed Complete" equals True condition indexed Complete
expect "completedIndexes" "$(get $JOBS/indexed | jq -r .status.completedIndexes)" "0-2"
said=$(for pod in $(get "$PODS?labelSelector=job-name%3Dindexed" | jq -r '.items[].metadata.name'); do
  idx=$(get "$PODS/$pod" | jq -r '.metadata.annotations["batch.kubernetes.io/job-completion-index"]')
  echo "$idx: $(get "$PODS/$pod/log" | grep '^I am index')"
done | sort)
echo "$said" | sed 's/^/    /'
expect "each pod's log names its own index" "$(echo "$said" | tr '\n' '|')" "0: I am index 0|1: I am index 1|2: I am index 2|"

step "5. A CronJob every minute whose Jobs never finish, with concurrencyPolicy Forbid"
say POST $CJ '{
  "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
  "spec": {"schedule": "*/1 * * * *", "concurrencyPolicy": "Forbid",
    "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
      "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo tick; sleep 3600"]}]}}}}}}' |
  jq -c '.spec | {schedule, concurrencyPolicy, suspend, successfulJobsHistoryLimit, failedJobsHistoryLimit}'
owned_jobs() { get "$JOBS" | jq '[.items[] | select(.metadata.ownerReferences[0]?.name == "tick")] | length'; }
WAIT=75 wait_for "the first Job, at the next whole minute" equals 1 owned_jobs
cj=$(get $CJ/tick)
jq -c '.status' <<<"$cj"
expect "status.active names the Job" "$(jq -r '.status.active[0].name' <<<"$cj")" "$(get "$JOBS" | jq -r '.items[] | select(.metadata.ownerReferences[0]?.name == "tick") | .metadata.name')"
# This CronJob's Events, by its uid: those of a "tick" an earlier run made are not its.
uid=$(jq -r .metadata.uid <<<"$cj")
forbidden() { [ "$(events ".involvedObject.uid == \"$uid\" and .reason == \"JobAlreadyActive\"" | jq length)" -ge 1 ]; }
WAIT=75 wait_for "the next minute: the CronJob does not start a second Job (event JobAlreadyActive)" forbidden
events ".involvedObject.uid == \"$uid\"" | jq -r '.[] | "  \(.reason): \(.message)"'
expect "Jobs of the CronJob" "$(owned_jobs)" 1

step "6. Delete the CronJob: its Job and the Job's pods go with it"
say DELETE "$CJ/tick?propagationPolicy=Background" >/dev/null
gone() { [ "$(owned_jobs)" == 0 ]; }
wait_for "the CronJob's Job collected" gone
for path in $JOBS/count $JOBS/flaky $JOBS/fatal $JOBS/indexed; do
  delete "$path" "propagationPolicy=Background" >/dev/null
done
wait_for "every Job and Job pod gone" no_jobs
