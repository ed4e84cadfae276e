#!/usr/bin/env bash
# Lesson 17: who are you? Certificates, tokens and the authenticator chain.
# Run it against a cluster: `make up` in another terminal, then
#   bash examples/17-who-are-you/lesson.sh
. "$(dirname "$0")/../lib.sh"

# The secure port, and the data dir where `minictl up` keeps the cluster CA
# (pki/ca.crt) and the admin's client certificate (pki/admin.crt, admin.key).
SECURE=${SECURE:-https://127.0.0.1:6443}
DATA_DIR=${DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/minictl}
PKI=$DATA_DIR/pki
for f in ca.crt admin.crt admin.key; do
  [ -f "$PKI/$f" ] || { echo "no $PKI/$f: set DATA_DIR to the data dir of minictl up" >&2; exit 1; }
done
command -v openssl >/dev/null || { echo "this lesson needs openssl" >&2; exit 1; }

# tls ARGS...: curl on the secure port, trusting the cluster CA and nothing
# else. Every request of this lesson goes through it; what comes after the
# CA says who is asking: nothing (anonymous), a client certificate, or a
# bearer token.
tls() { curl -sS --cacert "$PKI/ca.crt" "$@"; }
anon() { tls "$@"; }
admin() { tls --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
bearer() { local token=$1; shift; tls -H "Authorization: Bearer $token" "$@"; }
# status WHO... URL: only the HTTP code (WHO is anon, admin or "bearer TOKEN").
status() { "$@" -o /dev/null -w '%{http_code}'; }
# whoami WHO...: the user a SelfSubjectReview (kubectl auth whoami) reports.
whoami() {
  "$@" -X POST "$SECURE/apis/authentication.k8s.io/v1/selfsubjectreviews" -H 'Content-Type: application/json' \
    -d '{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}' | jq -c .status.userInfo
}
# claims JWT: the JSON of a token's middle part (base64url, unpadded).
claims() {
  local p
  p=$(cut -d. -f2 <<<"$1" | tr '_-' '/+')
  while [ $((${#p} % 4)) -ne 0 ]; do p+='='; done
  base64 -d <<<"$p"
}

NS=/api/v1/namespaces/who
# Start clean, so that the lesson can be run again on the same cluster.
if [ "$(code GET $NS)" == 200 ]; then
  delete $NS >/dev/null
  wait_for "namespace who of an earlier run to go" equals 404 code GET $NS
fi
if [ "$(code GET /apis/certificates.k8s.io/v1/certificatesigningrequests/jane)" == 200 ]; then
  delete /apis/certificates.k8s.io/v1/certificatesigningrequests/jane >/dev/null
fi

step "1. Nobody: the secure port lets an anonymous request through, and RBAC says no"
printf '$ curl -s --cacert %s %s/api/v1/pods\n' "$PKI/ca.crt" "$SECURE"
refused=$(anon "$SECURE/api/v1/pods")
jq -c '{kind, code, reason, message}' <<<"$refused"
expect "code" "$(jq .code <<<"$refused")" 403
expect "message" "$(jq -r .message <<<"$refused")" \
  'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope'
expect "GET /version as anonymous" "$(status anon "$SECURE/version")" 200
expect "GET /healthz as anonymous" "$(status anon "$SECURE/healthz")" 200
anon "$SECURE/version" | jq -c '{major, minor, gitVersion}'
expect "even whoami is for authenticated users only" \
  "$(anon -X POST "$SECURE/apis/authentication.k8s.io/v1/selfsubjectreviews" -H 'Content-Type: application/json' \
    -d '{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}' | jq -r .message)" \
  'selfsubjectreviews.authentication.k8s.io is forbidden: User "system:anonymous" cannot create resource "selfsubjectreviews" in API group "authentication.k8s.io" at the cluster scope'
expect "without --cacert, curl does not trust the server" \
  "$(curl -s -o /dev/null -w '%{http_code}' "$SECURE/version" || true)" 000

step "2. The admin: a client certificate signed by the cluster CA"
show openssl x509 -in "$PKI/admin.crt" -noout -subject -issuer
subject=$(openssl x509 -in "$PKI/admin.crt" -noout -subject -nameopt RFC2253)
expect "its subject" "$subject" 'subject=CN=minictl-admin,O=system:masters'
expect "its extended key usage" \
  "$(openssl x509 -in "$PKI/admin.crt" -noout -ext extendedKeyUsage | tail -1 | tr -d ' ')" "TLSWebClientAuthentication"
printf '$ curl -s --cacert ca.crt --cert admin.crt --key admin.key -X POST %s/apis/authentication.k8s.io/v1/selfsubjectreviews ...\n' "$SECURE"
me=$(whoami admin)
echo "$me"
expect "username (the CN)" "$(jq -r .username <<<"$me")" minictl-admin
expect "groups (the Os, and every authenticated user's)" "$(jq -c .groups <<<"$me")" '["system:masters","system:authenticated"]'
expect "extra: the certificate's fingerprint" "$(jq -r '.extra["authentication.kubernetes.io/credential-id"][0]' <<<"$me")" \
  "X509SHA256=$(openssl x509 -in "$PKI/admin.crt" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f)"
expect "the admin lists pods" "$(status admin "$SECURE/api/v1/pods")" 200
expect "the kubeconfig carries the same certificate" \
  "$(grep -c "client-certificate-data: $(base64 <"$PKI/admin.crt" | tr -d '\n')" "$DATA_DIR/kubeconfig")" 1

step "3. A ServiceAccount, and a token for it from the TokenRequest API"
say POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "who"}}' >/dev/null
say POST $NS/serviceaccounts '{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}' >/dev/null
sa_uid=$(get $NS/serviceaccounts/robot | jq -r .metadata.uid)
tr=$(say POST $NS/serviceaccounts/robot/token '{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
  "spec": {"expirationSeconds": 3600}}')
token=$(jq -r .status.token <<<"$tr")
jq -c '{kind, spec, status: {expirationTimestamp: .status.expirationTimestamp, token: (.status.token[:24] + "…")}}' <<<"$tr"
expect "a JWT: three base64url parts, header.claims.signature" \
  "$(grep -cE '^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$' <<<"$token")" 1
expect "the audience defaulted to the issuer" "$(jq -c .spec.audiences <<<"$tr")" '["https://kubernetes.default.svc.cluster.local"]'
expect "nothing was stored: no Secret holds the token" \
  "$(get $NS/secrets | jq '[.items[] | select(.type == "kubernetes.io/service-account-token")] | length')" 0

step "4. What the token says: its claims, decoded with jq"
echo "\$ cut -d. -f2 <<<\"\$token\" | base64 -d | jq"
c=$(claims "$token")
jq . <<<"$c"
expect "alg in the header" "$(claims ".$(cut -d. -f1 <<<"$token")" | jq -r .alg)" RS256
expect "iss" "$(jq -r .iss <<<"$c")" https://kubernetes.default.svc.cluster.local
expect "sub" "$(jq -r .sub <<<"$c")" system:serviceaccount:who:robot
expect "aud" "$(jq -c .aud <<<"$c")" '["https://kubernetes.default.svc.cluster.local"]'
expect "exp is iat + 3600" "$(jq '.exp - .iat' <<<"$c")" 3600
expect "exp is the expirationTimestamp" "$(jq -r '.exp | todate' <<<"$c")" "$(jq -r .status.expirationTimestamp <<<"$tr")"
expect "kubernetes.io: the ServiceAccount, by name and uid" \
  "$(jq -c '.["kubernetes.io"] | {namespace, serviceaccount}' <<<"$c")" \
  "{\"namespace\":\"who\",\"serviceaccount\":{\"name\":\"robot\",\"uid\":\"$sa_uid\"}}"

step "5. The token on the secure port: whoami, and TokenReview"
printf '$ curl -s --cacert ca.crt -H "Authorization: Bearer $token" -X POST %s/apis/authentication.k8s.io/v1/selfsubjectreviews ...\n' "$SECURE"
robot=$(whoami bearer "$token")
jq . <<<"$robot"
expect "username" "$(jq -r .username <<<"$robot")" system:serviceaccount:who:robot
expect "uid: the ServiceAccount's" "$(jq -r .uid <<<"$robot")" "$sa_uid"
expect "groups" "$(jq -c .groups <<<"$robot")" '["system:serviceaccounts","system:serviceaccounts:who","system:authenticated"]'
expect "extra: the token's id" "$(jq -r '.extra["authentication.kubernetes.io/credential-id"][0]' <<<"$robot")" "JTI=$(jq -r .jti <<<"$c")"
review=$(admin -X POST "$SECURE/apis/authentication.k8s.io/v1/tokenreviews" -H 'Content-Type: application/json' \
  -d "{\"apiVersion\": \"authentication.k8s.io/v1\", \"kind\": \"TokenReview\", \"spec\": {\"token\": \"$token\"}}")
printf '$ curl -s ... -X POST %s/apis/authentication.k8s.io/v1/tokenreviews -d {"spec": {"token": "…"}}\n' "$SECURE"
jq -c '.status | {authenticated, user: {username: .user.username, groups: .user.groups}, audiences}' <<<"$review"
expect "TokenReview: authenticated" "$(jq .status.authenticated <<<"$review")" true
expect "TokenReview: the same user" "$(jq -r .status.user.username <<<"$review")" system:serviceaccount:who:robot
expect "TokenReview: the audiences" "$(jq -c .status.audiences <<<"$review")" '["https://kubernetes.default.svc.cluster.local"]'
expect "the robot may not list pods: authenticated is not authorized" \
  "$(status bearer "$token" "$SECURE/api/v1/namespaces/who/pods")" 403

step "6. Tokens that prove nothing: forged, meant for someone else, expired, deleted"
# A forgery: the same header and signature, claims of our own making.
forged_claims=$(jq -c '.sub = "system:serviceaccount:kube-system:default"' <<<"$c" | base64 | tr -d '=\n' | tr '/+' '_-')
forged="$(cut -d. -f1 <<<"$token").$forged_claims.$(cut -d. -f3 <<<"$token")"
answer=$(bearer "$forged" "$SECURE/api/v1/namespaces/who/pods")
printf '$ curl -s --cacert ca.crt -H "Authorization: Bearer <forged>" %s/api/v1/namespaces/who/pods\n' "$SECURE"
jq -c . <<<"$answer"
expect "forged: 401" "$(jq .code <<<"$answer")" 401
expect "and only this" "$(jq -c '{kind, status, message, reason}' <<<"$answer")" \
  '{"kind":"Status","status":"Failure","message":"Unauthorized","reason":"Unauthorized"}'
expect "a forged token is not anonymous either" "$(status bearer "$forged" "$SECURE/version")" 401
other=$(post $NS/serviceaccounts/robot/token '{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
  "spec": {"audiences": ["vault"], "expirationSeconds": 600}}' | jq -r .status.token)
expect "a token meant for another audience (vault): 401" "$(status bearer "$other" "$SECURE/version")" 401
expect "a TokenRequest for less than ten minutes is invalid" \
  "$(post $NS/serviceaccounts/robot/token '{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
  "spec": {"expirationSeconds": 60}}' | jq -r .message)" \
  'TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes'
# An expired token cannot be asked for; one can be made, with the key that
# signs them all (pki/sa.key), and it is refused all the same.
if [ -f "$PKI/sa.key" ]; then
  now=$(date +%s)
  old=$(jq -c --argjson now "$now" '.iat = $now - 7200 | .nbf = $now - 7200 | .exp = $now - 3600' <<<"$c")
  b64url() { base64 | tr -d '=\n' | tr '/+' '_-'; }
  unsigned="$(cut -d. -f1 <<<"$token").$(printf '%s' "$old" | b64url)"
  sig=$(printf '%s' "$unsigned" | openssl dgst -sha256 -sign "$PKI/sa.key" -binary | b64url)
  expired="$unsigned.$sig"
  echo "\$ # the same claims, exp an hour ago, signed with pki/sa.key"
  expect "expired: 401 Unauthorized" "$(bearer "$expired" "$SECURE/version" | jq -c '{code, message}')" '{"code":401,"message":"Unauthorized"}'
  fresh=$(jq -c --argjson now "$now" '.iat = $now | .nbf = $now | .exp = $now + 3600' <<<"$c")
  unsigned="$(cut -d. -f1 <<<"$token").$(printf '%s' "$fresh" | b64url)"
  sig=$(printf '%s' "$unsigned" | openssl dgst -sha256 -sign "$PKI/sa.key" -binary | b64url)
  expect "the same claims, in date and signed alike, are believed" "$(whoami bearer "$unsigned.$sig" | jq -r .username)" system:serviceaccount:who:robot
fi
say DELETE $NS/serviceaccounts/robot >/dev/null
wait_for "the ServiceAccount to go" equals 404 code GET $NS/serviceaccounts/robot
expect "the ServiceAccount deleted, its token proves nothing: 401" "$(status bearer "$token" "$SECURE/version")" 401

step "7. A pod's credentials: the kube-api-access projected volume and kube-root-ca.crt"
wait_for "the ServiceAccount default in namespace who" equals 200 code GET $NS/serviceaccounts/default
say POST $NS/pods '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"},
  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}' >/dev/null
pod=$(get $NS/pods/app)
expect "serviceAccountName defaulted" "$(jq -r .spec.serviceAccountName <<<"$pod")" default
vol=$(jq -c '.spec.volumes[] | select(.name | startswith("kube-api-access-"))' <<<"$pod")
jq . <<<"$vol"
expect_match "the volume's name" "$(jq -r .name <<<"$vol")" '^kube-api-access-[a-z0-9]{5}$'
expect "its sources" "$(jq -c '[.projected.sources[] | keys[0]]' <<<"$vol")" '["serviceAccountToken","configMap","downwardAPI"]'
expect "the token: an hour, refreshed by the kubelet" "$(jq -c '.projected.sources[0].serviceAccountToken' <<<"$vol")" '{"expirationSeconds":3607,"path":"token"}'
expect "the CA: the kube-root-ca.crt ConfigMap" "$(jq -c '.projected.sources[1].configMap' <<<"$vol")" '{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}'
expect "mounted where client libraries look" \
  "$(jq -r --arg v "$(jq -r .name <<<"$vol")" '.spec.containers[0].volumeMounts[] | select(.name == $v) | "\(.mountPath) readOnly=\(.readOnly)"' <<<"$pod")" \
  "/var/run/secrets/kubernetes.io/serviceaccount readOnly=true"
wait_for "kube-root-ca.crt in namespace who" equals 200 code GET $NS/configmaps/kube-root-ca.crt
expect "kube-root-ca.crt holds the cluster CA, pki/ca.crt" \
  "$(get $NS/configmaps/kube-root-ca.crt | jq -r '.data["ca.crt"]' | openssl x509 -noout -subject -fingerprint -sha256)" \
  "$(openssl x509 -in "$PKI/ca.crt" -noout -subject -fingerprint -sha256)"

step "8. A user of your own: jane, with a CertificateSigningRequest"
show openssl req -new -newkey rsa:2048 -nodes -keyout "$work/jane.key" -subj "/CN=jane/O=developers" -out "$work/jane.csr" 2>/dev/null
CSR=/apis/certificates.k8s.io/v1/certificatesigningrequests
printf '$ curl -s -X POST %s%s -d {... "request": "<base64 of jane.csr>", "signerName": "kubernetes.io/kube-apiserver-client", ...}\n' "$API" $CSR
post $CSR "{\"apiVersion\": \"certificates.k8s.io/v1\", \"kind\": \"CertificateSigningRequest\",
  \"metadata\": {\"name\": \"jane\"},
  \"spec\": {\"request\": \"$(base64 <"$work/jane.csr" | tr -d '\n')\",
    \"signerName\": \"kubernetes.io/kube-apiserver-client\", \"expirationSeconds\": 86400,
    \"usages\": [\"client auth\"]}}" >/dev/null
csr=$(get $CSR/jane)
expect "the requester, recorded by the API server" "$(jq -r .spec.username <<<"$csr")" minictl-admin
expect "not signed before it is approved" "$(jq -r '.status.certificate // "none"' <<<"$csr")" none
approved=$(jq -c '.status.conditions = [{"type": "Approved", "status": "True", "reason": "LessonApprove",
  "message": "jane is a developer"}]' <<<"$csr")
printf '$ curl -s -X PUT %s%s/jane/approval -d {... "status": {"conditions": [{"type": "Approved", "status": "True", ...}]}}\n' "$API" $CSR
put $CSR/jane/approval "$approved" | jq -c '.status.conditions[] | {type, status, reason}'

wait_for "csrsigning to sign it" jqtest $CSR/jane '.status.certificate != null and .status.certificate != ""'
get $CSR/jane | jq -r .status.certificate | base64 -d >"$work/jane.crt"
show openssl x509 -in "$work/jane.crt" -noout -subject -issuer
expect "jane's subject" "$(openssl x509 -in "$work/jane.crt" -noout -subject -nameopt RFC2253)" 'subject=CN=jane,O=developers'
expect "signed by the cluster CA" "$(openssl verify -CAfile "$PKI/ca.crt" "$work/jane.crt" | tail -1)" "$work/jane.crt: OK"
jane=$(whoami tls --cert "$work/jane.crt" --key "$work/jane.key")
echo "$jane"
expect "jane is jane, a developer" "$(jq -c '{username, groups}' <<<"$jane")" '{"username":"jane","groups":["developers","system:authenticated"]}'
expect "and may not list pods: RBAC knows nothing of her yet (lesson 18)" \
  "$(tls --cert "$work/jane.crt" --key "$work/jane.key" "$SECURE/api/v1/namespaces/who/pods" | jq -r .message)" \
  'pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "who"'

step "Clean up"
say DELETE $CSR/jane >/dev/null
say DELETE $NS >/dev/null
