#!/usr/bin/env bash
# The base image, made here without a container registry: a Debian 12 (bookworm)
# root built by debootstrap from Debian's own package mirror, `docker import`ed.
#
#   deploy/docker/base-image.sh [IMAGE]        # default judge-runner-base:bookworm
#
# The Dockerfile's FROM takes it through a build argument:
#   docker build --build-arg BASE_IMAGE=judge-runner-base:bookworm ...
# (the default is the public debian:12, for machines that can pull it).
#
# Cached: when IMAGE already exists nothing is done (JUDGE_BASE_REBUILD=1 forces a
# new one). Needs root (debootstrap) and a Docker engine; installs debootstrap
# from Debian when it is missing. Environment: DEBIAN_MIRROR (default
# http://deb.debian.org/debian), DEBIAN_SECURITY_MIRROR.
set -euo pipefail

image=${1:-${JUDGE_BASE_IMAGE:-judge-runner-base:bookworm}}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm
log() { printf 'base-image: %s\n' "$*" >&2; }

if [ -z "${JUDGE_BASE_REBUILD:-}" ] && docker image inspect "$image" >/dev/null 2>&1; then
  log "$image exists ($(docker image inspect -f '{{.Created}}' "$image")); nothing to do"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { log "debootstrap needs root"; exit 1; }
if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

root=$(mktemp -d "${TMPDIR:-/var/tmp}/judge-base.XXXXXX")
cleanup() {
  # debootstrap mounts proc/sys inside the root while it works; never rm through a mount.
  for m in proc sys dev/pts dev; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

log "debootstrap $suite from $mirror into $root"
t0=$SECONDS
debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2; rm -f "$root.log"; log "debootstrap failed"; exit 1; }
rm -f "$root.log"

# The package sources of the image: the release, its updates and security.
cat >"$root/etc/apt/sources.list" <<SRC
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
SRC
# Container-friendly apt: no recommends, no .deb cache, no translations.
cat >"$root/etc/apt/apt.conf.d/90judge-container" <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT
# Services must not start inside an image build.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod 0755 "$root/usr/sbin/policy-rc.d"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log \
       "$root"/var/log/apt/* "$root"/tmp/* "$root"/var/tmp/*
: >"$root/etc/machine-id"
# docker supplies these at run time.
rm -f "$root/etc/hostname" "$root/etc/resolv.conf"

log "docker import as $image"
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
tar --numeric-owner --xattrs -C "$root" --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* -c . \
  | docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'CMD ["bash"]' \
      --change "LABEL org.opencontainers.image.title=judge-runner-base org.opencontainers.image.description=\"Debian $suite (debootstrap --variant=minbase from $mirror)\" org.opencontainers.image.created=$created" \
      --message "debootstrap --variant=minbase $suite $mirror" \
      - "$image" >/dev/null
log "$image built in $((SECONDS - t0)) s ($(docker image inspect -f '{{.Size}}' "$image") bytes)"
