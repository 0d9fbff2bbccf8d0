//! The `deckhand` binary's client commands against an API server over an in-memory engine in
//! this test process: output, exit codes and messages of submit, stop, ps, inspect and events.

#[path = "support/api.rs"]
mod api_support;
#[path = "support/memory_engine.rs"]
mod memory_engine;

use api_support::{TempDir, TestApi, INVALID_DEFINITION, WEB_DEFINITION};
use memory_engine::Call;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(30);

fn deckhand(api: &TestApi, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deckhand"));
    command
        .arg("--socket")
        .arg(&api.socket)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Waits for a child with a deadline (the wait runs on a helper thread).
fn finish(child: Child) -> Output {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    receiver
        .recv_timeout(DEADLINE)
        .expect("the command did not finish in time")
        .expect("wait")
}

fn run(api: &TestApi, args: &[&str]) -> Output {
    finish(deckhand(api, args).spawn().expect("spawn deckhand"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_definition(directory: &TempDir, name: &str, content: &str) -> String {
    let path = directory.path().join(name);
    std::fs::write(&path, content).expect("write definition");
    path.to_string_lossy().into_owned()
}

fn submit(api: &TestApi) -> String {
    let file = write_definition(&api.directory, "web.json", WEB_DEFINITION);
    let output = run(api, &["submit", &file]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    text(&output.stdout).trim().to_string()
}

#[test]
fn submit_prints_the_id_alone() {
    let api = TestApi::start(false);
    let id = submit(&api);
    assert_eq!(id.len(), 32, "{id:?}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        api.engine.calls(),
        vec![Call::Submit {
            id: id.clone(),
            family: "web".into()
        }]
    );
}

#[test]
fn submit_reads_stdin() {
    let api = TestApi::start(false);
    let mut child = deckhand(&api, &["submit", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(WEB_DEFINITION.as_bytes())
        .expect("write stdin");
    let output = finish(child);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim().len(), 32);
}

#[test]
fn an_invalid_definition_exits_2_with_every_error_and_creates_nothing() {
    let api = TestApi::start(false);
    let file = write_definition(&api.directory, "broken.json", INVALID_DEFINITION);
    let output = run(&api, &["submit", &file]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = text(&output.stderr);
    let error_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert!(error_lines.len() >= 2, "{stderr}");
    assert!(stderr.contains("containerDefinitions[0]"), "{stderr}");
    // The same lines as `deckhand validate`.
    let validate = run(&api, &["validate", &file]);
    assert_eq!(validate.status.code(), Some(2));
    assert_eq!(text(&validate.stderr), stderr);
    assert!(api.engine.calls().is_empty());
}

#[test]
fn ps_inspect_and_stop_by_prefix() {
    let api = TestApi::start(false);
    let id = submit(&api);
    let second = submit(&api);

    let output = run(&api, &["ps"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let table = text(&output.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("TASK ID"), "{table}");
    for column in [
        "FAMILY:REVISION",
        "DESIRED",
        "KNOWN",
        "CONTAINERS",
        "HEALTH",
        "RESTARTS",
        "AGE",
    ] {
        assert!(lines[0].contains(column), "{column}: {table}");
    }
    // Newest first (the two may share a millisecond, so find the first one's row by its id).
    let row: Vec<&str> = lines
        .iter()
        .find(|line| line.starts_with(id.as_str()))
        .unwrap_or_else(|| panic!("{id} not listed: {table}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..7],
        [id.as_str(), "web:0", "RUNNING", "NONE", "0/1", "-", "0"]
    );

    let output = run(&api, &["inspect", &id[..10]]);
    assert_eq!(output.status.code(), Some(0));
    let inspect: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        inspect["TaskARN"],
        format!("arn:aws:ecs:local:000000000000:task/test-cluster/{id}")
    );

    let output = run(&api, &["stop", &id[..10]]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(api.engine.calls().contains(&Call::Stop { id: id.clone() }));
    api.engine.finish_stop(&id);

    let output = run(&api, &["ps"]);
    let table = text(&output.stdout);
    assert_eq!(
        table.lines().count(),
        2,
        "stopped tasks are hidden: {table}"
    );
    assert!(table.contains(&second));
    let output = run(&api, &["ps", "--all", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(all.as_array().map(Vec::len), Some(2));
}

#[test]
fn stop_wait_returns_only_once_the_task_is_stopped() {
    let api = TestApi::start(false);
    let id = submit(&api);
    let child = deckhand(&api, &["stop", "--wait", &id])
        .spawn()
        .expect("spawn");
    assert!(api.engine.wait_for_calls(DEADLINE, |calls| calls
        .contains(&Call::Stop { id: id.clone() })));
    // Accepted but not yet stopped: the command is still waiting (it sits in a long poll).
    assert!(api.engine.wait_for_waiting_readers(1, DEADLINE));
    api.engine.finish_stop(&id);
    let output = finish(child);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), id);
}

#[test]
fn unknown_and_ambiguous_tasks_exit_2() {
    let api = TestApi::start(false);
    let first = "abc10000000000000000000000000000";
    let second = "abc20000000000000000000000000000";
    for id in [first, second] {
        let definition = deckhand::task::parse_task_definition(WEB_DEFINITION.as_bytes())
            .expect("valid")
            .definition;
        api.engine.insert_task(deckhand::task::Task::new(
            id.to_string(),
            "test-cluster",
            definition,
            1,
            0,
        ));
    }
    let output = run(&api, &["inspect", "ffff"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("no task ffff"),
        "{}",
        text(&output.stderr)
    );
    let output = run(&api, &["inspect", ""]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("TASK is empty"));
    let output = run(&api, &["stop", "abc"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("ambiguous") && stderr.contains(first) && stderr.contains(second),
        "{stderr}"
    );
    assert!(api.engine.calls().is_empty(), "nothing was stopped");
}

#[test]
fn events_print_one_object_per_line_with_rfc3339_times() {
    let api = TestApi::start(false);
    api.engine.push_event("t1", Some("web"), "RUNNING", None);
    api.engine.push_event("t1", None, "RUNNING", None);
    api.engine.push_event("t1", Some("web"), "STOPPED", Some(3));
    let output = run(&api, &["events", "--since", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let lines: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["seq"], 2);
    assert!(lines[0].get("container").is_none());
    assert_eq!(lines[1]["container"], "web");
    assert_eq!(lines[1]["exitCode"], 3);
    let time = lines[1]["time"].as_str().expect("time");
    assert!(
        deckhand::api::views::millis_from_rfc3339(time).is_some(),
        "{time}"
    );
}

#[test]
fn events_follow_prints_new_events_as_they_come() {
    let api = TestApi::start(false);
    api.engine.push_event("t1", None, "RUNNING", None);
    let mut child = deckhand(&api, &["events", "--follow"])
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let first = receiver.recv_timeout(DEADLINE).expect("the existing event");
    assert!(first.contains("\"seq\":1"), "{first}");
    assert!(api.engine.wait_for_waiting_readers(1, DEADLINE));
    api.engine.push_event("t1", None, "STOPPED", Some(0));
    let second = receiver.recv_timeout(DEADLINE).expect("the new event");
    assert!(
        second.contains("\"seq\":2") && second.contains("STOPPED"),
        "{second}"
    );
    child.kill().expect("kill follower");
    let _ = child.wait();
}

#[test]
fn an_unreachable_agent_exits_1_naming_the_socket() {
    let directory = TempDir::new("cli-nowhere");
    let socket = directory.path().join("absent.sock");
    let output = finish(
        Command::new(env!("CARGO_BIN_EXE_deckhand"))
            .args(["ps", "--socket"])
            .arg(&socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&socket.to_string_lossy().into_owned()),
        "{stderr}"
    );
    assert!(stderr.contains("deckhand run"), "{stderr}");

    // DECKHAND_API_SOCKET is honoured when --socket is absent.
    let output = finish(
        Command::new(env!("CARGO_BIN_EXE_deckhand"))
            .arg("ps")
            .env("DECKHAND_API_SOCKET", &socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains(&socket.to_string_lossy().into_owned()));
}

#[test]
fn usage_help_and_version() {
    let api = TestApi::start(false);
    let table: [(&[&str], i32, &str); 7] = [
        (&["--version"], 0, "deckhand 0."),
        (&["--help"], 0, "Usage: deckhand"),
        (&["help", "events"], 0, "Usage: deckhand events"),
        (&["stop", "--help"], 0, "Usage: deckhand stop"),
        (&["frobnicate"], 2, "unknown command"),
        (&["ps", "--wait"], 2, "ps does not take --wait"),
        (&["help", "nope"], 2, "no command"),
    ];
    for (args, code, expected) in table {
        let output = run(&api, args);
        assert_eq!(output.status.code(), Some(code), "{args:?}");
        let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(all.contains(expected), "{args:?}: {all}");
    }
    let output = finish(
        Command::new(env!("CARGO_BIN_EXE_deckhand"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_bad_configuration_exits_78_naming_the_key() {
    let api = TestApi::start(false);
    let output = finish(
        Command::new(env!("CARGO_BIN_EXE_deckhand"))
            .arg("ps")
            .env("DECKHAND_API_SOCKET", "relative/path.sock")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    assert_eq!(output.status.code(), Some(78), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("DECKHAND_API_SOCKET"));
    drop(api);
}

/// Runs the binary as user `nobody` (uid 65534, no groups) with only the given environment, so the
/// CLI applies the non-root socket rule. `None` when this test process cannot switch users.
fn run_as_nobody(
    home: &std::path::Path,
    runtime_dir: &std::path::Path,
    args: &[&str],
) -> Option<Output> {
    let is_root = std::fs::read_to_string("/proc/self/status")
        .map(|status| {
            status
                .lines()
                .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !is_root || !std::path::Path::new("/usr/bin/setpriv").exists() {
        // CI (DECKHAND_REQUIRE_DOCKER=1) runs as root: there the test must run, not skip.
        assert!(
            std::env::var("DECKHAND_REQUIRE_DOCKER").as_deref() != Ok("1"),
            "switching to user nobody needs root and setpriv (util-linux)"
        );
        eprintln!("SKIPPED: switching to user nobody needs root and setpriv (util-linux)");
        return None;
    }
    let child = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_deckhand"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn setpriv");
    Some(finish(child))
}

#[test]
fn a_non_root_cli_uses_its_own_agent_socket_by_default() {
    use std::os::unix::fs::PermissionsExt;
    let directory = TempDir::new("cli-user-socket");
    let runtime_dir = directory.path().join("runtime");
    let socket = runtime_dir.join("deckhand").join("api.sock");
    let engine = std::sync::Arc::new(memory_engine::MemoryEngine::new("user-cluster"));
    let _servers = deckhand::api::ApiServers::start(engine, &socket, None).expect("start the API");
    // Let nobody through the directories and onto the socket (this test runs as root).
    for path in [
        directory.path(),
        runtime_dir.as_path(),
        socket.parent().expect("parent"),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let Some(output) = run_as_nobody(directory.path(), &runtime_dir, &["ps"]) else {
        return;
    };
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).starts_with("TASK ID"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn a_non_root_cli_with_no_agent_names_both_sockets_it_tried() {
    use std::os::unix::fs::PermissionsExt;
    let directory = TempDir::new("cli-no-socket");
    let runtime_dir = directory.path().join("runtime");
    std::fs::create_dir_all(&runtime_dir).expect("runtime dir");
    std::fs::set_permissions(directory.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let Some(output) = run_as_nobody(directory.path(), &runtime_dir, &["ps"]) else {
        return;
    };
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let own = runtime_dir.join("deckhand").join("api.sock");
    // The system socket, if an agent serves it, is mode 0660 for group deckhand: not for nobody.
    for tried in [
        own.display().to_string(),
        "/run/deckhand/api.sock".to_string(),
    ] {
        assert!(
            stderr.contains(&format!("{tried} (")),
            "{tried} not named: {stderr}"
        );
    }
    assert!(stderr.contains("deckhand run"), "{stderr}");
}
