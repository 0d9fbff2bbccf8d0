#!/usr/bin/env bash
# Package tests, run by .ci/run after `cargo test`: builds the .deb and .rpm of amd64, arm64 and
# armhf with packaging/build.sh, checks their file lists, conffiles, scripts, architecture fields
# and binaries (`file` and the ELF header), then really installs,
# upgrades, removes and purges the .deb (and installs and erases the .rpm with Debian's rpm) on
# this machine, checking what is on disk after each step. Every check that fails stops the script
# with a message saying what was expected.
#
# It installs into / as root, so it refuses to run where a deckhand package is already installed
# unless CI=true or DECKHAND_PACKAGE_TEST_MAY_PURGE=1 (purging deletes /var/lib/deckhand).
set -euo pipefail

# Like `grep -q`, but reads all its input: under pipefail, `grep -q` closing the pipe early
# makes the writer (dpkg-deb, rpm) die of SIGPIPE and fails the pipeline.
contains() { grep "$@" >/dev/null; }
cd "$(dirname "$0")/.."

started=$(date +%s)
# Each step is a group of checks; a step counts as passed once the next one starts.
steps=0
skipped=0
step() {
    steps=$((steps + 1))
    printf '\n== packages: %s\n' "$*"
}
fail() {
    printf 'packages: FAILED: %s\n' "$*" >&2
    printf 'packages: %d passed, 1 failed\n' "$((steps > 0 ? steps - 1 : 0))"
    exit 1
}
expect_path() { [ -e "$1" ] || [ -L "$1" ] || fail "expected $1 to exist ($2)"; }
expect_no_path() { [ ! -e "$1" ] && [ ! -L "$1" ] || fail "expected $1 to be gone ($2)"; }
# expect_lines NAME ACTUAL EXPECTED: the two sorted line lists must be equal.
expect_lines() {
    if ! diff -u <(printf '%s\n' "$3" | sort) <(printf '%s\n' "$2" | sort) >/tmp/deckhand-pkg-diff; then
        cat /tmp/deckhand-pkg-diff >&2
        fail "$1 differs from what is expected (- expected, + actual)"
    fi
}

if [ "$(id -u)" -ne 0 ]; then
    fail "must run as root (it installs the packages)"
fi
if dpkg -s deckhand >/dev/null 2>&1 || rpm -q deckhand >/dev/null 2>&1; then
    if [ "${CI:-}" != true ] && [ "${DECKHAND_PACKAGE_TEST_MAY_PURGE:-}" != 1 ]; then
        fail "a deckhand package is installed here; set DECKHAND_PACKAGE_TEST_MAY_PURGE=1 to let this test purge it"
    fi
    dpkg --purge deckhand >/dev/null 2>&1 || true
    rpm -e --nodeps deckhand >/dev/null 2>&1 || true
fi
for tool in dpkg-deb rpm python3 file; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing (.ci/run installs it)"
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || fail "cannot read the version from Cargo.toml"

step "build (packaging/build.sh)"
build_started=$(date +%s)
packaging/build.sh
build_seconds=$(( $(date +%s) - build_started ))
# Every architecture's packages: Debian's and rpm's names, the ELF class and machine of its
# binary, and what `file` says of it. The amd64 ones are also installed below.
architectures="amd64 x86_64 2 62 x86-64
arm64 aarch64 2 183 ARM.aarch64
armhf armv7hl 1 40 ARM,.EABI5"
if [ "${DECKHAND_SKIP_CROSS:-}" = 1 ]; then
    # build.sh refuses the variable when CI=true: only a developer's machine gets here.
    architectures=$(printf '%s\n' "$architectures" | head -n 1)
    skipped=1
fi
deb="target/packages/deckhand_${version}_amd64.deb"
rpm_file="target/packages/deckhand-${version}-1.x86_64.rpm"
# The size budget of the stripped release binary: small edge hosts are what deckhand is for.
binary_bytes=$(stat -c %s target/release/deckhand)
[ "$binary_bytes" -le $((5 * 1024 * 1024)) ] \
    || fail "target/release/deckhand is $binary_bytes B stripped, over the 5 MiB budget"

step "example task is valid ECS task-definition JSON"
python3 - packaging/examples/web.json <<'PY' || fail "packaging/examples/web.json is not the expected task"
import json, sys
task = json.load(open(sys.argv[1]))
assert task["family"], "family"
containers = task["containerDefinitions"]
assert len(containers) == 1, "one container"
web = containers[0]
# The image examples/make-image.sh builds locally (no registry needed).
assert web["image"] == "deckhand/busybox:latest", web["image"]
assert web["essential"] is True
assert {"containerPort": 80, "hostPort": 8080, "protocol": "tcp"} in web["portMappings"]
assert open(sys.argv[1]).read() == open("examples/web.json").read(), "differs from examples/web.json"
PY

# check_packages DEB_ARCH RPM_ARCH ELF_CLASS ELF_MACHINE FILE_WORDS: the architecture's .deb and
# .rpm hold the same files (its own binary, the hardened unit, the same configuration and
# documentation), with its architecture in their fields and in the binary's ELF header. (Its body
# is not indented: the expected file lists are multi-line strings compared line by line.)
check_packages() {
local deb_arch=$1 rpm_arch=$2 elf_class=$3 elf_machine=$4 file_words=$5
local deb="target/packages/deckhand_${version}_${deb_arch}.deb"
local rpm_file="target/packages/deckhand-${version}-1.${rpm_arch}.rpm"
expect_path "$deb" "build.sh writes the $deb_arch .deb"
expect_path "$rpm_file" "build.sh writes the $rpm_arch .rpm"
local control_dir deb_files rpm_scripts unpacked
step "deb contents and control ($deb)"
deb_files=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {sub(/^\.\//, "", $6); print "/" $6}')
# cargo-deb may gzip the man page, as Debian's policy asks.
deb_man_page=$(printf '%s\n' "$deb_files" | grep '^/usr/share/man/man1/deckhand\.1' || echo /usr/share/man/man1/deckhand.1)
expect_lines "deb file list" "$deb_files" "/usr/bin/deckhand
/lib/systemd/system/deckhand.service
/etc/deckhand/deckhand.conf
/usr/share/bash-completion/completions/deckhand
/usr/share/zsh/vendor-completions/_deckhand
/usr/share/fish/vendor_completions.d/deckhand.fish
$deb_man_page
/usr/share/doc/deckhand/README.md
/usr/share/doc/deckhand/CHANGELOG.md
/usr/share/doc/deckhand/copyright
/usr/share/doc/deckhand/examples/web.json
/usr/share/doc/deckhand/examples/make-image.sh
/usr/share/doc/deckhand/examples/deckhand-rules.yml"
dpkg-deb -c "$deb" | contains -E '^-rwxr-xr-x (root/root|0/0) .* \./usr/bin/deckhand$' \
    || fail "/usr/bin/deckhand must be root-owned mode 0755 in the deb"
dpkg-deb -c "$deb" | contains -E '^-rw-r----- (root/root|0/0) .* \./etc/deckhand/deckhand\.conf$' \
    || fail "/etc/deckhand/deckhand.conf must be root-owned mode 0640 in the deb (it may hold a registry password)"
dpkg-deb -c "$deb" | contains -E '^drwxr-xr-x (root/root|0/0) .* \./etc/deckhand/tasks\.d/$' \
    || fail "the deb must ship /etc/deckhand/tasks.d as a root-owned 0755 directory"
if dpkg-deb -c "$deb" | awk '{print $6}' | grep '^\./etc/deckhand/tasks\.d/.' >/dev/null; then
    fail "the deb's /etc/deckhand/tasks.d must be empty"
fi
[ "$(dpkg-deb -f "$deb" Package)" = deckhand ] || fail "deb Package field"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "deb Version field is not $version"
[ "$(dpkg-deb -f "$deb" Architecture)" = "$deb_arch" ] || fail "deb Architecture field"
dpkg-deb -f "$deb" Depends | contains libc6 || fail "deb Depends lacks libc6"
dpkg-deb -f "$deb" Depends | contains iptables || fail "deb Depends lacks iptables (the credentials redirect)"
control_dir=$(mktemp -d)
dpkg-deb -e "$deb" "$control_dir"
expect_lines "deb conffiles" "$(cat "$control_dir/conffiles")" "/etc/deckhand/deckhand.conf"
for script in postinst prerm postrm; do
    [ -x "$control_dir/$script" ] || fail "deb $script missing or not executable"
    sh -n "$control_dir/$script" || fail "deb $script has a shell syntax error"
    cmp -s "$control_dir/$script" "packaging/deb/$script" || fail "deb $script differs from packaging/deb/$script"
done
grep -q '\[ -d /run/systemd/system \]' "$control_dir/postinst" || fail "postinst must guard systemctl calls"
grep -qE '^[[:space:]]*(install|mkdir)[[:space:]].*tasks\.d' "$control_dir/postinst" && fail "postinst must not create tasks.d: the package ships it"
rm -rf "$control_dir"

step "rpm contents and scripts ($rpm_file)"
# Files and the package's own directories (rpm lists both; /etc and /usr/share/doc are the
# system's).
expect_lines "rpm file list" "$(rpm -qpl "$rpm_file")" "/usr/bin/deckhand
/usr/lib/systemd/system/deckhand.service
/etc/deckhand
/etc/deckhand/deckhand.conf
/etc/deckhand/tasks.d
/usr/share/bash-completion/completions/deckhand
/usr/share/zsh/site-functions/_deckhand
/usr/share/fish/vendor_completions.d/deckhand.fish
/usr/share/man/man1/deckhand.1
/usr/share/doc/deckhand
/usr/share/doc/deckhand/README.md
/usr/share/doc/deckhand/CHANGELOG.md
/usr/share/doc/deckhand/examples
/usr/share/doc/deckhand/examples/web.json
/usr/share/doc/deckhand/examples/make-image.sh
/usr/share/doc/deckhand/examples/deckhand-rules.yml"
rpm -qlvp "$rpm_file" | contains -E '^drwxr-xr-x +[0-9]+ +root +root +.* /etc/deckhand/tasks\.d$' \
    || fail "the rpm must ship /etc/deckhand/tasks.d as a root-owned 0755 directory"
if rpm -qpl "$rpm_file" | grep '^/etc/deckhand/tasks\.d/' >/dev/null; then
    fail "the rpm's /etc/deckhand/tasks.d must be empty"
fi
expect_lines "rpm config files" "$(rpm -qpc "$rpm_file")" "/etc/deckhand/deckhand.conf"
rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpm_file" | contains '^cn /etc/deckhand/deckhand.conf$' \
    || fail "rpm deckhand.conf must be %config(noreplace)"
rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES}\n]' "$rpm_file" \
    | contains '^-rw-r----- root:root /etc/deckhand/deckhand.conf$' \
    || fail "rpm deckhand.conf must be root-owned mode 0640 (it may hold a registry password)"
[ "$(rpm -qp --qf '%{VERSION}-%{RELEASE} %{ARCH}' "$rpm_file")" = "$version-1 $rpm_arch" ] \
    || fail "rpm version/release/arch"
rpm_scripts=$(rpm -qp --scripts "$rpm_file")
for scriptlet in preinstall postinstall preuninstall postuninstall; do
    printf '%s\n' "$rpm_scripts" | contains "^$scriptlet scriptlet" || fail "rpm lacks a $scriptlet scriptlet"
done
printf '%s\n' "$rpm_scripts" | contains 'groupadd -r deckhand' || fail "rpm %pre must create the deckhand group"
for tag_and_script in PREIN:pre-install POSTIN:post-install PREUN:pre-uninstall POSTUN:post-uninstall; do
    tag=${tag_and_script%%:*}
    script=packaging/rpm/${tag_and_script#*:}.sh
    [ "$(rpm -qp --qf "%{$tag}" "$rpm_file")" = "$(cat "$script")" ] \
        || fail "the rpm's $tag scriptlet differs from $script"
    if grep -qE '^[[:space:]]*(install|mkdir|rmdir|rm)[[:space:]].*tasks\.d' "$script"; then
        fail "$script must not make or remove tasks.d: the package owns it"
    fi
done
rpm -qp --requires "$rpm_file" | contains '^libc\.so\.6' || fail "rpm Requires lacks libc.so.6"
rpm -qp --requires "$rpm_file" | contains "^iptables" || fail "rpm Requires lacks iptables (the credentials redirect)"
for script in packaging/rpm/*.sh; do
    sh -n "$script" || fail "$script has a shell syntax error"
done

step "$deb_arch binary, unit and rpm payload"
unpacked=$(mktemp -d)
dpkg-deb -x "$deb" "$unpacked"
local binary="$unpacked/usr/bin/deckhand"
file -b "$binary" | contains -E "^ELF $((elf_class * 32))-bit LSB .*${file_words//./ }" \
    || fail "the $deb_arch binary is not a $file_words ELF: $(file -b "$binary")"
python3 - "$binary" "$elf_class" "$elf_machine" <<'PY' || fail "the $deb_arch binary's ELF header is not its architecture's"
import struct, sys
header = open(sys.argv[1], "rb").read(20)
assert header[:4] == b"\x7fELF", "ELF magic"
assert header[4] == int(sys.argv[2]), f"class {header[4]}"
assert header[5] == 1, "little-endian"
machine = struct.unpack("<H", header[18:20])[0]
assert machine == int(sys.argv[3]), f"e_machine {machine}"
PY
cmp -s "$unpacked/lib/systemd/system/deckhand.service" packaging/deckhand.service \
    || fail "the $deb_arch .deb's unit differs from packaging/deckhand.service"
echo "$deb_arch: $(stat -c %s "$binary") B binary: $(file -b "$binary" | cut -d, -f1-2)"
# The .rpm carries the very same files: its digests are the .deb's files' SHA-256.
local path digest
while read -r digest path; do
    local from_deb="$unpacked$path"
    [ "$path" = /usr/lib/systemd/system/deckhand.service ] && from_deb="$unpacked/lib/systemd/system/deckhand.service"
    # Where each distribution looks: zsh's vendor-completions on Debian, site-functions on RPM
    # systems; the .deb's man page is gzipped (Debian policy), the .rpm's is not.
    [ "$path" = /usr/share/zsh/site-functions/_deckhand ] && from_deb="$unpacked/usr/share/zsh/vendor-completions/_deckhand"
    # Directories have no digest: `read` then puts the path first.
    [ -n "$path" ] || continue
    local deb_digest
    if [ "$path" = /usr/share/man/man1/deckhand.1 ]; then
        deb_digest=$(gzip -dc "$unpacked$path.gz" | sha256sum | cut -d' ' -f1)
    else
        deb_digest=$(sha256sum "$from_deb" | cut -d' ' -f1)
    fi
    [ "$deb_digest" = "$digest" ] \
        || fail "$path differs between the $deb_arch .deb and the $rpm_arch .rpm"
done < <(rpm -qp --qf '[%{FILEDIGESTS} %{FILENAMES}\n]' "$rpm_file")
rm -rf "$unpacked"
}

while read -r deb_arch rpm_arch elf_class elf_machine file_words; do
    check_packages "$deb_arch" "$rpm_arch" "$elf_class" "$elf_machine" "$file_words"
done <<<"$architectures"

step "systemd unit"
unit_text=$(cat packaging/deckhand.service)
for line in 'Type=notify' 'ExecStart=/usr/bin/deckhand run' 'After=docker.service' \
    'Wants=docker.service' 'Restart=on-failure' 'RestartPreventExitStatus=78' \
    'StateDirectory=deckhand' 'RuntimeDirectory=deckhand' 'ConfigurationDirectory=deckhand' \
    'WatchdogSec=30s' 'ProtectSystem=strict' 'NoNewPrivileges=yes' 'WantedBy=multi-user.target'; do
    printf '%s\n' "$unit_text" | contains -x "$line" || fail "deckhand.service lacks the line $line"
done
printf '%s\n' "$unit_text" | contains -x 'KillMode=process' && fail "deckhand.service must not use KillMode=process"

step "install the .deb"
rm -rf /etc/deckhand /var/lib/deckhand
dpkg -i "$deb" || fail "dpkg -i failed"
[ "$(dpkg-query -W -f '${Status}' deckhand)" = "install ok installed" ] || fail "dpkg does not list deckhand as installed"
[ "$(/usr/bin/deckhand --version)" = "deckhand $version" ] || fail "deckhand --version does not print 'deckhand $version'"
getent group deckhand >/dev/null || fail "the deckhand group was not created"
expect_path /lib/systemd/system/deckhand.service "unit installed"
[ -d /etc/deckhand/tasks.d ] || fail "/etc/deckhand/tasks.d was not created"
[ -z "$(ls -A /etc/deckhand/tasks.d)" ] || fail "/etc/deckhand/tasks.d must be empty after install"
[ "$(dpkg -S /etc/deckhand/tasks.d 2>/dev/null)" = "deckhand: /etc/deckhand/tasks.d" ] \
    || fail "dpkg -S /etc/deckhand/tasks.d must name deckhand (the package owns the directory)"
cmp -s /etc/deckhand/deckhand.conf packaging/deckhand.conf || fail "installed deckhand.conf differs from packaging/deckhand.conf"
if grep -v '^#' /etc/deckhand/deckhand.conf | contains '='; then
    fail "every key in the installed deckhand.conf must be commented out"
fi
expect_path /etc/systemd/system/multi-user.target.wants/deckhand.service "enabled on install"
installed_kib=$(dpkg-query -W -f '${Installed-Size}' deckhand)

step "each shell loads the installed completions, man shows deckhand(1)"
for program_and_package in zsh:zsh fish:fish man:man-db; do
    program=${program_and_package%%:*}
    if ! command -v "$program" >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${program_and_package#*:}" >/dev/null || fail "cannot install ${program_and_package#*:}"
    fi
done
check_completions() {
    # $1: where zsh's completions are (vendor-completions on Debian, site-functions on RPM hosts).
    bash -c 'source /usr/share/bash-completion/completions/deckhand && complete -p deckhand' \
        | contains -- '-F _deckhand deckhand' || fail "bash: complete -p deckhand after sourcing"
    bash -c 'source /usr/share/bash-completion/completions/deckhand
        COMP_WORDS=(deckhand t); COMP_CWORD=1; _deckhand; printf "%s\n" "${COMPREPLY[@]}"' \
        | contains -x top || fail "bash: deckhand t<TAB> does not offer top"
    dump=$(mktemp)
    zsh -fc "fpath=($1 \$fpath); autoload -U compinit; compinit -u -d $dump; print -r -- \$_comps[deckhand]" \
        | contains -x _deckhand || fail "zsh: compinit does not find _deckhand in $1"
    rm -f "$dump" "$dump".zwc
    # Not --no-config: it also leaves fish's completion path empty.
    fish -c 'complete -C "deckhand "' | contains -E '^top[[:space:]]' \
        || fail "fish: deckhand <TAB> does not offer top from vendor_completions.d"
    fish -c 'complete -C "deckhand ps --"' | contains -E '^--json' \
        || fail "fish: deckhand ps --<TAB> does not offer --json"
    man -l /usr/share/man/man1/deckhand.1* 2>/dev/null | contains 'deckhand top' \
        || fail "man -l does not render the installed deckhand(1)"
    MANPAGER=cat man deckhand 2>/dev/null | contains 'deckhand top' \
        || fail "man deckhand does not find the page where man looks"
}
check_completions /usr/share/zsh/vendor-completions

if command -v systemd-analyze >/dev/null 2>&1; then
    step "systemd-analyze verify the installed unit"
    verify_output=$(systemd-analyze verify /lib/systemd/system/deckhand.service 2>&1) || {
        printf '%s\n' "$verify_output" >&2
        fail "systemd-analyze verify rejected deckhand.service"
    }
    # verify exits 0 on some warnings; deckhand's unit must produce none of its own.
    if printf '%s\n' "$verify_output" | grep -i 'deckhand.service'; then
        fail "systemd-analyze verify warned about deckhand.service"
    fi
    # A regression guard for the hardening: systemd's own exposure score (0 best, 10 worst).
    if exposure_line=$(systemd-analyze security --offline=true /lib/systemd/system/deckhand.service 2>/dev/null | grep 'Overall exposure level'); then
        exposure=$(printf '%s\n' "$exposure_line" | sed -n 's/.*deckhand.service: \([0-9.]*\).*/\1/p')
        echo "systemd-analyze security: exposure $exposure"
        awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 3.0) }' \
            || fail "deckhand.service exposure level $exposure is above 3.0: hardening regressed"
    fi
else
    printf '\n== packages: systemd-analyze not installed: skipping the unit verification (the unit'"'"'s lines were checked above)\n'
    skipped=1
fi

step "upgrade in place keeps a modified conffile and task files"
sed -i 's/^#ECS_CLUSTER=default$/ECS_CLUSTER=edge/' /etc/deckhand/deckhand.conf
cp packaging/examples/web.json /etc/deckhand/tasks.d/web.json
dpkg -i "$deb" || fail "dpkg -i over the installed package (upgrade path) failed"
grep -qx 'ECS_CLUSTER=edge' /etc/deckhand/deckhand.conf || fail "upgrade replaced the admin's deckhand.conf"
expect_path /etc/deckhand/tasks.d/web.json "upgrade keeps task files"
expect_path /etc/systemd/system/multi-user.target.wants/deckhand.service "still enabled after upgrade"

step "remove (not purge) keeps configuration and state"
mkdir -p /var/lib/deckhand/tasks && echo '{}' >/var/lib/deckhand/tasks/stand-in.json
dpkg -r deckhand || fail "dpkg -r failed"
expect_no_path /usr/bin/deckhand "remove deletes the binary"
expect_no_path /lib/systemd/system/deckhand.service "remove deletes the unit"
expect_path /etc/deckhand/deckhand.conf "remove keeps the conffile"
expect_path /var/lib/deckhand/tasks/stand-in.json "remove keeps the state"
if command -v deb-systemd-helper >/dev/null 2>&1; then
    # Disabled the debhelper way: masked, so nothing starts it; the enable link is kept so a
    # reinstall restores the admin's choice, and purge removes both.
    [ "$(readlink /etc/systemd/system/deckhand.service)" = /dev/null ] \
        || fail "remove must mask deckhand.service"
fi

step "remove and purge delete an empty tasks.d"
dpkg -i "$deb" >/dev/null || fail "dpkg -i (reinstall) failed"
mv /etc/deckhand/tasks.d/web.json /tmp/deckhand-pkg-web.json
dpkg -r deckhand >/dev/null || fail "dpkg -r failed"
expect_no_path /etc/deckhand/tasks.d "remove deletes the package's empty tasks.d"
dpkg --purge deckhand >/dev/null || fail "dpkg --purge failed"
expect_no_path /etc/deckhand "purge deletes /etc/deckhand once it is empty"
dpkg -i "$deb" >/dev/null || fail "dpkg -i (reinstall) failed"
mv /tmp/deckhand-pkg-web.json /etc/deckhand/tasks.d/web.json
dpkg -r deckhand >/dev/null || fail "dpkg -r failed"

step "purge deletes state and leaves only the group and the admin's task files"
dpkg --purge deckhand || fail "dpkg --purge failed"
dpkg -s deckhand >/dev/null 2>&1 && fail "dpkg still knows deckhand after purge"
expect_no_path /var/lib/deckhand "purge deletes the state"
expect_no_path /etc/deckhand/deckhand.conf "purge deletes the conffile"
expect_path /etc/deckhand/tasks.d/web.json "purge keeps the admin's task files"
rm -rf /etc/deckhand
left=$(find /usr/bin /lib/systemd /usr/lib/systemd /etc/systemd /usr/share/doc /var/lib/systemd/deb-systemd-helper-enabled \
    /usr/share/bash-completion /usr/share/zsh /usr/share/fish /usr/share/man/man1 \
    -name '*deckhand*' 2>/dev/null || true)
[ -z "$left" ] || fail "purge left files behind: $left"
getent group deckhand >/dev/null || fail "purge must keep the deckhand group (files may still be owned by it)"

step "install and erase the .rpm (Debian's rpm, scripts run on this host)"
rpm -i --nodeps --force-debian "$rpm_file" 2>/dev/null || rpm -i --nodeps "$rpm_file" || fail "rpm -i failed"
[ "$(/usr/bin/deckhand --version)" = "deckhand $version" ] || fail "rpm: deckhand --version"
check_completions /usr/share/zsh/site-functions
expect_path /usr/lib/systemd/system/deckhand.service "rpm installs the unit"
[ -d /etc/deckhand/tasks.d ] || fail "rpm -i must create /etc/deckhand/tasks.d"
[ -z "$(ls -A /etc/deckhand/tasks.d)" ] || fail "/etc/deckhand/tasks.d must be empty after rpm -i"
[ "$(rpm -qf --qf '%{NAME}\n' /etc/deckhand/tasks.d 2>/dev/null)" = deckhand ] \
    || fail "rpm -qf /etc/deckhand/tasks.d must name deckhand (the package owns the directory)"
if command -v systemctl >/dev/null 2>&1; then
    expect_path /etc/systemd/system/multi-user.target.wants/deckhand.service "rpm %post enables the unit"
fi
rpm -e --nodeps deckhand || fail "rpm -e failed"
expect_no_path /usr/bin/deckhand "rpm -e deletes the binary"
expect_no_path /etc/systemd/system/multi-user.target.wants/deckhand.service "rpm %preun disables the unit"
expect_no_path /etc/deckhand "rpm -e deletes the package's empty configuration directories"
expect_no_path /usr/share/doc/deckhand "rpm -e deletes the package's doc directories"
expect_no_path /usr/share/bash-completion/completions/deckhand "rpm -e deletes the bash completion"
expect_no_path /usr/share/man/man1/deckhand.1 "rpm -e deletes the man page"

step "rpm -e keeps a tasks.d that holds task files"
rpm -i --nodeps --force-debian "$rpm_file" 2>/dev/null || rpm -i --nodeps "$rpm_file" || fail "rpm -i (reinstall) failed"
cp packaging/examples/web.json /etc/deckhand/tasks.d/web.json
rpm -e --nodeps deckhand || fail "rpm -e failed"
expect_path /etc/deckhand/tasks.d/web.json "rpm -e keeps the admin's task files and their directory"
expect_no_path /etc/deckhand/deckhand.conf "rpm -e deletes the unmodified deckhand.conf"
rm -rf /etc/deckhand

deb_bytes=$(stat -c %s "$deb")
rpm_bytes=$(stat -c %s "$rpm_file")
step "done in $(( $(date +%s) - started )) s (build $build_seconds s): binary $binary_bytes B, deb $deb_bytes B, rpm $rpm_bytes B, installed ${installed_kib} KiB"
if [ "$skipped" -gt 0 ]; then
    printf 'packages: %d passed, 0 failed, %d skipped\n' "$((steps - 1))" "$skipped"
else
    printf 'packages: %d passed, 0 failed\n' "$((steps - 1))"
fi
