//! The awsvpc sandbox's pause program for every architecture deckhand carries it for (x86_64,
//! aarch64, 32-bit ARM), run as a real process: the one of this machine natively, the others
//! under qemu's user-mode emulator (Debian's `qemu-user`, installed on first need). Each waits, survives a signal it does not
//! handle, and exits 0 on SIGTERM and on SIGINT.

#[path = "support/packages.rs"]
mod packages;

use deckhand::engine::sandbox_image::{pause_program, Architecture};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn write_program(architecture: Architecture) -> PathBuf {
    let directory = std::env::temp_dir().join(format!(
        "deckhand-sandbox-program-{}-{architecture:?}",
        std::process::id()
    ));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let path = directory.join("pause");
    std::fs::write(&path, pause_program(architecture)).expect("write the program");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("sh")
        .args(["-c", &format!("kill -{name} {pid}")])
        .status()
        .expect("sh");
    assert!(status.success(), "kill -{name} {pid}");
}

/// The host's system calls the pause program (or the emulator running it) blocks in while it
/// waits: `pause`, `ppoll` and `rt_sigsuspend` (x86_64: 34, 271, 130; aarch64: —, 73, 133;
/// 32-bit ARM: 29, 336, 179).
const WAITING_SYSCALLS: &[&str] = if cfg!(target_arch = "x86_64") {
    &["34", "271", "130"]
} else if cfg!(target_arch = "arm") {
    &["29", "336", "179"]
} else {
    &["73", "133"]
};

/// Waits until a thread of process `pid` is blocked in one of [`WAITING_SYSCALLS`], which the
/// program reaches only after installing its signal handlers (`/proc/PID/task/*/syscall`).
fn wait_until_blocked_waiting(pid: u32, program: &Path, emulator: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten();
        let waiting = tasks.flatten().any(|task| {
            std::fs::read_to_string(task.path().join("syscall")).is_ok_and(|syscall| {
                syscall
                    .split_whitespace()
                    .next()
                    .is_some_and(|number| WAITING_SYSCALLS.contains(&number))
            })
        });
        if waiting {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{program:?} under {emulator:?} never started waiting"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `program` (through `emulator` if given) and checks it waits and ends with 0 on `stop`.
fn check_waits_then_exits_zero(emulator: Option<&str>, program: &Path, stop: &str) {
    let mut command = match emulator {
        Some(emulator) => {
            let mut command = Command::new(emulator);
            command.arg(program);
            command
        }
        None => Command::new(program),
    };
    let mut child = command
        .stdin(Stdio::null())
        .spawn()
        .expect("the program starts");
    // The program waits only after its handlers are installed: until it blocks, a stop signal
    // would find none (and, emulated, start-up takes a while on a loaded machine).
    wait_until_blocked_waiting(child.id(), program, emulator);
    signal(child.id(), "CHLD");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().expect("wait").is_none(),
        "{program:?} under {emulator:?} ended before any stop signal"
    );
    signal(child.id(), stop);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{program:?} under {emulator:?} ignored SIG{stop}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(0),
        "{program:?} under {emulator:?} after SIG{stop}: {status:?}"
    );
    if let Some(directory) = program.parent() {
        let _ = std::fs::remove_dir_all(directory);
    }
}

/// The emulator that runs `architecture`'s programs on another CPU.
fn emulator(architecture: Architecture) -> &'static str {
    match architecture {
        Architecture::X86_64 => "qemu-x86_64",
        Architecture::Aarch64 => "qemu-aarch64",
        Architecture::Arm => "qemu-arm",
    }
}

#[test]
fn every_pause_program_waits_and_exits_zero_on_sigterm_and_sigint() {
    let native = Architecture::of_this_build().expect("a build deckhand carries the program for");
    let others: Vec<Architecture> = Architecture::ALL
        .into_iter()
        .filter(|architecture| *architecture != native)
        .collect();
    assert_eq!(others.len(), 2, "three architectures");
    for other in &others {
        packages::ensure_program(emulator(*other), "qemu-user");
    }
    for stop in ["TERM", "INT"] {
        check_waits_then_exits_zero(None, &write_program(native), stop);
        for other in &others {
            check_waits_then_exits_zero(Some(emulator(*other)), &write_program(*other), stop);
        }
    }
}
