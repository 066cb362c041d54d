# judge-runner: the Runner daemon (and `serve`, `demo`) in a container.
#
#   docker build --build-arg JUDGE_RUNNER_GIT_HASH=$(git rev-parse --short=7 HEAD) -t judge-runner .
#
# The daemon creates namespaces and cgroups, so it runs --privileged; see
# docs/runner.md ("Docker") for the cgroup v1 / v2 options and the cache volume.

# ---- build ---------------------------------------------------------------------
FROM rust:1.95-bookworm AS build
ARG JUDGE_RUNNER_GIT_HASH=unknown
ENV JUDGE_RUNNER_GIT_HASH=${JUDGE_RUNNER_GIT_HASH}
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin judge-runner \
 && install -D -m 0755 target/release/judge-runner /out/judge-runner

# ---- runtime -------------------------------------------------------------------
# The toolchains of the default language table: c (gcc), cpp (g++), python3,
# java (JDK 17), rust (rustc). A language whose toolchain is missing is simply
# not offered; add or remove packages here to change what a pool judges.
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc g++ libc6-dev python3 openjdk-17-jdk-headless rustc \
      ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/judge-runner /usr/local/bin/judge-runner
# The demo finds its examples here (`docker run --privileged IMAGE demo`).
COPY examples/problems /usr/share/judge-runner/examples/problems
# The package cache: keep it on a volume so a restarted container does not
# download every package again; several containers may share it.
VOLUME ["/var/cache/judge-runner"]
WORKDIR /var/lib/judge-runner
# tini reaps stray children and forwards SIGTERM to the daemon, which releases
# its jobs and exits 0 (`docker stop` gives it 10 s by default; that is enough).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/judge-runner"]
CMD ["daemon", "--cache", "/var/cache/judge-runner", "--metrics", "0.0.0.0:9464"]
EXPOSE 9464
