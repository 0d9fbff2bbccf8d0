#!/usr/bin/env bash
# Builds deckhand's release binary and both packages:
#   target/packages/deckhand_<version>_<arch>.deb      (Debian, Ubuntu)
#   target/packages/deckhand-<version>-1.<arch>.rpm    (RHEL, Fedora, SUSE)
# Usage: packaging/build.sh   (from anywhere; needs cargo, dpkg-deb and rpmbuild, which is in the
# package rpm on Debian and Ubuntu and rpm-build on Fedora; installs cargo-deb with
# `cargo install --locked` if it is missing)
set -euo pipefail
cd "$(dirname "$0")/.."

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

cargo deb --no-build --locked --output "$out/" >/dev/null

# The .deb owns the empty /etc/deckhand/tasks.d (so `dpkg -S` names deckhand and removing the
# package removes it when empty). cargo-deb puts only files and their parents into a .deb, so the
# .deb is unpacked, given the directory, and packed again with dpkg-deb, everything owned by root.
deb=$(ls "$out"/deckhand_"$version"_*.deb)
unpacked=$(mktemp -d)
rpm_top=$(mktemp -d)
trap 'rm -rf "$unpacked" "$rpm_top"' EXIT
dpkg-deb -R "$deb" "$unpacked"
# mktemp made it 0700, and dpkg-deb packs the root's mode as the package's `./`.
chmod 0755 "$unpacked"
install -d -m 0755 "$unpacked/etc/deckhand/tasks.d"
dpkg-deb --root-owner-group -Zxz -b "$unpacked" "$deb" >/dev/null

# The .rpm: rpmbuild from packaging/rpm/deckhand.spec, which lists the package's directories
# (the empty /etc/deckhand/tasks.d among them) as well as its files; cargo-generate-rpm, which
# built it before, cannot put a directory into a package (see the spec). Version, summary and
# license come from Cargo.toml, as the .deb's do; rpmbuild works in a scratch directory and
# writes only the package into $out.
summary=$(sed -n 's/^description = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
license=$(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
rpmbuild -bb --quiet \
    --define "_topdir $rpm_top" \
    --define "_tmppath $rpm_top" \
    --define "_sourcedir $PWD" \
    --define "_rpmdir $PWD/$out" \
    --define '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm' \
    --define "deckhand_version $version" \
    --define "deckhand_summary $summary" \
    --define "deckhand_license $license" \
    packaging/rpm/deckhand.spec

ls -1 "$out"/deckhand_"$version"_*.deb "$out"/deckhand-"$version"-1.*.rpm
