#!/usr/bin/env bash
# Create (once) and cache a Python venv holding problemtools, the Kattis reference
# tools, for the oracle tests (tests/problemtools_oracle.rs) and benchmarks.
#
#   tests/problemtools/venv.sh            # prints the venv directory on stdout
#   PT=$(tests/problemtools/venv.sh) && "$PT/bin/verifyproblem" -h
#
# The venv lives at ${JUDGE_PROBLEMTOOLS_CACHE:-$HOME/.cache/judge-runner}/problemtools-<version>
# and is reused while it is complete (a `ready` marker is written last). It also holds
#   $PT/config/problemtools/languages.yaml   - Python 3 run by python3, not pypy3
#   $PT/bin/default_validator                - problemtools' compiled default validator
# Set XDG_CONFIG_HOME=$PT/config when running verifyproblem so it reads that file.
# problemtools does not read .timelimit: pass `-t <seconds>` to verifyproblem.
#
# Needs python3 with venv and pip (Debian: python3-venv), gcc/g++ for the problems,
# and PyPI. Progress goes to stderr; only the directory goes to stdout.
set -euo pipefail
version=${PROBLEMTOOLS_VERSION:-1.20260907}
cache=${JUDGE_PROBLEMTOOLS_CACHE:-${HOME:-/root}/.cache/judge-runner}
dir=$cache/problemtools-$version

if [ -e "$dir/ready" ]; then
  echo "$dir"
  exit 0
fi

if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "problemtools venv: installing python3-venv" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >&2
  else
    echo "problemtools venv: python3 -m venv is not available (install python3-venv)" >&2
    exit 1
  fi
fi

mkdir -p "$cache"
# One creator at a time (a test and a benchmark may ask at once).
exec 9>"$cache/.problemtools-$version.lock"
flock 9
if [ -e "$dir/ready" ]; then
  echo "$dir"
  exit 0
fi
echo "problemtools venv: creating $dir (pip install problemtools==$version, a few minutes)" >&2
# The venv's scripts name their interpreter by absolute path: build it in place;
# `ready` is written last, so a half-built venv is rebuilt next time.
rm -rf "$dir"
python3 -m venv "$dir" >&2
"$dir/bin/pip" install -q --disable-pip-version-check "problemtools==$version" >&2

# problemtools ships its compiled default validator inside the package.
dv=$(find "$dir/lib" -path '*problemtools*' -type f -name default_validator -perm -u+x | head -n1)
if [ -z "$dv" ]; then
  echo "problemtools venv: the installed problemtools has no compiled default_validator" >&2
  exit 1
fi
ln -sf "$dv" "$dir/bin/default_validator"

# Its languages.yaml runs Python 3 with pypy3; override that entry with python3.
langs=$(find "$dir/lib" -path '*problemtools/config/languages.yaml' | head -n1)
mkdir -p "$dir/config/problemtools"
if [ -n "$langs" ]; then
  "$dir/bin/python" - "$langs" "$dir/config/problemtools/languages.yaml" <<'PY'
import sys, yaml
src, dst = sys.argv[1], sys.argv[2]
with open(src) as f:
    langs = yaml.safe_load(f)
py = langs.get("python3", {})
langs = {"python3": {
    "name": "Python 3 (python3)",
    "compile": py.get("compile", "pypy3 -m py_compile {files}").replace("pypy3", "python3"),
    "run": py.get("run", 'pypy3 "{mainfile}"').replace("pypy3", "python3"),
}}
with open(dst, "w") as f:
    yaml.safe_dump(langs, f)
PY
fi
touch "$dir/ready"
echo "$dir"
