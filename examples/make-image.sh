#!/bin/sh
# Builds the image the examples run, deckhand/busybox:latest, on this machine with no registry:
# a root filesystem holding Debian's static busybox and one link per applet (sh, httpd, wget,
# sleep, ...), imported into the local Docker Engine.
#
#   examples/make-image.sh [IMAGE]        # IMAGE defaults to deckhand/busybox:latest
#
# Needs /bin/busybox from Debian's busybox-static (installed here when run as root with apt-get),
# and either the docker CLI or curl to reach the Docker Engine at DOCKER_HOST
# (default unix:///var/run/docker.sock). A user in the docker group may run it.
set -eu

image=${1:-deckhand/busybox:latest}
busybox=/bin/busybox

fail() {
    echo "make-image.sh: $*" >&2
    exit 1
}

case "$image" in
    *:*) repository=${image%:*} tag=${image##*:} ;;
    *) repository=$image tag=latest ;;
esac

# A dynamically linked busybox (Debian's plain `busybox` package) would not run in an image
# without a C library: insist on the static one.
if ! [ -x "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1 \
    || { command -v file >/dev/null 2>&1 && ! file -L "$busybox" | grep -Eq 'statically linked|static-pie linked'; }; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "make-image.sh: installing busybox-static" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static
    else
        fail "$busybox (a static busybox) is missing: install it with 'sudo apt-get install busybox-static'"
    fi
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/deckhand-image.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/www"
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
    case "$applet" in
        busybox | */*) ;;
        *) ln -s busybox "$root/bin/$applet" ;;
    esac
done
echo 'root:x:0:0:root:/:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"

socket=${DOCKER_HOST:-unix:///var/run/docker.sock}
case "$socket" in
    unix://*) socket=${socket#unix://} ;;
    *) fail "DOCKER_HOST=$socket: only unix:// sockets are supported" ;;
esac

if command -v docker >/dev/null 2>&1; then
    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . \
        | docker import --message "static busybox for the deckhand examples" - "$repository:$tag" >/dev/null \
        || fail "docker import failed (is Docker running, and may you use $socket?)"
elif command -v curl >/dev/null 2>&1; then
    answer=$(tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . \
        | curl --silent --show-error --fail --unix-socket "$socket" -X POST \
            -H 'Content-Type: application/x-tar' --data-binary @- \
            "http://docker/images/create?fromSrc=-&repo=$repository&tag=$tag") \
        || fail "importing through $socket failed (is Docker running, and may you use it?)"
    case "$answer" in
        *errorDetail*) fail "Docker refused the import: $answer" ;;
    esac
else
    fail "neither the docker CLI nor curl is installed: one of them is needed to import the image"
fi

echo "$repository:$tag"
