//! Task IAM role credentials in the whole agent on real Docker, against the fake ECS of
//! `tests/support/fake_ecs.rs`: a payload's task role and execution role credentials are
//! acknowledged after the payload (`IAMRoleCredentialsAckRequest` with each id and expiration),
//! served at `/v2/credentials/<id>` on the task metadata port, named in the container's
//! `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (the execution role's never), replaced by an
//! `IAMRoleCredentialsMessage` (acknowledged; one for a task that is not here is not); after a
//! `kill -9` and a restart the first ACS connection asks with `sendCredentials=true`, the
//! restored task's endpoint answers 503 until ECS sends them again, then 200; and no key, secret
//! or token the fake handed out is anywhere in the data directory, the agent's logs, `inspect`
//! or the events. A bridge-mode and a host-network container read their credentials with `wget`
//! from `169.254.170.2` (the agent's redirect, checked in place first: no packet for that address
//! may leave the host), then an unknown id's 400, then the credentials of a refresh; once the
//! task is STOPPED its id answers 400, even after a late refresh.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;

use agent_support::{
    contains, files_under, free_port, redirect_rules, Agent, AgentOptions, RedirectTurn,
};
use deckhand::runtime::ContainerRuntime;
use docker_support::{TempDir, TEST_IMAGE};
use fake_ecs::{acs_container, acs_task, random_hex32, task_arn, AgentMessage, FakeEcs};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// A fake ECS and an agent joined to it, its task metadata (and credentials) endpoint on `port`.
fn ecs_agent(port: u16) -> Option<(FakeEcs, Agent)> {
    let docker = docker_support::docker_client_or_skip("agent ECS credentials")?;
    Some(start_ecs_agent(docker, port, false))
}

/// The agent of [`ecs_agent`] on `docker`, with the redirect of 169.254.170.2 when `redirect`
/// (the caller holds the redirect's turn).
fn start_ecs_agent(
    docker: deckhand::docker::DockerClient,
    port: u16,
    redirect: bool,
) -> (FakeEcs, Agent) {
    let fake = FakeEcs::start();
    let cluster = format!("ecs-{}", &random_hex32()[..12]);
    let extra_env: Vec<(String, String)> = [
        fake.agent_env(&cluster),
        vec![
            ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into()),
            ("DECKHAND_TASK_METADATA_PORT".into(), port.to_string()),
            // Every line the agent can write, so the leak check reads them all.
            ("ECS_LOGLEVEL".into(), "debug".into()),
            ("DECKHAND_CREDENTIALS_ENDPOINT".into(), redirect.to_string()),
        ],
    ]
    .concat();
    let mut agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env,
        },
    );
    // Its containers carry the ECS cluster's name: the agent's drop removes them by it.
    agent.cluster = cluster;
    fake.wait_for_acs_session(1, deadline());
    (fake, agent)
}

/// Fresh credentials under `id` (ACS's `IAMRoleCredentials`); their key, secret and token are
/// added to `handed_out`.
fn role_credentials(id: &str, role: &str, handed_out: &mut Vec<String>) -> Value {
    let (key, secret, token) = (
        format!("ASIA{}", &random_hex32()[..16].to_uppercase()),
        format!("secret{}", random_hex32()),
        format!("token{}{}", random_hex32(), random_hex32()),
    );
    handed_out.extend([key.clone(), secret.clone(), token.clone()]);
    json!({"credentialsId": id, "accessKeyId": key, "secretAccessKey": secret, "sessionToken": token,
           "expiration": format!("2026-12-05T0{}:00:00Z", handed_out.len() % 10),
           "roleArn": format!("arn:aws:iam::123456789012:role/{role}"), "credentialScope": "task"})
}

/// What the endpoint answers for `credentials` (ACS's shape): ECS's JSON.
fn served(credentials: &Value) -> Value {
    json!({"AccessKeyId": credentials["accessKeyId"], "SecretAccessKey": credentials["secretAccessKey"],
           "Token": credentials["sessionToken"], "Expiration": credentials["expiration"],
           "RoleArn": credentials["roleArn"]})
}

/// One GET from the test process: (status, JSON body).
fn get(port: u16, path: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: test\r\n\r\n").expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn uninitialized() -> Value {
    json!({"code": "CredentialsUninitialized", "message": "CredentialsV2Request: Credentials uninitialized for ID", "HTTPErrorCode": 503})
}

/// Waits for the `IAMRoleCredentialsAckRequest` of `credentials` answering `message_id`.
fn wait_for_credentials_ack(fake: &FakeEcs, message_id: &str, credentials: &Value) -> AgentMessage {
    let ack = fake.wait_for_message(
        |message| {
            message.type_name == "IAMRoleCredentialsAckRequest"
                && message.message["messageId"] == message_id
                && message.message["credentialsId"] == credentials["credentialsId"]
        },
        deadline(),
    );
    assert_eq!(
        ack.message["expiration"], credentials["expiration"],
        "{ack:?}"
    );
    ack
}

fn sleeper(arn: &str, containers: Vec<Value>) -> Value {
    acs_task(arn, "ecs-creds", "RUNNING", containers)
}

/// The Docker ids of the containers labelled with `arn`.
fn containers_of(arn: &str) -> Vec<String> {
    let output = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.amazonaws.ecs.task-arn={arn}"),
        ])
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn docker_inspect(id: &str, format: &str) -> String {
    let output = Command::new("docker")
        .args(["inspect", "--format", format, id])
        .output()
        .expect("docker inspect");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn credentials_are_acknowledged_served_refreshed_restored_and_never_written_down() {
    let port = free_port();
    let Some((fake, mut agent)) = ecs_agent(port) else {
        return;
    };
    let cluster = agent.cluster.clone();
    let arn = task_arn(&cluster);
    let app_id = format!("app-{}", random_hex32());
    let exec_id = format!("exec-{}", random_hex32());
    let mut handed_out = Vec::new();
    let app = role_credentials(&app_id, "app", &mut handed_out);
    let exec = role_credentials(&exec_id, "exec", &mut handed_out);
    let container = acs_container("app", TEST_IMAGE, &["sleep", "3600"], true, &[]);
    let mut task = sleeper(&arn, vec![container]);
    task["roleCredentials"] = app.clone();
    task["executionRoleCredentials"] = exec.clone();

    // The payload, then each of its credentials, acknowledged.
    let payload = fake.send_payload(json!([task]), 1);
    fake.wait_for_message(
        |message| {
            message.type_name == "AckRequest" && message.message["messageId"] == payload.as_str()
        },
        deadline(),
    );
    wait_for_credentials_ack(&fake, &payload, &app);
    wait_for_credentials_ack(&fake, &payload, &exec);
    let kinds: Vec<String> = fake
        .agent_messages()
        .into_iter()
        .filter(|message| message.message["messageId"] == payload.as_str())
        .map(|message| message.type_name)
        .collect();
    assert_eq!(
        kinds,
        [
            "AckRequest",
            "IAMRoleCredentialsAckRequest",
            "IAMRoleCredentialsAckRequest"
        ],
        "the payload's ack first, one per credentials"
    );

    // Served at their ids; an unknown id is ECS's 400.
    assert_eq!(
        get(port, &format!("/v2/credentials/{app_id}")),
        (200, served(&app))
    );
    assert_eq!(
        get(port, &format!("/v2/credentials/{exec_id}")),
        (200, served(&exec))
    );
    assert_eq!(
        get(port, &format!("/v1/credentials?id={app_id}")),
        (200, served(&app))
    );
    assert_eq!(
        get(port, "/v2/credentials/not-an-id"),
        (
            400,
            json!({"code": "InvalidIdInRequest", "message": "CredentialsV2Request: Credentials not found", "HTTPErrorCode": 400})
        )
    );

    // The container is told where its task role's credentials are; never the execution role's.
    fake.wait_for_task_state(&arn, "RUNNING", deadline());
    let docker_ids = containers_of(&arn);
    assert_eq!(docker_ids.len(), 1, "{docker_ids:?}");
    let environment = docker_inspect(&docker_ids[0], "{{json .Config.Env}}");
    assert!(
        environment.contains(&format!(
            "\"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/{app_id}\""
        )),
        "{environment}"
    );
    assert!(!environment.contains(&exec_id), "{environment}");

    // A refresh replaces them and is acknowledged the same way.
    let refreshed = role_credentials(&app_id, "app", &mut handed_out);
    let refresh = fake.send_credentials_message(&arn, "TaskApplication", refreshed.clone());
    wait_for_credentials_ack(&fake, &refresh, &refreshed);
    assert_eq!(
        get(port, &format!("/v2/credentials/{app_id}")),
        (200, served(&refreshed))
    );
    // One for a task that is not here: not acknowledged (the heartbeat after it is).
    let stray_credentials =
        role_credentials(&format!("stray-{}", random_hex32()), "app", &mut handed_out);
    let stray = fake.send_credentials_message(
        &task_arn(&cluster),
        "TaskApplication",
        stray_credentials.clone(),
    );
    let heartbeat = fake.send_heartbeat();
    fake.wait_for_message(
        |message| {
            message.type_name == "HeartbeatAckRequest"
                && message.message["messageId"] == heartbeat.as_str()
        },
        deadline(),
    );
    assert!(
        fake.agent_messages()
            .iter()
            .all(|message| message.message["messageId"] != stray.as_str()),
        "{:?}",
        fake.agent_messages()
    );
    let stray_id = stray_credentials["credentialsId"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(get(port, &format!("/v2/credentials/{stray_id}")).0, 400);
    let task_id = arn.rsplit('/').next().unwrap_or_default().to_string();
    let inspected = agent.inspect(&task_id);
    assert_eq!(
        inspected["RoleCredentials"][0]["CredentialsId"],
        app_id.as_str(),
        "{inspected}"
    );
    assert_eq!(
        inspected["RoleCredentials"][0]["Status"], "READY",
        "{inspected}"
    );
    assert_eq!(
        inspected["RoleCredentials"][0]["Expiration"], refreshed["expiration"],
        "{inspected}"
    );
    let mut logs = agent.log();

    // kill -9 and a restart: the first connection asks for the credentials again; until they
    // come the restored task's endpoint says 503, and its container keeps running.
    let sessions = fake.counters().acs_sessions;
    agent.kill9();
    agent.restart();
    let query = fake.wait_for_acs_session(sessions + 1, deadline());
    assert_eq!(
        query.get("sendCredentials").map(String::as_str),
        Some("true"),
        "{query:?}"
    );
    assert_eq!(
        get(port, &format!("/v2/credentials/{app_id}")),
        (503, uninitialized())
    );
    assert_eq!(
        get(port, &format!("/v2/credentials/{exec_id}")),
        (503, uninitialized())
    );
    assert_eq!(
        agent.inspect(&task_id)["RoleCredentials"][0]["Status"],
        "PENDING"
    );
    assert_eq!(containers_of(&arn), docker_ids, "the same container");
    assert_eq!(docker_inspect(&docker_ids[0], "{{.State.Running}}"), "true");
    // ECS sends the task again with its credentials, as it does for `sendCredentials`.
    let app_again = role_credentials(&app_id, "app", &mut handed_out);
    let exec_again = role_credentials(&exec_id, "exec", &mut handed_out);
    let mut task = sleeper(
        &arn,
        vec![acs_container(
            "app",
            TEST_IMAGE,
            &["sleep", "3600"],
            true,
            &[],
        )],
    );
    task["roleCredentials"] = app_again.clone();
    task["executionRoleCredentials"] = exec_again.clone();
    let again = fake.send_payload(json!([task]), 2);
    wait_for_credentials_ack(&fake, &again, &app_again);
    wait_for_credentials_ack(&fake, &again, &exec_again);
    assert_eq!(
        get(port, &format!("/v2/credentials/{app_id}")),
        (200, served(&app_again))
    );
    assert_eq!(
        get(port, &format!("/v2/credentials/{exec_id}")),
        (200, served(&exec_again))
    );
    assert_eq!(containers_of(&arn), docker_ids, "nothing started twice");

    // None of what the fake handed out is written anywhere or shown.
    logs.extend(agent.log());
    let mut places: Vec<(String, Vec<u8>)> = Vec::new();
    files_under(&agent.directory.path.join("data"), &mut places);
    assert!(!places.is_empty(), "the data directory has files");
    places.push(("the agent's logs".into(), logs.join("\n").into_bytes()));
    for target in [
        "/v1/tasks".to_string(),
        format!("/v1/tasks/{task_id}"),
        "/v1/events?since=0".to_string(),
    ] {
        let response = agent.request("GET", &target, None);
        places.push((target, response.body.to_string().into_bytes()));
    }
    for args in [vec!["inspect", task_id.as_str()], vec!["ps", "-a"]] {
        let output = agent.cli(&args);
        places.push((format!("deckhand {}", args.join(" ")), output.stdout));
    }
    let docker_inspected = Command::new("docker")
        .arg("inspect")
        .args(&docker_ids)
        .output()
        .expect("docker inspect");
    places.push(("docker inspect".into(), docker_inspected.stdout));
    assert!(
        places.iter().any(|(_, bytes)| contains(bytes, &app_id)),
        "the credentials id is shown somewhere (inspect)"
    );
    assert_eq!(handed_out.len(), 18, "six sets of three");
    for (place, bytes) in &places {
        for secret in &handed_out {
            assert!(
                !contains(bytes, secret),
                "{place} holds a secret the fake handed out"
            );
        }
    }
}

/// Waits until `path` exists (the container writes each file whole, with `mv`) and reads it.
fn wait_for_file(path: &Path) -> String {
    let until = deadline();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(Instant::now() < until, "{} was not written", path.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bridge_and_host_network_containers_read_their_credentials_with_wget() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ECS credentials wget") else {
        return;
    };
    // The redirect of 169.254.170.2 is one per host: this test's turn, before its agent starts.
    let _turn = RedirectTurn::take();
    let port = free_port();
    let (fake, agent) = start_ecs_agent(docker, port, true);
    // Nothing goes to 169.254.170.2 before the rules that keep it on this host are in place.
    let until = deadline();
    while !redirect_rules()
        .iter()
        .any(|rule| rule.contains("DNAT") && rule.ends_with(&format!(":{port}")))
    {
        assert!(
            Instant::now() < until,
            "no redirect: {:?}",
            redirect_rules()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let gateway = agent
        .docker
        .bridge_gateway()
        .expect("Docker answers")
        .expect("the default bridge has a gateway");
    // (network mode, where the task metadata server is reached from there)
    for (network_mode, address) in [
        ("bridge", gateway.to_string()),
        ("host", "127.0.0.1".into()),
    ] {
        let out = TempDir::new("dh-credentials-out");
        let arn = task_arn(&agent.cluster);
        let app_id = format!("app-{}", random_hex32());
        let mut handed_out = Vec::new();
        let app = role_credentials(&app_id, "app", &mut handed_out);
        // The container asks where every AWS SDK asks (169.254.170.2 and the relative URI of
        // its variable), then for an id no task holds; once the test has sent new credentials
        // it asks again, and exits: its task stops.
        let script = "u=\"http://169.254.170.2$AWS_CONTAINER_CREDENTIALS_RELATIVE_URI\"; \
                      echo \"$ECS_CONTAINER_METADATA_URI_V4\" > /out/uri; \
                      wget -q -O /out/first.tmp \"$u\" 2>/out/first.err \
                        || cp /out/first.err /out/first.tmp; mv /out/first.tmp /out/first.json; \
                      wget -S -q -O /out/unknown.tmp http://169.254.170.2/v2/credentials/no-such-id \
                        2>/out/unknown.err; mv /out/unknown.err /out/unknown.txt; \
                      while [ ! -e /out/go ]; do sleep 0.1; done; \
                      wget -q -O /out/second.tmp \"$u\" 2>/out/second.err \
                        || cp /out/second.err /out/second.tmp; mv /out/second.tmp /out/second.json";
        let mut container = acs_container("reader", TEST_IMAGE, &["sh", "-c", script], true, &[]);
        container["mountPoints"] =
            json!([{"sourceVolume": "out", "containerPath": "/out", "readOnly": false}]);
        let mut task = sleeper(&arn, vec![container]);
        task["networkMode"] = json!(network_mode);
        task["volumes"] =
            json!([{"name": "out", "host": {"sourcePath": out.path().display().to_string()}}]);
        task["roleCredentials"] = app.clone();
        fake.send_payload(json!([task]), 1);

        let read = |name: &str| -> Value {
            let text = wait_for_file(&out.path().join(name));
            serde_json::from_str(&text).unwrap_or_else(|error| {
                panic!(
                    "{network_mode}: {name} through 169.254.170.2: {error}: {text:?}; log:\n{}",
                    agent.log().join("\n")
                )
            })
        };
        assert_eq!(read("first.json"), served(&app), "{network_mode}");
        let uri = std::fs::read_to_string(out.path().join("uri")).unwrap_or_default();
        assert!(
            uri.starts_with(&format!("http://{address}:{port}/v4/")),
            "{network_mode}: {uri}"
        );
        let unknown = wait_for_file(&out.path().join("unknown.txt"));
        assert!(unknown.contains("400"), "{network_mode}: {unknown}");
        // A refresh: the same id, new credentials, read by the running container.
        let refreshed = role_credentials(&app_id, "refreshed", &mut handed_out);
        let message = fake.send_credentials_message(&arn, "TaskApplication", refreshed.clone());
        wait_for_credentials_ack(&fake, &message, &refreshed);
        std::fs::write(out.path().join("go"), b"").expect("write go");
        assert_eq!(read("second.json"), served(&refreshed), "{network_mode}");
        fake.wait_for_task_state(&arn, "STOPPED", deadline());

        // STOPPED: its task role's credentials went with it, as the ECS agent drops them at
        // its task's STOPPED; a refresh for the stopped task is acknowledged and not kept.
        let path = format!("/v2/credentials/{app_id}");
        let until = deadline();
        while get(port, &path).0 != 400 {
            assert!(
                Instant::now() < until,
                "{network_mode}: {:?}",
                get(port, &path)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let late = role_credentials(&app_id, "late", &mut handed_out);
        let message = fake.send_credentials_message(&arn, "TaskApplication", late.clone());
        wait_for_credentials_ack(&fake, &message, &late);
        assert_eq!(get(port, &path).0, 400, "{network_mode}");
    }
}
