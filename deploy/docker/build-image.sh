#!/usr/bin/env bash
# The judge-runner image where no registry can be reached: the base image from
# Debian's packages (deploy/docker/base-image.sh, cached), then the Dockerfile's
# `prebuilt` target with a binary built on this host.
#
#   deploy/docker/build-image.sh [--binary PATH] [--tag IMAGE] [--base IMAGE]
#
#   --binary  a judge-runner built for Debian 12 / glibc 2.36 (default: $JUDGE_RUNNER_BIN,
#             else the newer of target/release/judge-runner and target/debug/judge-runner)
#   --tag     the image to build (default: $JUDGE_IMAGE, else judge-runner)
#   --base    the base image (default: $JUDGE_BASE_IMAGE, else judge-runner-base:bookworm)
#
# With a registry, `docker build -t judge-runner .` builds the binary in Docker
# instead (the default target). The binary is copied without its debug info.
set -euo pipefail
cd "$(dirname "$0")/../.."
binary=${JUDGE_RUNNER_BIN:-}
tag=${JUDGE_IMAGE:-judge-runner}
base=${JUDGE_BASE_IMAGE:-judge-runner-base:bookworm}
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    *) echo "usage: $0 [--binary PATH] [--tag IMAGE] [--base IMAGE]" >&2; exit 2 ;;
  esac
done
log() { printf 'build-image: %s\n' "$*" >&2; }
if [ -z "$binary" ]; then
  for b in target/release/judge-runner target/debug/judge-runner; do
    if [ -x "$b" ] && { [ -z "$binary" ] || [ "$b" -nt "$binary" ]; }; then binary=$b; fi
  done
fi
[ -n "$binary" ] && [ -x "$binary" ] || { log "no binary: build one (cargo build [--release]) or pass --binary"; exit 1; }

deploy/docker/base-image.sh "$base"

version=$("$binary" --version | awk '{print $2}')
mkdir -p deploy/docker/bin
# Only replaced when it differs, so the build cache keeps the image's layer.
tmp=$(mktemp deploy/docker/bin/.judge-runner.XXXXXX)
trap 'rm -f "$tmp"' EXIT
objcopy --strip-debug "$binary" "$tmp" 2>/dev/null || cp "$binary" "$tmp"
chmod 0755 "$tmp"
if cmp -s "$tmp" deploy/docker/bin/judge-runner; then rm -f "$tmp"; else mv "$tmp" deploy/docker/bin/judge-runner; fi

log "building $tag from $binary ($version) on $base"
t0=$SECONDS
# The image the tag names now: once replaced it is left untagged, and removed below
# (its layers below the binary stay, shared with the new one), so that repeated
# builds (CI) do not pile up a binary layer each.
old=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
# The legacy builder when buildx (BuildKit) is missing, as on Debian's docker.io.
docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0}
docker build -q --target prebuilt \
  --build-arg BASE_IMAGE="$base" \
  --build-arg JUDGE_RUNNER_BINARY=deploy/docker/bin/judge-runner \
  --build-arg JUDGE_RUNNER_GIT_HASH="${version#*+}" \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.created="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  -t "$tag" . >/dev/null
log "$tag built in $((SECONDS - t0)) s"
new=$(docker image inspect -f '{{.Id}}' "$tag")
if [ -n "$old" ] && [ "$old" != "$new" ] && [ -z "$(docker image inspect -f '{{join .RepoTags ","}}' "$old" 2>/dev/null)" ]; then
  docker image rm "$old" >/dev/null 2>&1 || log "the previous $tag ($old) is still in use; left"
fi
