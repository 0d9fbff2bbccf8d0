#!/usr/bin/env bash
# The size and idle memory of deckhand's three builds on this amd64 machine: the amd64 binary
# natively, the arm64 and armhf ones under qemu's user-mode emulator (qemu-aarch64, qemu-arm).
# Each agent starts over an empty state directory against the host's Docker and idles for
# IDLE_SECONDS (default 60); then its RSS (file-backed and anonymous), PSS and threads are read
# from /proc. What qemu adds is measured the same way: the emulator running a C program that only
# waits (`pause()`, built with the cross compiler), a floor every emulated program pays.
# Usage: bench/foreign-footprint.sh   (root, after packaging/build.sh; prints a Markdown table)
set -euo pipefail
cd "$(dirname "$0")/.."
idle=${IDLE_SECONDS:-60}
scratch=$(mktemp -d)
pids=()
trap 'for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done; sleep 2; rm -rf "$scratch"' EXIT

printf 'int main(void) { for (;;) pause(); }\n' | sed '1i #include <unistd.h>' >"$scratch/pause.c"
aarch64-linux-gnu-gcc -O2 -o "$scratch/pause-arm64" "$scratch/pause.c"
arm-linux-gnueabihf-gcc -O2 -o "$scratch/pause-armhf" "$scratch/pause.c"

# start NAME COMMAND...: an agent (or the waiting program) in the background.
start() {
    local name=$1
    shift
    local dir="$scratch/$name"
    mkdir -p "$dir"
    : >"$dir/deckhand.conf"
    DECKHAND_API_SOCKET="$dir/api.sock" ECS_DATADIR="$dir/data" DECKHAND_TASKS_DIR="$dir/tasks.d" \
        DECKHAND_INTROSPECTION_ADDR= DECKHAND_TASK_METADATA_PORT=$((20000 + RANDOM % 20000)) \
        ECS_CLUSTER="footprint-$name-$$" "$@" >"$dir/log" 2>&1 &
    pids+=($!)
    echo $! >"$dir/pid"
}
start amd64 target/release/deckhand run --config "$scratch/amd64/deckhand.conf"
start arm64 qemu-aarch64 target/cross/aarch64-unknown-linux-gnu/release/deckhand run --config "$scratch/arm64/deckhand.conf"
start armhf qemu-arm target/cross/armv7-unknown-linux-gnueabihf/release/deckhand run --config "$scratch/armhf/deckhand.conf"
start qemu-arm64 qemu-aarch64 "$scratch/pause-arm64"
start qemu-armhf qemu-arm "$scratch/pause-armhf"
sleep "$idle"

mib() { awk -v k="$1" 'BEGIN { printf "%.2f MiB", k / 1024 }'; }
field() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }
echo "| what | binary | RSS | RSS: files | RSS: anonymous | PSS | threads |"
echo "|---|---|---|---|---|---|---|"
for row in "amd64:amd64 agent, native:target/release/deckhand" \
    "arm64:arm64 agent under qemu-aarch64:target/cross/aarch64-unknown-linux-gnu/release/deckhand" \
    "armhf:armhf agent under qemu-arm:target/cross/armv7-unknown-linux-gnueabihf/release/deckhand" \
    "qemu-arm64:qemu-aarch64 running a program that only waits:" \
    "qemu-armhf:qemu-arm running a program that only waits:"; do
    IFS=: read -r name what binary <<<"$row"
    pid=$(cat "$scratch/$name/pid")
    [ -d "/proc/$pid" ] || { echo "$what is not running:" >&2; cat "$scratch/$name/log" >&2; exit 1; }
    size=—
    [ -n "$binary" ] && size="$(stat -c %s "$binary") B"
    pss=$(awk '$1 == "Pss:" { print $2 }' "/proc/$pid/smaps_rollup")
    echo "| $what | $size | $(mib "$(field VmRSS "$pid")") | $(mib "$(field RssFile "$pid")") | $(mib "$(field RssAnon "$pid")") | $(mib "$pss") | $(field Threads "$pid") |"
done
