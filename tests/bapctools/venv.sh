#!/usr/bin/env bash
# Create (once) and cache a Python venv holding BAPCtools (`bt`), the second
# reference tool of the oracle tests (tests/problemtools_oracle.rs), beside
# problemtools (tests/problemtools/venv.sh).
#
#   tests/bapctools/venv.sh            # prints the venv directory on stdout
#   BT=$(tests/bapctools/venv.sh) && "$BT/bin/bt" --help
#
# The venv lives at ${JUDGE_BAPCTOOLS_CACHE:-$HOME/.cache/judge-runner}/bapctools-<version>
# and is reused while it is complete (a `ready` marker is written last).
# BAPCtools reads only the current problem format (2025-09): the oracle test runs
# `bt upgrade` on a copy of each package first.
#
# Needs python3 with venv and pip (Debian: python3-venv), gcc/g++ for the problems,
# and PyPI. Progress goes to stderr; only the directory goes to stdout.
set -euo pipefail
version=${BAPCTOOLS_VERSION:-2026.10.0}
cache=${JUDGE_BAPCTOOLS_CACHE:-${HOME:-/root}/.cache/judge-runner}
dir=$cache/bapctools-$version

if [ -e "$dir/ready" ]; then
  echo "$dir"
  exit 0
fi

if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bapctools venv: installing python3-venv" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >&2
  else
    echo "bapctools venv: python3 -m venv is not available (install python3-venv)" >&2
    exit 1
  fi
fi

mkdir -p "$cache"
# One creator at a time (a test and a benchmark may ask at once).
exec 9>"$cache/.bapctools-$version.lock"
flock 9
if [ -e "$dir/ready" ]; then
  echo "$dir"
  exit 0
fi
echo "bapctools venv: creating $dir (pip install bapctools==$version, a few minutes)" >&2
# The venv's scripts name their interpreter by absolute path: build it in place;
# `ready` is written last, so a half-built venv is rebuilt next time.
rm -rf "$dir"
python3 -m venv "$dir" >&2
"$dir/bin/pip" install -q --disable-pip-version-check "bapctools==$version" >&2
# (`bt --help` itself fails on Python 3.11 with this release: check the import.)
"$dir/bin/python" -c "import bapctools.cli" >&2
touch "$dir/ready"
echo "$dir"
