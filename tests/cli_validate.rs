//! `deckhand validate` as a process: exit codes, what goes to stdout and stderr, reading a file
//! and standard input. No Docker needed: validation is offline.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn deckhand() -> Command {
    Command::new(env!("CARGO_BIN_EXE_deckhand"))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `deckhand validate PATH`, run to its end.
fn validate_file(path: &Path) -> Output {
    deckhand()
        .arg("validate")
        .arg(path)
        .output()
        .expect("run deckhand")
}

fn validate_stdin(input: &[u8]) -> Output {
    let mut child = deckhand()
        .args(["validate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn deckhand");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("deckhand exits")
}

/// A scratch file under the target directory, unique to this test.
fn scratch_file(name: &str, contents: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_validate");
    std::fs::create_dir_all(&directory).expect("create scratch directory");
    let path = directory.join(name);
    std::fs::write(&path, contents).expect("write scratch file");
    path
}

#[test]
fn valid_file_prints_a_summary_and_exits_0() {
    let output = validate_file(&example("three-tier.json"));
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    assert_eq!(
        text(&output.stdout),
        "valid: family \"three-tier\", 3 containers, start order: init, db, app\n"
    );
    assert_eq!(text(&output.stderr), "");
}

#[test]
fn web_example_is_valid() {
    let output = validate_file(&example("web.json"));
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    assert_eq!(
        text(&output.stdout),
        "valid: family \"web\", 1 container, start order: httpd\n"
    );
}

#[test]
fn stdin_is_read_with_dash_and_warnings_go_to_stderr() {
    let output = validate_stdin(
        br#"{"taskDefinition": {"family": "shop", "revision": 4, "status": "ACTIVE",
             "containerDefinitions": [{"name": "web", "image": "busybox"}]}}"#,
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    assert_eq!(
        text(&output.stdout),
        "valid: family \"shop\" revision 4, 1 container, start order: web\n"
    );
    assert_eq!(
        text(&output.stderr),
        "warning: taskDefinition.status: ignored: it has no effect on this host\n"
    );
}

#[test]
fn invalid_definition_lists_every_error_and_exits_2() {
    let path = scratch_file(
        "invalid.json",
        r#"{
            "family": "shop",
            "containerDefinitions": [
                {"name": "web", "image": "busybox", "links": ["cache"]},
                {"name": "api", "image": "busybox",
                 "dependsOn": [{"containerName": "db", "condition": "START"}],
                 "healthCheck": {"command": ["CMD", "true"], "interval": 1}}
            ]
        }"#,
    );
    let output = validate_file(&path);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(text(&output.stdout), "");
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        vec![
            "error: containerDefinitions[1].healthCheck.interval: 1 is out of range 5–300",
            "error: containerDefinitions[0].links[0]: no container named \"cache\"",
            "error: containerDefinitions[1].dependsOn[0].containerName: no container named \"db\"",
        ]
    );
}

#[test]
fn linux_fields_validate_and_their_rules_name_the_path() {
    let valid = validate_stdin(
        br#"{"family": "edge", "pidMode": "host", "ipcMode": "none",
             "containerDefinitions": [{"name": "app", "image": "busybox", "memory": 64,
               "ulimits": [{"name": "nofile", "softLimit": 1024, "hardLimit": 4096}],
               "linuxParameters": {"initProcessEnabled": true, "capabilities": {"drop": ["NET_RAW"]},
                                   "tmpfs": [{"containerPath": "/tmp", "size": 64}], "maxSwap": 0},
               "readonlyRootFilesystem": true, "hostname": "edge", "dnsSearchDomains": ["corp.example"],
               "extraHosts": [{"hostname": "db", "ipAddress": "10.0.0.5"}],
               "systemControls": [{"namespace": "net.core.somaxconn", "value": "1024"}],
               "portMappings": [{"containerPortRange": "9000-9009"}]}]}"#,
    );
    assert_eq!(
        (valid.status.code(), text(&valid.stderr)),
        (Some(0), String::new())
    );
    let invalid = validate_stdin(
        br#"{"family": "edge", "networkMode": "host", "pidMode": "task",
             "containerDefinitions": [{"name": "app", "image": "busybox",
               "ulimits": [{"name": "files", "softLimit": 1, "hardLimit": 1}],
               "systemControls": [{"namespace": "net.core.somaxconn", "value": "1024"}]}]}"#,
    );
    assert_eq!(invalid.status.code(), Some(2));
    let stderr = text(&invalid.stderr);
    for expected in [
        "error: pidMode: task needs networkMode awsvpc",
        "error: containerDefinitions[0].ulimits[0].name: unknown ulimit \"files\"",
        "error: containerDefinitions[0].systemControls[0].namespace: \"net.core.somaxconn\" is a network parameter",
    ] {
        assert!(
            stderr.lines().any(|line| line.starts_with(expected)),
            "missing {expected:?} in {stderr}"
        );
    }
}

#[test]
fn malformed_json_from_stdin_exits_2_with_a_located_error() {
    let output = validate_stdin(b"{\"family\": \"x\",\n \"containerDefinitions\": [}");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: $: not valid JSON: ") && stderr.contains("line 2"),
        "{stderr}"
    );
}

#[test]
fn missing_file_exits_1_naming_it() {
    let output = validate_file(Path::new("/nonexistent/deckhand/task.json"));
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("deckhand validate: cannot read /nonexistent/deckhand/task.json: "),
        "{stderr}"
    );
}

#[test]
fn wrong_arguments_print_usage_and_exit_2() {
    for args in [vec!["validate"], vec!["validate", "a.json", "b.json"]] {
        let output = deckhand().args(&args).output().expect("run deckhand");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            text(&output.stderr).starts_with("usage: deckhand validate FILE"),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
}

/// A Compose project in its own scratch directory: `compose.yaml`, `.env` and an `env_file`.
fn compose_project(name: &str, compose: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_validate")
        .join(name);
    std::fs::create_dir_all(&directory).expect("create project directory");
    std::fs::write(directory.join(".env"), "WEB_TAG=1.36\n").expect(".env");
    std::fs::write(directory.join("web.env"), "MODE=production\n").expect("web.env");
    let path = directory.join("compose.yaml");
    std::fs::write(&path, compose).expect("compose.yaml");
    path
}

#[test]
fn convert_prints_the_task_definition_that_validate_accepts() {
    let compose = compose_project(
        "My Shop",
        "services:\n  web:\n    image: busybox:${WEB_TAG}\n    env_file: web.env\n    \
         ports: ['127.0.0.1:8080:80']\n    depends_on:\n      db:\n        condition: \
         service_healthy\n  db:\n    image: busybox\n    healthcheck:\n      test: exit 0\n",
    );
    let output = deckhand()
        .arg("convert")
        .arg(&compose)
        .output()
        .expect("run deckhand");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(json["family"], "myshop");
    assert_eq!(json["containerDefinitions"][0]["image"], "busybox:1.36");
    assert_eq!(
        json["containerDefinitions"][0]["environment"],
        serde_json::json!([{"name": "MODE", "value": "production"}])
    );
    assert!(
        text(&output.stderr)
            .contains("warning: services.web.ports[0] (line 5): host address 127.0.0.1 dropped"),
        "{}",
        text(&output.stderr)
    );
    // What convert prints, validate accepts as JSON; and validate takes the Compose file too.
    let converted = scratch_file("converted.json", &text(&output.stdout));
    let from_json = validate_file(&converted);
    assert_eq!(
        from_json.status.code(),
        Some(0),
        "{}",
        text(&from_json.stderr)
    );
    let from_compose = validate_file(&compose);
    assert_eq!(
        from_compose.status.code(),
        Some(0),
        "{}",
        text(&from_compose.stderr)
    );
    assert_eq!(
        text(&from_compose.stdout).trim(),
        "valid: family \"myshop\", 2 containers, start order: db, web"
    );
}

#[test]
fn a_compose_file_that_cannot_be_mapped_exits_2_with_every_error_and_its_line() {
    let compose = compose_project(
        "refused",
        "services:\n  app:\n    build: .\n    image: app\n    secrets: [token]\nsecrets:\n  token:\n    file: ./token\n",
    );
    for verb in ["convert", "validate"] {
        let output = deckhand()
            .arg(verb)
            .arg(&compose)
            .output()
            .expect("run deckhand");
        assert_eq!(output.status.code(), Some(2), "{verb}");
        assert!(output.stdout.is_empty(), "{verb}");
        let errors = text(&output.stderr);
        for wanted in [
            "error: secrets (line 6): ",
            "error: services.app.build (line 3): build the image first",
            "error: services.app.secrets (line 5): ",
        ] {
            assert!(errors.contains(wanted), "{verb}: {wanted:?} in {errors}");
        }
    }
    // Compose by content, on standard input: YAML that does not start with `{`.
    let output = validate_stdin(b"services:\n  a:\n    image: busybox\n");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
}

#[test]
fn an_environment_file_task_definition_is_valid() {
    let output = validate_stdin(
        br#"{"family": "env-files", "containerDefinitions": [{"name": "app", "image": "busybox",
            "memory": 32, "environmentFiles": [
                {"value": "arn:aws:s3:::config-bucket/app/prod.env", "type": "s3"}]}]}"#,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("valid: family \"env-files\""),
        "{}",
        text(&output.stdout)
    );
}
