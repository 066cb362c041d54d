#!/usr/bin/env bash
# schemathesis against a real `judge-runner serve` (SQLite), over the Server's own
# GET /api/openapi.json, with the manager token, a runner key and a token holding
# every grantable scope for their security schemes. Checks: not_a_server_error, status_code_conformance,
# content_type_conformance, response_schema_conformance. Bounded: SCHEMATHESIS_EXAMPLES
# cases per operation (default 40) and SCHEMATHESIS_MAX_TIME seconds (default 150,
# plus 20 s for the revocation pass); SCHEMATHESIS_ARGS adds options to both passes.
#
#   tests/schemathesis/run.sh [path/to/judge-runner]    (default target/debug/judge-runner)
#
# schemathesis is installed from PyPI into a venv cached at
# $SCHEMATHESIS_VENV (default ~/.cache/judge-runner/schemathesis-$VERSION).
# Exits non-zero when schemathesis finds a failure; the report is in
# $SCHEMATHESIS_REPORT (default target/schemathesis).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
VERSION=4.32.5
BIN=${1:-$REPO/target/debug/judge-runner}
EXAMPLES=${SCHEMATHESIS_EXAMPLES:-40}
MAX_TIME=${SCHEMATHESIS_MAX_TIME:-150}
SEED=${SCHEMATHESIS_SEED:-20261201}
VENV=${SCHEMATHESIS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/judge-runner/schemathesis-$VERSION}
REPORT=${SCHEMATHESIS_REPORT:-$REPO/target/schemathesis}

[ -x "$BIN" ] || { echo "schemathesis: no $BIN (cargo build first)" >&2; exit 1; }
if ! "$VENV/bin/st" --version >/dev/null 2>&1; then
  echo "schemathesis: installing $VERSION into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$VERSION"
fi

work=$(mktemp -d /tmp/judge-schemathesis.XXXXXX)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

export JUDGE_MANAGER_TOKEN="schemathesis-manager-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
"$BIN" serve --listen 127.0.0.1:0 --max-claim-wait 1 --database "sqlite://$work/judge.db" --storage "$work/storage" \
  >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
base=
for _ in $(seq 1 200); do
  base=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$work/stdout" | head -n1)
  [ -n "$base" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/stderr" >&2; exit 1; }
  sleep 0.05
done
[ -n "$base" ] || { echo "schemathesis: serve did not start" >&2; cat "$work/stderr" >&2; exit 1; }

# Something to find: a problem, a submission (ids 1), a runner key, a scoped token.
api() { # METHOD PATH TOKEN [curl args...]
  local m=$1 p=$2 t=$3; shift 3
  curl -fsS -X "$m" -H "Authorization: Bearer $t" "$@" "$base$p"
}
json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
tar -czf "$work/guess.tar.gz" -C examples/problems/guess .
api POST /api/problems "$JUDGE_MANAGER_TOKEN" --data-binary "@$work/guess.tar.gz" >/dev/null
api POST /api/submissions "$JUDGE_MANAGER_TOKEN" -H 'content-type: application/json' \
  -d '{"problem_id": 1, "language": "python3", "files": [{"name": "a.py", "content": "print(1)"}]}' >/dev/null
RUNNER_KEY=$(api POST /api/runners "$JUDGE_MANAGER_TOKEN" -H 'content-type: application/json' -d '{"name": "schemathesis"}' | json key)
TRIAL_TOKEN=$(api POST /api/tokens "$JUDGE_MANAGER_TOKEN" -H 'content-type: application/json' -d '{"scopes": ["trial:run", "console:read", "problems:write", "submissions:write"]}' | json token)
export JUDGE_MANAGER_TOKEN RUNNER_KEY TRIAL_TOKEN

cat >"$work/schemathesis.toml" <<'TOML'
[auth.openapi.manager_token]
bearer = "${JUDGE_MANAGER_TOKEN}"

[auth.openapi.runner_key]
bearer = "${RUNNER_KEY}"

[auth.openapi.scoped_token]
bearer = "${TRIAL_TOKEN}"
TOML

mkdir -p "$REPORT"
read -r -a EXTRA_ARGS <<<"${SCHEMATHESIS_ARGS:-}"
st() { # PHASE-NAME SECONDS FILTER...
  local name=$1 secs=$2; shift 2
  echo "schemathesis: $name (at most $EXAMPLES examples per operation, $secs s)" >&2
  # (in $work: its example database is thrown away with the run)
  (cd "$work" && "$VENV/bin/st" --config-file "$work/schemathesis.toml" run "$base/api/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$EXAMPLES" --max-time "$secs" --seed "$SEED" \
    --phases examples,coverage,fuzzing --workers 2 --request-timeout 30 \
    --report junit --report-dir "$REPORT/$name" "$@" "${EXTRA_ARGS[@]}")
}
rc=0
# Revoking runners (DELETE /api/runners/{id}) would revoke the key the other
# operations use: everything else first, then the revocations.
st all-but-revoke "$MAX_TIME" --exclude-method DELETE || rc=$?
st revoke 20 --include-method DELETE || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "schemathesis: failures found (rc=$rc); serve's log:" >&2
  tail -n 40 "$work/stderr" >&2
fi
exit "$rc"
