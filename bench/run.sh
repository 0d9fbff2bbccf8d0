#!/usr/bin/env bash
# deckhand's benchmarks in one command: installs what they compare against if missing (Debian's
# docker-compose, busybox-static for the local test image, and a C compiler for the slow-storage
# shim benches/agent/slow_sync.c), checks Docker answers, then runs `cargo bench --bench agent`,
# which prints the table and writes docs/PERFORMANCE.md.
# BENCH_QUICK=1 runs few samples and writes target/PERFORMANCE-quick.md instead (a smoke check).
# Needs root for apt-get and the Docker socket. Removes every container it made, even on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${#need[@]}" -gt 0 ]; then
    echo "bench: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    echo "bench: the Docker Engine does not answer on ${DOCKER_HOST:-/var/run/docker.sock}" >&2
    exit 1
fi

started=$(date +%s)
cargo bench --bench agent
echo "bench: done in $(( $(date +%s) - started )) s (build included)" >&2
