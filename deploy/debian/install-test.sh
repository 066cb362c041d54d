#!/usr/bin/env bash
# The judge host package's test: build-time checks of the .deb and its -dbgsym,
# then an install, a first hour and an uninstall in a clean Debian 12 container.
# Run as root on a host with a Docker engine and no registry:
#
#   deploy/debian/install-test.sh [DEB [DBGSYM]]
#
# DEB defaults to the newest target/debian/judge-runner_*_amd64.deb (`cargo deb`
# makes it; docs/packaging.md), DBGSYM to the judge-runner-dbgsym_*.ddeb beside it.
#
# The container is the debootstrapped base image (deploy/docker/base-image.sh,
# judge-runner-base:bookworm, built once and reused) with systemd added from
# Debian's mirror and run as its PID 1, so the units are started by systemd
# itself, from the configuration the package installed, as on a judge host.
# apt installs the package's Depends from Debian's mirror, and the toolchains the
# examples need (gcc, g++, python3: a part of its Recommends; the JDK is left out
# for time). Then: `judge-runner check`, `judge` on an example, `demo`, the
# packaged seccomp policy and language table used as files, `serve` and `daemon`
# through `systemctl enable --now` with the token and key written into
# /etc/judge-runner/, one submission Completed through them; `apt-get remove`
# leaves only configuration (and the Server's state and user), `apt-get purge`
# removes those too.
#
# One `PASS name` / `FAIL name: why` line per case, `N passed, M failed` last;
# exit 0 only when nothing failed. The container and the cgroups it made are
# removed however it ends. Bounded: every wait has a limit (.ci/run adds an
# overall timeout). Environment: JUDGE_BASE_IMAGE (judge-runner-base:bookworm).
set -uo pipefail
cd "$(dirname "$0")/../.."

P=judge-deb-$$
BASE=${JUDGE_BASE_IMAGE:-judge-runner-base:bookworm}
# Box ids no other test of the project uses (e2e.sh: 100-300; cargo test: low
# ids, check's 999), so that host and container never share a box uid at once.
BOX=700
CHECK_BOX=760
CG=$P  # the cgroup parent of every run in the container (the host's v1 hierarchies)
WORK=$(mktemp -d "/tmp/$P.XXXXXX")
T0=$SECONDS

passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
log() { printf '[deb %4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
measure() { echo "MEASURE $1"; }
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] && exit 0
  exit 1
}

cleanup() {
  docker rm -f -v "$P" >/dev/null 2>&1
  # The cgroup parents made in the host's v1 hierarchies: the runs' (the daemon
  # keeps its parent), and the demo's should it have been stopped half-way.
  local d
  for d in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/*/"judge-runner-demo-${DEMO_PID:-none}"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$WORK"
  return 0
}
trap cleanup EXIT

until_ok() {  # SECONDS CMD...: retries CMD every 0.5 s until it succeeds
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.5
  done
}
in_c() { docker exec "$P" "$@"; }          # a command in the container
sh_c() { docker exec "$P" bash -c "$1"; }  # a shell line in the container

# ---- the .deb as built -------------------------------------------------------

deb=${1:-$(ls -t target/debian/judge-runner_*_amd64.deb 2>/dev/null | head -n1)}
[ -n "$deb" ] && [ -f "$deb" ] || { fail setup "no .deb: run cargo deb (docs/packaging.md) or pass one"; finish; }
ver=$(dpkg-deb -f "$deb" Version)
dbgsym=${2:-$(dirname "$deb")/judge-runner-dbgsym_${ver}_amd64.ddeb}
log "package $deb (version $ver), debug symbols $dbgsym"

case $(basename "$deb") in
  "judge-runner_${ver}_amd64.deb") pass deb.name ;;
  *) fail deb.name "$(basename "$deb") is not judge-runner_${ver}_amd64.deb" ;;
esac

names() { dpkg-deb -f "$deb" "$1" | tr ',|' '\n\n' | sed 's/([^)]*)//; s/^ *//; s/ *$//'; }  # FIELD: one package a line
bad=""
dpkg-deb -f "$deb" Depends | grep -Eq '(^|, )libc6 \(>= [0-9.]+\)' || bad+=" Depends lacks libc6 (\$auto);"
names Depends | grep -qx adduser || bad+=" Depends lacks adduser;"
for p in gcc g++ python3 default-jdk-headless; do
  names Recommends | grep -qxF -- "$p" || bad+=" Recommends lacks $p;"
done
for p in pypy3 kotlin golang-go nodejs mono-mcs; do
  names Suggests | grep -qxF -- "$p" || bad+=" Suggests lacks $p;"
done
if [ -z "$bad" ]; then pass deb.relations; else fail deb.relations "$bad"; fi

# What the package holds, and the configuration's modes (dpkg keeps them).
contents=$(dpkg-deb -c "$deb")
bad=""
for f in ./usr/bin/judge-runner ./usr/lib/systemd/system/judge-runner-daemon.service \
  ./usr/lib/systemd/system/judge-runner-serve.service ./usr/share/judge-runner/seccomp/default.json \
  ./usr/share/judge-runner/languages.yaml ./usr/share/judge-runner/examples/problems/addition/problem.yaml \
  ./usr/share/judge-runner/examples/problems/twosum/output_validators/twosum_checker/validate.cpp \
  ./usr/share/doc/judge-runner/README.md ./usr/share/doc/judge-runner/runner.md; do
  grep -q " $f\$" <<<"$contents" || bad+=" $f missing;"
done
for f in ./etc/judge-runner/daemon.env ./etc/judge-runner/serve.env; do
  grep -Eq "^-rw------- (root/root|0/0) .* $f\$" <<<"$contents" || bad+=" $f not -rw------- root/root;"
done
examples=$(cd examples/problems && find . -type f | wc -l)
packed=$(grep -c ' ./usr/share/judge-runner/examples/problems/.*[^/]$' <<<"$contents")
[ "$examples" -eq "$packed" ] || bad+=" $packed of $examples example files;"
if [ -z "$bad" ]; then pass deb.contents; else fail deb.contents "$bad"; fi

mkdir -p "$WORK/x" "$WORK/dbg"
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$WORK/x" ./conffiles 2>/dev/null
if [ "$(sort "$WORK/x/conffiles" 2>/dev/null | tr '\n' ' ')" = "/etc/judge-runner/daemon.env /etc/judge-runner/serve.env " ]; then
  pass deb.conffiles
else
  fail deb.conffiles "conffiles: $(tr '\n' ' ' <"$WORK/x/conffiles" 2>/dev/null)"
fi

# The binary: stripped, under 30 MB, its line tables in the -dbgsym package
# under its build id, where addr2line (and gdb, Rust's backtraces) resolve them.
dpkg-deb -x "$deb" "$WORK/x"
bin=$WORK/x/usr/bin/judge-runner
size=$(stat -c %s "$bin")
measure "binary_bytes=$size"
if [ "$size" -lt $((30 * 1024 * 1024)) ] && ! readelf -S "$bin" | grep -q '\.debug_line'; then
  pass binary.stripped
else
  fail binary.stripped "$size bytes; sections: $(readelf -S "$bin" | grep -o '\.debug_[a-z]*' | tr '\n' ' ')"
fi
if [ -f "$dbgsym" ]; then
  dpkg-deb -x "$dbgsym" "$WORK/dbg"
  id=$(readelf -n "$bin" | awk '/Build ID/ {print $3}')
  debug=$WORK/dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
  # A function of ours, by its address in the binary (the symbol table went to
  # the debug file too): only the debug file knows its source line.
  addr=$(nm -C "$debug" 2>/dev/null | awk '$2 ~ /^[tT]$/ && $3 == "judge_runner::demo::run" {print $1; exit}')
  with=$( [ -n "$addr" ] && addr2line -e "$debug" "0x$addr")
  without=$( [ -n "$addr" ] && addr2line -e "$bin" "0x$addr")
  if [ -n "$id" ] && [ -f "$debug" ] && [[ $with == */src/demo/mod.rs:[0-9]* ]] && [[ $without == '??'* ]]; then
    pass dbgsym.resolves
    measure "dbgsym_bytes=$(stat -c %s "$dbgsym")"
  else
    fail dbgsym.resolves "build id ${id:-none}, debug file $( [ -f "$debug" ] && echo found || echo missing), judge_runner::demo::run at ${addr:-?}: with it '${with}', without '${without}'"
  fi
else
  fail dbgsym.resolves "no $dbgsym"
fi

# ---- a clean Debian 12 with systemd -------------------------------------------

deploy/docker/base-image.sh "$BASE" >&2 || { fail setup "no base image $BASE"; finish; }
# A container that may make namespaces, mounts and cgroups (the daemon's
# sandbox) and run systemd: --privileged, or spelled out where this engine's
# bounding set lacks one of its capabilities (deploy/docker/e2e.sh does the same).
PRIV=(--privileged)
if ! docker run --rm --privileged "$BASE" true >/dev/null 2>"$WORK/priv.err"; then
  grep -q 'apply caps' "$WORK/priv.err" || { fail setup "docker run --privileged: $(cat "$WORK/priv.err")"; finish; }
  PRIV=(--cap-add ALL --security-opt seccomp=unconfined --security-opt apparmor=unconfined
    --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm')
  bnd=$((16#$(awk '/^CapBnd/ {print $2}' "/proc/$(pgrep -xo dockerd || echo self)/status")))
  for ((i = 0; i <= $(cat /proc/sys/kernel/cap_last_cap) && i <= 40; i++)); do
    (((bnd >> i) & 1)) && continue
    name=$(capsh --decode="$(printf '0x%x' $((1 << i)))" 2>/dev/null | sed 's/.*=cap_//')
    [ -n "$name" ] && PRIV+=(--cap-drop "${name^^}")
  done
fi
# cgroup v1 (this machine): the host's hierarchies, writable; systemd keeps to
# the container's own cgroup, the runs go below $CG. cgroup v2: a private
# cgroup namespace (not run here).
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
  CGROUPS=(--cgroupns=private)
else
  CGROUPS=(--cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw)
fi
log "container $P: systemd from Debian's mirror, then systemd as PID 1"
t=$SECONDS
docker run -d --name "$P" --hostname judge-host "${PRIV[@]}" "${CGROUPS[@]}" \
  --tmpfs /run --tmpfs /run/lock --tmpfs /tmp:exec -e container=docker --stop-signal SIGRTMIN+3 \
  "$BASE" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd systemd-sysv >/tmp/systemd.log 2>&1 && exec /sbin/init' >/dev/null \
  || { fail setup "docker run failed"; finish; }
booted() { [[ $(in_c systemctl is-system-running 2>/dev/null) =~ ^(running|degraded)$ ]]; }
if until_ok 300 booted; then
  pass container.systemd
  measure "systemd_container_s=$((SECONDS - t))"
  # The base image forbids starting services (policy-rc.d exits 101: no daemon
  # may start inside an image build); a judge host has no such policy, and with
  # it deb-systemd-invoke would not stop the units on removal either.
  in_c rm -f /usr/sbin/policy-rc.d
else
  fail container.systemd "$(docker logs "$P" 2>&1 | tail -5 | tr '\n' ' ') $(in_c systemctl is-system-running 2>&1)"
  finish
fi

# ---- install ---------------------------------------------------------------------

docker cp "$deb" "$P:/var/tmp/" >/dev/null
debname=/var/tmp/$(basename "$deb")
# Every package the .deb names is a real bookworm package.
missing=""
for p in $(names Recommends) $(names Suggests); do
  in_c apt-cache show --no-all-versions "$p" >/dev/null 2>&1 || missing+=" $p"
done
if [ -z "$missing" ]; then pass deb.relations_exist; else fail deb.relations_exist "not in bookworm:$missing"; fi

log "apt-get install $debname (Depends from Debian's mirror) and gcc g++ libc6-dev python3 curl"
t=$SECONDS
if sh_c "DEBIAN_FRONTEND=noninteractive apt-get install -y -q $debname gcc g++ libc6-dev python3 curl" >"$WORK/install.log" 2>&1; then
  pass install
  measure "install_s=$((SECONDS - t))"
else
  tail -n 20 "$WORK/install.log" >&2
  fail install "apt-get install failed"
  finish
fi
in_c dpkg-query -L judge-runner >"$WORK/files"
in_c rm -f "$debname"

bad=""
user=$(in_c getent passwd judge-runner)
IFS=: read -r _ _ uid _ _ home shell <<<"$user"
[ -n "$user" ] && [ "$uid" -lt 1000 ] && [ "$shell" = /usr/sbin/nologin ] || bad+=" user: '$user';"
[ "$(in_c stat -c '%U:%G %a' /var/lib/judge-runner)" = "judge-runner:judge-runner 750" ] || bad+=" /var/lib/judge-runner: $(in_c stat -c '%U:%G %a' /var/lib/judge-runner);"
for f in daemon serve; do
  [ "$(in_c stat -c '%U:%G %a' /etc/judge-runner/$f.env)" = "root:root 600" ] || bad+=" $f.env: $(in_c stat -c '%U:%G %a' /etc/judge-runner/$f.env);"
  [ "$(in_c systemctl is-enabled judge-runner-$f.service)" = disabled ] || bad+=" judge-runner-$f enabled at install;"
  in_c systemctl is-active -q judge-runner-$f.service && bad+=" judge-runner-$f started at install;"
done
verify=$(in_c systemd-analyze verify /usr/lib/systemd/system/judge-runner-daemon.service /usr/lib/systemd/system/judge-runner-serve.service 2>&1)
[ -z "$verify" ] || bad+=" systemd-analyze verify: $(tr '\n' ' ' <<<"$verify");"
if [ -z "$bad" ]; then pass install.layout; else fail install.layout "$bad"; fi

# ---- the binary from the package ---------------------------------------------------

log "judge-runner check"
if in_c judge-runner check --runs 20 --cgroup-parent "$CG" --box-id $CHECK_BOX >"$WORK/check" 2>&1 \
  && in_c judge-runner check --json --runs 5 --cgroup-parent "$CG" --box-id $CHECK_BOX \
       --languages /usr/share/judge-runner/languages.yaml >"$WORK/check.json" 2>"$WORK/check.err" \
  && python3 -c 'import json,sys; c={x["name"]:x["status"] for x in json.load(open(sys.argv[1]))["checks"]}; sys.exit(0 if all(c.get("language-"+l)=="ok" for l in ("c","cpp","python3")) else 1)' "$WORK/check.json"; then
  pass check
else
  cat "$WORK/check" "$WORK/check.err" >&2
  fail check "judge-runner check failed (or c, cpp, python3 not ok with the packaged languages.yaml)"
fi

# The packaged seccomp policy as a file: the same deny list as the built-in one.
if in_c judge-runner sandbox --seccomp /usr/share/judge-runner/seccomp/default.json \
     --cgroup-parent "$CG" --box-id $CHECK_BOX --report - -- /bin/true 2>&1 | grep -q '"status": *"ok"'; then
  pass seccomp.file
else
  fail seccomp.file "judge-runner sandbox --seccomp /usr/share/judge-runner/seccomp/default.json -- /bin/true"
fi

log "judge-runner judge on the packaged examples"
ex=/usr/share/judge-runner/examples/problems
bad=""
for s in addition/submissions/accepted/add.c:Accepted addition/submissions/wrong_answer/concat.py:"Wrong Answer" \
  twosum/submissions/accepted/*.cpp:Accepted; do
  src=${s%%:*} want=${s#*:}
  problem=${src%%/*}
  got=$(sh_c "cd /tmp && judge-runner judge --problem $ex/$problem --cgroup-parent $CG --box-id $CHECK_BOX --report - $ex/$src" 2>"$WORK/judge.err" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"])' 2>/dev/null)
  [ "$got" = "$want" ] || bad+=" $src: '$got' (want $want; $(tail -n 2 "$WORK/judge.err" | tr '\n' ' '));"
done
if [ -z "$bad" ]; then pass judge; else fail judge "$bad"; fi

log "judge-runner demo (outside any checkout: the packaged examples)"
t=$SECONDS
sh_c "cd / && exec timeout 600 judge-runner demo" >"$WORK/demo.out" 2>"$WORK/demo.err" &
demo=$!
# The URL it prints is where its Server listens, while it runs.
url_seen=""
for _ in $(seq 1 240); do
  [ -n "${DEMO_PID:-}" ] || DEMO_PID=$(in_c pgrep -o -f '^judge-runner demo' 2>/dev/null)
  url=$(grep -o 'Server listening on http://[0-9.:]*' "$WORK/demo.err" 2>/dev/null | head -n1 | sed 's/.* //')
  if [ -n "$url" ]; then
    in_c curl -fsS -m 5 -o /dev/null "$url/healthz" && url_seen=$url
    break
  fi
  kill -0 "$demo" 2>/dev/null || break
  sleep 0.5
done
wait "$demo"; demo_rc=$?
if [ "$demo_rc" -eq 0 ] && grep -q 'from /usr/share/judge-runner/examples/problems' "$WORK/demo.err" && [ -n "$url_seen" ] \
  && grep -q ' 0 mismatched' "$WORK/demo.out"; then
  pass demo
  measure "demo_s=$((SECONDS - t))"
else
  tail -n 15 "$WORK/demo.err" >&2; tail -n 5 "$WORK/demo.out" >&2
  fail demo "exit $demo_rc; URL answered: ${url_seen:-no}"
fi

# ---- serve and daemon, as systemd starts them ---------------------------------------

log "serve and daemon through systemctl enable --now, configured in /etc/judge-runner/"
TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
# What an operator does: put the token into serve.env, enable the unit.
sh_c "sed -i 's/^JUDGE_MANAGER_TOKEN=.*/JUDGE_MANAGER_TOKEN=$TOKEN/' /etc/judge-runner/serve.env && systemctl enable --now judge-runner-serve" >/dev/null 2>&1
api() {  # METHOD PATH [curl args...]
  local m=$1 p=$2; shift 2
  in_c curl -fsS -m 20 -X "$m" -H "Authorization: Bearer $TOKEN" "$@" "http://127.0.0.1:8080$p"
}
serve_up() { in_c curl -fsS -m 5 -o /dev/null http://127.0.0.1:8080/healthz; }
if until_ok 60 serve_up; then
  pid=$(in_c systemctl show -p MainPID --value judge-runner-serve)
  owner=$(in_c stat -c %U "/proc/$pid")
  if [ "$owner" = judge-runner ] && in_c test -f /var/lib/judge-runner/judge.db; then
    pass serve.unit
  else
    fail serve.unit "serve runs as '$owner'; database: $(in_c ls /var/lib/judge-runner)"
  fi
else
  fail serve.unit "not up: $(in_c journalctl -u judge-runner-serve --no-pager -n 5 2>&1 | tr '\n' ' ')"
fi

key=$(api POST /api/runners -H 'Content-Type: application/json' -d '{"name":"judge-host"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])' 2>/dev/null)
# The Runner key into daemon.env, this test's box range and cgroup parent.
sh_c "sed -i -e 's/^JUDGE_RUNNER_KEY=.*/JUDGE_RUNNER_KEY=$key/' -e 's/^JUDGE_FIRST_BOX=.*/JUDGE_FIRST_BOX=$BOX/' \
  -e 's/^JUDGE_DAEMON_OPTS=.*/JUDGE_DAEMON_OPTS=--slots 1 --metrics 127.0.0.1:9464 --cgroup-parent $CG/' /etc/judge-runner/daemon.env \
  && systemctl enable --now judge-runner-daemon" >/dev/null 2>&1
daemon_up() { in_c curl -fsS -m 5 http://127.0.0.1:9464/metrics 2>/dev/null | grep -q '^judge_runner_slots'; }
if [ -n "$key" ] && until_ok 120 daemon_up; then
  pid=$(in_c systemctl show -p MainPID --value judge-runner-daemon)
  if in_c cat "/proc/$pid/cmdline" | tr '\0' ' ' | grep -q -- "$key"; then
    fail daemon.unit "the key is on the daemon's command line"
  elif ! in_c cat "/proc/$pid/cmdline" | tr '\0' ' ' | grep -q -- "--first-box $BOX --cache /var/cache/judge-runner --slots 1"; then
    fail daemon.unit "command line: $(in_c cat "/proc/$pid/cmdline" | tr '\0' ' ')"
  else
    pass daemon.unit
  fi
else
  fail daemon.unit "not up (key '${key:0:8}…'): $(in_c journalctl -u judge-runner-daemon --no-pager -n 8 2>&1 | tr '\n' ' ')"
fi

# One submission, as README shows it: the package's .tar.gz, then a submission.
sh_c "tar -czf /tmp/addition.tar.gz -C $ex/addition ."
problem=$(api POST /api/problems --data-binary @/tmp/addition.tar.gz | python3 -c 'import json,sys; print(json.load(sys.stdin)["problem_id"])' 2>/dev/null)
body=$(python3 -c 'import json,sys; print(json.dumps({"problem_id": int(sys.argv[1]), "language": "python3", "files": [{"name": "add.py", "content": open(sys.argv[2]).read()}]}))' \
  "${problem:-0}" examples/problems/addition/submissions/accepted/add.py)
job=$(api POST /api/submissions -H 'Content-Type: application/json' -d "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])' 2>/dev/null)
state() { api GET "/api/jobs/$job" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["state"], (j.get("result") or {}).get("verdict", ""))' 2>/dev/null; }
completed() { [[ $(state) == Completed* ]]; }
t=$SECONDS
if [ -n "$job" ] && until_ok 180 completed && [ "$(state)" = "Completed Accepted" ]; then
  pass job.completed
  measure "job_s=$((SECONDS - t))"
else
  fail job.completed "problem ${problem:-?}, job ${job:-?}: $(state); $(in_c journalctl -u judge-runner-daemon --no-pager -n 5 2>&1 | tr '\n' ' ')"
fi

# ---- remove, then purge ------------------------------------------------------------

log "apt-get remove"
in_c dpkg-query -W -f='${Conffiles}\n' judge-runner | awk 'NF {print $1}' >"$WORK/conffiles"
sh_c "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q judge-runner" >"$WORK/remove.log" 2>&1 || { tail -5 "$WORK/remove.log" >&2; fail remove "apt-get remove failed"; }
# Everything the package installed is gone but its conffiles; outside dpkg's
# list, what has the package's name is configuration (its own, the units'
# enable links and the masks deb-systemd-helper puts on removed units, until
# purge), the Server's state (kept until purge, like its user), dpkg's own
# record of the conffiles, and the two tmpfs runtime directories every
# judge-runner on a host shares (the box locks, the runs' root staging point).
leftover() {
  sh_c "find / -xdev \( -path /proc -o -path /sys \) -prune -o -name '*judge-runner*' -print; find /run -maxdepth 1 -name '*judge-runner*'" 2>/dev/null | sort
}
bad=""
status=$(in_c dpkg-query -W -f='${db:Status-Abbrev}' judge-runner 2>/dev/null)
[ "$status" = "rc " ] || bad+=" dpkg status '$status';"
# One shell in the container walks dpkg's list (conffiles as arguments).
bad+=$(docker exec -i "$P" bash -c '
  while read -r f; do
    conf=""; for c in "$@"; do [ "$f" = "$c" ] && conf=1; done
    if [ -n "$conf" ]; then [ -f "$f" ] || printf " conffile %s gone;" "$f"
    elif [ ! -d "$f" ] && [ -e "$f" ]; then printf " %s left;" "$f"; fi
  done' _ $(cat "$WORK/conffiles") <"$WORK/files")
for d in /usr/share/judge-runner /usr/share/doc/judge-runner /var/cache/judge-runner; do
  in_c test -e "$d" && bad+=" $d left;"
done
for f in daemon serve; do
  in_c systemctl is-active -q judge-runner-$f && bad+=" judge-runner-$f still running;"
done
in_c pgrep -x judge-runner >/dev/null && bad+=" a judge-runner process left;"
allowed='^(/etc/judge-runner(/(daemon|serve)\.env)?|/var/lib/judge-runner(/.*)?|/var/lib/dpkg/info/judge-runner\.(conffiles|list|md5sums|postinst|postrm|prerm|preinst)|/var/lib/systemd/deb-systemd-helper-[a-z]*/.*judge-runner-(daemon|serve)\.service.*|/etc/systemd/system/(multi-user\.target\.wants/)?judge-runner-(daemon|serve)\.service|/run/judge-runner(-root)?)$'
extra=$(leftover | grep -Ev "$allowed")
[ -z "$extra" ] || bad+=" left: $(tr '\n' ' ' <<<"$extra");"
if [ -z "$bad" ]; then pass remove.config_only; else fail remove.config_only "$bad"; fi
leftover | sed 's/^/  after remove: /' >&2

log "apt-get purge"
sh_c "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q judge-runner" >"$WORK/purge.log" 2>&1 || { tail -5 "$WORK/purge.log" >&2; fail purge "apt-get purge failed"; }
bad=""
in_c dpkg-query -W judge-runner >/dev/null 2>&1 && bad+=" dpkg still knows it: $(in_c dpkg-query -W -f='${db:Status-Abbrev}' judge-runner);"
in_c getent passwd judge-runner >/dev/null && bad+=" user judge-runner left;"
in_c getent group judge-runner >/dev/null && bad+=" group judge-runner left;"
# /run/judge-runner (the box locks every judge-runner on a host shares) and
# /run/judge-runner-root (where every run mounts its fresh root) are tmpfs
# runtime directories: they go with the next boot, not with the package.
extra=$(leftover | grep -Ev '^/run/judge-runner(-root)?$')
[ -z "$extra" ] || bad+=" left: $(tr '\n' ' ' <<<"$extra");"
if [ -z "$bad" ]; then pass purge.nothing_left; else fail purge.nothing_left "$bad"; fi

measure "total_s=$((SECONDS - T0))"
finish
