#!/usr/bin/env bash
# Lesson 13: an admission webhook that says no. Run it against a cluster:
# `make up` in another terminal, then
#   bash examples/13-admission-webhooks/lesson.sh
. "$(dirname "$0")/../lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
VWC=/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations
P=/api/v1/namespaces/webhooks/pods

# The webhook's configuration goes at the end, whatever happens: a webhook
# that fails closed and is no longer running would refuse every pod of the
# namespace it watches.
remove_config() {
  if [ "$(code GET $VWC/team-policy)" == 200 ]; then delete $VWC/team-policy >/dev/null; fi
}
show_log() {
  if [ "$1" -ne 0 ] && [ -f "$work/webhook.log" ]; then
    echo "--- the webhook's log:"
    cat "$work/webhook.log"
  fi
}
at_exit 'show_log $status; remove_config'
# pod NAME [LABELS]: a pod in JSON, with LABELS (a JSON object) if given.
pod() {
  local labels=${2:-}
  [ -n "$labels" ] || labels='{}'
  echo "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"$1\", \"labels\": $labels},
    \"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"nginx:1.27\"}]}}"
}
# create_code NS NAME [LABELS] [QUERY]: the HTTP code of a pod's create.
create_code() { code POST "/api/v1/namespaces/$1/pods${4:-}" "$(pod "$2" "${3:-}")"; }

# Start clean, so that the lesson can be run again on the same cluster.
remove_config
if [ "$(code GET /api/v1/namespaces/webhooks)" == 200 ]; then
  delete /api/v1/namespaces/webhooks >/dev/null
  wait_for "namespace webhooks of an earlier run to go" equals 404 code GET /api/v1/namespaces/webhooks
fi
for p in no-team with-team; do
  if [ "$(code GET /api/v1/namespaces/default/pods/$p)" == 200 ]; then delete /api/v1/namespaces/default/pods/$p gracePeriodSeconds=0 >/dev/null; fi
done
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace",
  "metadata": {"name": "webhooks", "labels": {"team-policy": "enforced"}}}' >/dev/null

step "1. Build the webhook and start it: an HTTPS server with a CA of its own"
printf '$ %s\n' "go run . --addr 127.0.0.1:0 --ca-file ca.pem    # here: go build, then run the binary"
(cd "$here" && go build -o "$work/team-webhook" .)
background "$work/webhook.log" "$work/team-webhook" --addr 127.0.0.1:0 --ca-file "$work/ca.pem"
webhook=$!
wait_for "it serves" grep -q '^serving on https://' "$work/webhook.log"
url=$(sed -n 's/^serving on //p' "$work/webhook.log")
head -1 "$work/ca.pem"
expect_match "its URL" "$url" '^https://127\.0\.0\.1:[0-9]+$'
ca=$(base64 <"$work/ca.pem" | tr -d '\n')

step "2. Register it: pods created in namespaces labelled team-policy=enforced go to it first"
config='{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
  "metadata": {"name": "team-policy"},
  "webhooks": [{"name": "team.policy.minictl.dev",
    "clientConfig": {"url": "'"$url"'/validate", "caBundle": "'"$ca"'"},
    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
    "namespaceSelector": {"matchLabels": {"team-policy": "enforced"}},
    "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5}]}'
say POST $VWC "$config" | jq -c '.webhooks[0] | {name, failurePolicy, matchPolicy, timeoutSeconds, objectSelector}'
expect "the API server's defaults: failurePolicy" "$(get $VWC/team-policy | jq -r '.webhooks[0].failurePolicy')" Fail
# The API server reads configurations from its watch cache: a dry run shows
# when this one is in force (sideEffects None: the webhook may see dry runs).
wait_for "the webhook to be in force" equals 403 create_code webhooks probe '{}' '?dryRun=All'

step "3. A pod without a team label: the webhook says no, and says why"
answer=$(say POST $P "$(pod no-team)")
jq -c '{code, reason, message}' <<<"$answer"
expect "code" "$(jq -r .code <<<"$answer")" 403
expect "message" "$(jq -r .message <<<"$answer")" 'admission webhook "team.policy.minictl.dev" denied the request: every pod needs a team label'
expect "nothing stored" "$(code GET $P/no-team)" 404
expect_match "the webhook's log" "$(grep 'pod=webhooks/no-team' "$work/webhook.log" | tail -1)" 'allowed=false'

step "4. With a team label it goes through; and elsewhere the webhook is not asked"
say POST $P "$(pod with-team '{"team": "blue"}')" | jq -c '{name: .metadata.name, labels: .metadata.labels}'
expect "webhooks/with-team" "$(code GET $P/with-team)" 200
expect "default/no-team (namespace not selected)" "$(create_code default no-team)" 201
expect "the webhook saw default/no-team" "$(grep -c 'pod=default/' "$work/webhook.log" || true)" 0

step "5. The webhook goes down: failurePolicy Fail refuses, Ignore lets through"
kill "$webhook"
wait "$webhook" 2>/dev/null || true
answer=$(say POST $P "$(pod while-down '{"team": "blue"}')")
jq -c '{code, reason}' <<<"$answer"
expect "code with Fail" "$(jq -r .code <<<"$answer")" 500
expect_match "message" "$(jq -r .message <<<"$answer")" '^Internal error occurred: failed calling webhook "team.policy.minictl.dev"'
say PATCH $VWC/team-policy '[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]' \
  application/json-patch+json | jq -c '.webhooks[0].failurePolicy'
wait_for "Ignore in force" equals 201 create_code webhooks while-down '{}' '?dryRun=All'
expect "a pod without a team label, webhook down, Ignore" "$(create_code webhooks no-team)" 201

step "6. What the API server counted"
metrics=$(get /metrics)
grep '^apiserver_admission_webhook_rejection_count' <<<"$metrics" | sed 's/^/  /'
expect_match "refusals by the webhook" "$(grep '^apiserver_admission_webhook_rejection_count{.*error_type="no_error".*rejection_code="403"' <<<"$metrics")" ' [1-9][0-9]*$'
expect_match "failures to call it" "$(grep '^apiserver_admission_webhook_rejection_count{.*error_type="calling_webhook_error"' <<<"$metrics")" ' [1-9][0-9]*$'

remove_config
delete /api/v1/namespaces/default/pods/no-team gracePeriodSeconds=0 >/dev/null
echo
echo "Done: the configuration is removed; namespace webhooks stays for you to look at."
