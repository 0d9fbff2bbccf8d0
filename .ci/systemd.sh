#!/usr/bin/env bash
# The packaged service under a real systemd, run by .ci/run after .ci/packages.sh: boots systemd
# as PID 1 in a container made from a Debian root file system, with the host's Docker socket
# mounted, installs the .deb in it and checks what the unit promises: READY with its status text,
# the credentials endpoint answering an unknown id with ECS's 400 on its own listener and through
# the agent's redirect of 169.254.170.2 (its nat rules made under the unit's capabilities), a
# restart after `kill -9` that re-adopts the running task, exit 78 for a bad configuration key
# and no restart, the watchdog killing a hung agent, an upgrade by `dpkg -i` that restarts the
# service and leaves the containers running, a reboot after which the enabled service re-adopts
# the task, and a purge that leaves nothing of deckhand behind; then the .rpm's scriptlets
# (installed with Debian's rpm: no RPM-based root file system can be had here).
# The agent in the container manages containers on the host's Docker. Every check that fails
# stops the script with a message saying what was expected.
#
# The systemd image is built once (debootstrap from the Debian mirror apt uses here, a few
# minutes) and kept in Docker under a tag holding a hash of the recipe below, so a later run on the
# same machine reuses it. Everything else the script creates is named deckhand-systemd-test and
# removed at the end.
#
# Needs root and a Docker Engine; installs debootstrap with apt-get if it is missing. Uses the
# .deb that packaging/build.sh wrote (runs it when the .deb is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
steps=0
step() {
    steps=$((steps + 1))
    printf '\n== systemd: %s\n' "$*"
}
fail() {
    printf 'systemd: FAILED: %s\n' "$*" >&2
    if [ -n "${box:-}" ] && docker container inspect "$box" >/dev/null 2>&1; then
        printf -- '-- the unit and its journal in the container:\n' >&2
        docker exec "$box" systemctl status --no-pager --lines=0 deckhand.service >&2 2>&1 || true
        docker exec "$box" journalctl --no-pager -u deckhand.service -n 40 >&2 2>&1 || true
    fi
    printf 'systemd: %d passed, 1 failed\n' "$((steps > 0 ? steps - 1 : 0))"
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail "must run as root (it installs debootstrap and runs a systemd container)"
docker version >/dev/null 2>&1 || fail "the Docker Engine does not answer (docker version failed)"

name=deckhand-systemd-test
box=$name
task_image=$name/busybox:latest
cluster=$name
scratch=$(mktemp -d "/var/tmp/$name.XXXXXX")
cleanup() {
    docker rm -f "$box" >/dev/null 2>&1 || true
    # The task containers the agent made on the host's Docker, found by the cluster label the
    # test configured.
    local ids
    ids=$(docker ps -aq --filter "label=com.amazonaws.ecs.cluster=$cluster" 2>/dev/null || true)
    [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
    docker image rm "$task_image" >/dev/null 2>&1 || true
    rm -rf "$scratch"
}
trap cleanup EXIT
cleanup_at_start() {
    docker rm -f "$box" >/dev/null 2>&1 || true
    local ids
    ids=$(docker ps -aq --filter "label=com.amazonaws.ecs.cluster=$cluster")
    [ -z "$ids" ] || docker rm -f $ids >/dev/null
}
cleanup_at_start

# Like `grep -q`, but reads all its input: under pipefail, `grep -q` closing the pipe early
# makes the writer (journalctl, docker) die of SIGPIPE and fails the pipeline.
contains() { grep "$@" >/dev/null; }
# journal_has TEXT: the unit's journal (the agent's lines and systemd's about it) holds TEXT.
journal_has() { inside journalctl --no-pager -o cat -u deckhand.service | contains -F -- "$1"; }
# inside CMD...: runs CMD in the systemd container.
inside() { docker exec "$box" "$@"; }
# unit_property NAME: one property of deckhand.service as systemctl shows it.
unit_property() { inside systemctl show deckhand.service -p "$1" --value; }
# wait_until SECONDS WHAT COMMAND...: polls COMMAND every half second until it succeeds.
wait_until() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$(($(date +%s) + limit))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "$what (waited ${limit}s)"
        sleep 0.5
    done
}
unit_is() { [ "$(unit_property "$1")" = "$2" ]; }
unit_running() { unit_is ActiveState active && unit_is SubState running; }
unit_running_with_new_pid() { unit_running && ! unit_is MainPID "$1" && ! unit_is MainPID 0; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || fail "cannot read the version from Cargo.toml"
deb=target/packages/deckhand_${version}_$(dpkg --print-architecture).deb

# --- image recipe: everything from here to "end of image recipe" is hashed into the image tag,
# so changing the recipe builds a new image.
suite=bookworm
# rpm: to install the .rpm with Debian's rpm too (no RPM-based root file system can be had from
# the mirrors this machine reaches).
# iptables: the .deb depends on it (the credentials redirect), and dpkg -i installs no
# dependency.
debootstrap_packages=systemd,systemd-sysv,dbus,rpm,iptables
build_systemd_image() {
    local root=$1 tag=$2 mirror
    # The mirror apt uses on this machine (deb822 or one-line sources), else Debian's own.
    mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p; s/^deb \(http[^ ]*debian\)\/* .*/\1/p' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
        2>/dev/null | head -n 1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "debootstrap $suite from $mirror"
    debootstrap --variant=minbase --include="$debootstrap_packages" "$suite" "$root" "$mirror" \
        >"$scratch/debootstrap.log" 2>&1 \
        || { tail -n 20 "$scratch/debootstrap.log" >&2; fail "debootstrap of $suite from $mirror failed"; }
    # Nothing of the booted system needs a login prompt or a network configuration.
    ln -sf /dev/null "$root/etc/systemd/system/getty.target"
    ln -sf /dev/null "$root/etc/systemd/system/console-getty.service"
    # A fixed machine id would be shared by every container of the image: leave it empty so
    # systemd makes one at boot, as on a freshly installed host.
    : >"$root/etc/machine-id"
    rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
    tar --numeric-owner -C "$root" -c . \
        | docker import --change 'CMD ["/sbin/init"]' \
            --message "Debian $suite with systemd, for deckhand's .ci/systemd.sh" - "$tag" >/dev/null \
        || fail "docker import of the systemd root file system failed"
}
# What booting systemd as PID 1 takes on this Docker (20.10, cgroup v1 with the unified
# hierarchy beside it): --privileged is refused ("unable to apply caps"), and these are enough.
# Docker mounts the v1 hierarchies read-only, so systemd runs on the writable cgroup2 (unified)
# mount of the private cgroup namespace and logs "Failed to create compat systemd cgroup" for
# each unit: harmless, processes are still tracked (and killed) through the unified hierarchy.
# NET_ADMIN: the agent's redirect of 169.254.170.2:80 (iptables nat rules) is made in the
# container's own network namespace, so the unit's capabilities for it are exercised without
# touching the host's rules.
run_options=(--cap-add SYS_ADMIN --cap-add NET_ADMIN --cgroupns=private --security-opt seccomp=unconfined
    --tmpfs /run --tmpfs /run/lock -v /var/run/docker.sock:/var/run/docker.sock)
# end of image recipe
recipe_hash=$(sed -n '/^# --- image recipe/,/^# end of image recipe/p' "$0" | sha256sum | cut -c 1-12)
systemd_image=$name/systemd-$suite:$recipe_hash

step "the systemd image ($systemd_image)"
if docker image inspect "$systemd_image" >/dev/null 2>&1; then
    echo "cached: reusing it"
    image_seconds=cached
else
    if ! command -v debootstrap >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    fi
    image_started=$(date +%s)
    build_systemd_image "$scratch/root" "$systemd_image"
    rm -rf "$scratch/root"
    image_seconds="$(( $(date +%s) - image_started )) s"
    echo "built in $image_seconds"
    # Older recipes' images are of no more use.
    docker images --format '{{.Repository}}:{{.Tag}}' "$name/systemd-$suite" \
        | grep -vxF "$systemd_image" | xargs -r docker image rm >/dev/null 2>&1 || true
fi

step "the packages and the task image"
if [ ! -f "$deb" ]; then
    packaging/build.sh >/dev/null
fi
[ -f "$deb" ] || fail "expected $deb (packaging/build.sh writes it)"
# The newer build for the upgrade: the same files, version $version+1 in the control file.
newer_version=$version+systemdtest1
dpkg-deb -R "$deb" "$scratch/newer"
sed -i "s/^Version: .*/Version: $newer_version/" "$scratch/newer/DEBIAN/control"
dpkg-deb --root-owner-group -b "$scratch/newer" "$scratch/deckhand-newer.deb" >/dev/null
rm -rf "$scratch/newer"
[ "$(dpkg-deb -f "$scratch/deckhand-newer.deb" Version)" = "$newer_version" ] \
    || fail "the repacked .deb's version is not $newer_version"
examples/make-image.sh "$task_image" >/dev/null || fail "examples/make-image.sh $task_image failed"
cat >"$scratch/task.json" <<EOF
{
  "family": "$name",
  "containerDefinitions": [
    {"name": "sleeper", "image": "$task_image", "essential": true, "command": ["sleep", "3600"]}
  ]
}
EOF

step "boot systemd as PID 1 in a container"
boot_started=$(date +%s)
docker run -d --name "$box" --hostname "$box" "${run_options[@]}" "$systemd_image" >/dev/null \
    || fail "docker run of the systemd container failed"
wait_until 60 "expected systemd in the container to finish booting" \
    sh -c "docker exec $box systemctl is-system-running 2>/dev/null | grep -qxE 'running|degraded'"
system_state=$(inside systemctl is-system-running || true)
[ "$system_state" = running ] || {
    inside systemctl --failed --no-pager >&2 || true
    fail "expected the booted system to be 'running', it is '$system_state'"
}
[ "$(inside cat /proc/1/comm)" = systemd ] || fail "expected systemd as PID 1 in the container"
echo "booted in $(( $(date +%s) - boot_started )) s"

step "dpkg -i: the service starts and reaches READY with its status text"
docker cp "$deb" "$box:/root/deckhand.deb"
docker cp "$scratch/deckhand-newer.deb" "$box:/root/deckhand-newer.deb"
docker cp "$scratch/task.json" "$box:/root/task.json"
inside dpkg -i /root/deckhand.deb >"$scratch/dpkg.log" 2>&1 || { cat "$scratch/dpkg.log" >&2; fail "dpkg -i failed"; }
# Type=notify: the unit is active (running) only once the agent sent READY=1.
wait_until 30 "expected deckhand.service active (running) after dpkg -i (postinst starts it)" unit_running
[ "$(unit_property Type)" = notify ] || fail "expected Type=notify"
[ "$(unit_property StatusText)" = serving ] || fail "expected StatusText 'serving', got '$(unit_property StatusText)'"
[ "$(unit_property UnitFileState)" = enabled ] || fail "expected the unit enabled on install"
[ "$(unit_property WatchdogUSec)" = 30s ] || fail "expected WatchdogUSec=30s, got $(unit_property WatchdogUSec)"
journal_has "deckhand $version ready" \
    || fail "expected the journal to hold the agent's 'deckhand $version ready' line"
# The unit's sandbox must cost the agent nothing: no warning or error at start, but for the one
# this container causes (it has its own network namespace, so the Docker bridge's gateway address
# that the task metadata endpoint also listens on is not there; on a host it is).
warnings=$(inside journalctl --no-pager -o cat -u deckhand.service | grep -E ' (WARN|ERROR) ' \
    | grep -vE 'cannot listen on [0-9.]+:51679: Cannot assign requested address' || true)
[ -z "$warnings" ] || fail "expected no warnings from the agent under the unit's sandbox; got: $warnings"
# The unit lets the agent's iptables make the credentials redirect (CAP_NET_ADMIN, AF_NETLINK):
# for this host's own connections only, to 127.0.0.1, as the container has no Docker bridge.
journal_has "169.254.170.2:80 leads to the task metadata endpoint at 127.0.0.1:51679 from this host" \
    || fail "expected the journal to say the agent redirected 169.254.170.2:80 (the unit must allow its iptables)"
# /metrics reads /proc/stat for the process start time: the sandbox must leave it readable.
inside bash -c 'exec 3<>/dev/tcp/127.0.0.1/51678 && printf "GET /metrics HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
    >"$scratch/metrics" || fail "expected the introspection endpoint 127.0.0.1:51678 to answer GET /metrics"
grep -q '^process_start_time_seconds [0-9]' "$scratch/metrics" \
    || fail "expected process_start_time_seconds in /metrics (it needs /proc/stat)"
inside test -S /run/deckhand/api.sock || fail "expected the API socket /run/deckhand/api.sock"
[ "$(inside stat -c '%a %G' /run/deckhand/api.sock)" = "660 deckhand" ] \
    || fail "expected the API socket mode 660, group deckhand; it is $(inside stat -c '%a %G' /run/deckhand/api.sock)"
# A member of group deckhand uses the system agent without root (no home: purge is checked for
# files named deckhand below).
inside useradd --no-create-home --groups deckhand edgeops
inside su -s /bin/sh edgeops -c 'deckhand ps' >/dev/null || fail "expected a member of group deckhand to run deckhand ps"

step "the credentials endpoint answers under the unit: ECS's 400 for an unknown id, through 169.254.170.2 too"
# The unit's capabilities let the agent install its nat chain (this container's own network
# namespace: OUTPUT only, as there is no Docker bridge in it). The rules are checked before
# anything is sent to 169.254.170.2: no packet for that address may leave the machine.
inside iptables -w -t nat -S >"$scratch/nat" 2>&1 || { cat "$scratch/nat" >&2; fail "iptables -t nat -S in the container failed"; }
for rule in "-N DECKHAND-CREDENTIALS" \
    "-A OUTPUT -d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS" \
    "-A DECKHAND-CREDENTIALS -p tcp -j REDIRECT --to-ports 51679"; do
    contains -xF -- "$rule" "$scratch/nat" || { cat "$scratch/nat" >&2; fail "expected the nat rule '$rule' made by the agent under the unit"; }
done
# http_get ADDRESS PORT PATH: one HTTP/1.0 GET from inside the container, the whole answer.
http_get() {
    inside bash -c "exec 3<>/dev/tcp/$1/$2 && printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' '$3' '$1' >&3 && cat <&3"
}
# invalid_id_answer FILE: ECS's answer for a credentials id no task holds.
invalid_id_answer() {
    python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace", newline="").read()
head, _, body = text.partition("\r\n\r\n")
status = head.split("\r\n")[0].split(" ")
assert len(status) > 1 and status[1] == "400", head
expected = {"code": "InvalidIdInRequest", "message": "CredentialsV2Request: Credentials not found", "HTTPErrorCode": 400}
assert json.loads(body) == expected, body
PY
}
unknown_id=deckhand-systemd-test-unknown-id
for address in 127.0.0.1:51679 169.254.170.2:80; do
    http_get "${address%:*}" "${address#*:}" "/v2/credentials/$unknown_id" >"$scratch/credentials" \
        || fail "expected http://$address/v2/credentials/$unknown_id to answer"
    invalid_id_answer "$scratch/credentials" \
        || { cat "$scratch/credentials" >&2; fail "expected ECS's 400 InvalidIdInRequest from http://$address/v2/credentials/<unknown id>"; }
done

step "a task submitted through the CLI runs on the host's Docker"
# The agent's own settings for this test: a cluster of its own (its containers are found by it),
# no pulls (there is no registry) and no image cleanup (the host's images are not its business).
inside sh -c "printf '%s\n' ECS_CLUSTER=$cluster ECS_IMAGE_PULL_BEHAVIOR=prefer-cached ECS_DISABLE_IMAGE_CLEANUP=true >>/etc/deckhand/deckhand.conf"
inside systemctl restart deckhand.service || fail "systemctl restart deckhand after the configuration change failed"
task_id=$(inside deckhand submit /root/task.json) || fail "deckhand submit /root/task.json failed"
[ -n "$task_id" ] || fail "deckhand submit printed no task id"
task_is_running() {
    inside deckhand inspect "$task_id" | python3 -c '
import json, sys
task = json.load(sys.stdin)
assert task["KnownStatus"] == "RUNNING", task["KnownStatus"]
assert [c["KnownStatus"] for c in task["Containers"]] == ["RUNNING"]'
}
wait_until 60 "expected task $task_id RUNNING (deckhand inspect)" task_is_running
container_id=$(docker ps -q --no-trunc --filter "label=com.amazonaws.ecs.cluster=$cluster" \
    --filter "label=com.amazonaws.ecs.container-name=sleeper")
[ "$(printf '%s\n' "$container_id" | grep -c .)" = 1 ] \
    || fail "expected one running container of cluster $cluster on the host's Docker, found '$container_id'"
docker inspect -f '{{index .Config.Labels "com.amazonaws.ecs.task-arn"}}' "$container_id" | contains -F "$task_id" \
    || fail "expected the host's container to carry task $task_id in its task-arn label"
container_started_at=$(docker inspect -f '{{.State.StartedAt}}' "$container_id")
# the task's container is the same one, started once, still running
container_unchanged() {
    [ "$(docker inspect -f '{{.State.Running}} {{.State.StartedAt}}' "$container_id" 2>/dev/null)" = "true $container_started_at" ] \
        || fail "expected the task's container $container_id still running since $container_started_at ($1)"
    [ "$(docker ps -q --filter "label=com.amazonaws.ecs.cluster=$cluster" | grep -c .)" = 1 ] \
        || fail "expected exactly one container of cluster $cluster ($1)"
}

step "kill -9 of the main process: systemd restarts it and the task is re-adopted"
old_pid=$(unit_property MainPID)
old_restarts=$(unit_property NRestarts)
inside sh -c "kill -9 $old_pid"
# RestartSec=5s, then READY again.
wait_until 30 "expected deckhand.service restarted with a new main process after kill -9 $old_pid" \
    unit_running_with_new_pid "$old_pid"
[ "$(unit_property NRestarts)" = $((old_restarts + 1)) ] \
    || fail "expected NRestarts $((old_restarts + 1)), got $(unit_property NRestarts)"
journal_has "Main process exited, code=killed, status=9/KILL" \
    || fail "expected the journal to record the SIGKILL"
container_unchanged "after kill -9 of the agent"
wait_until 30 "expected task $task_id RUNNING after the restart (re-adopted)" task_is_running

step "a bad configuration key: exit 78, and no restart"
inside cp /etc/deckhand/deckhand.conf /root/deckhand.conf.good
inside sh -c 'echo DECKHAND_NO_SUCH_KEY=1 >>/etc/deckhand/deckhand.conf'
restarts_before=$(unit_property NRestarts)
if inside systemctl restart deckhand.service 2>/dev/null; then
    fail "expected systemctl restart to fail with an unknown key in deckhand.conf"
fi
[ "$(unit_property ActiveState)" = failed ] || fail "expected ActiveState=failed, got $(unit_property ActiveState)"
[ "$(unit_property ExecMainStatus)" = 78 ] || fail "expected ExecMainStatus=78, got $(unit_property ExecMainStatus)"
[ "$(unit_property Result)" = exit-code ] || fail "expected Result=exit-code, got $(unit_property Result)"
journal_has DECKHAND_NO_SUCH_KEY \
    || fail "expected the journal to name the bad key DECKHAND_NO_SUCH_KEY"
restarts_failed=$(unit_property NRestarts)
# Twice RestartSec: a restart would have happened by now.
sleep 10
[ "$(unit_property ActiveState)" = failed ] || fail "expected the service to stay failed (RestartPreventExitStatus=78), it is $(unit_property ActiveState)"
[ "$(unit_property NRestarts)" = "$restarts_failed" ] \
    || fail "expected NRestarts to stay $restarts_failed after exit 78, got $(unit_property NRestarts)"
[ "$(unit_property MainPID)" = 0 ] || fail "expected no main process after exit 78"
container_unchanged "while the agent is stopped by a bad configuration"
inside cp /root/deckhand.conf.good /etc/deckhand/deckhand.conf
inside systemctl reset-failed deckhand.service
inside systemctl start deckhand.service || fail "systemctl start with the configuration restored failed"
wait_until 30 "expected task $task_id RUNNING with the configuration restored" task_is_running
echo "NRestarts: $restarts_before before, $restarts_failed after exit 78 (a manual restart resets it)"

step "ECS_EXTERNAL=true: the service reads root's shared credentials file (ProtectHome=read-only)"
# Credentials only in /root/.aws/credentials, as ECS Anywhere's SSM agent writes them, and an ECS
# endpoint that does not answer: the agent must find the credentials (else it exits 78 saying it
# needs them) and keep retrying the registration while its task runs on.
inside mkdir -p /root/.aws
inside sh -c 'umask 077; printf "[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n" >/root/.aws/credentials'
inside cp /etc/deckhand/deckhand.conf /root/deckhand.conf.before-ecs
inside sh -c 'printf "ECS_EXTERNAL=true\nAWS_REGION=us-west-2\nECS_BACKEND_HOST=http://127.0.0.1:9\n" >>/etc/deckhand/deckhand.conf'
inside systemctl restart deckhand.service \
    || { inside journalctl --no-pager -o cat -u deckhand.service | tail -n 5 >&2; fail "systemctl restart with ECS_EXTERNAL=true failed"; }
wait_until 30 "expected the agent to try to register with ECS (journal: 'cannot register yet')" \
    journal_has "ECS: cannot register yet"
[ "$(unit_property ActiveState)" = active ] || fail "expected the service active while ECS is away, it is $(unit_property ActiveState)"
if journal_has "needs AWS credentials"; then
    fail "expected the service to read /root/.aws/credentials; the journal says it found none"
fi
wait_until 30 "expected task $task_id RUNNING while ECS is out of reach" task_is_running
inside cp /root/deckhand.conf.before-ecs /etc/deckhand/deckhand.conf
inside rm -rf /root/.aws /root/deckhand.conf.before-ecs
inside systemctl restart deckhand.service || fail "systemctl restart without ECS failed"
wait_until 30 "expected task $task_id RUNNING after ECS was turned off again" task_is_running

step "a hung main loop is killed by the watchdog and restarted"
inside mkdir -p /etc/systemd/system/deckhand.service.d
inside sh -c 'printf "[Service]\nWatchdogSec=3s\n" >/etc/systemd/system/deckhand.service.d/watchdog.conf'
inside systemctl daemon-reload
inside systemctl restart deckhand.service || fail "systemctl restart with WatchdogSec=3s failed"
[ "$(unit_property WatchdogUSec)" = 3s ] || fail "expected WatchdogUSec=3s from the drop-in, got $(unit_property WatchdogUSec)"
hung_pid=$(unit_property MainPID)
# The agent pings every 1.5 s: it must outlive the watchdog interval several times over.
sleep 8
[ "$(unit_property MainPID)" = "$hung_pid" ] && unit_running \
    || fail "expected the agent (pid $hung_pid) to keep the watchdog fed for 8 s"
restarts_before=$(unit_property NRestarts)
watchdog_started=$(date +%s)
inside sh -c "kill -STOP $hung_pid"
# systemd sends SIGABRT after 3 s (and SIGCONT after it, so a stopped process takes it), then
# RestartSec=5s; if the abort did not end it, SIGKILL after TimeoutAbortSec (TimeoutStopSec=30s).
wait_until 60 "expected the watchdog to kill the stopped agent (pid $hung_pid) and systemd to restart it" \
    unit_running_with_new_pid "$hung_pid"
watchdog_seconds=$(( $(date +%s) - watchdog_started ))
journal_has "Watchdog timeout" \
    || fail "expected the journal to record a watchdog timeout"
journal_has "Failed with result 'watchdog'" \
    || fail "expected the journal to record the result 'watchdog'"
[ "$(unit_property NRestarts)" = $((restarts_before + 1)) ] \
    || fail "expected NRestarts $((restarts_before + 1)) after the watchdog, got $(unit_property NRestarts)"
echo "restarted $watchdog_seconds s after SIGSTOP"
container_unchanged "after the watchdog restart"
wait_until 30 "expected task $task_id RUNNING after the watchdog restart" task_is_running
inside rm -r /etc/systemd/system/deckhand.service.d
inside systemctl daemon-reload
inside systemctl restart deckhand.service
[ "$(unit_property WatchdogUSec)" = 30s ] || fail "expected WatchdogUSec=30s without the drop-in"

step "dpkg -i of a newer build restarts the service and leaves the containers running"
old_pid=$(unit_property MainPID)
inside dpkg -i /root/deckhand-newer.deb >"$scratch/dpkg.log" 2>&1 \
    || { cat "$scratch/dpkg.log" >&2; fail "dpkg -i of the newer .deb failed"; }
[ "$(inside dpkg-query -W -f '${Version}' deckhand)" = "$newer_version" ] || fail "expected deckhand $newer_version installed"
wait_until 30 "expected the upgrade to restart deckhand.service (a new main process)" \
    unit_running_with_new_pid "$old_pid"
[ "$(unit_property StatusText)" = serving ] || fail "expected StatusText 'serving' after the upgrade"
inside grep -qx "ECS_CLUSTER=$cluster" /etc/deckhand/deckhand.conf || fail "expected the upgrade to keep the edited deckhand.conf"
container_unchanged "after the upgrade"
wait_until 30 "expected task $task_id RUNNING after the upgrade" task_is_running

step "a reboot: the enabled service starts at boot and re-adopts the task"
# SIGRTMIN+3 is systemd's "halt" in a container: services are stopped in order, then PID 1 exits.
docker kill --signal SIGRTMIN+3 "$box" >/dev/null
box_stopped() { [ "$(docker inspect -f '{{.State.Running}}' "$box")" = false ]; }
wait_until 60 "expected the systemd container to halt" box_stopped
container_unchanged "after the host's shutdown (stopping the agent leaves its containers)"
docker start "$box" >/dev/null || fail "docker start of the halted systemd container failed"
wait_until 60 "expected deckhand.service active (running) after the reboot" unit_running
[ "$(unit_property StatusText)" = serving ] || fail "expected StatusText 'serving' after the reboot"
container_unchanged "after the reboot"
wait_until 30 "expected task $task_id RUNNING after the reboot (re-adopted from /var/lib/deckhand)" task_is_running

step "purge removes everything of deckhand; the containers keep running"
inside rm /root/deckhand.deb /root/deckhand-newer.deb /root/task.json /root/deckhand.conf.good
inside dpkg --purge deckhand >"$scratch/dpkg.log" 2>&1 || { cat "$scratch/dpkg.log" >&2; fail "dpkg --purge failed"; }
inside dpkg -s deckhand >/dev/null 2>&1 && fail "expected dpkg to know no deckhand after purge"
[ "$(unit_property LoadState)" = not-found ] || fail "expected deckhand.service not-found after purge, it is $(unit_property LoadState)"
[ "$(unit_property MainPID)" = 0 ] || fail "expected no agent process after purge"
if inside sh -c 'for exe in /proc/[0-9]*/exe; do readlink "$exe"; done' 2>/dev/null | contains deckhand; then
    fail "expected no deckhand process left after purge"
fi
# Every file system of the container, /run (a tmpfs) too.
left=$(inside find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -name '*deckhand*' -print)
left=$left$(inside find /run -xdev -name '*deckhand*' -print)
[ -z "$left" ] || fail "expected purge to leave no file named deckhand; left: $left"
# The package promises to keep the group (postrm: files elsewhere may still be owned by it).
inside getent group deckhand >/dev/null || fail "expected purge to keep the deckhand group, as postrm says"
# Stopping the agent does not stop its containers (prerm): they belong to Docker.
container_unchanged "after purge (prerm stops the agent, not its containers)"

step "the .rpm under systemd: %post starts the service, an upgrade restarts it, rpm -e stops it"
# Debian's rpm in the Debian system (not an RPM-based one: none can be had from the mirrors this
# machine reaches), with --nodeps as its database knows none of Debian's libraries: this runs
# the .rpm's scriptlets against the booted systemd.
rpm_file=target/packages/deckhand-${version}-1.$(uname -m).rpm
[ -f "$rpm_file" ] || fail "expected $rpm_file (packaging/build.sh writes it)"
docker cp "$rpm_file" "$box:/root/package.rpm"
rpm_in_box() { inside rpm "$@" --nodeps --force-debian 2>/dev/null || inside rpm "$@" --nodeps; }
rpm_in_box -i /root/package.rpm >"$scratch/rpm.log" 2>&1 || { cat "$scratch/rpm.log" >&2; fail "rpm -i failed"; }
wait_until 30 "expected deckhand.service active (running) after rpm -i (%post starts it)" unit_running
# (/lib is /usr/lib in Debian 12, so systemd may name it either way.)
[ "$(inside readlink -f "$(unit_property FragmentPath)")" = /usr/lib/systemd/system/deckhand.service ] \
    || fail "expected the rpm's unit /usr/lib/systemd/system/deckhand.service, got $(unit_property FragmentPath)"
[ "$(inside rpm -qf --qf '%{NAME}' /usr/lib/systemd/system/deckhand.service)" = deckhand ] \
    || fail "expected rpm -qf to name deckhand as the unit's owner"
[ "$(unit_property StatusText)" = serving ] || fail "expected StatusText 'serving' (rpm)"
[ "$(unit_property UnitFileState)" = enabled ] || fail "expected %post to enable the unit"
# An upgrade in rpm's terms (the same build again: the old package's %postun runs with 1 and
# try-restarts the service).
old_pid=$(unit_property MainPID)
rpm_in_box -U --replacepkgs /root/package.rpm >"$scratch/rpm.log" 2>&1 \
    || { cat "$scratch/rpm.log" >&2; fail "rpm -U --replacepkgs failed"; }
wait_until 30 "expected rpm -U to restart deckhand.service (a new main process)" \
    unit_running_with_new_pid "$old_pid"
rpm_in_box -e deckhand >"$scratch/rpm.log" 2>&1 || { cat "$scratch/rpm.log" >&2; fail "rpm -e failed"; }
inside rm /root/package.rpm
[ "$(unit_property LoadState)" = not-found ] || fail "expected deckhand.service not-found after rpm -e"
[ "$(unit_property MainPID)" = 0 ] || fail "expected no agent process after rpm -e"
left=$(inside find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -name '*deckhand*' -print)
left=$left$(inside find /run -xdev -name '*deckhand*' -print)
# rpm has no purge: the state is kept, as %postun says.
[ "$left" = /var/lib/deckhand ] || fail "expected rpm -e to leave only /var/lib/deckhand; left: $left"
container_unchanged "after rpm -e"

step "done in $(( $(date +%s) - started )) s (systemd image: $image_seconds; watchdog restart after $watchdog_seconds s)"
printf 'systemd: %d passed, 0 failed\n' "$((steps - 1))"
