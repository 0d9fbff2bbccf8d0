//! The rule every real-Docker test relies on: without Docker a test skips with a message, but
//! with `DECKHAND_REQUIRE_DOCKER=1` it fails. Checked by running this test binary again, in a
//! child process pointed at a socket that does not exist. Also checks what `deckhand run` says
//! about a Docker it cannot reach (it waits) or may not use (it exits 1).

#[path = "support/docker.rs"]
mod docker_support;

use std::process::Command;

const MISSING_SOCKET: &str = "unix:///nonexistent/deckhand-test/docker.sock";

/// Run only as the child of `docker_client_or_skip_obeys_deckhand_require_docker`.
#[test]
#[ignore = "run in a child process by docker_client_or_skip_obeys_deckhand_require_docker"]
fn child_connects_or_skips() {
    let client = docker_support::docker_client_or_skip("child_connects_or_skips");
    println!("CHILD connected={}", client.is_some());
}

#[test]
fn docker_client_or_skip_obeys_deckhand_require_docker() {
    let this_test_binary = std::env::current_exe().expect("the test binary's path");
    for require in ["1", "0"] {
        let output = Command::new(&this_test_binary)
            .args([
                "--ignored",
                "--exact",
                "child_connects_or_skips",
                "--nocapture",
            ])
            .env("DOCKER_HOST", MISSING_SOCKET)
            .env("DECKHAND_REQUIRE_DOCKER", require)
            .output()
            .expect("running the test binary again");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if require == "1" {
            assert!(
                !output.status.success(),
                "must fail when Docker is required: {text}"
            );
            assert!(text.contains("Docker is required"), "{text}");
        } else {
            assert!(output.status.success(), "must skip, not fail: {text}");
            assert!(text.contains("SKIPPED child_connects_or_skips"), "{text}");
            assert!(text.contains("CHILD connected=false"), "{text}");
        }
        assert!(
            text.contains("/nonexistent/deckhand-test/docker.sock"),
            "{text}"
        );
    }
}

#[test]
fn deckhand_run_explains_an_unreachable_docker_while_it_waits_for_it() {
    use std::io::{BufRead, BufReader};
    // systemd may start deckhand before Docker: it waits, saying why, and a SIGTERM ends it.
    let directory = docker_support::TempDir::new("deckhand-unreachable");
    let config_path = directory.path.join("deckhand.conf");
    std::fs::write(&config_path, "").expect("write the config file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_deckhand"))
        .arg("run")
        .arg("--config")
        .arg(&config_path)
        .env("DOCKER_HOST", MISSING_SOCKET)
        .env("ECS_DATADIR", directory.path.join("data"))
        .env("DECKHAND_API_SOCKET", directory.path.join("api.sock"))
        .env("DECKHAND_TASKS_DIR", directory.path.join("tasks.d"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running deckhand");
    let stderr = child.stderr.take().expect("stderr");
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let message = loop {
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("deckhand explains what it waits for");
        if line.contains("waiting for it") {
            break line;
        }
    };
    assert!(
        message.contains("no Docker socket at /nonexistent/deckhand-test/docker.sock"),
        "{message}"
    );
    let killed = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -TERM {}", child.id()))
        .status()
        .expect("sh");
    assert!(killed.success());
    assert_eq!(child.wait().expect("wait").code(), Some(0));

    // With Docker reachable, `deckhand run` is the agent and keeps running: the versions it
    // logs at start are checked by tests/agent_cli.rs.
}

#[test]
fn deckhand_run_explains_a_socket_it_may_not_use() {
    use std::os::unix::fs::PermissionsExt;
    let directory = docker_support::TempDir::new("deckhand-denied");
    let socket_path = directory.path.join("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket_path).expect("bind");
    std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o600))
        .expect("chmod the socket");
    let deckhand = env!("CARGO_BIN_EXE_deckhand");
    let running_as_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0");
    // Root may use any socket: drop to `nobody` so the socket's mode applies.
    let mut command = if running_as_root {
        let mut command = Command::new("setpriv");
        command.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            deckhand,
        ]);
        command
    } else {
        Command::new(deckhand)
    };
    // `deckhand run` reads its configuration first: give it an empty file `nobody` may read,
    // so that the Docker socket is what it trips over.
    let config_path = directory.path.join("deckhand.conf");
    std::fs::write(&config_path, "").expect("write the config file");
    // And a state directory `nobody` may create (the state is opened before Docker).
    std::fs::set_permissions(&directory.path, std::fs::Permissions::from_mode(0o777))
        .expect("chmod the temp dir");
    let output = command
        .arg("run")
        .arg("--config")
        .arg(&config_path)
        .env("ECS_DATADIR", directory.path.join("data"))
        .env("DOCKER_HOST", format!("unix://{}", socket_path.display()))
        .output()
        .expect("running deckhand (setpriv comes with util-linux)");
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(
        message.contains(&format!("permission denied on {}", socket_path.display())),
        "{message}"
    );
    assert!(
        message.contains("docker"),
        "names the group to join: {message}"
    );
}
