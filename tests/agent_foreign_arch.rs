//! deckhand's arm64 and armhf builds as whole agents: each binary is cross-built by
//! `packaging/cross.sh` (Debian's Rust and cross linkers, installed on first need) and runs under
//! qemu's user-mode emulator (`qemu-aarch64`, `qemu-arm`) against this host's Docker, with
//! Debian's multiarch C library of the architecture (`libc6:arm64`, `libc6:armhf`, which the
//! target's Rust standard library package brings). Each runs a task from the local image to RUNNING, survives a `kill -9` and a
//! restart (re-adopting the same container), and stops it; the emulator cannot start the binary
//! again for its malloc settings, so each also proves that the agent runs on with a warning. The
//! armhf agent refuses `ECS_EXTERNAL=true` with exit 78.
//!
//! The cross builds take minutes: `DECKHAND_SKIP_CROSS=1` skips these tests on a developer's
//! machine (never in CI, where `CI=true` makes it an error).

#[path = "support/docker.rs"]
mod docker_support;

#[path = "support/agent.rs"]
mod agent_support;

use agent_support::{free_port, http_get_eventually, web_definition, Agent, AgentOptions};
use deckhand::runtime::ContainerRuntime;
use docker_support::{docker_client_or_skip, ensure_program, unique_id, TempDir};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A foreign architecture: Debian's name and its emulator.
struct Foreign {
    arch: &'static str,
    emulator: &'static str,
}

const ARM64: Foreign = Foreign {
    arch: "arm64",
    emulator: "qemu-aarch64",
};
const ARMHF: Foreign = Foreign {
    arch: "armhf",
    emulator: "qemu-arm",
};

/// The architecture's release binary, built (or found up to date) by `packaging/cross.sh`;
/// `None` when a developer skips these tests.
fn cross_binary(foreign: &Foreign) -> Option<PathBuf> {
    if std::env::var("DECKHAND_SKIP_CROSS").is_ok_and(|value| value == "1") {
        assert!(
            std::env::var("CI").map_or(true, |value| value != "true"),
            "DECKHAND_SKIP_CROSS=1 is for a developer's machine: CI runs the {} agent",
            foreign.arch
        );
        eprintln!(
            "SKIPPED the {} agent under qemu: DECKHAND_SKIP_CROSS=1",
            foreign.arch
        );
        return None;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(root.join("packaging/cross.sh"))
        .arg(foreign.arch)
        .current_dir(&root)
        .output()
        .expect("run packaging/cross.sh");
    assert!(
        output.status.success(),
        "packaging/cross.sh {} failed:\n{}",
        foreign.arch,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = root.join(
        stdout
            .lines()
            .last()
            .expect("cross.sh prints the binary's path"),
    );
    assert!(path.is_file(), "{path:?}");
    Some(path)
}

/// The command that runs `binary` under the architecture's emulator. Without `-L`: the binary's
/// loader and C library are Debian's multiarch ones (`/lib/ld-linux-armhf.so.3`,
/// `/lib/arm-linux-gnueabihf/`), as on a board. With `-L` and the cross linker's sysroot
/// (`/usr/arm-linux-gnueabihf`), the sysroot's loader finds the multiarch `libc.so.6` (a
/// different build of glibc) through `/lib/<triple>`, and the mix crashes at the first thread.
fn emulated(foreign: &Foreign, binary: &std::path::Path) -> Vec<String> {
    ensure_program(foreign.emulator, "qemu-user");
    vec![
        foreign.emulator.to_string(),
        binary.to_string_lossy().into_owned(),
    ]
}

/// The Docker id of the task's only container.
fn container_id(agent: &Agent, task: &str) -> String {
    let inspect = agent.inspect(task);
    inspect["Containers"][0]["DockerId"]
        .as_str()
        .unwrap_or_else(|| panic!("task {task} has no container id: {inspect}"))
        .to_string()
}

/// A task's life under the emulated agent: RUNNING, `kill -9`, restart and re-adoption, stop.
fn a_task_lives_through_a_kill_and_a_restart(foreign: &Foreign) {
    let Some(docker) = docker_client_or_skip(&format!("the {} agent", foreign.arch)) else {
        return;
    };
    let Some(binary) = cross_binary(foreign) else {
        return;
    };
    let command = emulated(foreign, &binary);
    let mut agent = Agent::start_with_command(
        docker.clone(),
        AgentOptions {
            introspection: false,
            ..AgentOptions::default()
        },
        command,
    );
    // The emulator runs the binary, but the kernel cannot: starting itself again for the malloc
    // settings fails, and the agent goes on with glibc's defaults.
    assert!(
        agent
            .log()
            .iter()
            .any(|line| line.contains("running with glibc's default malloc settings")),
        "no warning about the malloc settings: {:?}",
        agent.log()
    );

    let port = free_port();
    let marker = format!("{}-{}", foreign.arch, unique_id());
    let task = agent.submit(&web_definition(
        &format!("foreign-{}", foreign.arch),
        port,
        &marker,
    ));
    agent.wait_for_task_status(&task, "RUNNING");
    http_get_eventually(port, &format!("hello from {marker}"));
    let container = container_id(&agent, &task);

    agent.kill9();
    assert!(
        docker
            .inspect_container(&container)
            .expect("inspect")
            .state
            .running,
        "the container outlives the agent"
    );
    agent.restart();
    // Re-adopted: the same container, still serving, and the only one of the agent's cluster.
    assert_eq!(agent.inspect(&task)["KnownStatus"], "RUNNING");
    assert_eq!(container_id(&agent, &task), container);
    let containers: Vec<String> = agent.containers().into_iter().map(|c| c.id).collect();
    assert_eq!(containers, vec![container.clone()]);
    http_get_eventually(port, &format!("hello from {marker}"));

    let stop = agent.cli(&["stop", &task]);
    assert_eq!(
        stop.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    agent.wait_for_task_status(&task, "STOPPED");
    let state = docker.inspect_container(&container).expect("inspect").state;
    assert!(!state.running, "{state:?}");

    agent.signal("TERM");
    let (status, _) = agent.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn the_arm64_agent_runs_a_task_through_a_kill_and_a_restart_under_qemu() {
    a_task_lives_through_a_kill_and_a_restart(&ARM64);
}

#[test]
fn the_armhf_agent_runs_a_task_through_a_kill_and_a_restart_under_qemu() {
    a_task_lives_through_a_kill_and_a_restart(&ARMHF);
}

/// ECS places no task on 32-bit ARM: the armhf agent says so and exits 78 (EX_CONFIG, which the
/// unit does not restart) instead of registering.
#[test]
fn the_armhf_agent_refuses_ecs_with_exit_78() {
    let Some(binary) = cross_binary(&ARMHF) else {
        return;
    };
    let command = emulated(&ARMHF, &binary);
    let directory = TempDir::new("dh-armhf-ecs");
    let config = directory.path.join("deckhand.conf");
    std::fs::write(&config, "ECS_EXTERNAL=true\nAWS_REGION=us-west-2\n").expect("config");
    let output = Command::new(&command[0])
        .args(&command[1..])
        .arg("run")
        .arg("--config")
        .arg(&config)
        .env("ECS_DATADIR", directory.path.join("data"))
        .env(
            "DECKHAND_API_SOCKET",
            directory.path.join("run").join("api.sock"),
        )
        .env("DECKHAND_TASKS_DIR", directory.path.join("tasks.d"))
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "example-secret")
        .output()
        .expect("run the armhf agent");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("Amazon ECS does not support 32-bit ARM (armhf) hosts"),
        "{stderr}"
    );
}
