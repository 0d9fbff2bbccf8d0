#!/usr/bin/env bash
# Builds deckhand's release binary and both packages:
#   target/packages/deckhand_<version>_<arch>.deb      (Debian, Ubuntu)
#   target/packages/deckhand-<version>-1.<arch>.rpm    (RHEL, Fedora, SUSE)
# Usage: packaging/build.sh   (from anywhere; needs cargo and dpkg-deb, installs cargo-deb and
# cargo-generate-rpm with `cargo install --locked` if they are missing)
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned so a new release of a packaging tool cannot change the packages under us; bump on purpose.
for tool_version in cargo-deb@3.8.0 cargo-generate-rpm@0.21.1; do
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

cargo deb --no-build --locked --output "$out/" >/dev/null
cargo generate-rpm --output "$out/" >/dev/null

# The .deb owns the empty /etc/deckhand/tasks.d (so `dpkg -S` names deckhand and removing the
# package removes it when empty). cargo-deb puts only files and their parents into a .deb, so the
# .deb is unpacked, given the directory, and packed again with dpkg-deb, everything owned by root.
# (The .rpm cannot yet: see Cargo.toml.)
deb=$(ls "$out"/deckhand_"$version"_*.deb)
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
dpkg-deb -R "$deb" "$unpacked"
# mktemp made it 0700, and dpkg-deb packs the root's mode as the package's `./`.
chmod 0755 "$unpacked"
install -d -m 0755 "$unpacked/etc/deckhand/tasks.d"
dpkg-deb --root-owner-group -Zxz -b "$unpacked" "$deb" >/dev/null

ls -1 "$out"/deckhand_"$version"_*.deb "$out"/deckhand-"$version"-1.*.rpm
