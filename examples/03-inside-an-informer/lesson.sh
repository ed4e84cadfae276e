#!/usr/bin/env bash
# Lesson 3: inside an informer. The Go program examples/informer-trace is a
# tiny controller built the way every minictl controller is built: a shared
# informer (Reflector → DeltaFIFO → Indexer → handler) feeding a workqueue,
# and a worker that reconciles keys. It logs one line per stage, so we can
# follow a single change all the way from the API server to reconcile.
. "$(dirname "$0")/../lib.sh"

command -v go >/dev/null || { echo "this lesson needs go" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
PODS=/api/v1/namespaces/default/pods

# A pod nobody else touches: no scheduler serves schedulerName "nobody", so
# the only changes to it are ours.
pod() { printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s"},"spec":{"schedulerName":"nobody","containers":[{"name":"app","image":"nginx"}]}}' "$1"; }
# stages KEY: the stages logged for KEY so far, one per line:
# "stage type resourceVersion" (type and resourceVersion when the line has them).
stages() {
  grep -E " key=$1( |\$)" "$work/trace" | sed -E 's/.*stage="([^"]+)".*/\1/' | tr ' ' _ >"$work/s1" || true
  grep -E " key=$1( |\$)" "$work/trace" | sed -E -n 's/.* type=([A-Za-z]+).*/\1/p; t; s/.*/-/p' >"$work/s2" || true
  grep -E " key=$1( |\$)" "$work/trace" | sed -E -n 's/.* resourceVersion=([0-9]+).*/\1/p; t; s/.*/-/p' >"$work/s3" || true
  paste -d' ' "$work/s1" "$work/s2" "$work/s3"
}
count() { stages "$1" | grep -c "^$2" || true; }
reconciled() { [ "$(count "$1" worker_reconciled)" -ge "$2" ]; }
# the seven stages of one change, as stages prints them
journey() {
  printf '%s\n' "reflector_received $1 $3" "deltafifo_queued $2 $3" "deltafifo_popped $2 $3" \
    "indexer_updated $2 $3" "handler_called $4 $3" "key_enqueued - -" "worker_reconciled - ${5:-$3}"
}

# Start clean, so that the lesson can be run again on the same cluster.
for p in before journey; do curl -sS -o /dev/null -X DELETE "$API$PODS/$p"; done

step "1. A pod exists before the program starts"
write POST "$PODS" "$(pod before)"
rv_before=$rv

step "2. Build and start the program (a controller with one informer on pods)"
echo "\$ go build -o informer-trace ./examples/informer-trace"
(cd "$here/.." && go build -o "$work/informer-trace" ./informer-trace)
echo "\$ ./informer-trace --server $API --namespace default > trace.log &"
background "$work/trace" "$work/informer-trace" --server "$API" --namespace default --duration 10m
wait_for "the program's cache to sync (it logs \"watching pods\")" grep -q 'msg="watching pods"' "$work/trace"

step "3. The initial list: the Reflector LISTs, the DeltaFIFO gets Replaced deltas"
echo "\$ grep 'key=default/before' trace.log"
grep -E ' key=default/before( |$)' "$work/trace" | cut -d' ' -f3-
wait_for "the worker to reconcile default/before" reconciled default/before 1
expect "the stages of default/before, in order" "$(stages default/before | tr '\n' '|')" \
  "$(journey LIST Replaced "$rv_before" OnAdd | tr '\n' '|')"
synced=$(grep -n 'msg="watching pods"' "$work/trace" | cut -d: -f1)
first_reconcile=$(grep -n 'stage="worker reconciled"' "$work/trace" | head -1 | cut -d: -f1)
expect "no worker runs before the cache has synced" "$((first_reconcile > synced))" 1

step "4. One change, seven stages: create a pod while the program watches"
write POST "$PODS" "$(pod journey)"
rv_create=$rv
wait_for "the worker to reconcile default/journey" reconciled default/journey 1
echo "\$ grep 'key=default/journey' trace.log"
grep -E ' key=default/journey( |$)' "$work/trace" | cut -d' ' -f3-
expect "the stages, in order" "$(stages default/journey | tr '\n' '|')" \
  "$(journey ADDED Added "$rv_create" OnAdd | tr '\n' '|')"

step "5. An update travels the same road, as MODIFIED / Updated / OnUpdate"
write PATCH "$PODS/journey" '{"metadata":{"labels":{"step":"5"}}}' application/merge-patch+json
rv_patch=$rv
wait_for "a second reconcile of default/journey" reconciled default/journey 2
expect "the update's stages, in order" "$(stages default/journey | tail -7 | tr '\n' '|')" \
  "$(journey MODIFIED Updated "$rv_patch" OnUpdate | tr '\n' '|')"

step "6. Ten quick changes: the worker always reads the newest state from the cache"
before_received=$(count default/journey reflector_received)
before_reconciled=$(count default/journey worker_reconciled)
for i in 1 2 3 4 5 6 7 8 9 10; do
  rv=$(patch "$PODS/journey" "{\"metadata\":{\"labels\":{\"n\":\"$i\"}}}" | jq -r .metadata.resourceVersion)
done
echo "ten merge patches; the last one's resourceVersion: $rv"
rv_last=$rv
last_reconcile_is() { [ "$(stages default/journey | grep '^worker_reconciled' | tail -1)" == "worker_reconciled - $1" ]; }
wait_for "the worker to reconcile the last version" last_reconcile_is "$rv_last"
received=$(($(count default/journey reflector_received) - before_received))
reconciles=$(($(count default/journey worker_reconciled) - before_reconciled))
echo "events received: $received, reconciles: $reconciles"
expect "the Reflector received every change" "$received" 10
expect "reconciles never outnumber changes (a queued key is not queued twice)" "$((reconciles <= received))" 1

step "7. Delete: DELETED / Deleted / OnDelete, and the worker finds the key gone"
printf '$ curl -s -X DELETE %s%s/journey\n' "$API" "$PODS"
delete "$PODS/journey" >/dev/null
expect "a pod on no node is removed at once" "$(code GET "$PODS/journey")" 404
deleted() { grep -E ' key=default/journey( |$)' "$work/trace" | tail -1 | grep -q 'observed=deleted'; }
wait_for "the worker to see default/journey deleted" deleted
grep -E ' key=default/journey( |$)' "$work/trace" | tail -7 | cut -d' ' -f3-
expect "the deletion's stages" "$(stages default/journey | tail -7 | cut -d' ' -f1,2 | tr '\n' '|')" \
  "reflector_received DELETED|deltafifo_queued Deleted|deltafifo_popped Deleted|indexer_updated Deleted|handler_called OnDelete|key_enqueued -|worker_reconciled -|"

delete "$PODS/before" >/dev/null
printf '\nLesson 3 done: Reflector → DeltaFIFO → Indexer → handler → workqueue → worker, for every change.\n'
