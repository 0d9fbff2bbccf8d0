#!/usr/bin/env bash
# Builds deckhand's release binary and both packages for amd64, arm64 and armhf:
#   target/packages/deckhand_<version>_<arch>.deb      (Debian, Ubuntu: amd64, arm64, armhf)
#   target/packages/deckhand-<version>-1.<arch>.rpm    (RHEL, Fedora, SUSE: x86_64, aarch64,
#                                                       armv7hl)
# Usage: packaging/build.sh   (from anywhere, on an amd64 Debian or Ubuntu machine; needs cargo,
# dpkg-deb and rpmbuild, which is in the package rpm on Debian and Ubuntu and rpm-build on Fedora;
# installs cargo-deb with `cargo install --locked` if it is missing). The arm64 and armhf binaries
# are built by packaging/cross.sh with Debian's Rust and cross linkers, which it installs as root
# when missing. DECKHAND_SKIP_CROSS=1 builds the amd64 packages only (refused when CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."

cross=true
if [ "${DECKHAND_SKIP_CROSS:-}" = 1 ]; then
    if [ "${CI:-}" = true ]; then
        echo "build.sh: DECKHAND_SKIP_CROSS=1 is for a developer's machine: CI builds every architecture" >&2
        exit 1
    fi
    echo "build.sh: DECKHAND_SKIP_CROSS=1: building the amd64 packages only" >&2
    cross=false
fi

if ! command -v rpmbuild >/dev/null 2>&1; then
    echo "build.sh: rpmbuild is missing: install the rpm package (Debian, Ubuntu) or rpm-build (Fedora, RHEL)" >&2
    exit 1
fi

# Pinned so a new release of a packaging tool cannot change the packages under us; bump on purpose.
for tool_version in cargo-deb@3.8.0; do
    tool=${tool_version%@*}
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build.sh: installing $tool_version (compiles it once, a few minutes)" >&2
        cargo install --locked "$tool" --version "${tool_version#*@}"
    fi
done

version=$(cargo metadata --no-deps --format-version 1 --offline 2>/dev/null \
    | sed -n 's/.*"name":"deckhand","version":"\([^"]*\)".*/\1/p')
if [ -z "$version" ]; then
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
fi

cargo build --release --locked

out=target/packages
mkdir -p "$out"
rm -f "$out"/deckhand_"$version"_*.deb "$out"/deckhand-"$version"-*.rpm
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
summary=$(sed -n 's/^description = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
license=$(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

# package DEB_ARCH RPM_ARCH BINARY [RUST_TARGET]: both packages of one architecture, from the
# same files but the binary.
package() {
    local deb_arch=$1 rpm_arch=$2 binary=$3 rust_target=${4:-}
    # cargo-deb reads the binary from target/release, or for another target from the cross
    # build's directory, and writes the architecture's Debian name (arm64, armhf).
    if [ -n "$rust_target" ]; then
        CARGO_TARGET_DIR=target/cross cargo deb --no-build --locked --target "$rust_target" \
            --output "$out/deckhand_${version}_${deb_arch}.deb" >/dev/null
    else
        cargo deb --no-build --locked --output "$out/deckhand_${version}_${deb_arch}.deb" >/dev/null
    fi

    # The .deb owns the empty /etc/deckhand/tasks.d (so `dpkg -S` names deckhand and removing
    # the package removes it when empty). cargo-deb puts only files and their parents into a
    # .deb, so the .deb is unpacked, given the directory, and packed again with dpkg-deb,
    # everything owned by root.
    local deb="$out/deckhand_${version}_${deb_arch}.deb"
    local unpacked="$scratch/deb-$deb_arch" rpm_top="$scratch/rpm-$deb_arch"
    mkdir -p "$rpm_top"
    dpkg-deb -R "$deb" "$unpacked"
    chmod 0755 "$unpacked"
    install -d -m 0755 "$unpacked/etc/deckhand/tasks.d"
    dpkg-deb --root-owner-group -Zxz -b "$unpacked" "$deb" >/dev/null

    # The .rpm: rpmbuild from packaging/rpm/deckhand.spec, which lists the package's
    # directories (the empty /etc/deckhand/tasks.d among them) as well as its files;
    # cargo-generate-rpm, which built it before, cannot put a directory into a package (see the
    # spec). Version, summary and license come from Cargo.toml, as the .deb's do; rpmbuild works
    # in a scratch directory and writes only the package into $out. `--target` names the
    # architecture: nothing is compiled, so any host builds any architecture's package.
    rpmbuild -bb --quiet --target "$rpm_arch-linux" \
        --define "_topdir $rpm_top" \
        --define "_tmppath $rpm_top" \
        --define "_sourcedir $PWD" \
        --define "_rpmdir $PWD/$out" \
        --define '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm' \
        --define "deckhand_version $version" \
        --define "deckhand_summary $summary" \
        --define "deckhand_license $license" \
        --define "deckhand_binary $binary" \
        packaging/rpm/deckhand.spec
}

package "$(dpkg --print-architecture)" "$(uname -m)" target/release/deckhand
if [ "$cross" = true ]; then
    arm64_binary=$(packaging/cross.sh arm64)
    armhf_binary=$(packaging/cross.sh armhf)
    package arm64 aarch64 "$arm64_binary" aarch64-unknown-linux-gnu
    package armhf armv7hl "$armhf_binary" armv7-unknown-linux-gnueabihf
fi

ls -1 "$out"/deckhand_"$version"_*.deb "$out"/deckhand-"$version"-1.*.rpm
