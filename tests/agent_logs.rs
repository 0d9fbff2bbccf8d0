//! `deckhand logs` on the whole agent and real Docker: a busybox task whose containers write to
//! stdout and stderr (one of them through a TTY), read through the CLI: every container's lines
//! prefixed, stderr on stderr, `--tail`, `--timestamps`, `--since`, `--follow` getting a line
//! written after it started and ending when the task stops, a stopped task's logs, an unknown
//! container, and a user who is in group deckhand but not in group docker.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{Agent, AgentOptions, DEADLINE};
use deckhand::task::time::{millis_from_rfc3339, rfc3339_from_millis};
use docker_support::TEST_IMAGE;
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Four containers: two that write to both streams, a TTY one, and one that ticks every half
/// second (for `--follow`). Each of the first three ends its output with a line marking that it
/// is done, then sleeps.
// `app` waits between its stderr line and its last stdout line: Docker reads the two pipes
// separately, so only time orders lines across them, and `--tail 1` must find `app-last` last.
fn definition(family: &str) -> String {
    format!(
        r#"{{
  "family": "{family}",
  "containerDefinitions": [
    {{"name": "app", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 2,
      "command": ["sh", "-c", "echo app-out; echo app-err >&2; sleep 1; echo app-last; exec sleep 3600"]}},
    {{"name": "side", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 2,
      "command": ["sh", "-c", "echo side-out; echo side-err >&2; echo side-last; exec sleep 3600"]}},
    {{"name": "console", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 2,
      "pseudoTerminal": true,
      "command": ["sh", "-c", "echo tty-line; echo console-last; exec sleep 3600"]}},
    {{"name": "ticker", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 2,
      "command": ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.5; done"]}}
  ]
}}"#
    )
}

/// Runs `deckhand logs` with `args` until its output satisfies `done` (the containers write
/// their lines after they start), or the deadline passes.
fn logs_until(agent: &Agent, args: &[&str], done: impl Fn(&Output) -> bool) -> Output {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let mut full = vec!["logs"];
        full.extend_from_slice(args);
        let output = agent.cli(&full);
        if done(&output) {
            return output;
        }
        assert!(
            Instant::now() < deadline,
            "deckhand {full:?} never gave the expected output: exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            text(&output.stdout),
            text(&output.stderr)
        );
        thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|status| {
            status
                .lines()
                .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn group_id(name: &str) -> Option<u32> {
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        fields.nth(1)?.parse().ok()
    })
}

/// The id of group deckhand, for root only. A fresh machine has no such group until a package
/// is installed (`.ci/packages.sh` runs after the tests), so root makes it here as the packages'
/// scripts do.
fn deckhand_group_id_as_root() -> Option<u32> {
    if !is_root() {
        return None;
    }
    if group_id("deckhand").is_none() {
        let made = Command::new("groupadd")
            .args(["--system", "deckhand"])
            .status()
            .map(|status| status.success())
            .unwrap_or(false);
        assert!(made, "groupadd --system deckhand failed");
    }
    group_id("deckhand")
}

#[test]
fn logs_through_the_agent_prefix_split_tail_since_follow_and_outlive_the_task() {
    let Some(docker) = docker_support::docker_client_or_skip("agent logs") else {
        return;
    };
    // Before the agent starts: it gives its socket to the group when the group exists then.
    let deckhand_gid = deckhand_group_id_as_root();
    let agent = Agent::start(docker, AgentOptions::default());
    let family = format!("logs-{}", docker_support::unique_id());
    let id = agent.submit(&definition(&family));
    agent.wait_for_task_status(&id, "RUNNING");
    let short = &id[..12];

    // Every container, prefixed (names padded to the longest, "console"), stderr apart.
    let all = logs_until(&agent, &[short], |output| {
        let stdout = text(&output.stdout);
        ["app-last", "side-last", "console-last", "tick-1"]
            .iter()
            .all(|marker| stdout.contains(marker))
    });
    assert_eq!(all.status.code(), Some(0));
    let stdout = text(&all.stdout);
    let stderr = text(&all.stderr);
    let stdout_lines: Vec<&str> = stdout.lines().collect();
    for expected in [
        "app     | app-out",
        "app     | app-last",
        "side    | side-out",
        "console | tty-line",
        "ticker  | tick-1",
    ] {
        assert!(
            stdout_lines.contains(&expected),
            "{expected:?} in\n{stdout}"
        );
    }
    // A TTY's own line ends (CR LF) come through as the terminal wrote them.
    assert!(stdout.contains("console | tty-line\r\n"), "{stdout:?}");
    let stderr_lines: Vec<&str> = stderr.lines().collect();
    assert!(stderr_lines.contains(&"app     | app-err"), "{stderr}");
    assert!(stderr_lines.contains(&"side    | side-err"), "{stderr}");
    assert!(
        !stdout.contains("-err"),
        "stderr lines on stdout:\n{stdout}"
    );
    assert!(
        !stderr.contains("-out"),
        "stdout lines on stderr:\n{stderr}"
    );

    // One container by name: its lines as they are; --tail 1 keeps the last one.
    let app = agent.cli(&["logs", short, "app"]);
    assert_eq!(text(&app.stdout), "app-out\napp-last\n");
    assert_eq!(text(&app.stderr), "app-err\n");
    let tail = agent.cli(&["logs", short, "app", "--tail", "1"]);
    assert_eq!(tail.status.code(), Some(0));
    assert_eq!(
        (text(&tail.stdout), text(&tail.stderr)),
        ("app-last\n".to_string(), String::new())
    );

    // --timestamps: each line starts with the RFC 3339 time Docker received it.
    let stamped = agent.cli(&["logs", short, "app", "--timestamps"]);
    let stamped_text = text(&stamped.stdout);
    let first = stamped_text.lines().next().expect("a line");
    let (time, rest) = first.split_once(' ').expect("time, then the line");
    assert_eq!(rest, "app-out");
    let written = millis_from_rfc3339(time).expect("an RFC 3339 time");

    // --since: a duration back from now includes the lines; a time after them excludes them.
    let recent = agent.cli(&["logs", short, "app", "--since", "1h"]);
    assert_eq!(text(&recent.stdout), "app-out\napp-last\n");
    let after = rfc3339_from_millis(written + 60_000);
    let none = agent.cli(&["logs", short, "app", "--since", &after]);
    assert_eq!(none.status.code(), Some(0));
    assert_eq!(
        (text(&none.stdout), text(&none.stderr)),
        (String::new(), String::new())
    );

    // An unknown container: exit 2, naming the task's containers.
    let unknown = agent.cli(&["logs", short, "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr).contains("its containers: app, side, console, ticker"),
        "{}",
        text(&unknown.stderr)
    );

    // A user in group deckhand, not in group docker, reads logs through the agent alone.
    if let Some(deckhand_gid) = deckhand_gid {
        use std::os::unix::fs::PermissionsExt;
        // The test's own directories are private; the path to the socket must be open to the
        // user (the socket itself is 0660, group deckhand, as the system agent makes it).
        for directory in [
            agent.directory.path.clone(),
            agent.directory.path.join("run"),
        ] {
            std::fs::set_permissions(&directory, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        let output = Command::new("/usr/bin/setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                &format!("--groups={deckhand_gid}"),
                "--",
            ])
            .arg(env!("CARGO_BIN_EXE_deckhand"))
            .arg("--socket")
            .arg(&agent.socket)
            .args(["logs", short, "side"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .output()
            .expect("run the CLI as a member of group deckhand");
        assert_eq!(
            (text(&output.stdout), text(&output.stderr)),
            (
                "side-out\nside-last\n".to_string(),
                "side-err\n".to_string()
            )
        );
        let docker_socket = Command::new("/usr/bin/setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                &format!("--groups={deckhand_gid}"),
                "--",
            ])
            .args(["sh", "-c", "exec 3<>/var/run/docker.sock"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("run sh");
        assert!(
            !docker_socket.status.success(),
            "the user can use Docker directly"
        );
    } else {
        assert!(
            std::env::var("DECKHAND_REQUIRE_DOCKER").as_deref() != Ok("1"),
            "the group deckhand test needs root and the group"
        );
        eprintln!(
            "SKIPPED (part): reading logs as a member of group deckhand needs root and the group"
        );
    }

    // --follow: lines written after it started arrive; it ends when the task stops.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_deckhand"))
        .arg("--socket")
        .arg(&agent.socket)
        .args(["logs", short, "ticker", "--follow", "--tail", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the follower");
    let follower_stdout = follower.stdout.take().expect("stdout");
    let (line_sender, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(follower_stdout).lines() {
            let Ok(line) = line else { break };
            if line_sender.send(line).is_err() {
                break;
            }
        }
    });
    let live = lines
        .recv_timeout(DEADLINE)
        .expect("a tick written after --follow started");
    assert!(live.starts_with("tick-"), "{live}");
    let stop = agent.cli(&["stop", short]);
    assert_eq!(stop.status.code(), Some(0), "{}", text(&stop.stderr));
    let (sender, exited) = mpsc::channel();
    thread::spawn(move || {
        let _ = sender.send(follower.wait_with_output());
    });
    let output = exited
        .recv_timeout(DEADLINE)
        .expect("the follower ends when the task stops")
        .expect("wait");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    agent.wait_for_task_status(&id, "STOPPED");

    // A stopped task keeps its logs until it is cleaned up.
    let stopped = agent.cli(&["logs", short, "app"]);
    assert_eq!(stopped.status.code(), Some(0), "{}", text(&stopped.stderr));
    assert_eq!(text(&stopped.stdout), "app-out\napp-last\n");
}
