#!/usr/bin/env bash
# Lesson 18: what may you do? RBAC, from a 403 to a RoleBinding. Run it
# against a cluster started with an audit log (see flags):
#   minictl up --audit-log-path=$HOME/.local/share/minictl/audit.log
# then, in another terminal,
#   bash examples/18-what-may-you-do/lesson.sh
. "$(dirname "$0")/../lib.sh"

SECURE=${SECURE:-https://127.0.0.1:6443}
DATA_DIR=${DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/minictl}
PKI=$DATA_DIR/pki
AUDIT=${AUDIT:-$DATA_DIR/audit.log}
for f in "$PKI/ca.crt" "$PKI/admin.crt" "$PKI/admin.key" "$AUDIT"; do
  [ -f "$f" ] || { echo "no $f: set DATA_DIR to the data dir of a minictl up started with --audit-log-path=\$DATA_DIR/audit.log" >&2; exit 1; }
done

# as WHO ARGS...: curl on the secure port as WHO: "admin" (the client
# certificate of pki/), or a ServiceAccount of namespace team, by its token.
as() {
  local who=$1; shift
  if [ "$who" == admin ]; then
    curl -sS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"
  else
    curl -sS --cacert "$PKI/ca.crt" -H "Authorization: Bearer ${tokens[$who]}" "$@"
  fi
}
# status WHO URL [ARGS...]: only the HTTP code.
status() { as "$1" -o /dev/null -w '%{http_code}' "${@:2}"; }
# review WHO KIND SPEC: POST an authorization.k8s.io/v1 review as WHO; its status.
review() {
  as "$1" -X POST "$SECURE/apis/authorization.k8s.io/v1/$(tr A-Z a-z <<<"$2")s" -H 'Content-Type: application/json' \
    -d "{\"apiVersion\": \"authorization.k8s.io/v1\", \"kind\": \"$2\", \"spec\": $3}" | jq -c .status
}
# may WHO VERB RESOURCE [GROUP]: what a SubjectAccessReview, asked by the
# admin, says of ServiceAccount WHO doing VERB on RESOURCE in namespace team.
may() {
  review admin SubjectAccessReview "{\"user\": \"system:serviceaccount:team:$1\",
    \"groups\": [\"system:serviceaccounts\", \"system:serviceaccounts:team\", \"system:authenticated\"],
    \"resourceAttributes\": {\"namespace\": \"team\", \"verb\": \"$2\", \"resource\": \"$3\", \"group\": \"${4:-}\"}}" | jq .allowed
}

NS=/api/v1/namespaces/team
RB=/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings
# Start clean, so that the lesson can be run again on the same cluster.
if [ "$(code GET $NS)" == 200 ]; then
  delete $NS >/dev/null
  wait_for "namespace team of an earlier run to go" equals 404 code GET $NS
fi
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}' >/dev/null
declare -A tokens
for sa in reader writer boss; do
  post $NS/serviceaccounts "{\"apiVersion\": \"v1\", \"kind\": \"ServiceAccount\", \"metadata\": {\"name\": \"$sa\"}}" >/dev/null
  tokens[$sa]=$(post $NS/serviceaccounts/$sa/token '{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
    "spec": {"expirationSeconds": 3600}}' | jq -r .status.token)
done
echo "ServiceAccounts reader, writer and boss in namespace team, each with a token (lesson 17)"

step "1. A 403: the reader may not list pods"
printf '$ curl -s --cacert ca.crt -H "Authorization: Bearer $READER" %s/api/v1/namespaces/team/pods\n' "$SECURE"
refused=$(as reader "$SECURE/api/v1/namespaces/team/pods")
jq . <<<"$refused"
expect "code" "$(jq .code <<<"$refused")" 403
expect "reason" "$(jq -r .reason <<<"$refused")" Forbidden
expect "message" "$(jq -r .message <<<"$refused")" \
  'pods is forbidden: User "system:serviceaccount:team:reader" cannot list resource "pods" in API group "" in the namespace "team"'
expect "details" "$(jq -c .details <<<"$refused")" '{"kind":"pods"}'
echo "\$ # SelfSubjectAccessReview: may I list pods in team? (kubectl auth can-i list pods -n team)"
no=$(review reader SelfSubjectAccessReview '{"resourceAttributes": {"namespace": "team", "verb": "list", "resource": "pods"}}')
echo "$no"
expect "the review says no" "$(jq .allowed <<<"$no")" false
expect "and nothing denied it: nothing allowed it" "$(jq '.denied // false' <<<"$no")" false

step "2. A RoleBinding: the reader gets the ClusterRole view in namespace team"
say POST $RB '{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
  "metadata": {"name": "reader-view"},
  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
  "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "team"}]}' | jq -c '{kind, name: .metadata.name, roleRef, subjects}'
wait_for "the reader to list pods in team" equals 200 status reader "$SECURE/api/v1/namespaces/team/pods"
yes=$(review reader SelfSubjectAccessReview '{"resourceAttributes": {"namespace": "team", "verb": "list", "resource": "pods"}}')
echo "$yes"
expect "the review says yes" "$(jq .allowed <<<"$yes")" true
expect "and why" "$(jq -r .reason <<<"$yes")" \
  'RBAC: allowed by RoleBinding "reader-view/team" of ClusterRole "view" to ServiceAccount "reader/team"'
expect "a RoleBinding grants in its namespace only: pods in default" "$(status reader "$SECURE/api/v1/namespaces/default/pods")" 403
expect "view does not read Secrets" "$(as reader "$SECURE/api/v1/namespaces/team/secrets" | jq -r .message)" \
  'secrets is forbidden: User "system:serviceaccount:team:reader" cannot list resource "secrets" in API group "" in the namespace "team"'
expect "nor write anything" "$(status reader "$SECURE/api/v1/namespaces/team/configmaps" -X POST -H 'Content-Type: application/json' \
  -d '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}')" 403

step "3. SelfSubjectRulesReview: everything the reader may do in team (kubectl auth can-i --list)"
rules=$(review reader SelfSubjectRulesReview '{"namespace": "team"}')
jq -c '.resourceRules[] | select(.resources | index("pods"))' <<<"$rules"
jq -c '.nonResourceRules[]' <<<"$rules" | head -3
expect "pods: get, list, watch" \
  "$(jq -c '[.resourceRules[] | select((.apiGroups | index("")) and (.resources | index("pods"))) | .verbs[]] | sort | unique' <<<"$rules")" \
  '["get","list","watch"]'
expect "secrets: nothing" "$(jq '[.resourceRules[] | select(.resources | index("secrets"))] | length' <<<"$rules")" 0
expect "every authenticated user may ask who they are" \
  "$(jq '[.resourceRules[] | select(.resources | index("selfsubjectreviews")) | .verbs[]] | index("create") != null' <<<"$rules")" true
expect "paths: discovery and the public ones, /version among them" \
  "$(jq '[.nonResourceRules[] | select(.verbs | index("get")) | .nonResourceURLs[]] | (index("/api") != null) and (index("/version") != null)' <<<"$rules")" true
expect "the list is complete" "$(jq .incomplete <<<"$rules")" false

step "4. The bootstrap roles: view, edit, admin"
for role in view edit admin; do
  get /apis/rbac.authorization.k8s.io/v1/clusterroles/$role |
    jq -c '{name: .metadata.name, aggregationRule: .aggregationRule.clusterRoleSelectors, rules: (.rules | length)}'
done
expect "view is aggregated from the roles labelled aggregate-to-view" \
  "$(get /apis/rbac.authorization.k8s.io/v1/clusterroles/view | jq -c .aggregationRule.clusterRoleSelectors)" \
  '[{"matchLabels":{"rbac.authorization.k8s.io/aggregate-to-view":"true"}}]'
say POST $RB '{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "writer-edit"},
  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
  "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "team"}]}' >/dev/null
say POST $RB '{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "boss-admin"},
  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
  "subjects": [{"kind": "ServiceAccount", "name": "boss", "namespace": "team"}]}' >/dev/null
echo "\$ # SubjectAccessReview, asked by the admin: may WHO do VERB on RESOURCE in team?"
printf '  %-7s %-10s %-13s %-19s %s\n' who "list pods" "get secrets" "create deployments" "create rolebindings"
for sa in reader writer boss; do
  printf '  %-7s %-10s %-13s %-19s %s\n' $sa "$(may $sa list pods)" "$(may $sa get secrets)" \
    "$(may $sa create deployments apps)" "$(may $sa create rolebindings rbac.authorization.k8s.io)"
done
expect "view (reader)" "$(may reader list pods) $(may reader get secrets) $(may reader create deployments apps) $(may reader create rolebindings rbac.authorization.k8s.io)" "true false false false"
expect "edit (writer)" "$(may writer list pods) $(may writer get secrets) $(may writer create deployments apps) $(may writer create rolebindings rbac.authorization.k8s.io)" "true true true false"
expect "admin (boss)" "$(may boss list pods) $(may boss get secrets) $(may boss create deployments apps) $(may boss create rolebindings rbac.authorization.k8s.io)" "true true true true"

step "5. Escalation: nobody grants what they do not hold"
give_reader() { # give_reader WHO NAME CLUSTERROLE: WHO binds CLUSTERROLE to the reader
  as "$1" -X POST "$SECURE/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings" -H 'Content-Type: application/json' \
    -d "{\"apiVersion\": \"rbac.authorization.k8s.io/v1\", \"kind\": \"RoleBinding\", \"metadata\": {\"name\": \"$2\"},
      \"roleRef\": {\"apiGroup\": \"rbac.authorization.k8s.io\", \"kind\": \"ClusterRole\", \"name\": \"$3\"},
      \"subjects\": [{\"kind\": \"ServiceAccount\", \"name\": \"reader\", \"namespace\": \"team\"}]}"
}
echo "\$ # the boss (admin in team) binds edit to the reader: the boss holds all of edit in team"
expect "allowed" "$(give_reader boss reader-edit edit | jq -r .metadata.name)" reader-edit
echo "\$ # the boss binds cluster-admin to the reader"
escalate=$(give_reader boss reader-cluster-admin cluster-admin)
jq -r .message <<<"$escalate"
expect "code" "$(jq .code <<<"$escalate")" 403
expect "message" "$(jq -r .message <<<"$escalate" | head -1)" \
  'rolebindings.rbac.authorization.k8s.io "reader-cluster-admin" is forbidden: user "system:serviceaccount:team:boss" (groups=["system:serviceaccounts" "system:serviceaccounts:team" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:'
expect "what it lacks" "$(jq -r .message <<<"$escalate" | sed -n 2p)" '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
expect "nothing stored" "$(code GET $RB/reader-cluster-admin)" 404
echo "\$ # the writer (edit) may not bind anything: edit has no rolebindings"
expect "writer binds view" "$(give_reader writer reader-view-2 view | jq -r .message)" \
  'rolebindings.rbac.authorization.k8s.io is forbidden: User "system:serviceaccount:team:writer" cannot create resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "team"'
say DELETE $RB/reader-edit >/dev/null

step "6. Impersonation: the admin acts as the reader"
printf '$ curl -s --cacert ca.crt --cert admin.crt --key admin.key -H "Impersonate-User: system:serviceaccount:team:reader" ...\n'
imp=(-H "Impersonate-User: system:serviceaccount:team:reader")
who=$(as admin "${imp[@]}" -X POST "$SECURE/apis/authentication.k8s.io/v1/selfsubjectreviews" -H 'Content-Type: application/json' \
  -d '{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}' | jq -c .status.userInfo)
echo "$who"
expect "whoami, impersonated" "$(jq -c '{username, groups}' <<<"$who")" \
  '{"username":"system:serviceaccount:team:reader","groups":["system:serviceaccounts","system:serviceaccounts:team","system:authenticated"]}'
expect "the admin, as the reader, lists pods in team" "$(status admin "$SECURE/api/v1/namespaces/team/pods" "${imp[@]}")" 200
expect "but not Secrets: the reader's rights, not the admin's" "$(as admin "${imp[@]}" "$SECURE/api/v1/namespaces/team/secrets" | jq -r .message)" \
  'secrets is forbidden: User "system:serviceaccount:team:reader" cannot list resource "secrets" in API group "" in the namespace "team"'
expect "the reader may not impersonate" \
  "$(as reader -H 'Impersonate-User: minictl-admin' "$SECURE/api/v1/namespaces/team/pods" | jq -r .message)" \
  'users "minictl-admin" is forbidden: User "system:serviceaccount:team:reader" cannot impersonate resource "users" in API group "" at the cluster scope'

step "7. The audit log: who asked what, and what the authorizer said"
# list_pods CODE: the audit Events of the reader's list of pods in team that
# ended with CODE, as the log has them.
list_pods() {
  jq -c --argjson code "$1" 'select(.stage == "ResponseComplete" and .verb == "list"
      and .user.username == "system:serviceaccount:team:reader" and .impersonatedUser == null
      and .objectRef.resource == "pods" and .objectRef.namespace == "team" and .responseStatus.code == $code)' "$AUDIT"
}
logged() { [ -n "$(list_pods "$1")" ]; }
wait_for "the refused list in the audit log" logged 403
wait_for "the allowed list in the audit log" logged 200
echo "\$ jq 'select(.user.username == \"system:serviceaccount:team:reader\" and .objectRef.resource == \"pods\")' $AUDIT"
summary='{verb, user: .user.username, objectRef, code: .responseStatus.code, annotations}'
refused_event=$(list_pods 403 | head -1)
allowed_event=$(list_pods 200 | head -1)
jq -c "$summary" <<<"$refused_event"
jq -c "$summary" <<<"$allowed_event"
expect "the refusal: kind and level" "$(jq -r '"\(.kind) \(.apiVersion) \(.level)"' <<<"$refused_event")" "Event audit.k8s.io/v1 Metadata"
expect "the refusal: objectRef" "$(jq -c .objectRef <<<"$refused_event")" '{"resource":"pods","namespace":"team","apiVersion":"v1"}'
expect "the refusal: decision" "$(jq -r '.annotations["authorization.k8s.io/decision"]' <<<"$refused_event")" forbid
expect "the refusal: no reason (nothing allowed it)" "$(jq -r '.annotations["authorization.k8s.io/reason"]' <<<"$refused_event")" ""
expect "the allowed one: decision" "$(jq -r '.annotations["authorization.k8s.io/decision"]' <<<"$allowed_event")" allow
expect "the allowed one: reason" "$(jq -r '.annotations["authorization.k8s.io/reason"]' <<<"$allowed_event")" \
  'RBAC: allowed by RoleBinding "reader-view/team" of ClusterRole "view" to ServiceAccount "reader/team"'
impersonated=$(jq -c 'select(.stage == "ResponseComplete" and .impersonatedUser.username == "system:serviceaccount:team:reader"
  and .objectRef.resource == "secrets")' "$AUDIT" | head -1)
jq -c '{user: .user.username, impersonatedUser: .impersonatedUser.username, verb, code: .responseStatus.code}' <<<"$impersonated"
expect "the impersonated request names both" \
  "$(jq -r '"\(.user.username) as \(.impersonatedUser.username): \(.responseStatus.code)"' <<<"$impersonated")" \
  "minictl-admin as system:serviceaccount:team:reader: 403"

step "Clean up"
say DELETE $NS >/dev/null
