//! `deckhand run` refuses a bad configuration, or a state file written by a newer deckhand, with
//! exit code 78 and a message naming the key or file, before it touches Docker or any socket; it
//! quarantines a corrupt task file and goes on; and with Docker not up yet it waits for it
//! (saying so) instead of exiting. None of these tests needs Docker.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::TempDir;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `deckhand run --config <directory>/deckhand.conf` (holding `config_text`) with its socket,
/// tasks.d and state in `directory`, no introspection endpoint, and a Docker socket that does not
/// exist.
fn agent_without_docker(directory: &std::path::Path, config_text: &str) -> Command {
    std::fs::create_dir_all(directory).expect("temp dir");
    let config = directory.join("deckhand.conf");
    std::fs::write(&config, config_text).expect("config");
    let mut command = Command::new(env!("CARGO_BIN_EXE_deckhand"));
    command
        .arg("run")
        .arg("--config")
        .arg(&config)
        .env("DECKHAND_API_SOCKET", directory.join("api.sock"))
        .env("DECKHAND_TASKS_DIR", directory.join("tasks.d"))
        .env("ECS_DATADIR", directory.join("data"))
        .env("DECKHAND_INTROSPECTION_ADDR", "")
        .env(
            "DOCKER_HOST",
            "unix:///nonexistent/deckhand-test/docker.sock",
        )
        .stdin(Stdio::null());
    command
}

fn run_agent(config_text: Option<&str>, env: &[(&str, &str)]) -> Output {
    let scratch = TempDir::new("dh-agent-config");
    let directory = &scratch.path;
    let mut command = agent_without_docker(directory, config_text.unwrap_or(""));
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command.spawn().expect("spawn");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    // `scratch` is removed when this returns, after the agent has exited.
    receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("deckhand run exits on a bad configuration")
        .expect("wait")
}

/// (config file text, environment, the key the message must name)
type ConfigCase = (
    Option<&'static str>,
    &'static [(&'static str, &'static str)],
    &'static str,
);

#[test]
fn bad_values_and_unknown_keys_exit_78_naming_the_key() {
    let table: [ConfigCase; 5] = [
        (
            None,
            &[("ECS_CONTAINER_STOP_TIMEOUT", "30")],
            "ECS_CONTAINER_STOP_TIMEOUT",
        ),
        (
            None,
            &[("ECS_IMAGE_PULL_BEHAVIOR", "sometimes")],
            "ECS_IMAGE_PULL_BEHAVIOR",
        ),
        (
            None,
            &[("DECKHAND_INTROSPECTION_ADDR", "not an address")],
            "DECKHAND_INTROSPECTION_ADDR",
        ),
        (Some("ECS_CLUSTR=typo\n"), &[], "ECS_CLUSTR"),
        (
            Some("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION=soon\n"),
            &[],
            "ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION",
        ),
    ];
    for (config_text, env, key) in table {
        let output = run_agent(config_text, env);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(78), "{key}: {stderr}");
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

#[test]
fn bad_registry_credentials_exit_78_naming_the_key_without_quoting_the_data() {
    const SECRET: &str = "agent-Config-s3cret";
    let valid = format!(r#"{{"r.example":{{"username":"u","password":"{SECRET}"}}}}"#);
    let broken = format!(r#"{{"r.example":{{"username":"u","password":"{SECRET}"}}"#);
    let in_file = format!("ECS_ENGINE_AUTH_TYPE=docker\nECS_ENGINE_AUTH_DATA={broken}\n");
    // (config file text, environment, what the message must say)
    type Case<'a> = (Option<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: [Case; 4] = [
        (
            None,
            vec![
                ("ECS_ENGINE_AUTH_TYPE", "docker"),
                ("ECS_ENGINE_AUTH_DATA", &broken),
            ],
            "ECS_ENGINE_AUTH_DATA",
        ),
        (
            None,
            vec![
                ("ECS_ENGINE_AUTH_TYPE", "ecr"),
                ("ECS_ENGINE_AUTH_DATA", &valid),
            ],
            "ECS_ENGINE_AUTH_TYPE",
        ),
        (
            None,
            vec![("ECS_ENGINE_AUTH_DATA", &valid)],
            "ECS_ENGINE_AUTH_TYPE is not set",
        ),
        (
            Some(&in_file),
            vec![],
            "deckhand.conf:2: bad value for ECS_ENGINE_AUTH_DATA",
        ),
    ];
    for (config_text, env, expected) in cases {
        let output = run_agent(config_text, &env);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(78), "{expected}: {stderr}");
        assert!(stderr.contains(expected), "{expected}: {stderr}");
        assert!(
            !stderr.contains(SECRET),
            "the message quotes the password: {stderr}"
        );
    }
}

#[test]
fn a_missing_config_file_given_on_the_command_line_exits_78() {
    let output = Command::new(env!("CARGO_BIN_EXE_deckhand"))
        .args([
            "run",
            "--config",
            "/nonexistent/deckhand-test/deckhand.conf",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("/nonexistent/deckhand-test/deckhand.conf"));
}

/// `deckhand run` with Docker unreachable, its stderr lines on a channel.
fn spawn_without_docker(
    directory: &std::path::Path,
) -> (std::process::Child, mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let mut child = agent_without_docker(directory, "")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (lines_sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_sender.send(line);
        }
    });
    (child, lines)
}

fn wait_for_line(lines: &mpsc::Receiver<String>, text: &str) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("deckhand never logged {text:?}"));
        if line.contains(text) {
            return line;
        }
    }
}

/// SIGTERM, then the exit status (within 30 s).
fn terminate(child: std::process::Child) -> std::process::ExitStatus {
    let killed = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -TERM {}", child.id()))
        .status()
        .expect("sh");
    assert!(killed.success());
    let (sender, receiver) = mpsc::channel();
    let mut child = child;
    std::thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("deckhand exits on SIGTERM")
        .expect("wait")
}

#[test]
fn a_good_configuration_with_docker_unreachable_waits_for_docker_and_stops_on_sigterm() {
    let scratch = TempDir::new("dh-agent-wait");
    let (mut child, lines) = spawn_without_docker(&scratch.path);
    // systemd may start deckhand before Docker: it must wait (saying so), not exit.
    let waiting_line = wait_for_line(&lines, "waiting for it");
    assert!(
        waiting_line.contains("/nonexistent/deckhand-test/docker.sock"),
        "{waiting_line}"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "deckhand exited instead of waiting for Docker"
    );
    assert_eq!(terminate(child).code(), Some(0));
}

#[test]
fn a_corrupt_task_file_is_quarantined_with_an_error_naming_it_and_start_up_goes_on() {
    let scratch = TempDir::new("dh-agent-corrupt");
    let directory = &scratch.path;
    let tasks = directory.join("data").join("tasks");
    std::fs::create_dir_all(&tasks).expect("tasks dir");
    std::fs::write(
        tasks.join("0123abcd.json"),
        b"{\"schema\": 1, \"task\": {trunc",
    )
    .expect("file");
    let (child, lines) = spawn_without_docker(directory);
    let error_line = wait_for_line(&lines, "0123abcd.json");
    assert!(error_line.contains("quarantine"), "{error_line}");
    // Start-up went on, to the point of waiting for Docker.
    wait_for_line(&lines, "waiting for it");
    assert_eq!(terminate(child).code(), Some(0));
    assert!(!tasks.join("0123abcd.json").exists(), "moved away");
    let quarantined: Vec<String> = std::fs::read_dir(directory.join("data").join("quarantine"))
        .expect("quarantine dir")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        quarantined
            .iter()
            .any(|name| name.starts_with("0123abcd.json")),
        "{quarantined:?}"
    );
}

#[test]
fn a_state_file_from_a_newer_deckhand_stops_start_up_with_78() {
    let scratch = TempDir::new("dh-agent-future");
    let data = scratch.path.join("data");
    std::fs::create_dir_all(data.join("tasks")).expect("data dir");
    std::fs::write(
        data.join("agent.json"),
        r#"{"schema": 99, "agent": {"next_sequence": 5}}"#,
    )
    .expect("agent.json");
    let output = run_agent(None, &[("ECS_DATADIR", &data.to_string_lossy())]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("agent.json"), "{stderr}");
    assert!(stderr.contains("schema version 99"), "{stderr}");
    let kept = std::fs::read_to_string(data.join("agent.json")).expect("left in place");
    assert!(kept.contains("99"), "the newer file is not touched");
}

/// The running agent's environment (`/proc/<pid>/environ`) as `KEY=VALUE` strings, once it got
/// as far as waiting for Docker, and its process name (`/proc/<pid>/comm`, what `ps`, `top` and
/// `pgrep` show) as the last entry, `comm=NAME`.
fn environment_of_running_agent(env: &[(&str, &str)]) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let scratch = TempDir::new("dh-agent-malloc");
    let mut command = agent_without_docker(&scratch.path, "");
    command
        .env_remove("RUST_LOG")
        .env_remove("GLIBC_TUNABLES")
        .env_remove("DECKHAND_MALLOC_TUNING")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (lines_sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_sender.send(line);
        }
    });
    wait_for_line(&lines, "waiting for it");
    let environ = std::fs::read(format!("/proc/{}/environ", child.id())).expect("environ");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", child.id())).expect("comm");
    assert_eq!(terminate(child).code(), Some(0));
    environ
        .split(|byte| *byte == 0)
        .map(|entry| String::from_utf8_lossy(entry).into_owned())
        .chain(std::iter::once(format!("comm={}", comm.trim_end())))
        .collect()
}

// glibc rewrites `GLIBC_TUNABLES` in the environment as it reads it at start (2.36 leaves only
// the first setting there), so the agent's own view shows where the restart happened and which
// setting came first; `ld.so --list-tunables` is how an operator sees the values in force.
#[test]
fn deckhand_run_restarts_itself_with_its_malloc_tunables_unless_told_not_to() {
    let environment = environment_of_running_agent(&[]);
    assert!(
        environment.contains(&"DECKHAND_MALLOC_TUNING=applied".to_string()),
        "{environment:?}"
    );
    assert!(
        environment
            .iter()
            .any(|entry| entry.starts_with("GLIBC_TUNABLES=glibc.malloc.tcache_count=0")),
        "{environment:?}"
    );
    // Started again through /proc/self/exe, it still goes by its own name, not `exe`.
    assert!(
        environment.contains(&"comm=deckhand".to_string()),
        "{environment:?}"
    );
    let environment =
        environment_of_running_agent(&[("GLIBC_TUNABLES", "glibc.malloc.arena_max=4")]);
    assert!(
        environment
            .iter()
            .any(|entry| entry.starts_with("GLIBC_TUNABLES=glibc.malloc.arena_max=4")),
        "the operator's setting is kept first: {environment:?}"
    );
    let environment = environment_of_running_agent(&[("DECKHAND_MALLOC_TUNING", "off")]);
    assert!(
        !environment
            .iter()
            .any(|entry| entry.starts_with("GLIBC_TUNABLES=")),
        "glibc's defaults when asked: {environment:?}"
    );
    assert!(environment.contains(&"DECKHAND_MALLOC_TUNING=off".to_string()));
}
