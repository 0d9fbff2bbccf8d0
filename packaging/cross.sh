#!/usr/bin/env bash
# Cross-builds deckhand's release binary for arm64 or armhf on an amd64 Debian 12 machine with
# Debian's own packages only: its Rust compiler and cargo (rustc-web, cargo-web), the target's
# standard library (libstd-rust-web-dev:<arch>, "Multi-Arch: same", so installable beside the
# host's once dpkg knows the architecture) and GNU's cross linker (gcc-<triple>). A rustup
# toolchain is not used: it has only the host's target unless it may download others.
#
# Usage: packaging/cross.sh arm64|armhf
# Prints the binary's path last: target/cross/<rust target>/release/deckhand. Run as root, it
# installs what is missing with apt-get (after `dpkg --add-architecture <arch>`); otherwise it
# names the command that does. Parallel runs (the package build, the tests) take turns at apt-get
# through the lock file the test suite uses.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:-}
case "$arch" in
    arm64) triple=aarch64-unknown-linux-gnu gnu=aarch64-linux-gnu ;;
    armhf) triple=armv7-unknown-linux-gnueabihf gnu=arm-linux-gnueabihf ;;
    *)
        echo "usage: packaging/cross.sh arm64|armhf" >&2
        exit 2
        ;;
esac

# Debian's compiler is /usr/bin/rustc (rustc-web on Debian 12): a rustup toolchain earlier in
# PATH must not be the one that runs.
rustc=/usr/bin/rustc
cargo=/usr/bin/cargo
packages=(rustc-web cargo-web "libstd-rust-web-dev:$arch" "gcc-$gnu" "libc6-dev-$arch-cross")
apt_lock=/tmp/deckhand-test-apt.lock

installed() { [ "$(dpkg-query -W -f '${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

missing=()
for package in "${packages[@]}"; do
    installed "$package" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    fix="sudo dpkg --add-architecture $arch && sudo apt-get update && sudo apt-get install --no-install-recommends ${missing[*]}"
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "cross.sh: the $arch build needs Debian's ${missing[*]}; install them with: $fix" >&2
        exit 1
    fi
    echo "cross.sh: installing Debian's ${missing[*]} for the $arch build" >&2
    script="
        dpkg --print-foreign-architectures | grep -qx '$arch' || dpkg --add-architecture '$arch'
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
            --no-install-recommends ${missing[*]}"
    if command -v flock >/dev/null 2>&1; then
        flock "$apt_lock" sh -c "$script" >&2
    else
        sh -c "$script" >&2
    fi || {
        echo "cross.sh: installing ${missing[*]} failed; Debian 12 ships them in bookworm and bookworm-security (rustc-web 1.96); try: $fix" >&2
        exit 1
    }
fi

# The compiler must be at least the crate's rust-version (bookworm's first rustc-web, 1.85, is
# older than deckhand's; bookworm-security carries the newer one).
need=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
have=$("$rustc" --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    echo "cross.sh: $rustc is $have, older than deckhand's rust-version $need: install rustc-web, cargo-web and libstd-rust-web-dev from bookworm-security" >&2
    exit 1
fi

# The linker, and the C compiler and archiver for any dependency that compiles C (the cc
# crate's variables), are the cross ones.
target_var=$(printf '%s' "$triple" | tr 'a-z-' 'A-Z_')
cc_var=$(printf '%s' "$triple" | tr '-' '_')
export "CARGO_TARGET_${target_var}_LINKER=$gnu-gcc"
export "CC_${cc_var}=$gnu-gcc" "AR_${cc_var}=$gnu-ar"
# A target directory of its own: Debian's compiler and the developer's rustup toolchain do not
# rebuild each other's build scripts in target/release.
export CARGO_TARGET_DIR=target/cross
started=$(date +%s)
RUSTC=$rustc RUSTDOC=/usr/bin/rustdoc "$cargo" build --release --locked --target "$triple" >&2
echo "cross.sh: $arch binary built with $("$rustc" --version) in $(( $(date +%s) - started )) s" >&2
echo "target/cross/$triple/release/deckhand"
