# lib.sh: what every lesson script shares. Source it from a lesson:
#   . "$(dirname "$0")/../lib.sh"
# It talks to the cluster at $API (default: the local `minictl up`) with
# curl and jq, prints each step as it goes, and stops the lesson with a
# clear message the moment something the README promises does not happen.
set -euo pipefail

API=${API:-http://127.0.0.1:8080}
MINICTL=${MINICTL:-minictl}
WAIT=${WAIT:-60} # seconds any wait_for may take

for tool in curl jq; do
  command -v "$tool" >/dev/null || { echo "this lesson needs $tool" >&2; exit 1; }
done

# The lesson's own things, and how they end. Every lesson gets $work, a
# scratch directory, and starts each process that outlives a step with
# `background`. Whatever way the lesson exits (done, a failed expect, ^C),
# the exit trap below stops those processes, waits for them, runs the
# lesson's at_exit commands and removes $work: a lesson leaves nothing
# running behind it, and nothing that would keep its caller waiting.
work=$(mktemp -d)
_background=() # the pids `background` started
_at_exit=()    # the commands at_exit registered, in order

# background FILE COMMAND...: run COMMAND in the background with its output
# (stdout and stderr) in FILE, never on the lesson's own output; $! is its
# pid. The process also dies with the lesson's shell if that is killed
# outright (setpriv's parent-death signal, where util-linux has it).
background() {
  local out=$1; shift
  local pdeath=()
  command -v setpriv >/dev/null && pdeath=(setpriv --pdeathsig KILL --)
  "${pdeath[@]}" "$@" >"$out" 2>&1 </dev/null &
  _background+=($!)
}

# at_exit "COMMAND": run COMMAND when the lesson exits, after its background
# processes have stopped (to print a log on failure, or undo a change).
at_exit() { _at_exit+=("$1"); }

_any_alive() {
  local pid
  for pid; do kill -0 "$pid" 2>/dev/null && return 0; done
  return 1
}

# _finish: the exit trap. SIGTERM to every background process, SIGKILL to
# any still alive 3s later, then the lesson's own commands; the lesson's
# exit status is kept.
_finish() {
  local status=$? tries cmd
  if [ ${#_background[@]} -gt 0 ]; then
    kill "${_background[@]}" 2>/dev/null || true
    for ((tries = 0; tries < 30; tries++)); do
      _any_alive "${_background[@]}" || break
      sleep 0.1
    done
    kill -KILL "${_background[@]}" 2>/dev/null || true
    wait "${_background[@]}" 2>/dev/null || true
  fi
  for cmd in ${_at_exit[@]+"${_at_exit[@]}"}; do eval "$cmd" || true; done
  rm -rf "$work"
  exit "$status"
}
trap _finish EXIT

# step "text": a heading for what comes next.
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# show "command...": print a command, then run it (so the learner sees the curl).
show() { printf '$ %s\n' "$*"; "$@"; }

# get PATH: GET and print the JSON answer.
get() { curl -sS "$API$1"; }

# post PATH BODY [CONTENT-TYPE], put PATH BODY, patch PATH BODY [TYPE], delete PATH [QUERY]
post() { curl -sS -X POST -H "Content-Type: ${3:-application/json}" "$API$1" --data-binary "$2"; }
put() { curl -sS -X PUT -H "Content-Type: application/json" "$API$1" --data-binary "$2"; }
patch() { curl -sS -X PATCH -H "Content-Type: ${3:-application/merge-patch+json}" "$API$1" --data-binary "$2"; }
delete() { curl -sS -X DELETE "$API$1${2:+?$2}"; }

# code METHOD PATH [BODY] [CONTENT-TYPE]: only the HTTP status code.
code() {
  curl -sS -o /dev/null -w '%{http_code}' -X "$1" -H "Content-Type: ${4:-application/json}" "$API$2" ${3:+--data-binary "$3"}
}

# say METHOD PATH [BODY] [CONTENT-TYPE]: print the curl line (on stderr, so
# that $(say ...) keeps only the answer), then send the request. An answer
# of 400 or more is also told on stderr, with its Status message: a lesson
# that goes on to wait for the request's effect shows why it never came.
say() {
  local type=${4:-application/json} body=$work/say.body code rc=0
  rm -f "$body"
  if [ -n "${3:-}" ]; then
    printf "\$ curl -s -X %s '%s%s' -H 'Content-Type: %s' -d '%s'\n" "$1" "$API" "$2" "$type" "$(jq -c . <<<"$3")" >&2
    code=$(curl -sS -o "$body" -w '%{http_code}' -X "$1" -H "Content-Type: $type" "$API$2" --data-binary "$3") || rc=$?
  else
    printf "\$ curl -s -X %s '%s%s'\n" "$1" "$API" "$2" >&2
    code=$(curl -sS -o "$body" -w '%{http_code}' -X "$1" "$API$2") || rc=$?
  fi
  if [ "${code:-0}" -ge 400 ]; then
    printf '  → HTTP %s: %s\n' "$code" "$(jq -r '.message // empty' "$body" 2>/dev/null)" >&2
  fi
  if [ -f "$body" ]; then cat "$body"; fi
  return $rc
}

# equals WANT COMMAND...: true when COMMAND prints WANT (for wait_for, which
# runs its command again on every try).
equals() { local want=$1; shift; [ "$("$@")" == "$want" ]; }

# write METHOD PATH BODY [CONTENT-TYPE]: print the curl line, run it, and
# print the resourceVersion it produced (kept in $rv); a failed write stops
# the lesson.
write() {
  local ctype=${4:-application/json}
  printf "\$ curl -s -X %s %s%s -H 'Content-Type: %s' -d '%s'\n" "$1" "$API" "$2" "$ctype" "$3"
  rv=$(curl -sS -X "$1" -H "Content-Type: $ctype" "$API$2" --data-binary "$3" | jq -r .metadata.resourceVersion)
  echo "  → resourceVersion $rv"
  [[ "$rv" =~ ^[0-9]+$ ]] || { echo "  ✘ the write failed" >&2; exit 1; }
}

# events FILTER [NAMESPACE]: the Events of NAMESPACE (default: default) that
# FILTER, a jq boolean over one Event, selects, as a JSON array.
events() { get "/api/v1/namespaces/${2:-default}/events" | jq -c "[.items[] | select($1)]"; }

# expect WHAT ACTUAL EXPECTED: the lesson's claims, checked.
expect() {
  if [ "$2" == "$3" ]; then
    printf '  \033[32m✔\033[0m %s: %s\n' "$1" "$2"
  else
    printf '  \033[31m✘\033[0m %s: got %q, expected %q\n' "$1" "$2" "$3" >&2
    exit 1
  fi
}

# expect_match WHAT ACTUAL REGEX
expect_match() {
  if [[ "$2" =~ $3 ]]; then
    printf '  \033[32m✔\033[0m %s: %s\n' "$1" "$2"
  else
    printf '  \033[31m✘\033[0m %s: got %q, expected to match %q\n' "$1" "$2" "$3" >&2
    exit 1
  fi
}

# wait_for WHAT COMMAND...: run COMMAND every half second until it succeeds
# (exit 0), for at most $WAIT seconds.
wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + WAIT))
  printf '  … waiting for %s\n' "$what"
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      printf '  \033[31m✘\033[0m gave up waiting for %s after %ss\n' "$what" "$WAIT" >&2
      # What an equals check saw last, against what it wanted.
      if [ "$1" == equals ]; then
        printf '    wanted: %s\n    last saw: %s\n' "$2" "$("${@:3}" 2>&1 | head -c 500)" >&2
      fi
      exit 1
    fi
    sleep 0.5
  done
  printf '  \033[32m✔\033[0m %s\n' "$what"
}

# jqtest PATH FILTER: true when FILTER (a jq boolean) holds for GET PATH.
# An error answer (a 404's Status is JSON too) and an empty one are false:
# jq -e alone would call them true.
jqtest() {
  local body
  body=$(curl -sSf "$API$1") && [ -n "$body" ] && jq -e "$2" >/dev/null <<<"$body"
}

# trace_attached FILE: true once the minictl trace writing FILE (stdout and
# stderr) has attached to the server and follows the timeline.
trace_attached() { grep -q '^minictl trace: following' "$1"; }

# running APP: how many pods labelled app=APP are Running, Ready and not being deleted.
running() {
  get "/api/v1/namespaces/${2:-default}/pods?labelSelector=app%3D$1" | jq '[.items[]
    | select(.metadata.deletionTimestamp == null and .status.phase == "Running")
    | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length'
}
