//! Local tasks' IAM roles (`DECKHAND_TASK_ROLES`) in the whole agent on real Docker. With
//! `assume`, against the fake STS of `tests/support/fake_aws.rs` (SigV4 checked): a local task
//! with a `taskRoleArn` the host may not assume yet shows the refusal in `inspect` and its
//! container's endpoint answers 503; once the role may be assumed the back-off's next try gets
//! credentials (session `deckhand-<task id>`, signed with the host's keys), the container reads
//! them with `wget` from the bridge gateway listener its `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`
//! is served on, and short-lived ones are replaced before they expire; the execution role's are
//! in the store too; after a `kill -9` and a restart the same id gets credentials again; and no
//! key, secret or token handed out is in the data directory, the logs, `inspect` or the events.
//! With `host`, the host's own credentials are served and a warning is logged; with `off`, the
//! submit's warnings name the ignored role and no container is told of an endpoint.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fake_aws.rs"]
mod fake_aws;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;

use agent_support::{contains, files_under, free_port, Agent, AgentOptions};
use docker_support::TEST_IMAGE;
use fake_aws::{assumed_credentials, FakeAws};
use fake_ecs::Credentials;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const APP_ROLE: &str = "arn:aws:iam::123456789012:role/app";
const EXEC_ROLE: &str = "arn:aws:iam::123456789012:role/exec";

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(90)
}

fn host_keys() -> Vec<(String, String)> {
    let host = Credentials::test();
    vec![
        ("AWS_ACCESS_KEY_ID".into(), host.access_key),
        ("AWS_SECRET_ACCESS_KEY".into(), host.secret_key),
        (
            "AWS_SESSION_TOKEN".into(),
            host.session_token.unwrap_or_default(),
        ),
        ("AWS_REGION".into(), "us-west-2".into()),
    ]
}

fn start_agent(test: &str, mode: &str, mut extra_env: Vec<(String, String)>) -> Option<Agent> {
    let docker = docker_support::docker_client_or_skip(test)?;
    extra_env.extend(host_keys());
    extra_env.push(("DECKHAND_TASK_ROLES".into(), mode.into()));
    extra_env.push(("ECS_LOGLEVEL".into(), "debug".into()));
    Some(Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env,
        },
    ))
}

fn definition(family: &str, execution_role: bool) -> String {
    let mut definition = json!({
        "family": family, "networkMode": "bridge", "taskRoleArn": APP_ROLE,
        "containerDefinitions": [{"name": "app", "image": TEST_IMAGE,
                                  "command": ["sleep", "3600"], "essential": true}]
    });
    if execution_role {
        definition["executionRoleArn"] = json!(EXEC_ROLE);
    }
    definition.to_string()
}

/// The Docker id of the one container of the agent's cluster.
fn the_container(agent: &Agent) -> String {
    let output = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=com.amazonaws.ecs.cluster={}", agent.cluster),
        ])
        .output()
        .expect("docker ps");
    let ids: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

/// What the container reads with `wget` where its variables point: `Ok(JSON)` or `Err(wget's
/// message)`.
fn read_in_container(container: &str) -> Result<Value, String> {
    let script = "base=${ECS_CONTAINER_METADATA_URI_V4%/v4/*}; \
                  wget -q -O - \"$base$AWS_CONTAINER_CREDENTIALS_RELATIVE_URI\"";
    let output = Command::new("docker")
        .args(["exec", container, "sh", "-c", script])
        .output()
        .expect("docker exec");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    serde_json::from_slice(&output.stdout).map_err(|error| error.to_string())
}

/// The `RoleCredentials` entry of `role` in `inspect`.
fn role_entry(agent: &Agent, task: &str, role: &str) -> Value {
    let inspected = agent.inspect(task);
    inspected["RoleCredentials"]
        .as_array()
        .and_then(|entries| entries.iter().find(|entry| entry["RoleType"] == role))
        .cloned()
        .unwrap_or(Value::Null)
}

fn wait_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = deadline();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Everything the agent wrote or shows of `task`: the data directory, its logs, the API's views
/// and events, `deckhand inspect`.
fn places(agent: &Agent, task: &str, logs: &[String]) -> Vec<(String, Vec<u8>)> {
    let mut places = Vec::new();
    files_under(&agent.directory.path.join("data"), &mut places);
    assert!(!places.is_empty(), "the data directory has files");
    places.push(("the agent's logs".into(), logs.join("\n").into_bytes()));
    for target in [
        "/v1/tasks".to_string(),
        format!("/v1/tasks/{task}"),
        "/v1/events?since=0".to_string(),
    ] {
        let response = agent.request("GET", &target, None);
        places.push((target, response.body.to_string().into_bytes()));
    }
    let output = agent.cli(&["inspect", task]);
    places.push((format!("deckhand inspect {task}"), output.stdout));
    places
}

#[test]
fn assumed_roles_are_served_refreshed_retried_restored_and_never_written_down() {
    let fake = FakeAws::start();
    // Credentials that expire in 5 minutes and 12 seconds: replaced after about 12 seconds.
    fake.set_credentials_lifetime(5 * 60 + 12);
    fake.add_role(EXEC_ROLE);
    let port = free_port();
    let Some(mut agent) = start_agent(
        "agent task roles: assume",
        "assume",
        vec![
            ("AWS_ENDPOINT_URL".into(), fake.endpoint()),
            ("DECKHAND_TASK_METADATA_PORT".into(), port.to_string()),
        ],
    ) else {
        return;
    };
    let task = agent.submit(&definition("roles", true));
    agent.wait_for_task_status(&task, "RUNNING");
    let container = the_container(&agent);

    // The task role may not be assumed yet: STS's refusal is in inspect, the endpoint says 503.
    let failed = wait_until("the refusal shown in inspect", || {
        let entry = role_entry(&agent, &task, "TaskApplication");
        entry.get("Failure").is_some().then_some(entry)
    });
    assert_eq!(failed["Status"], "FAILED", "{failed}");
    let failure = failed["Failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("AssumeRole") && failure.contains("AccessDenied"),
        "{failure}"
    );
    let refused = read_in_container(&container).expect_err("no credentials yet");
    assert!(refused.contains("503"), "{refused}");
    let app_id = failed["CredentialsId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(app_id.len(), 32, "a random 128-bit id: {app_id}");
    let environment = Command::new("docker")
        .args(["inspect", "--format", "{{json .Config.Env}}", &container])
        .output()
        .expect("docker inspect");
    let environment = String::from_utf8_lossy(&environment.stdout).into_owned();
    assert!(
        environment.contains(&format!(
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/{app_id}"
        )),
        "{environment}"
    );
    // The execution role's are there, never in the container's environment.
    let exec = wait_until("the execution role's credentials", || {
        let entry = role_entry(&agent, &task, "TaskExecution");
        (entry["Status"] == "READY").then_some(entry)
    });
    assert_eq!(exec["RoleArn"], EXEC_ROLE, "{exec}");
    let exec_id = exec["CredentialsId"].as_str().unwrap_or_default();
    assert!(!environment.contains(exec_id), "{environment}");

    // Allowed now: the back-off's next try gets them, and the container reads them.
    fake.add_role(APP_ROLE);
    let first = wait_until("the container reads its credentials", || {
        read_in_container(&container).ok()
    });
    assert_eq!(first["RoleArn"], APP_ROLE, "{first}");
    let ready = role_entry(&agent, &task, "TaskApplication");
    assert_eq!(ready["Status"], "READY", "{ready}");
    assert!(ready.get("Failure").is_none(), "{ready}");
    let calls = fake.calls();
    let granted: Vec<&fake_aws::Call> = calls
        .iter()
        .filter(|call| {
            call.operation == "AssumeRole"
                && call.status == 200
                && call.request["RoleArn"] == APP_ROLE
        })
        .collect();
    assert!(!granted.is_empty(), "{calls:?}");
    assert_eq!(
        granted[0].request["RoleSessionName"],
        format!("deckhand-{task}"),
        "{:?}",
        granted[0]
    );
    assert_eq!(granted[0].access_key, Credentials::test().access_key);

    // Short-lived: replaced before they expire, and the container reads the new ones.
    let refreshed = wait_until("new credentials before the old expire", || {
        read_in_container(&container)
            .ok()
            .filter(|read| read["AccessKeyId"] != first["AccessKeyId"])
    });
    assert_eq!(refreshed["RoleArn"], APP_ROLE);
    assert_ne!(refreshed["Token"], first["Token"]);

    // kill -9 and a restart: the same id, in the same container's environment, gets
    // credentials again.
    let mut logs = agent.log();
    agent.kill9();
    agent.restart();
    let again = wait_until("credentials again after the restart", || {
        read_in_container(&container)
            .ok()
            .filter(|read| read["AccessKeyId"] != refreshed["AccessKeyId"])
    });
    assert_eq!(again["RoleArn"], APP_ROLE);
    assert_eq!(the_container(&agent), container, "the same container");
    assert_eq!(
        role_entry(&agent, &task, "TaskApplication")["CredentialsId"],
        app_id.as_str()
    );

    // None of what STS handed out is written anywhere or shown.
    logs.extend(agent.log());
    let issued = fake
        .statuses("AssumeRole")
        .iter()
        .filter(|s| **s == 200)
        .count() as u64;
    assert!(issued >= 4, "{issued}");
    let places = places(&agent, &task, &logs);
    assert!(
        places.iter().any(|(_, bytes)| contains(bytes, &app_id)),
        "the credentials id is shown (inspect)"
    );
    for n in 1..=issued {
        let handed_out = assumed_credentials(n);
        for secret in [
            handed_out.access_key,
            handed_out.secret_key,
            handed_out.session_token.unwrap_or_default(),
        ] {
            for (place, bytes) in &places {
                assert!(!contains(bytes, &secret), "{place} holds {secret}");
            }
        }
    }

    // STOPPED: the task role's credentials are served no more (an unknown id's 400), as the
    // ECS agent drops them at its task's STOPPED; the execution role's stay until removal.
    let stopped = agent.cli(&["stop", "--wait", &task]);
    assert!(stopped.status.success(), "{stopped:?}");
    let answer = get_credentials(port, &app_id);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("InvalidIdInRequest"), "{answer}");
    assert_eq!(
        role_entry(&agent, &task, "TaskApplication")["Status"],
        "REMOVED"
    );
    assert_eq!(
        role_entry(&agent, &task, "TaskExecution")["CredentialsId"],
        exec_id
    );

    // Restarted with DECKHAND_TASK_ROLES=off: the execution role's id is kept, FAILED with why.
    agent.kill9();
    agent.set_env("DECKHAND_TASK_ROLES", "off");
    agent.restart();
    let execution = role_entry(&agent, &task, "TaskExecution");
    assert_eq!(execution["Status"], "FAILED", "{execution}");
    assert!(
        execution["Failure"]
            .as_str()
            .is_some_and(|why| why.contains("DECKHAND_TASK_ROLES is off")),
        "{execution}"
    );
    assert_eq!(
        role_entry(&agent, &task, "TaskApplication")["Status"],
        "REMOVED"
    );
    agent.wait_for_log("DECKHAND_TASK_ROLES is off (it was on when the task was accepted)");
}

/// The whole answer of `GET /v2/credentials/<id>` on the task metadata listener's loopback
/// address.
fn get_credentials(port: u16, id: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let request =
        format!("GET /v2/credentials/{id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn host_mode_serves_the_hosts_own_credentials_with_a_warning() {
    let Some(agent) = start_agent("agent task roles: host", "host", Vec::new()) else {
        return;
    };
    agent.wait_for_log("DECKHAND_TASK_ROLES=host");
    let task = agent.submit(&definition("host-roles", false));
    agent.wait_for_task_status(&task, "RUNNING");
    let container = the_container(&agent);
    let read = wait_until("the container reads the host's credentials", || {
        read_in_container(&container).ok()
    });
    let host = Credentials::test();
    assert_eq!(read["AccessKeyId"], host.access_key.as_str(), "{read}");
    assert_eq!(read["SecretAccessKey"], host.secret_key.as_str());
    let places = places(&agent, &task, &agent.log());
    for (place, bytes) in &places {
        assert!(
            !contains(bytes, &host.secret_key),
            "{place} holds the host's secret"
        );
    }
}

#[test]
fn off_names_the_ignored_role_and_tells_no_container_of_an_endpoint() {
    let Some(agent) = start_agent("agent task roles: off", "off", Vec::new()) else {
        return;
    };
    let response = agent.request(
        "POST",
        "/v1/tasks",
        Some(definition("no-roles", false).as_bytes()),
    );
    assert_eq!(response.status, 201, "{:?}", response.body);
    let warnings = response.body["warnings"].to_string();
    assert!(
        warnings.contains("taskRoleArn: ignored: DECKHAND_TASK_ROLES is off"),
        "{warnings}"
    );
    let task = response.body["id"].as_str().unwrap_or_default().to_string();
    agent.wait_for_task_status(&task, "RUNNING");
    let environment = Command::new("docker")
        .args([
            "inspect",
            "--format",
            "{{json .Config.Env}}",
            &the_container(&agent),
        ])
        .output()
        .expect("docker inspect");
    let environment = String::from_utf8_lossy(&environment.stdout);
    assert!(
        !environment.contains("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        "{environment}"
    );
    assert!(agent.inspect(&task).get("RoleCredentials").is_none());
}
