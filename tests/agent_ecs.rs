//! deckhand as an Amazon ECS external instance, the whole agent on real Docker against the fake
//! ECS of `tests/support/fake_ecs.rs` (JSON API and ACS websocket on 127.0.0.1, every request's
//! SigV4 signature checked): registration (and re-registration with the saved ARN), a payload's
//! task running under its own ARN and reported, idempotent re-delivery, heartbeats, the task
//! manifest and stop verification, local tasks beside ECS tasks and never reported, a local
//! stop of an ECS task refused, ECS out of reach while a task stops (reported once ECS is back),
//! a close with 1008 backing off and reconnecting without asking for the poll endpoint again,
//! every call and the websocket through `HTTP_PROXY` (a counting `CONNECT` proxy) and none with
//! `NO_PROXY`, and the start-up checks (exit 78). The protocol's details: a report refused with an expired
//! token retried until it lands, a manifest entry with desiredStatus STOPPED stopping its task,
//! a fake ECS whose clock is an hour ahead joined after one correction, a deregistered saved
//! instance registering anew, tags at registration and a warning for a credentials file others
//! can read.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;
#[path = "support/proxy.rs"]
mod proxy;

use agent_support::{free_port, http_get_eventually, web_definition, Agent, AgentOptions};
use fake_ecs::{acs_container, acs_task, task_arn, Credentials, FakeEcs};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn ecs_env(fake: &FakeEcs, cluster: &str) -> Vec<(String, String)> {
    [
        fake.agent_env(cluster),
        vec![
            (
                "ECS_INSTANCE_ATTRIBUTES".into(),
                r#"{"stack":"edge-7"}"#.into(),
            ),
            (
                "ECS_CONTAINER_INSTANCE_TAGS".into(),
                r#"{"site":"depot 7"}"#.into(),
            ),
            ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into()),
        ],
    ]
    .concat()
}

/// A fake ECS, a cluster name of its own, and an agent joined to it.
fn ecs_agent(
    docker: deckhand::docker::DockerClient,
    introspection: bool,
) -> (FakeEcs, String, Agent) {
    let fake = FakeEcs::start();
    let cluster = unique_cluster();
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection,
            extra_env: ecs_env(&fake, &cluster),
        },
    );
    (fake, cluster, agent)
}

fn web_task(arn: &str, port: u16, marker: &str) -> Value {
    let script = format!(
        "mkdir -p /www && echo '{marker}' > /www/index.html && exec httpd -f -p 80 -h /www"
    );
    acs_task(
        arn,
        "ecs-web",
        "RUNNING",
        vec![acs_container(
            "web",
            docker_support::TEST_IMAGE,
            &["sh", "-c", &script],
            true,
            &[(80, port, "tcp")],
        )],
    )
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

/// SubmitTaskStateChange requests for `arn` with `status`.
fn state_changes_of(fake: &FakeEcs, arn: &str, status: &str) -> usize {
    fake.state_changes()
        .iter()
        .filter(|change| {
            change.operation == "SubmitTaskStateChange"
                && change.task_arn == arn
                && change.status == status
        })
        .count()
}

/// How often container `name` of `arn` was reported with `status`: carried by a task change,
/// or alone in a SubmitContainerStateChange.
fn container_reports(fake: &FakeEcs, arn: &str, name: &str, status: &str) -> usize {
    fake.state_changes()
        .iter()
        .filter(|change| change.task_arn == arn)
        .map(|change| {
            if change.operation == "SubmitContainerStateChange" {
                usize::from(change.body["containerName"] == name && change.body["status"] == status)
            } else {
                change
                    .containers
                    .iter()
                    .filter(|c| c["containerName"] == name && c["status"] == status)
                    .count()
            }
        })
        .sum()
}

fn http_get_path(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    answer
}

/// Waits until the agent's `ecs.json` records ECS's acknowledgement of RUNNING for every task.
fn wait_for_acknowledged_running(agent: &Agent, ids: &[String]) {
    let path = agent.directory.path.join("data").join("ecs.json");
    let until = deadline();
    loop {
        let record = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .unwrap_or_default();
        let acknowledged = &record["ecs"]["acknowledged"];
        if ids.iter().all(|id| acknowledged[id]["task"] == "RUNNING") {
            return;
        }
        if Instant::now() >= until {
            let missing: Vec<&String> = ids
                .iter()
                .filter(|id| acknowledged[*id]["task"] != "RUNNING")
                .collect();
            panic!(
                "{}: tasks {missing:?} never acknowledged RUNNING (record: {record})",
                path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the agent's `ecs.json` says every event up to `seq` was reported.
fn wait_for_reported_through(agent: &Agent, seq: u64) {
    let path = agent.directory.path.join("data").join("ecs.json");
    let until = deadline();
    loop {
        let through = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .and_then(|record| record["ecs"]["reportedThrough"].as_u64())
            .unwrap_or(0);
        if through >= seq {
            return;
        }
        assert!(
            Instant::now() < until,
            "{} never reached {seq}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn unique_cluster() -> String {
    format!("ecs-{}", &fake_ecs::random_hex32()[..12])
}

#[test]
fn an_ecs_task_runs_under_its_arn_is_reported_verified_and_stopped() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs") else {
        return;
    };
    let fake = FakeEcs::start();
    let cluster = unique_cluster();
    let mut agent = Agent::start(
        docker,
        AgentOptions {
            introspection: true,
            extra_env: ecs_env(&fake, &cluster),
        },
    );

    // Registration: an external instance with what deckhand implements and the custom attribute.
    let registration = fake.wait_for_registrations(1, deadline()).remove(0);
    assert_eq!(registration["cluster"], cluster.as_str());
    let attributes: Vec<&str> = registration["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .filter_map(|attribute| attribute["name"].as_str())
        .collect();
    for expected in [
        "ecs.capability.external",
        "ecs.os-type",
        "ecs.cpu-architecture",
        "com.amazonaws.ecs.capability.docker-remote-api.1.17",
        "com.amazonaws.ecs.capability.task-iam-role",
        "ecs.capability.execution-role-awslogs",
        "ecs.capability.execution-role-ecr-pull",
        "com.amazonaws.ecs.capability.ecr-auth",
        "ecs.capability.secrets.ssm.environment-variables",
        "ecs.capability.secrets.asm.environment-variables",
        "ecs.capability.secrets.ssm.bootstrap.log-driver",
        "ecs.capability.secrets.asm.bootstrap.log-driver",
        "ecs.capability.private-registry-authentication.secretsmanager",
        "stack",
    ] {
        assert!(attributes.contains(&expected), "{expected}: {attributes:?}");
    }
    for absent in ["ecs.capability.task-eni", "ecs.capability.efs"] {
        assert!(!attributes.contains(&absent), "{absent}: {attributes:?}");
    }
    let resources = registration["totalResources"]
        .as_array()
        .expect("resources");
    let cpu = resources.iter().find(|r| r["name"] == "CPU").expect("CPU");
    assert!(cpu["integerValue"].as_u64().unwrap_or(0) >= 1024, "{cpu}");
    assert_eq!(
        registration["tags"],
        serde_json::json!([{"key": "site", "value": "depot 7"}])
    );
    let query = fake.wait_for_acs_session(1, deadline());
    assert_eq!(query.get("protocolVersion").map(String::as_str), Some("2"));
    // The query as the ECS agent sends it: seqNum 1, credentials asked for on the first
    // connection.
    assert_eq!(query.get("seqNum").map(String::as_str), Some("1"));
    assert_eq!(
        query.get("sendCredentials").map(String::as_str),
        Some("true")
    );

    // A figure, not a check: the agent's resident memory, connected, before any task.
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap_or_default();
    let rss = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .unwrap_or("VmRSS: ?");
    println!("idle agent connected to ECS (debug build): {rss}");

    // The introspection endpoint shows the registered ARN.
    let introspection = agent.introspection.expect("introspection");
    let metadata = http_get_path(introspection.port(), "/v1/metadata");
    assert!(metadata.contains(":container-instance/"), "{metadata}");

    // A local task beside it.
    let local_port = free_port();
    let local = agent.submit(&web_definition("local-web", local_port, "local"));
    agent.wait_for_task_status(&local, "RUNNING");

    // A payload: acknowledged, run, reported RUNNING with its container.
    let arn = task_arn(&cluster);
    let port = free_port();
    let payload_id = fake.send_payload(Value::Array(vec![web_task(&arn, port, "from ecs")]), 1);
    fake.wait_for_message(
        |message| {
            message.type_name == "AckRequest" && message.message["messageId"] == payload_id.as_str()
        },
        deadline(),
    );
    let running = fake.wait_for_task_state(&arn, "RUNNING", deadline());
    let container = &running.containers[0];
    assert_eq!(container["containerName"], "web");
    assert!(container["runtimeId"].as_str().is_some(), "{container}");
    assert_eq!(container["networkBindings"][0]["hostPort"], port);
    http_get_eventually(port, "from ecs");
    assert_eq!(containers_of(&arn).len(), 1);

    // `ps` shows the ARN; a local stop is refused, naming ECS.
    let ps = agent.cli(&["ps"]);
    assert!(String::from_utf8_lossy(&ps.stdout).contains(arn.rsplit('/').next().unwrap()));
    let id = arn.rsplit('/').next().unwrap().to_string();
    let stop = agent.request("POST", &format!("/v1/tasks/{id}/stop"), None);
    assert_eq!(stop.status, 409, "{:?}", stop.body);
    assert!(stop.error_message().contains("ECS"), "{:?}", stop.body);

    // Re-delivered: acknowledged again, nothing started twice.
    let again = fake.send_payload(Value::Array(vec![web_task(&arn, port, "from ecs")]), 1);
    fake.wait_for_message(
        |message| {
            message.type_name == "AckRequest" && message.message["messageId"] == again.as_str()
        },
        deadline(),
    );
    assert_eq!(containers_of(&arn).len(), 1);

    // Heartbeat.
    let heartbeat = fake.send_heartbeat();
    fake.wait_for_message(
        |message| {
            message.type_name == "HeartbeatAckRequest"
                && message.message["messageId"] == heartbeat.as_str()
        },
        deadline(),
    );

    // A manifest without the task: deckhand asks to verify, ECS confirms, the task stops.
    fake.send_manifest(&[], 10);
    let verification = fake.wait_for_message(
        |message| message.type_name == "TaskStopVerificationMessage",
        deadline(),
    );
    let candidates = verification.message["stopCandidates"].to_string();
    assert!(candidates.contains(&arn), "{candidates}");
    assert!(!candidates.contains(&local), "{candidates}");
    let verification_id = verification.message["messageId"]
        .as_str()
        .expect("message id")
        .to_string();
    fake.send_stop_verification_ack(&verification_id, &[&arn]);
    let stopped = fake.wait_for_task_state(&arn, "STOPPED", deadline());
    assert!(!stopped.containers.is_empty(), "{stopped:?}");
    // Acknowledged STOPPED: cleaned up.
    let until = deadline();
    while !containers_of(&arn).is_empty() {
        assert!(
            Instant::now() < until,
            "the ECS task's container was never removed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(state_changes_of(&fake, &arn, "RUNNING"), 1);
    assert_eq!(state_changes_of(&fake, &arn, "STOPPED"), 1);
    assert_eq!(container_reports(&fake, &arn, "web", "RUNNING"), 1);
    assert_eq!(container_reports(&fake, &arn, "web", "STOPPED"), 1);
    // The local task was never reported.
    assert!(
        fake.state_changes()
            .iter()
            .all(|change| !change.body.to_string().contains(&local)),
        "{:?}",
        fake.state_changes()
    );

    // A restart registers again under the saved ARN.
    let first_arn = fake.registrations()[0].clone();
    agent.kill9();
    agent.restart();
    let registrations = fake.wait_for_registrations(2, deadline());
    let saved = registrations[1]["containerInstanceArn"]
        .as_str()
        .expect("re-registration carries the saved ARN");
    assert!(
        saved.contains(":container-instance/"),
        "{first_arn} {saved}"
    );
}

#[test]
fn with_ecs_out_of_reach_tasks_keep_running_and_changes_arrive_once_it_is_back() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs offline") else {
        return;
    };
    let (fake, cluster, mut agent) = ecs_agent(docker, false);
    fake.wait_for_acs_session(1, deadline());
    // The server drops the connection, then closes the next one: the agent reconnects each time.
    fake.drop_connection();
    fake.wait_for_acs_session(2, deadline());
    fake.send_close();
    let query = fake.wait_for_acs_session(3, deadline());
    assert!(query.contains_key("seqNum"), "{query:?}");
    let arn = task_arn(&cluster);
    let port = free_port();
    fake.send_payload(Value::Array(vec![web_task(&arn, port, "offline")]), 1);
    fake.wait_for_task_state(&arn, "RUNNING", deadline());
    // ECS's answer is recorded by the agent (a kill before that would make it report RUNNING
    // again, as any at-least-once reporter must).
    wait_for_reported_through(&agent, 1);

    // ECS goes away; the agent restarts meanwhile; the task keeps running.
    fake.set_down(true);
    agent.kill9();
    agent.restart();
    http_get_eventually(port, "offline");
    // The essential container dies while ECS is away: the task stops here all the same.
    let ids = containers_of(&arn);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let killed = Command::new("docker").args(["kill", &ids[0]]).output();
    assert!(killed.map(|o| o.status.success()).unwrap_or(false));
    let id = arn.rsplit('/').next().unwrap().to_string();
    agent.wait_for_task_status(&id, "STOPPED");
    assert_eq!(state_changes_of(&fake, &arn, "STOPPED"), 0);
    // Not removed while ECS has not acknowledged the STOPPED.
    assert_eq!(containers_of(&arn).len(), 1);

    fake.set_down(false);
    let stopped = fake.wait_for_task_state(&arn, "STOPPED", deadline());
    assert_eq!(
        stopped.reason.as_deref(),
        Some("Essential container in task exited"),
        "{stopped:?}"
    );
    let until = deadline();
    while !containers_of(&arn).is_empty() {
        assert!(
            Instant::now() < until,
            "never cleaned up after the acknowledgement"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(state_changes_of(&fake, &arn, "RUNNING"), 1);
    assert_eq!(state_changes_of(&fake, &arn, "STOPPED"), 1);
}

/// The agent binary with only these variables (and a scratch data directory).
fn start_up_error(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let directory = std::env::temp_dir().join(format!("dh-ecs-{}", fake_ecs::random_hex32()));
    std::fs::create_dir_all(&directory).expect("scratch");
    let config = directory.join("deckhand.conf");
    std::fs::write(&config, "").expect("config");
    let output = Command::new(env!("CARGO_BIN_EXE_deckhand"))
        .args(["run", "--config", &config.to_string_lossy()])
        .env_clear()
        .env("ECS_DATADIR", directory.join("data"))
        .env("DECKHAND_API_SOCKET", directory.join("api.sock"))
        .env("DECKHAND_TASKS_DIR", directory.join("tasks.d"))
        .env("HOME", &directory)
        .envs(env.iter().copied())
        .output()
        .expect("run deckhand");
    let _ = std::fs::remove_dir_all(&directory);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn ecs_external_without_a_region_or_credentials_exits_78_saying_why() {
    let (code, stderr) = start_up_error(&[("ECS_EXTERNAL", "true")]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("AWS_REGION") && stderr.contains("AWS_DEFAULT_REGION"),
        "{stderr}"
    );

    let (code, stderr) = start_up_error(&[("ECS_EXTERNAL", "true"), ("AWS_REGION", "us-west-2")]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("AWS_ACCESS_KEY_ID"), "{stderr}");
    assert!(stderr.contains(".aws/credentials"), "{stderr}");

    let (code, stderr) = start_up_error(&[
        ("ECS_EXTERNAL", "true"),
        ("AWS_REGION", "us-west-2"),
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("ECS_INSTANCE_ATTRIBUTES", r#"{"bad name!":"x"}"#),
    ]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("ECS_INSTANCE_ATTRIBUTES") && stderr.contains("bad name!"),
        "{stderr}"
    );

    let (code, stderr) = start_up_error(&[
        ("ECS_EXTERNAL", "true"),
        ("AWS_REGION", "us-west-2"),
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("HTTPS_PROXY", "socks5://proxy.example:1080"),
    ]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("HTTPS_PROXY") && stderr.contains("socks5"),
        "{stderr}"
    );

    let (code, stderr) = start_up_error(&[
        ("ECS_EXTERNAL", "true"),
        ("AWS_REGION", "us-west-2"),
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("ECS_CONTAINER_INSTANCE_TAGS", r#"{"aws:site":"x"}"#),
    ]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("ECS_CONTAINER_INSTANCE_TAGS") && stderr.contains("aws:site"),
        "{stderr}"
    );
}

#[test]
fn a_close_with_1008_backs_off_and_reconnects_to_the_cached_endpoint() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs close code") else {
        return;
    };
    let (fake, _cluster, agent) = ecs_agent(docker, false);
    fake.wait_for_acs_session(1, deadline());
    let calls = fake.counters().api_requests;
    // Past the first second of the session, where any close backs off (SHORT_LIVED): what
    // follows is the close code's doing.
    std::thread::sleep(Duration::from_millis(1200));
    let closed_at = Instant::now();
    fake.close_with_code(1008);
    fake.wait_for_acs_session(2, deadline());
    let waited = closed_at.elapsed();
    let line = agent.wait_for_log("closed the connection with code 1008");
    assert!(!line.contains("after it opened"), "{line}");
    // 1008 is not a close "for a valid reason": the reconnect backs off (250 ms at least),
    assert!(
        waited >= Duration::from_millis(250),
        "reconnected after {waited:?}"
    );
    // and goes to the poll endpoint already known: no DiscoverPollEndpoint (no API call) again.
    assert_eq!(fake.counters().api_requests, calls);
}

#[test]
fn all_ecs_traffic_goes_through_the_proxy_and_none_when_no_proxy_covers_the_endpoint() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs proxy") else {
        return;
    };
    let proxy = proxy::TestProxy::start();
    let fake = FakeEcs::start();
    let cluster = unique_cluster();
    let mut env = ecs_env(&fake, &cluster);
    // The fake's endpoint is http://127.0.0.1:<port>: HTTP_PROXY is the one that applies.
    env.push(("HTTP_PROXY".into(), proxy.url()));
    let agent = Agent::start(
        docker.clone(),
        AgentOptions {
            introspection: false,
            extra_env: env.clone(),
        },
    );
    fake.wait_for_acs_session(1, deadline());
    drop(agent);
    let fake_target = format!("127.0.0.1:{}", fake.port());
    let targets = proxy.targets();
    // RegisterContainerInstance, DiscoverPollEndpoint and the ACS websocket at least, each its
    // own tunnel to the fake, and the fake saw no connection that did not come through one.
    assert!(targets.len() >= 3, "{targets:?}");
    assert!(
        targets.iter().all(|target| *target == fake_target),
        "{targets:?}"
    );
    assert_eq!(fake.counters().connections, targets.len() as u64);

    // The same agent with NO_PROXY covering the endpoint: not one CONNECT more.
    let before = proxy.connects();
    let fake = FakeEcs::start();
    let mut env = ecs_env(&fake, &unique_cluster());
    env.push(("HTTP_PROXY".into(), proxy.url()));
    env.push(("NO_PROXY".into(), "localhost,127.0.0.0/8".into()));
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: env,
        },
    );
    fake.wait_for_acs_session(1, deadline());
    drop(agent);
    assert_eq!(proxy.connects(), before, "{:?}", proxy.targets());
    assert!(fake.counters().connections >= 3);
}

#[test]
fn kill_9_between_payload_and_ack_twenty_times_leaves_one_container_set_and_one_report_per_change()
{
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs crash loop") else {
        return;
    };
    let (fake, cluster, mut agent) = ecs_agent(docker, false);
    fake.wait_for_acs_session(1, deadline());
    let mut tasks: Vec<(String, Value)> = Vec::new();
    let rounds = 20u64;
    for round in 0..rounds {
        let arn = task_arn(&cluster);
        let task = web_task(&arn, free_port(), &format!("round {round}"));
        tasks.push((arn, task));
        // ACS sends what it has not seen acknowledged again: every task so far, each time.
        let payload = Value::Array(tasks.iter().map(|(_, task)| task.clone()).collect());
        let sessions = fake.counters().acs_sessions;
        fake.send_payload(payload, 2 * round + 1);
        // The kill lands anywhere from just after the payload arrived to just after its ack.
        std::thread::sleep(Duration::from_millis(5 * (round % 5)));
        agent.kill9();
        agent.restart();
        fake.wait_for_acs_session(sessions + 1, deadline());
        // ECS sends it again; once acknowledged, every task so far runs and is reported, and
        // the agent has recorded ECS's answers (so the next kill, aimed at the next payload, is
        // not also a kill between a report and its record — that window makes any reporter
        // at-least-once, and is not what this test is about).
        let payload = Value::Array(tasks.iter().map(|(_, task)| task.clone()).collect());
        let again = fake.send_payload(payload, 2 * round + 2);
        fake.wait_for_message(
            |message| {
                message.type_name == "AckRequest" && message.message["messageId"] == again.as_str()
            },
            deadline(),
        );
        let ids: Vec<String> = tasks
            .iter()
            .map(|(arn, _)| arn.rsplit('/').next().unwrap_or_default().to_string())
            .collect();
        wait_for_acknowledged_running(&agent, &ids);
    }
    for (arn, _) in &tasks {
        fake.wait_for_task_state(arn, "RUNNING", deadline());
        assert_eq!(containers_of(arn).len(), 1, "{arn}: one container set");
    }
    // Every change reported once: nothing is sent twice once ECS acknowledged it (a kill can
    // land between ECS's answer and the agent's record of it only after a report, which these
    // kills, right after a payload, rarely hit; the count says if one did).
    for (arn, _) in &tasks {
        assert_eq!(
            state_changes_of(&fake, arn, "RUNNING"),
            1,
            "{arn}: {:#?}",
            fake.state_changes()
        );
    }
    let registrations = fake.registrations();
    let first = registrations[0]["containerInstanceArn"].clone();
    assert!(
        registrations[1..]
            .iter()
            .all(|registration| registration["containerInstanceArn"].is_string()),
        "every re-registration carries the saved ARN: {first} {registrations:?}"
    );
}

/// A measurement, not a check (`cargo build --release && cargo test --test agent_ecs --
/// --ignored --nocapture`): the stripped release binary's resident memory once it registered
/// and holds the ACS session, idle, against the fake ECS.
#[test]
#[ignore]
fn idle_rss_of_the_release_binary_connected_to_ecs() {
    let binary = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/deckhand");
    assert!(binary.exists(), "build it first: cargo build --release");
    let fake = FakeEcs::start();
    let cluster = unique_cluster();
    let directory = std::env::temp_dir().join(format!("dh-ecs-rss-{}", fake_ecs::random_hex32()));
    std::fs::create_dir_all(directory.join("tasks.d")).expect("scratch");
    let config = directory.join("deckhand.conf");
    std::fs::write(&config, "").expect("config");
    let mut child = Command::new(&binary)
        .args(["run", "--config", &config.to_string_lossy()])
        .env("ECS_DATADIR", directory.join("data"))
        .env("DECKHAND_API_SOCKET", directory.join("api.sock"))
        .env("DECKHAND_TASKS_DIR", directory.join("tasks.d"))
        .env("DECKHAND_INTROSPECTION_ADDR", "")
        .env("DECKHAND_TASK_METADATA", "false")
        .envs(ecs_env(&fake, &cluster))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the release binary");
    fake.wait_for_acs_session(1, deadline());
    // Settled: the session is open and nothing else happens.
    std::thread::sleep(Duration::from_secs(2));
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    for line in status.lines().filter(|line| {
        ["VmRSS:", "RssAnon:", "RssFile:", "Threads:"]
            .iter()
            .any(|name| line.starts_with(name))
    }) {
        println!("release binary, registered, ACS session open, no task: {line}");
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_deregistered_instance_says_so_and_local_tasks_run_on() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs inactive") else {
        return;
    };
    let fake = FakeEcs::start();
    fake.set_inactive(true);
    let cluster = unique_cluster();
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: ecs_env(&fake, &cluster),
        },
    );
    let line = agent.wait_for_log("this container instance is deregistered");
    assert!(line.contains("InactiveInstanceException"), "{line}");
    assert!(line.contains("in an hour"), "{line}");
    let port = free_port();
    let local = agent.submit(&web_definition("local-web", port, "still here"));
    agent.wait_for_task_status(&local, "RUNNING");
    http_get_eventually(port, "still here");
    // It does not hammer ECS meanwhile: one registration attempt, refused, and no session.
    assert_eq!(fake.registrations().len(), 1);
    assert_eq!(fake.counters().acs_sessions, 0);
}

/// The status each call of `operation` was answered with, in order, once `count` were.
fn answers_to(fake: &FakeEcs, operation: &str, count: usize) -> Vec<u16> {
    fake.wait_for_answers(operation, count, deadline())
}

#[test]
fn a_report_refused_with_an_expired_token_three_times_lands_on_the_fourth_try() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs expired token") else {
        return;
    };
    let (fake, cluster, _agent) = ecs_agent(docker, false);
    fake.wait_for_acs_session(1, deadline());
    // The SSM agent is rotating the credentials: ECS refuses the old token a while.
    fake.fail_next(
        "SubmitTaskStateChange",
        3,
        400,
        "ExpiredTokenException",
        "The security token included in the request is expired",
    );
    let arn = task_arn(&cluster);
    fake.send_payload(
        Value::Array(vec![web_task(&arn, free_port(), "expired")]),
        1,
    );
    let running = fake.wait_for_task_state(&arn, "RUNNING", deadline());
    assert_eq!(running.containers[0]["containerName"], "web");
    assert_eq!(
        answers_to(&fake, "SubmitTaskStateChange", 4),
        [400, 400, 400, 200]
    );
    assert_eq!(state_changes_of(&fake, &arn, "RUNNING"), 1);
}

#[test]
fn a_manifest_entry_with_desired_status_stopped_stops_the_task() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs manifest") else {
        return;
    };
    let (fake, cluster, _agent) = ecs_agent(docker, false);
    let query = fake.wait_for_acs_session(1, deadline());
    let (kept, stopped) = (task_arn(&cluster), task_arn(&cluster));
    fake.send_payload(
        Value::Array(vec![
            web_task(&kept, free_port(), "kept"),
            web_task(&stopped, free_port(), "stopped"),
        ]),
        1,
    );
    fake.wait_for_task_state(&kept, "RUNNING", deadline());
    fake.wait_for_task_state(&stopped, "RUNNING", deadline());

    // The manifest lists both; one with desiredStatus STOPPED.
    let manifest = fake.send_manifest(&[(&kept, "RUNNING"), (&stopped, "STOPPED")], 10);
    let verification = fake.wait_for_message(
        |message| message.type_name == "TaskStopVerificationMessage",
        deadline(),
    );
    assert_eq!(verification.message["messageId"], manifest.as_str());
    // The candidate in the ECS agent's TaskIdentifier shape.
    assert_eq!(
        verification.message["stopCandidates"],
        serde_json::json!([{
            "taskArn": stopped,
            "desiredStatus": "STOPPED",
            "taskClusterArn": query["clusterArn"],
        }])
    );
    fake.send_stop_verification_ack(&manifest, &[&stopped]);
    fake.wait_for_task_state(&stopped, "STOPPED", deadline());
    assert_eq!(state_changes_of(&fake, &kept, "STOPPED"), 0);
    assert_eq!(containers_of(&kept).len(), 1);
}

#[test]
fn a_fake_ecs_an_hour_ahead_is_joined_after_one_correction() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs skewed clock") else {
        return;
    };
    let fake = FakeEcs::start();
    fake.set_clock_ahead(3600);
    let cluster = unique_cluster();
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: ecs_env(&fake, &cluster),
        },
    );
    // Registered, the poll endpoint found and the ACS upgrade accepted, each signed with the
    // fake's time once the first refusal taught it.
    fake.wait_for_acs_session(1, deadline());
    assert_eq!(fake.counters().signature_failures, 1);
    assert_eq!(answers_to(&fake, "RegisterContainerInstance", 1), [200]);
    assert_eq!(answers_to(&fake, "DiscoverPollEndpoint", 1), [200]);
    let line = agent.wait_for_log("behind ECS's");
    assert!(line.contains("359") || line.contains("360"), "{line}");
    let corrections = agent
        .log()
        .iter()
        .filter(|line| line.contains("behind ECS's"))
        .count();
    assert_eq!(corrections, 1, "{:?}", agent.log());
    // Later calls are signed right the first time: a report lands without a refusal.
    let arn = task_arn(&cluster);
    fake.send_payload(Value::Array(vec![web_task(&arn, free_port(), "skewed")]), 1);
    fake.wait_for_task_state(&arn, "RUNNING", deadline());
    assert_eq!(answers_to(&fake, "SubmitTaskStateChange", 1), [200]);
    assert_eq!(fake.counters().signature_failures, 1);
}

#[test]
fn a_saved_instance_ecs_says_is_inactive_registers_anew() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs re-register") else {
        return;
    };
    let (fake, _cluster, mut agent) = ecs_agent(docker, false);
    let first = fake.wait_for_acs_session(1, deadline());
    let old_arn = first["containerInstanceArn"].clone();
    agent.kill9();
    // Deregistered while the host was away.
    fake.deregister(&old_arn);
    agent.restart();
    let registrations = fake.wait_for_registrations(3, deadline());
    assert_eq!(registrations[1]["containerInstanceArn"], old_arn.as_str());
    assert!(
        registrations[2].get("containerInstanceArn").is_none(),
        "a fresh registration: {}",
        registrations[2]
    );
    let line = agent.wait_for_log("registering as a new instance");
    assert!(line.contains("InactiveInstanceException"), "{line}");
    let second = fake.wait_for_acs_session(2, deadline());
    let new_arn = second["containerInstanceArn"].clone();
    assert_ne!(new_arn, old_arn);
    let record: Value = serde_json::from_slice(
        &std::fs::read(agent.directory.path.join("data").join("ecs.json")).expect("ecs.json"),
    )
    .expect("JSON");
    assert_eq!(record["ecs"]["containerInstanceArn"], new_arn.as_str());
    assert_eq!(
        answers_to(&fake, "RegisterContainerInstance", 3),
        [200, 400, 200]
    );
}

#[test]
fn a_credentials_file_others_can_read_is_used_with_a_warning() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs credentials file") else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeEcs::start();
    let cluster = unique_cluster();
    let credentials = Credentials::test();
    let directory = std::env::temp_dir().join(format!("dh-creds-{}", fake_ecs::random_hex32()));
    std::fs::create_dir_all(&directory).expect("scratch");
    let file = directory.join("credentials");
    std::fs::write(
        &file,
        format!(
            "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\naws_session_token = {}\n",
            credentials.access_key,
            credentials.secret_key,
            credentials.session_token.clone().unwrap_or_default()
        ),
    )
    .expect("credentials file");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut env: Vec<(String, String)> = ecs_env(&fake, &cluster)
        .into_iter()
        .filter(|(key, _)| {
            !key.starts_with("AWS_ACCESS")
                && !key.starts_with("AWS_SECRET")
                && key != "AWS_SESSION_TOKEN"
        })
        .collect();
    env.push((
        "AWS_SHARED_CREDENTIALS_FILE".into(),
        file.to_string_lossy().into_owned(),
    ));
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: env,
        },
    );
    fake.wait_for_acs_session(1, deadline());
    let line = agent.wait_for_log("is readable by its group and others (mode 0644)");
    assert!(
        line.contains(&file.to_string_lossy().into_owned()),
        "{line}"
    );
    let warnings = agent
        .log()
        .iter()
        .filter(|line| line.contains("readable by its group"))
        .count();
    assert_eq!(warnings, 1, "once, not per request: {:?}", agent.log());
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn with_the_task_metadata_port_taken_no_task_role_capability_is_advertised() {
    let Some(docker) = docker_support::docker_client_or_skip("agent ecs metadata port taken")
    else {
        return;
    };
    // Another program holds the port on 127.0.0.1: the listener that would serve the
    // credentials cannot start, so ECS must not place tasks with roles here.
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind a port");
    let port = taken.local_addr().expect("its address").port();
    let fake = FakeEcs::start();
    let cluster = unique_cluster();
    let mut env = ecs_env(&fake, &cluster);
    env.push(("DECKHAND_TASK_METADATA_PORT".into(), port.to_string()));
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: env,
        },
    );
    let registration = fake.wait_for_registrations(1, deadline()).remove(0);
    let attributes: Vec<&str> = registration["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .filter_map(|attribute| attribute["name"].as_str())
        .collect();
    for absent in [
        "com.amazonaws.ecs.capability.task-iam-role",
        "com.amazonaws.ecs.capability.task-iam-role-network-host",
        "ecs.capability.execution-role-awslogs",
    ] {
        assert!(!attributes.contains(&absent), "{absent}: {attributes:?}");
    }
    // What needs no listener is still there.
    assert!(
        attributes.contains(&"ecs.capability.execution-role-ecr-pull"),
        "{attributes:?}"
    );
    agent.wait_for_log("task IAM role capabilities are not advertised");
    drop(taken);
}
