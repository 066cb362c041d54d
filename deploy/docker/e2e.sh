#!/usr/bin/env bash
# The Docker runner pool's end-to-end test (CONTRACT §6), run as root on a host
# with a Docker engine and no registry:
#
#   deploy/docker/e2e.sh
#
# On one private (--internal) Docker network: a PostgreSQL container, two `serve`
# containers on it sharing one storage volume (both under the network alias
# `judge`, which Docker's DNS answers with every live Server), and three
# Runner containers started as docs/runner.md ("Docker") shows them (`--server http://judge:8080`).
# Everything is checked from outside, through the HTTP API (and, at the end,
# PostgreSQL itself). One `PASS name` / `FAIL name: why` line per case,
# `N passed, M failed` last; exit 0 only when nothing failed. Every container,
# network, volume and cgroup it made is removed however it ends.
#
# Images: deploy/docker/build-image.sh (base image by debootstrap, cached; the
# binary $JUDGE_RUNNER_BIN, default the newer of target/{release,debug}) and
# deploy/docker/postgres/ on the same base. Environment: JUDGE_RUNNER_BIN,
# JUDGE_IMAGE (judge-runner), JUDGE_BASE_IMAGE (judge-runner-base:bookworm),
# JUDGE_PG_IMAGE (judge-runner-postgres), JUDGE_E2E_LEASE_SECONDS (5),
# JUDGE_E2E_SKIP_BUILD=1 (use the images as they are).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

P=judge-e2e-$$
NET=$P-net
IMAGE=${JUDGE_IMAGE:-judge-runner}
BASE=${JUDGE_BASE_IMAGE:-judge-runner-base:bookworm}
PG_IMAGE=${JUDGE_PG_IMAGE:-judge-runner-postgres}
LEASE=${JUDGE_E2E_LEASE_SECONDS:-5}
TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
PGPW=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
WORK=$(mktemp -d "/tmp/$P.XXXXXX")
mkdir -p "$WORK/sub"
T0=$SECONDS

passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
log() { printf '[e2e %4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
measure() { echo "MEASURE $1"; echo "$1" >>"$WORK/measures"; }
now_ms() { date +%s%3N; }

cleanup() {
  local ids
  ids=$(docker ps -aq --filter "label=judge-e2e=$P")
  [ -n "$ids" ] && docker rm -f -v $ids >/dev/null 2>&1
  docker network rm "$NET" >/dev/null 2>&1
  ids=$(docker volume ls -q --filter "label=judge-e2e=$P")
  [ -n "$ids" ] && docker volume rm $ids >/dev/null 2>&1
  # The cgroup parents the Runners made in the host's v1 hierarchies.
  local d
  for d in /sys/fs/cgroup/*/"$P"-runner-*; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$WORK"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
  if [ -s "$WORK/measures" ]; then log "measured: $(tr '\n' ' ' <"$WORK/measures")"; fi
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

for tool in docker curl jq tar; do
  command -v "$tool" >/dev/null || { fail setup "$tool is missing"; finish; }
done
docker info >/dev/null 2>&1 || { fail setup "no Docker engine (docker info failed)"; finish; }

# ---- helpers -------------------------------------------------------------------

ip_of() {  # CONTAINER: its address on the test network (empty when it has none)
  docker inspect -f "{{with index .NetworkSettings.Networks \"$NET\"}}{{.IPAddress}}{{end}}" "$1" 2>/dev/null
}

# api CONTAINER METHOD PATH [curl args]: the body on stdout; fails unless 2xx.
api() {
  local ip code
  ip=$(ip_of "$1") && [ -n "$ip" ] || return 1
  code=$(curl -sS -m 30 -o "$WORK/body" -w '%{http_code}' -X "$2" \
    -H "Authorization: Bearer $TOKEN" "${@:4}" "http://$ip:8080$3" 2>/dev/null) || return 1
  cat "$WORK/body"
  [ "${code:0:1}" = 2 ]
}

# live_api METHOD PATH [curl args]: through whichever Server answers.
live_api() {
  api "$SERVER_A" "$@" || api "$SERVER_B" "$@"
}

metric() {  # URL NAME: the sample's value (0 when absent)
  curl -sS -m 10 "$1" 2>/dev/null | awk -v n="$2" '$1 == n { v = $2 } END { print v + 0 }'
}

stale_total() {  # judge_stale_result_dropped_total summed over both Servers
  local a b
  a=$(metric "http://$(ip_of "$SERVER_A"):8080/metrics" judge_stale_result_dropped_total)
  b=$(metric "http://$(ip_of "$SERVER_B"):8080/metrics" judge_stale_result_dropped_total)
  echo $((${a%.*} + ${b%.*}))
}

runner_metric() {  # CONTAINER NAME
  metric "http://$(ip_of "$1"):9464/metrics" "$2"
}

healthy() {  # CONTAINER...: every one's Docker healthcheck says healthy
  local c
  for c in "$@"; do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$c" 2>/dev/null)" = healthy ] || return 1
  done
}

until_ok() {  # SECONDS CMD...: retries CMD every 0.2 s until it succeeds
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

language_of() {
  case $1 in
    *.c) echo c ;; *.cpp | *.cc) echo cpp ;; *.py) echo python3 ;;
    *.java) echo java ;; *.rs) echo rust ;; *) return 1 ;;
  esac
}

declare -A PROBLEM RUNNER_CT

# submit SERVER PROBLEM_DIR FILE: prints "submission_id job_id". What it
# expects is kept in $WORK/sub/ID (callers run it in subshells).
submit() {
  local server=$1 dir=$2 file=$3 lang folder
  lang=$(language_of "$file") || return 1
  folder=$(basename "$(dirname "$file")")
  jq -n --argjson p "${PROBLEM[$dir]}" --arg l "$lang" --arg n "$(basename "$file")" \
    --rawfile c "$file" '{problem_id: $p, language: $l, files: [{name: $n, content: $c}]}' >"$WORK/sub.json"
  local out sid
  out=$(api "$server" POST /api/submissions -H 'Content-Type: application/json' \
    --data-binary @"$WORK/sub.json") || { log "submit $file via $server: $out"; return 1; }
  sid=$(jq -r .submission_id <<<"$out")
  printf '%s %s\n' "$folder" "$(basename "$dir")/$folder/$(basename "$file")" >"$WORK/sub/$sid"
  jq -r '"\(.submission_id) \(.job_id)"' <<<"$out"
}

# ended SID: every attempt of the submission is in a final state
ended() {
  live_api GET "/api/submissions/$1" | jq -e \
    '[.jobs[].state] | all(. == "Completed" or . == "Failed" or . == "Cancelled" or . == "Superseded")' >/dev/null
}

wait_ended() {  # TIMEOUT SID...: 0 when every one has ended
  local deadline=$((SECONDS + $1)) s
  shift
  local pending=("$@") still
  while [ ${#pending[@]} -gt 0 ]; do
    still=()
    for s in "${pending[@]}"; do ended "$s" || still+=("$s"); done
    pending=(${still[@]+"${still[@]}"})
    [ ${#pending[@]} -eq 0 ] && return 0
    [ "$SECONDS" -ge "$deadline" ] && { log "not ended: ${pending[*]}"; return 1; }
    sleep 1
  done
}

# verdict_problem SID: empty when the submission has exactly one attempt,
# Completed, with a Result whose verdict (and score) its folder says.
verdict_problem() {
  local view folder label
  read -r folder label <"$WORK/sub/$1"
  view=$(live_api GET "/api/submissions/$1") || { echo "$label: no Server answered"; return; }
  jq -r --arg folder "$folder" --arg lbl "$label" '
    ({accepted: "Accepted", partially_accepted: "Accepted", wrong_answer: "Wrong Answer",
      time_limit_exceeded: "Time Limit Exceeded", run_time_error: "Run-Time Error",
      memory_limit_exceeded: "Memory Limit Exceeded", output_limit_exceeded: "Output Limit Exceeded",
      compile_error: "Compilation Error", compilation_error: "Compilation Error"}[$folder]) as $want
    | .jobs as $jobs | ($jobs[0].result) as $r
    | if ($jobs | length) != 1 then "\($lbl): \($jobs | length) attempts"
      elif $jobs[0].state != "Completed" then "\($lbl): \($jobs[0].state) \($jobs[0].failure_reason // "")"
      elif $r == null then "\($lbl): Completed without a Result"
      elif $r.verdict != $want then "\($lbl): \($r.verdict), expected \($want)"
      elif $folder == "partially_accepted" and (($r.score > 0 and $r.score < $r.max_score) | not)
        then "\($lbl): score \($r.score) of \($r.max_score)"
      elif $folder == "accepted" and $r.score != $r.max_score then "\($lbl): score \($r.score) of \($r.max_score)"
      else empty end' <<<"$view" || echo "$label: cannot read the answer"
}

check_verdicts() {  # SID...: prints what is wrong, nothing when all are right
  local s
  for s in "$@"; do verdict_problem "$s"; done
}

job() { live_api GET "/api/jobs/$1"; }

# mid_job JOB: Running, acknowledged, at least one test done → prints runner_id
mid_job() {
  job "$1" | jq -er 'select(.state == "Running" and .acknowledged_at != null and ((.progress.done // 0) >= 1)) | .runner_id'
}

wait_mid_job() {  # JOB TIMEOUT → prints runner_id
  local deadline=$((SECONDS + $2)) r
  while :; do
    r=$(mid_job "$1") && { echo "$r"; return 0; }
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

# claimed_again JOB TOKEN: Running under a lease other than TOKEN
claimed_again() {
  job "$1" | jq -e --arg t "$2" '.state == "Running" and .lease_token != null and .lease_token != $t' >/dev/null
}

job_field() { job "$1" | jq -r "$2"; }

# ---- the cgroup form and the privileged form of this host ----------------------

if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then CGROUP=v2; else CGROUP=v1; fi
PRIV=(--privileged)
privileged_form() {
  docker run --rm --privileged "$BASE" true >/dev/null 2>"$WORK/priv.err" && return 0
  if ! grep -q 'apply caps' "$WORK/priv.err"; then
    log "docker run --privileged: $(tr '\n' ' ' <"$WORK/priv.err")"
    return 1
  fi
  # The engine's own bounding set lacks a capability --privileged asks for (this
  # machine: CAP_SYS_RESOURCE). The same container without it, spelled out.
  local pid bnd last i name drops=() lacks=()
  pid=$(pgrep -xo dockerd || echo self)
  bnd=$((16#$(awk '/^CapBnd/ {print $2}' "/proc/$pid/status")))
  last=$(cat /proc/sys/kernel/cap_last_cap)
  for ((i = 0; i <= last && i <= 37; i++)); do
    if (((bnd >> i) & 1)); then continue; fi
    name=$(capsh --decode="$(printf '0x%x' $((1 << i)))" 2>/dev/null | sed 's/.*=cap_//')
    [ -n "$name" ] && drops+=(--cap-drop "${name^^}") && lacks+=("CAP_${name^^}")
  done
  PRIV=(--cap-add ALL "${drops[@]}" --security-opt seccomp=unconfined --security-opt apparmor=unconfined
    --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm')
  log "this engine refuses --privileged (its bounding set lacks ${lacks[*]}); Runners get: ${PRIV[*]}"
}

# The Runner, exactly as docs/runner.md ("Docker") shows it.
start_runner() {  # N KEY
  local n=$1 key=$2 name=$P-runner-$1
  if [ "$CGROUP" = v2 ]; then
    docker run -d --name "$name" --label "judge-e2e=$P" --network "$NET" \
      "${PRIV[@]}" --cgroupns=private \
      -e JUDGE_RUNNER_KEY="$key" -v "$P-cache:/var/cache/judge-runner" \
      "$IMAGE" daemon --server http://judge:8080 --cache /var/cache/judge-runner \
      --metrics 0.0.0.0:9464 --first-box $((n * 100))
  else
    docker run -d --name "$name" --label "judge-e2e=$P" --network "$NET" \
      "${PRIV[@]}" --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
      -e JUDGE_RUNNER_KEY="$key" -v "$P-cache:/var/cache/judge-runner" \
      "$IMAGE" daemon --server http://judge:8080 --cache /var/cache/judge-runner \
      --metrics 0.0.0.0:9464 --cgroup-parent "$name" --first-box $((n * 100))
  fi
}

# The Server, as docs/server.md shows it (two of them under one alias).
start_server() {  # NAME
  docker run -d --name "$1" --label "judge-e2e=$P" --network "$NET" --network-alias judge \
    --user judge -e JUDGE_MANAGER_TOKEN="$TOKEN" -e JUDGE_HEALTHCHECK_URL=http://127.0.0.1:8080/healthz \
    -v "$P-storage:/var/lib/judge-runner/storage" \
    "$IMAGE" serve --listen 0.0.0.0:8080 --database "postgres://judge:$PGPW@db:5432/judge" \
    --storage /var/lib/judge-runner/storage --lease-seconds "$LEASE" --reap-interval 1
}

server_up() { curl -fsS -m 5 -o /dev/null "http://$(ip_of "$1"):8080/healthz" 2>/dev/null; }
runner_up() {  # the daemon passed its self-test and serves metrics
  curl -fsS -m 5 "http://$(ip_of "$1"):9464/metrics" 2>/dev/null | grep -q '^judge_runner_slots'
}

# ---- docs/runner.md shows what this test starts ---------------------------------

# The commands of docs/runner.md ("Docker"), continuation lines joined, spaces squeezed: the
# Runner (both cgroup forms) and Server lines of start_runner/start_server
# above, with the names there for what the test names judge-e2e-<pid>-*.
log "case readme.form"
readme=$(sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' "$REPO/docs/runner.md" | tr -s ' ')
runner_v1='--network judge-net --privileged --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw -e JUDGE_RUNNER_KEY=jrk_... -v judge-cache:/var/cache/judge-runner judge-runner daemon --server http://judge:8080 --cache /var/cache/judge-runner --metrics 0.0.0.0:9464 --cgroup-parent runner-1 --first-box 100'
runner_v2='--network judge-net --privileged --cgroupns=private -e JUDGE_RUNNER_KEY=jrk_... -v judge-cache:/var/cache/judge-runner judge-runner daemon --server http://judge:8080 --cache /var/cache/judge-runner --metrics 0.0.0.0:9464 --first-box 100'
server='--network judge-net --network-alias judge --user judge -e JUDGE_MANAGER_TOKEN=$TOKEN -e JUDGE_HEALTHCHECK_URL=http://127.0.0.1:8080/healthz -v judge-storage:/var/lib/judge-runner/storage judge-runner serve --listen 0.0.0.0:8080 --database postgres://judge:$PGPW@db:5432/judge --storage /var/lib/judge-runner/storage'
database='--network judge-net --network-alias db -e POSTGRES_PASSWORD=$PGPW -v judge-db:/var/lib/postgresql/data judge-runner-postgres'
bad=""
for form in runner_v1 runner_v2 server database; do
  grep -qF -- "${!form}" <<<"$readme" || bad+=" $form;"
done
grep -qF 'docker network create --internal judge-net' <<<"$readme" || bad+=" network;"
if [ -z "$bad" ]; then pass readme.form; else fail readme.form "docs/runner.md lacks the test's form of:$bad"; fi

# ---- images --------------------------------------------------------------------

if [ -z "${JUDGE_E2E_SKIP_BUILD:-}" ]; then
  log "images: $IMAGE (deploy/docker/build-image.sh), $PG_IMAGE"
  t=$SECONDS
  if deploy/docker/build-image.sh --tag "$IMAGE" --base "$BASE" >"$WORK/build.log" 2>&1 \
    && docker build -q --build-arg BASE_IMAGE="$BASE" -t "$PG_IMAGE" deploy/docker/postgres >>"$WORK/build.log" 2>&1; then
    pass image.build
    measure "image_build_s=$((SECONDS - t))"
  else
    tail -n 30 "$WORK/build.log" >&2
    fail image.build "see the build log above"
    finish
  fi
fi
privileged_form || { fail setup "no privileged container can start here"; finish; }

# ---- the pool ------------------------------------------------------------------

log "pool: network $NET, PostgreSQL, two Servers, three Runners ($CGROUP form)"
docker network create --internal --label "judge-e2e=$P" "$NET" >/dev/null
for v in pg storage cache; do docker volume create --label "judge-e2e=$P" "$P-$v" >/dev/null; done
PG=$P-pg
SERVER_A=$P-server-a
SERVER_B=$P-server-b
docker run -d --name "$PG" --label "judge-e2e=$P" --network "$NET" --network-alias db \
  -e POSTGRES_PASSWORD="$PGPW" -v "$P-pg:/var/lib/postgresql/data" "$PG_IMAGE" >/dev/null
pg_up() { docker exec "$PG" pg_isready -q -h 127.0.0.1 -U judge -d judge 2>/dev/null; }
psql_judge() { docker exec -e PGPASSWORD="$PGPW" "$PG" psql -h 127.0.0.1 -U judge -d judge -v ON_ERROR_STOP=1 -At -F ' ' "$@"; }
until_ok 120 pg_up || { fail pool.start "PostgreSQL did not come up: $(docker logs "$PG" 2>&1 | tail -5)"; finish; }
start_server "$SERVER_A" >/dev/null
until_ok 60 server_up "$SERVER_A" || { fail pool.start "Server A: $(docker logs "$SERVER_A" 2>&1 | tail -5)"; finish; }
start_server "$SERVER_B" >/dev/null
until_ok 60 server_up "$SERVER_B" || { fail pool.start "Server B: $(docker logs "$SERVER_B" 2>&1 | tail -5)"; finish; }

declare -A KEY
for n in 0 1 2 3; do
  out=$(api "$SERVER_A" POST /api/runners -H 'Content-Type: application/json' -d "{\"name\":\"runner-$n\"}") \
    || { fail pool.start "POST /api/runners: $out"; finish; }
  KEY[$n]=$(jq -r .key <<<"$out")
  RUNNER_CT[$(jq -r .runner_id <<<"$out")]=$P-runner-$n
done

# A Runner container without the privileges: its self-test refuses to start,
# saying what is missing (runner-0's key; it never claims anything).
log "case runner.unprivileged"
out=$(timeout 120 docker run --rm --name "$P-runner-0" --label "judge-e2e=$P" --network "$NET" \
  $([ "$CGROUP" = v1 ] && echo --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw) \
  -e JUDGE_RUNNER_KEY="${KEY[0]}" -v "$P-cache:/var/cache/judge-runner" \
  "$IMAGE" daemon --server http://judge:8080 --cache /var/cache/judge-runner \
  --cgroup-parent "$P-runner-0" --first-box 0 2>&1)
rc=$?
msg=$(grep 'does not work on this host' <<<"$out" | tail -n 1)
if [ "$rc" -eq 1 ] && grep -q -- '--privileged' <<<"$msg" && grep -q 'CAP_SYS_ADMIN' <<<"$msg"; then
  pass runner.unprivileged
  log "  $msg"
else
  fail runner.unprivileged "exit $rc, want 1 and a message naming CAP_SYS_ADMIN and --privileged: $(tail -n 3 <<<"$out")"
fi

for n in 1 2 3; do start_runner "$n" "${KEY[$n]}" >/dev/null || { fail pool.start "docker run runner-$n"; finish; }; done
for n in 1 2 3; do
  until_ok 120 runner_up "$P-runner-$n" || { fail pool.start "runner-$n: $(docker logs "$P-runner-$n" 2>&1 | tail -5)"; finish; }
done
# Docker's own view: every container's HEALTHCHECK passes (the image's for
# Servers and Runners, the PostgreSQL image's).
if until_ok 90 healthy "$PG" "$SERVER_A" "$SERVER_B" "$P-runner-1" "$P-runner-2" "$P-runner-3"; then
  pass pool.start
else
  fail pool.start "not healthy: $(for c in "$PG" "$SERVER_A" "$SERVER_B" "$P"-runner-{1,2,3}; do
    printf '%s=%s ' "${c#"$P"-}" "$(docker inspect -f '{{.State.Health.Status}}' "$c")"; done)"
fi

# ---- packages: uploaded through A, the same bytes from both --------------------

log "case package.same_bytes"
mkdir -p "$WORK/pkg"
problems=("$REPO"/examples/problems/* "$REPO/deploy/docker/e2e/slow")
bad=""
for dir in "${problems[@]}"; do
  name=$(basename "$dir")
  (cd "$dir" && tar -czf "$WORK/pkg/$name.tar.gz" $(ls -A | grep -vx submissions)) \
    || { bad+=" pack $name;"; continue; }
  out=$(api "$SERVER_A" POST /api/problems -H 'Content-Type: application/gzip' \
    --data-binary @"$WORK/pkg/$name.tar.gz") || { bad+=" upload $name: $out;"; continue; }
  PROBLEM[$dir]=$(jq -r .problem_id <<<"$out")
  sha=$(jq -r .sha256 <<<"$out")
  want=$(sha256sum "$WORK/pkg/$name.tar.gz" | cut -d' ' -f1)
  [ "$sha" = "$want" ] || bad+=" $name: sha256 $sha, uploaded $want;"
  for s in "$SERVER_A" "$SERVER_B"; do
    got=$(api "$s" GET "/api/packages/$sha" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$want" ] || bad+=" $name from ${s#"$P"-}: $got;"
  done
done
if [ -z "$bad" ]; then pass package.same_bytes; else fail package.same_bytes "$bad"; fi
SLOW=$REPO/deploy/docker/e2e/slow
SLOW_FILE=$SLOW/submissions/accepted/sleepy.py
[ -n "${PROBLEM[$SLOW]:-}" ] || { fail setup "the slow problem was not uploaded"; finish; }

# ---- every example submission, through both Servers ----------------------------

log "case examples.verdicts"
t=$SECONDS
subs=()
i=0
for dir in "$REPO"/examples/problems/*; do
  [ -n "${PROBLEM[$dir]:-}" ] || continue
  for f in "$dir"/submissions/*/*; do
    language_of "$f" >/dev/null || continue
    if ((i % 2)); then s=$SERVER_B; else s=$SERVER_A; fi
    i=$((i + 1))
    read -r sid _ < <(submit "$s" "$dir" "$f") && subs+=("$sid")
  done
done
if [ ${#subs[@]} -ne "$i" ]; then
  fail examples.verdicts "submitted ${#subs[@]} of $i"
elif ! wait_ended 600 "${subs[@]}"; then
  fail examples.verdicts "not all ended in 600 s"
else
  problems_found=$(check_verdicts "${subs[@]}")
  if [ -z "$problems_found" ]; then
    pass examples.verdicts
    measure "examples=${#subs[@]} examples_s=$((SECONDS - t))"
  else
    fail examples.verdicts "$(head -n 5 <<<"$problems_found" | tr '\n' ';')"
  fi
fi

# ---- a Runner killed mid-job ---------------------------------------------------

log "case runner.killed"
read -r sid jid < <(submit "$SERVER_A" "$SLOW" "$SLOW_FILE")
if ! rid=$(wait_mid_job "$jid" 120); then
  fail runner.killed "job $jid never ran: $(job "$jid")"
else
  victim=${RUNNER_CT[$rid]}
  token=$(job_field "$jid" .lease_token)
  t_kill=$(now_ms)
  docker kill "$victim" >/dev/null
  if ! until_ok 120 claimed_again "$jid" "$token"; then
    fail runner.killed "job $jid not claimed again: $(job "$jid")"
  else
    measure "kill_to_reclaim_ms=$(($(now_ms) - t_kill))"
    wait_ended 180 "$sid"
    v=$(job "$jid")
    why=$(check_verdicts "$sid")
    # Acknowledged before the kill: the expired delivery is not given back (§4).
    if [ -n "$why" ]; then
      fail runner.killed "$why"
    elif ! jq -e --argjson dead "$rid" '.deliveries == 2 and .refunds == 0 and .runner_id != $dead' <<<"$v" >/dev/null; then
      fail runner.killed "want deliveries 2, refunds 0, another runner: $(jq -c '{deliveries, refunds, runner_id}' <<<"$v")"
    else
      pass runner.killed
    fi
  fi
  docker start "$victim" >/dev/null
  until_ok 120 runner_up "$victim" || log "killed runner did not come back: $(docker logs "$victim" 2>&1 | tail -3)"
fi

# ---- a Runner cut off past its lease, then back --------------------------------

log "case runner.partitioned"
read -r sid jid < <(submit "$SERVER_B" "$SLOW" "$SLOW_FILE")
if ! rid=$(wait_mid_job "$jid" 120); then
  fail runner.partitioned "job $jid never ran: $(job "$jid")"
else
  cut=${RUNNER_CT[$rid]}
  token=$(job_field "$jid" .lease_token)
  lost0=$(runner_metric "$cut" judge_runner_leases_lost_total)
  docker network disconnect "$NET" "$cut"
  if ! until_ok 120 claimed_again "$jid" "$token"; then
    fail runner.partitioned "job $jid not claimed again: $(job "$jid")"
    docker network connect "$NET" "$cut"
  else
    second=$(job_field "$jid" .runner_id)
    wait_ended 180 "$sid"
    stale0=$(stale_total)
    t_back=$(now_ms)
    docker network connect "$NET" "$cut"
    lost_again() { [ "$(runner_metric "$cut" judge_runner_leases_lost_total)" -gt "${lost0%.*}" ]; }
    if ! until_ok 120 lost_again; then
      fail runner.partitioned "no lease.lost at the reconnected runner: $(docker logs --tail 5 "$cut" 2>&1)"
    else
      measure "reconnect_to_lease_lost_ms=$(($(now_ms) - t_back))"
      stale1=$(stale_total)
      v=$(job "$jid")
      why=$(check_verdicts "$sid")
      if [ -n "$why" ]; then
        fail runner.partitioned "$why"
      elif [ "$stale1" -le "$stale0" ]; then
        fail runner.partitioned "judge_stale_result_dropped_total did not grow ($stale0 → $stale1)"
      elif ! jq -e --argjson s "$second" --arg t "$token" \
        '.runner_id == $s and .state == "Completed" and .lease_token != $t and .deliveries == 2' <<<"$v" >/dev/null; then
        fail runner.partitioned "the stored Result is not the second runner's: $(jq -c '{runner_id, state}' <<<"$v")"
      else
        pass runner.partitioned
      fi
    fi
  fi
fi

# ---- docker stop: the job released at once -------------------------------------

log "case runner.stopped"
read -r sid jid < <(submit "$SERVER_A" "$SLOW" "$SLOW_FILE")
if ! rid=$(wait_mid_job "$jid" 120); then
  fail runner.stopped "job $jid never ran: $(job "$jid")"
else
  stopped=${RUNNER_CT[$rid]}
  token=$(job_field "$jid" .lease_token)
  t_stop=$(now_ms)
  docker stop -t 30 "$stopped" >/dev/null
  if ! until_ok 120 claimed_again "$jid" "$token"; then
    fail runner.stopped "job $jid not claimed again: $(job "$jid")"
  else
    measure "stop_to_reclaim_ms=$(($(now_ms) - t_stop))"
    wait_ended 180 "$sid"
    v=$(job "$jid")
    why=$(check_verdicts "$sid")
    code=$(docker inspect -f '{{.State.ExitCode}}' "$stopped")
    # Released, not expired: the release gave the delivery back (§4).
    if [ -n "$why" ]; then
      fail runner.stopped "$why"
    elif [ "$code" != 0 ]; then
      fail runner.stopped "the stopped daemon exited $code"
    elif ! jq -e '.releases == 1 and .deliveries == 1 and .refunds == 0' <<<"$v" >/dev/null; then
      fail runner.stopped "want releases 1, deliveries 1, refunds 0: $(jq -c '{releases, deliveries, refunds}' <<<"$v")"
    else
      pass runner.stopped
    fi
  fi
  docker start "$stopped" >/dev/null
  until_ok 120 runner_up "$stopped" || log "stopped runner did not come back"
fi

# ---- a Server killed mid-job ---------------------------------------------------

batch() {  # SLOW_COUNT: slow jobs first, then a quick example of each problem; prints submission ids
  local n=$1 k dir f i=0
  for ((k = 0; k < n; k++)); do
    if ((k % 2)); then s=$SERVER_B; else s=$SERVER_A; fi
    read -r sid _ < <(submit "$s" "$SLOW" "$SLOW_FILE") && echo "$sid"
  done
  for dir in "$REPO"/examples/problems/*; do
    for f in "$dir"/submissions/accepted/* "$dir"/submissions/wrong_answer/*; do
      language_of "$f" >/dev/null || continue
      if ((i % 2)); then s=$SERVER_B; else s=$SERVER_A; fi
      i=$((i + 1))
      read -r sid _ < <(submit "$s" "$dir" "$f") && echo "$sid"
      break
    done
  done
}

first_job() { live_api GET "/api/submissions/$1" | jq -r '.jobs[0].id'; }

log "case server.killed"
mapfile -t subs < <(batch 3)
if ! wait_mid_job "$(first_job "${subs[0]}")" 120 >/dev/null; then
  fail server.killed "the first slow job never ran"
else
  docker kill "$SERVER_A" >/dev/null
  t_kill=$(now_ms)
  # Everything finishes with A down: the Runners went on through B.
  if ! wait_ended 300 "${subs[@]}"; then
    fail server.killed "not all ended with Server A down"
  else
    measure "server_down_batch_ms=$(($(now_ms) - t_kill))"
    why=$(check_verdicts "${subs[@]}")
    docker start "$SERVER_A" >/dev/null
    if [ -n "$why" ]; then
      fail server.killed "$(head -n 5 <<<"$why" | tr '\n' ';')"
    elif ! until_ok 60 server_up "$SERVER_A"; then
      fail server.killed "Server A did not come back"
    elif [ "$(api "$SERVER_A" GET "/api/submissions/${subs[0]}" | jq -r '.jobs[0].state')" != Completed ]; then
      fail server.killed "Server A, restarted, does not show what B completed"
    else
      pass server.killed
    fi
  fi
fi
docker start "$SERVER_A" >/dev/null 2>&1
until_ok 60 server_up "$SERVER_A" >/dev/null

# ---- PostgreSQL restarted ------------------------------------------------------

log "case postgres.restarted"
mapfile -t subs < <(batch 2)
if ! wait_mid_job "$(first_job "${subs[0]}")" 120 >/dev/null; then
  fail postgres.restarted "the first slow job never ran"
else
  t_restart=$(now_ms)
  docker restart -t 30 "$PG" >/dev/null
  until_ok 120 pg_up
  measure "postgres_restart_ms=$(($(now_ms) - t_restart))"
  if ! wait_ended 300 "${subs[@]}"; then
    fail postgres.restarted "not all ended after the restart"
  else
    why=$(check_verdicts "${subs[@]}")
    if [ -n "$why" ]; then
      fail postgres.restarted "$(head -n 5 <<<"$why" | tr '\n' ';')"
    elif ! server_up "$SERVER_A" || ! server_up "$SERVER_B"; then
      fail postgres.restarted "a Server is not healthy after the restart"
    elif ! api "$SERVER_A" GET "/api/submissions/${subs[0]}" >/dev/null \
      || ! api "$SERVER_B" GET "/api/submissions/${subs[0]}" >/dev/null; then
      fail postgres.restarted "a Server does not answer after the restart"
    else
      pass postgres.restarted
    fi
  fi
fi

# ---- the database itself: one Result per Completed attempt ---------------------

log "case results.counted"
psql_judge -c "SELECT s.id, count(j.id), count(j.id) FILTER (WHERE j.state = 'Completed'),
    count(r.evaluation_job_id), count(r.evaluation_job_id) FILTER (WHERE j.state <> 'Completed')
  FROM submissions s JOIN jobs j ON j.submission_id = s.id
  LEFT JOIN results r ON r.evaluation_job_id = j.id GROUP BY s.id ORDER BY s.id" >"$WORK/counts" 2>&1
bad=""
made=$(ls "$WORK/sub" | wc -l)
if [ "$(wc -l <"$WORK/counts")" -ne "$made" ]; then
  bad="$(wc -l <"$WORK/counts") submissions in PostgreSQL, $made made: $(head -n 2 "$WORK/counts");"
fi
while read -r s jobs completed results stray; do
  [ "$jobs" = 1 ] && [ "$completed" = 1 ] && [ "$results" = 1 ] && [ "$stray" = 0 ] \
    || bad+=" submission $s: $jobs attempts, $completed Completed, $results Results, $stray on unfinished attempts;"
done <"$WORK/counts"
if [ -z "$bad" ]; then pass results.counted; else fail results.counted "$bad"; fi

log "done in $((SECONDS - T0)) s"
finish
