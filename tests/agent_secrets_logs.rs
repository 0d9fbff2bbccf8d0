//! Secrets from the local store and awslogs without AWS, on the whole agent and real Docker:
//! a task whose secret becomes an environment variable (checked from inside the container by
//! its digest, never by its value), whose awslogs configuration runs with json-file because the
//! host has no AWS credentials (so `deckhand logs` shows its output, and `inspect` says it fell
//! back), and whose secret value appears in none of deckhand's outputs; and a task naming a
//! secret the store lacks, refused at submit with 400 naming it.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{Agent, AgentOptions, DEADLINE};
use docker_support::TEST_IMAGE;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Instant;

const SECRET_VALUE: &str = "s3cr3t-VALUE-never-shown-7f1c";
const SECRET_REF: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:shop/db-AbCdEf";
const MISSING_REF: &str = "arn:aws:ssm:eu-west-1:123456789012:parameter/shop/not-there";

fn md5_hex(text: &str) -> String {
    let output = Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(format!("{text}\n").as_bytes())?;
            child.wait_with_output()
        })
        .expect("md5sum runs");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn secrets_become_environment_awslogs_falls_back_and_no_value_leaks() {
    let Some(docker) = docker_support::docker_client_or_skip("agent secrets and awslogs") else {
        return;
    };
    let home = std::env::temp_dir().join(format!("dh-secrets-{}", docker_support::unique_id()));
    std::fs::create_dir_all(&home).expect("home");
    let secrets_file = home.join("secrets.json");
    std::fs::write(
        &secrets_file,
        serde_json::json!({ SECRET_REF: SECRET_VALUE }).to_string(),
    )
    .expect("write the store");
    std::fs::set_permissions(&secrets_file, std::fs::Permissions::from_mode(0o600))
        .expect("chmod 0600");
    let agent = Agent::start(
        docker,
        AgentOptions {
            extra_env: vec![
                (
                    "DECKHAND_SECRETS_FILE".into(),
                    secrets_file.display().to_string(),
                ),
                ("HOME".into(), home.display().to_string()),
                (
                    "AWS_SHARED_CREDENTIALS_FILE".into(),
                    home.join("none").display().to_string(),
                ),
                ("AWS_ACCESS_KEY_ID".into(), String::new()),
                ("AWS_SECRET_ACCESS_KEY".into(), String::new()),
                ("AWS_REGION".into(), "eu-west-1".into()),
            ],
            ..AgentOptions::default()
        },
    );
    let family = format!("secrets-{}", docker_support::unique_id());
    let definition = serde_json::json!({
        "family": family,
        "containerDefinitions": [{
            "name": "app", "image": TEST_IMAGE, "stopTimeout": 2,
            "environment": [{"name": "DB_PASSWORD", "value": "plain-overridden"}],
            "secrets": [{"name": "DB_PASSWORD", "valueFrom": SECRET_REF}],
            "logConfiguration": {"logDriver": "awslogs", "options": {
                "awslogs-group": "/ecs/shop", "awslogs-stream-prefix": "ecs"}},
            "command": ["sh", "-c", "echo \"digest=$(echo \"$DB_PASSWORD\" | md5sum | cut -d' ' -f1)\"; echo ready-line; exec sleep 3600"]
        }]
    })
    .to_string();
    let task = agent.submit(&definition);
    agent.wait_for_task_status(&task, "RUNNING");

    // The variable holds the store's value (its digest, seen from inside), and the container's
    // output is readable: it runs with json-file.
    let expected = format!("digest={}", md5_hex(SECRET_VALUE));
    let deadline = Instant::now() + DEADLINE;
    let logs = loop {
        let output = agent.cli(&["logs", &task]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        if text.contains("ready-line") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        logs.contains(&expected),
        "deckhand logs: {logs:?}, expected {expected}"
    );

    // inspect shows what runs and that it fell back.
    let inspect = agent.inspect(&task);
    let container = &inspect["Containers"][0];
    assert_eq!(container["LogDriver"], "json-file", "{container}");
    assert_eq!(
        container["LogDriverFallback"]["RequestedLogDriver"], "awslogs",
        "{container}"
    );
    assert_eq!(
        container["LogDriverFallback"]["Reason"], "no AWS credentials configured",
        "{container}"
    );
    let said = agent
        .log()
        .iter()
        .filter(|line| line.contains("awslogs does not ship logs from this host"))
        .count();
    assert_eq!(said, 1, "said once per task: {:?}", agent.log());

    // A secret the store lacks: refused at submit, naming it.
    let missing = definition.replace(SECRET_REF, MISSING_REF);
    let response = agent.request("POST", "/v1/tasks", Some(missing.as_bytes()));
    assert_eq!(response.status, 400, "{:?}", response.body);
    assert!(
        response.body.to_string().contains(MISSING_REF),
        "{:?}",
        response.body
    );

    // deckhand's own outputs never hold the value.
    let events = agent.cli(&["events"]);
    let introspection = agent.request("GET", "/v1/tasks", None);
    let ps = agent.cli(&["ps", "--all", "--json"]);
    let checkpoints: String = std::fs::read_dir(agent.directory.path.join("data").join("tasks"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    let outputs = [
        ("inspect", inspect.to_string()),
        (
            "events",
            String::from_utf8_lossy(&events.stdout).into_owned(),
        ),
        ("API tasks", introspection.body.to_string()),
        ("ps", String::from_utf8_lossy(&ps.stdout).into_owned()),
        ("agent log", agent.log().join("\n")),
        ("checkpoints", checkpoints),
        ("400 body", response.body.to_string()),
    ];
    for (name, text) in outputs {
        assert!(
            !text.contains(SECRET_VALUE),
            "{name} holds the secret value: {text}"
        );
    }
    let stop = agent.cli(&["stop", "--wait", &task]);
    assert_eq!(
        stop.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let _ = std::fs::remove_dir_all(&home);
}
