//! The execution role's awslogs in the whole agent on real Docker: an ECS payload task with
//! `executionRoleCredentials` and an awslogs log configuration (fake ECS of
//! `tests/support/fake_ecs.rs`) makes a container whose `HostConfig.LogConfig` holds
//! `awslogs-credentials-endpoint` = `/v2/credentials/<execution id>` and no key, secret or token;
//! Docker's awslogs driver fetches the role's credentials from `169.254.170.2` (the agent's
//! redirect, so the daemon needs no AWS credentials) and ships the container's output, signed
//! with the role's access key, to a fake CloudWatch Logs on 127.0.0.1 (`awslogs-endpoint`,
//! `tests/support/fake_logs.rs`).
//!
//! The redirect is one per host: this test takes its turn (`RedirectTurn`) like
//! `tests/agent_credentials_redirect.rs`, checks that `iptables -t nat -S` shows the rules before
//! the daemon can send anything to 169.254.170.2, and removes the rules at the end, pass or fail.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;
#[path = "support/fake_logs.rs"]
mod fake_logs;

use agent_support::{free_port, redirect_rules, Agent, AgentOptions, RedirectTurn};
use deckhand::host::credentials_redirect::CREDENTIALS_ADDRESS;
use docker_support::TEST_IMAGE;
use fake_ecs::{acs_container, acs_task, random_hex32, task_arn, Credentials, FakeEcs};
use fake_logs::FakeLogs;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const REGION: &str = "us-west-2";

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn docker_inspect(id: &str, format: &str) -> String {
    let output = Command::new("docker")
        .args(["inspect", "--format", format, id])
        .output()
        .expect("docker inspect");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The task's first RUNNING or STOPPED change (a container that cannot start its log driver
/// stops the task).
fn task_running_or_stopped(fake: &FakeEcs, arn: &str) -> fake_ecs::StateChange {
    let deadline = deadline();
    loop {
        let found = fake.state_changes().into_iter().find(|change| {
            change.operation == "SubmitTaskStateChange"
                && change.task_arn == arn
                && (change.status == "RUNNING" || change.status == "STOPPED")
        });
        if let Some(change) = found {
            return change;
        }
        assert!(
            Instant::now() < deadline,
            "no RUNNING or STOPPED for {arn}: {:#?}",
            fake.state_changes()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_awslogs_driver_ships_with_the_execution_role_from_the_credentials_endpoint() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ECS awslogs") else {
        return;
    };
    let _turn = RedirectTurn::take();

    // The execution role's credentials, valid for an hour (the SDK refetches expired ones).
    let role = Credentials {
        access_key: format!("ASIA{}", &random_hex32()[..16].to_uppercase()),
        secret_key: format!("secret{}", random_hex32()),
        session_token: Some(format!("token{}{}", random_hex32(), random_hex32())),
    };
    let handed_out = [
        role.access_key.clone(),
        role.secret_key.clone(),
        role.session_token.clone().unwrap_or_default(),
    ];
    let logs = FakeLogs::start(REGION, vec![role.clone()]);
    let fake = FakeEcs::start();
    let cluster = format!("ecs-{}", &random_hex32()[..12]);
    let port = free_port();
    let mut agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: [
                fake.agent_env(&cluster),
                vec![
                    ("DECKHAND_TASK_METADATA_PORT".into(), port.to_string()),
                    ("DECKHAND_CREDENTIALS_ENDPOINT".into(), "true".into()),
                    ("ECS_LOGLEVEL".into(), "debug".into()),
                ],
            ]
            .concat(),
        },
    );
    agent.cluster = cluster.clone();
    fake.wait_for_acs_session(1, deadline());
    // Nothing may reach 169.254.170.2 before the rules keep it on this machine.
    agent.wait_for_log("leads to the task metadata endpoint at ");
    let rules = redirect_rules();
    assert!(
        rules.iter().any(|rule| rule.starts_with("-A OUTPUT")
            && rule.contains(&format!("-d {CREDENTIALS_ADDRESS}/32"))),
        "the daemon's connections to {CREDENTIALS_ADDRESS} are redirected: {rules:?}"
    );
    assert!(
        rules
            .iter()
            .any(|rule| rule.contains("DNAT") && rule.ends_with(&format!(":{port}"))),
        "to the agent's listener on port {port}: {rules:?}"
    );

    let arn = task_arn(&cluster);
    let exec_id = format!("exec-{}", random_hex32());
    let marker = format!("shipped-{}", random_hex32());
    let group = format!("/deckhand/{}", &random_hex32()[..8]);
    let task_id = arn.rsplit('/').next().unwrap_or_default().to_string();
    let stream = format!("ecs/app/{task_id}");
    // As ECS sends it: in `dockerConfig.hostConfig`, the stream named from the definition's
    // prefix by ECS.
    let log_config = json!({"LogConfig": {"Type": "awslogs", "Config": {
        "awslogs-group": group, "awslogs-region": REGION,
        "awslogs-stream": stream, "awslogs-endpoint": logs.endpoint()}}});
    let mut container = acs_container(
        "app",
        TEST_IMAGE,
        &["sh", "-c", &format!("echo {marker}; exec sleep 3600")],
        true,
        &[],
    );
    container["dockerConfig"] = json!({"hostConfig": log_config.to_string()});
    let mut task = acs_task(&arn, "ecs-awslogs", "RUNNING", vec![container]);
    task["executionRoleCredentials"] = json!({
        "credentialsId": exec_id, "accessKeyId": role.access_key,
        "secretAccessKey": role.secret_key, "sessionToken": role.session_token,
        "expiration": "2099-01-01T00:00:00Z",
        "roleArn": "arn:aws:iam::123456789012:role/exec", "credentialScope": "task"});
    fake.send_payload(json!([task]), 1);

    let change = task_running_or_stopped(&fake, &arn);
    assert_eq!(
        change.status,
        "RUNNING",
        "the awslogs container runs: {change:?}; log:\n{}",
        agent.log().join("\n")
    );
    let ids = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.amazonaws.ecs.task-arn={arn}"),
        ])
        .output()
        .expect("docker ps");
    let ids: Vec<String> = String::from_utf8_lossy(&ids.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");

    // Docker was handed the endpoint, and nothing secret.
    let log_config: Value =
        serde_json::from_str(&docker_inspect(&ids[0], "{{json .HostConfig.LogConfig}}"))
            .expect("LogConfig as JSON");
    assert_eq!(log_config["Type"], "awslogs", "{log_config}");
    assert_eq!(
        log_config["Config"]["awslogs-credentials-endpoint"],
        format!("/v2/credentials/{exec_id}").as_str(),
        "{log_config}"
    );
    assert_eq!(
        log_config["Config"]["awslogs-stream"],
        stream.as_str(),
        "{log_config}"
    );
    let inspected = Command::new("docker")
        .args(["inspect", &ids[0]])
        .output()
        .expect("docker inspect");
    let inspected = String::from_utf8_lossy(&inspected.stdout);
    for secret in &handed_out {
        assert!(
            !inspected.contains(secret.as_str()),
            "docker inspect holds a key, secret or token of the role"
        );
    }

    // The driver shipped the container's line, signed with the execution role.
    let put = logs.wait_for_call(
        |call| {
            call.operation == "PutLogEvents"
                && call.body["logEvents"].as_array().is_some_and(|events| {
                    events
                        .iter()
                        .any(|event| event["message"] == marker.as_str())
                })
        },
        deadline(),
    );
    assert_eq!(put.access_key, role.access_key, "{put:?}");
    assert_eq!(put.verified, Ok(()), "{put:?}");
    assert_eq!(put.body["logGroupName"], group.as_str(), "{put:?}");
    assert_eq!(put.body["logStreamName"], stream.as_str(), "{put:?}");
    let calls = logs.calls();
    assert!(
        calls.iter().all(|call| call.verified.is_ok()),
        "every call was signed with the role: {calls:#?}"
    );
    assert!(
        calls.iter().any(|call| call.operation == "CreateLogStream"),
        "{calls:#?}"
    );
    // Nothing of the role in the agent's logs either.
    let log = agent.log().join("\n");
    for secret in &handed_out {
        assert!(
            !log.contains(secret.as_str()),
            "the agent's log holds a secret"
        );
    }
}
