# judge-runner: the Runner daemon, `serve` and `demo` in one image.
#
# With a registry (Docker Hub reachable): everything is built in Docker, the
# binary by cargo in a rust builder stage (the last stage is the default target):
#
#   docker build --build-arg JUDGE_RUNNER_GIT_HASH=$(git rev-parse --short=7 HEAD) -t judge-runner .
#
# Without a registry (nothing can be pulled): make the base image from Debian's
# packages and put a binary built on the host into it (the `prebuilt` target):
#
#   deploy/docker/build-image.sh [--binary target/release/judge-runner]
#
# which is deploy/docker/base-image.sh (debootstrap + docker import) and then
#
#   docker build --target prebuilt --build-arg BASE_IMAGE=judge-runner-base:bookworm \
#     --build-arg JUDGE_RUNNER_BINARY=deploy/docker/bin/judge-runner -t judge-runner .
#
# The stages are ordered so that the legacy builder (no BuildKit), which builds
# every stage before the target, never needs the rust image for `prebuilt`.
#
# The daemon creates namespaces and cgroups, so it runs --privileged; see
# docs/runner.md ("Docker") for the cgroup v1 / v2 forms and the cache volume.

# The Debian 12 the runtime is made from: the public image, or the one
# deploy/docker/base-image.sh imports.
ARG BASE_IMAGE=debian:12
# The toolchain of the from-source build (the crate needs Rust >= 1.95).
ARG RUST_IMAGE=rust:1.95-bookworm

# ---- runtime base: toolchains, layout, healthcheck, labels ---------------------
FROM ${BASE_IMAGE} AS runtime-base
# Which languages of the built-in table get their toolchain (ids, space- or
# comma-separated; docs/judge.md, "Languages"). The default is the ICPC World
# Finals set (c, cpp, java, kotlin, python3) plus PyPy and the contract's rust;
# add go, javascript, csharp (or `all`), e.g.
#   docker build --build-arg JUDGE_LANGUAGES="c cpp python3 pypy3 go" ...
# A language whose toolchain is missing is simply not offered (`check` says
# `missing`). curl: the healthcheck; tini: PID 1.
ARG JUDGE_LANGUAGES="c cpp java kotlin python3 pypy3 rust"
RUN set -eu; pkgs="ca-certificates curl tini"; \
    for l in $(echo "$JUDGE_LANGUAGES" | tr ',' ' '); do \
      case "$l" in \
        all) pkgs="$pkgs gcc g++ libc6-dev python3 pypy3 openjdk-17-jdk-headless kotlin rustc golang-go nodejs mono-mcs mono-runtime" ;; \
        c) pkgs="$pkgs gcc libc6-dev" ;; \
        cpp) pkgs="$pkgs g++ libc6-dev" ;; \
        python3) pkgs="$pkgs python3" ;; \
        pypy3) pkgs="$pkgs pypy3" ;; \
        java) pkgs="$pkgs openjdk-17-jdk-headless" ;; \
        kotlin) pkgs="$pkgs openjdk-17-jdk-headless kotlin" ;; \
        rust) pkgs="$pkgs rustc" ;; \
        go) pkgs="$pkgs golang-go" ;; \
        javascript) pkgs="$pkgs nodejs" ;; \
        csharp) pkgs="$pkgs mono-mcs mono-runtime" ;; \
        *) echo "JUDGE_LANGUAGES: unknown language $l" >&2; exit 1 ;; \
      esac; \
    done; \
    apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
# The non-root layout. `serve` needs no privilege and runs as `judge`
# (docker run --user judge); the daemon is the sandbox and must be root. The uid
# is far below the box uids (60000 + box id), which must stay unused.
#   /var/lib/judge-runner          working directory (a SQLite database, if any)
#   /var/lib/judge-runner/storage  serve --storage (a volume; shared by Servers)
#   /var/cache/judge-runner        daemon --cache (a volume; shared by daemons of a host)
RUN groupadd --system --gid 990 judge \
 && useradd --system --uid 990 --gid judge --home-dir /var/lib/judge-runner --shell /usr/sbin/nologin judge \
 && install -d -o judge -g judge -m 0750 /var/lib/judge-runner /var/lib/judge-runner/storage \
 && install -d -o root -g root -m 0755 /var/cache/judge-runner
COPY deploy/docker/healthcheck /usr/local/bin/judge-runner-healthcheck
# The demo finds its examples here (`docker run --privileged IMAGE demo`).
COPY examples/problems /usr/share/judge-runner/examples/problems
VOLUME ["/var/cache/judge-runner"]
WORKDIR /var/lib/judge-runner
# The daemon's metrics (CMD below), or serve's /healthz when JUDGE_HEALTHCHECK_URL
# says so (e.g. http://127.0.0.1:8080/healthz).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/judge-runner-healthcheck"]
# tini reaps stray children and forwards SIGTERM to the daemon, which releases
# its jobs and exits 0 (`docker stop` gives it 10 s by default; that is enough).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/judge-runner"]
CMD ["daemon", "--cache", "/var/cache/judge-runner", "--metrics", "0.0.0.0:9464"]
EXPOSE 8080 9464
ARG BASE_IMAGE
ARG JUDGE_RUNNER_GIT_HASH=unknown
ARG JUDGE_LANGUAGES
LABEL org.opencontainers.image.title="judge-runner" \
      io.github.judge-runner.languages="${JUDGE_LANGUAGES}" \
      org.opencontainers.image.description="Sandboxed contest judge: Runner daemon (privileged), Server, demo" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0" \
      org.opencontainers.image.revision="${JUDGE_RUNNER_GIT_HASH}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

# ---- prebuilt: the binary built on the host (no registry needed) ---------------
# A binary for Debian 12 (glibc 2.36), inside the build context; target/ is not
# in the context (.dockerignore), so copy it to deploy/docker/bin/ first
# (deploy/docker/build-image.sh does).
FROM runtime-base AS prebuilt
ARG JUDGE_RUNNER_BINARY=deploy/docker/bin/judge-runner
COPY ${JUDGE_RUNNER_BINARY} /usr/local/bin/judge-runner
RUN /usr/local/bin/judge-runner --version

# ---- build from source (needs the rust image) ----------------------------------
FROM ${RUST_IMAGE} AS build
ARG JUDGE_RUNNER_GIT_HASH=unknown
ENV JUDGE_RUNNER_GIT_HASH=${JUDGE_RUNNER_GIT_HASH}
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin judge-runner \
 && install -D -m 0755 target/release/judge-runner /out/judge-runner

# ---- runtime (the default target): the binary built above ----------------------
FROM runtime-base AS runtime
COPY --from=build /out/judge-runner /usr/local/bin/judge-runner
RUN /usr/local/bin/judge-runner --version
