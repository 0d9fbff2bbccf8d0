//! `deckhand run` refuses a bad configuration with exit code 78 and a message naming the key,
//! before it touches Docker or any socket (so these tests need no Docker).

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

fn run_agent(config_text: Option<&str>, env: &[(&str, &str)]) -> Output {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let directory = std::env::temp_dir().join(format!(
        "dh-agent-config-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let config = directory.join("deckhand.conf");
    std::fs::write(&config, config_text.unwrap_or("")).expect("config");
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
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command.spawn().expect("spawn");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    let output = receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("deckhand run exits on a bad configuration")
        .expect("wait");
    let _ = std::fs::remove_dir_all(&directory);
    output
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

#[test]
fn a_good_configuration_with_docker_unreachable_exits_1_not_78() {
    let output = run_agent(None, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/deckhand-test/docker.sock"),
        "{stderr}"
    );
}
