//! The Debian packages the real-Docker tests use, installed on first need.
//!
//! A newcomer's `cargo test` on a fresh machine with only Docker must pass: a test that needs a
//! program (the static busybox its image is made of, a local `docker-registry`, `htpasswd`,
//! `promtool` and the `prometheus` server, `qemu-aarch64` for the other architecture's sandbox
//! program, `tmux` that drives `deckhand top`,
//! the shells and `man` that load the completions and the man page) installs the package itself when it runs as root on a
//! machine with `apt-get`, as `examples/make-image.sh` does. Anywhere else it fails with the one
//! command that fixes it. (Debian's `prometheus` enables its own service where systemd runs; the
//! tests start their own server on a free port and never use it.)
//! Parallel test processes take turns through a lock file, so only one runs `apt-get` at a time
//! and the others find the program installed.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Every package the test suite may install, for the message that tells a user what to run.
pub const TEST_PACKAGES: [&str; 10] = [
    "busybox-static",
    "docker-registry",
    "apache2-utils",
    "prometheus",
    "qemu-user",
    "tmux",
    "zsh",
    "fish",
    "man-db",
    "iptables",
];

/// Serialises `apt-get` runs of parallel test processes.
const APT_LOCK_FILE: &str = "/tmp/deckhand-test-apt.lock";

fn is_present(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).exists();
    }
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|directory| directory.join(program).is_file())
    })
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"))
    })
}

fn fix_command() -> String {
    format!(
        "sudo apt-get install -y --no-install-recommends {}",
        TEST_PACKAGES.join(" ")
    )
}

/// Makes sure `program` (a name looked up in `PATH`, or an absolute path) exists, installing
/// Debian's `package` when it does not and this process may (root, `apt-get` present). Panics
/// with the command that fixes it otherwise.
pub fn ensure_program(program: &str, package: &str) {
    if is_present(program) {
        return;
    }
    if !running_as_root() || !is_present("apt-get") {
        panic!(
            "{program} is missing: the tests need Debian's {package}; install what they use \
             with: {}",
            fix_command()
        );
    }
    eprintln!("{program} is missing: installing Debian's {package} with apt-get");
    // Checked again under the lock: another test process may have installed it meanwhile.
    let script = format!(
        "if ! command -v {program} >/dev/null 2>&1 && ! [ -e {program} ]; then \
           apt-get update -qq && \
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {package}; \
         fi"
    );
    let status = if is_present("flock") {
        Command::new("flock")
            .args([APT_LOCK_FILE, "sh", "-c", &script])
            .status()
    } else {
        Command::new("sh").args(["-c", &script]).status()
    };
    match status {
        Ok(status) if status.success() && is_present(program) => {}
        Ok(status) => panic!(
            "installing {package} for {program} failed ({status}); install what the tests use \
             with: {}",
            fix_command()
        ),
        Err(error) => panic!(
            "cannot run apt-get to install {package} ({error}); install what the tests use \
             with: {}",
            fix_command()
        ),
    }
}
