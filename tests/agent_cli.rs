//! The whole agent (`deckhand run`) on real Docker, driven through the CLI and its two HTTP
//! surfaces: submit/ps/inspect/events/stop, the introspection endpoint and its filters, bad
//! input that must not disturb a running task, and SIGTERM leaving containers running.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{free_port, http_get_eventually, web_definition, Agent, AgentOptions};
use deckhand::api::http::{percent_encode, read_response, write_request};
use deckhand::runtime::ContainerRuntime;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn introspection_get(agent: &Agent, target: &str) -> (u16, serde_json::Value) {
    let address = agent.introspection.expect("introspection enabled");
    let mut stream = std::net::TcpStream::connect(address).expect("connect introspection");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write_request(&mut stream, "GET", target, None).expect("request");
    let response = read_response(&mut stream, 1 << 20).expect("response");
    let body = serde_json::from_slice(&response.body).unwrap_or(serde_json::Value::Null);
    (response.status, body)
}

#[test]
fn submit_ps_inspect_events_and_stop_through_the_cli() {
    let Some(docker) = docker_support::docker_client_or_skip("agent submit/ps/inspect/stop") else {
        return;
    };
    let agent = Agent::start(docker, AgentOptions::default());
    let version_line = agent.wait_for_log("Docker Engine ");
    assert!(version_line.contains("(negotiated"), "{version_line}");

    let port = free_port();
    let id = agent.submit(&web_definition("cli-web", port, "cli-web"));
    assert_eq!(id.len(), 32);
    agent.wait_for_task_status(&id, "RUNNING");
    let page = http_get_eventually(port, "hello from cli-web");
    assert!(page.contains("hello from cli-web"), "{page}");

    let ps = agent.cli(&["ps"]);
    assert_eq!(ps.status.code(), Some(0));
    let table = text(&ps.stdout);
    let row = table
        .lines()
        .find(|line| line.starts_with(&id))
        .expect("ps row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[1..5],
        ["cli-web:0", "RUNNING", "RUNNING", "1/1"],
        "{table}"
    );

    // A container becomes RUNNING with its start call's answer, which carries the inspection
    // with the ports: a task seen RUNNING already shows them.
    let inspect = agent.cli(&["inspect", &id[..8]]);
    assert_eq!(inspect.status.code(), Some(0));
    let view: serde_json::Value = serde_json::from_slice(&inspect.stdout).expect("JSON");
    assert_eq!(view["KnownStatus"], "RUNNING");
    let container = &view["Containers"][0];
    let docker_id = container["DockerId"]
        .as_str()
        .expect("DockerId")
        .to_string();
    assert!(container["StartedAt"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert_eq!(container["Ports"][0]["HostPort"], port);
    // The labels shown are the labels Docker has.
    let info = agent
        .docker
        .inspect_container(&docker_id)
        .expect("docker inspect");
    for key in [
        "com.amazonaws.ecs.task-arn",
        "com.amazonaws.ecs.container-name",
        "com.amazonaws.ecs.task-definition-family",
        "com.amazonaws.ecs.task-definition-version",
        "com.amazonaws.ecs.cluster",
        "test-marker",
    ] {
        assert_eq!(
            container["Labels"][key].as_str(),
            info.labels.get(key).map(String::as_str),
            "{key}"
        );
    }
    assert_eq!(info.labels["com.amazonaws.ecs.cluster"], agent.cluster);

    let stop = agent.cli(&["stop", "--wait", &id]);
    assert_eq!(stop.status.code(), Some(0), "{}", text(&stop.stderr));
    assert_eq!(agent.inspect(&id)["KnownStatus"], "STOPPED");
    let info = agent
        .docker
        .inspect_container(&docker_id)
        .expect("docker inspect");
    assert!(!info.state.running, "the container really stopped");

    let events = agent.cli(&["events"]);
    let lines: Vec<serde_json::Value> = text(&events.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .filter(|event: &serde_json::Value| event["task"] == id.as_str())
        .collect();
    let statuses: Vec<(bool, &str)> = lines
        .iter()
        .map(|event| {
            (
                event.get("container").is_some(),
                event["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (true, "RUNNING"),
            (false, "RUNNING"),
            (true, "STOPPED"),
            (false, "STOPPED")
        ],
        "{lines:?}"
    );
    assert!(
        lines[2]["exitCode"].is_i64(),
        "the stopped container has an exit code"
    );
    assert!(lines[0]["time"].as_str().is_some_and(|t| t.ends_with('Z')));
}

fn agent_inspect_status(agent: &Agent, id: &str) -> (u16, serde_json::Value) {
    let response = agent.request("GET", &format!("/v1/tasks/{id}"), None);
    (response.status, response.body)
}

#[test]
fn introspection_answers_as_ecs_does() {
    let Some(docker) = docker_support::docker_client_or_skip("agent introspection") else {
        return;
    };
    let agent = Agent::start(docker, AgentOptions::default());
    let id = agent.submit(&web_definition("intro", free_port(), "intro"));
    agent.wait_for_task_status(&id, "RUNNING");
    let arn = format!("arn:aws:ecs:local:000000000000:task/{}/{id}", agent.cluster);

    let (status, metadata) = introspection_get(&agent, "/v1/metadata");
    assert_eq!(status, 200);
    assert_eq!(metadata["Cluster"], agent.cluster.as_str());
    assert!(metadata["Version"]
        .as_str()
        .is_some_and(|v| v.starts_with("deckhand v")));

    let (status, list) = introspection_get(&agent, "/v1/tasks");
    assert_eq!(status, 200);
    let task = list["Tasks"]
        .as_array()
        .and_then(|tasks| tasks.iter().find(|task| task["Arn"] == arn.as_str()))
        .expect("our task is listed");
    assert_eq!(task["KnownStatus"], "RUNNING");
    assert_eq!(task["DesiredStatus"], "RUNNING");
    assert_eq!(task["Family"], "intro");
    let docker_id = task["Containers"][0]["DockerId"]
        .as_str()
        .expect("DockerId")
        .to_string();
    assert_eq!(task["Containers"][0]["Name"], "web");
    // Networks and addresses are Docker's own.
    let inspected = agent
        .docker
        .inspect_container(&docker_id)
        .expect("inspect the task's container");
    let (network, address) = inspected.networks.first().expect("attached to a network");
    assert_eq!(network, "bridge");
    assert!(
        address.starts_with(|c: char| c.is_ascii_digit()),
        "{address}"
    );
    // A container becomes RUNNING with its start call's answer, which carries the inspection
    // with the addresses: a task seen RUNNING already shows them.
    let expected = serde_json::json!([{"NetworkMode": "bridge", "IPv4Addresses": [address]}]);
    let (status, task) = introspection_get(&agent, &format!("/v1/tasks?dockerid={docker_id}"));
    assert_eq!(status, 200);
    assert_eq!(task["Containers"][0]["Networks"], expected);
    let (status, metadata) = agent_inspect_status(&agent, &id);
    assert_eq!(status, 200);
    assert_eq!(
        metadata["Containers"][0]["Networks"], task["Containers"][0]["Networks"],
        "deckhand inspect shows the same networks"
    );

    for target in [
        format!("/v1/tasks?taskarn={}", percent_encode(&arn)),
        format!("/v1/tasks?dockerid={docker_id}"),
        format!("/v1/tasks?dockerid={}", &docker_id[..12]),
    ] {
        let (status, one) = introspection_get(&agent, &target);
        assert_eq!(status, 200, "{target}");
        assert_eq!(one["Arn"], arn.as_str(), "{target}");
    }
    let (status, _) = introspection_get(
        &agent,
        &format!(
            "/v1/tasks?taskarn={}&dockerid={docker_id}",
            percent_encode(&arn)
        ),
    );
    assert_eq!(status, 400, "both filters");
    let (status, _) = introspection_get(&agent, "/v1/tasks?dockerid=000000000000");
    assert_eq!(status, 404);
}

#[test]
fn bad_input_gets_the_right_status_and_the_agent_keeps_serving() {
    let Some(docker) = docker_support::docker_client_or_skip("agent bad input") else {
        return;
    };
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            ..AgentOptions::default()
        },
    );
    let id = agent.submit(&web_definition("steady", free_port(), "steady"));
    agent.wait_for_task_status(&id, "RUNNING");

    let malformed = agent.request("POST", "/v1/tasks", Some(b"{\"family\": "));
    assert_eq!(malformed.status, 400);
    assert!(!malformed.error_message().is_empty());

    let invalid = agent.request(
        "POST",
        "/v1/tasks",
        Some(br#"{"family":"x","containerDefinitions":[{"name":"a","dependsOn":[{"containerName":"db","condition":"START"}]}]}"#),
    );
    assert_eq!(invalid.status, 400);
    assert!(
        invalid.body["errors"]
            .as_array()
            .is_some_and(|e| e.len() >= 2),
        "{:?}",
        invalid.body
    );

    // 2 MiB: answered 413 right after the head, without the body being read.
    let mut stream = UnixStream::connect(agent.socket_path()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n")
        .expect("head");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(
        text(&answer).starts_with("HTTP/1.1 413 "),
        "{}",
        text(&answer)
    );

    let unknown = agent.request("GET", "/v1/tasks/0123456789abcdef0123456789abcdef", None);
    assert_eq!(unknown.status, 404);
    assert!(unknown.error_message().contains("no task"));
    let wrong_method = agent.request("DELETE", &format!("/v1/tasks/{id}"), None);
    assert_eq!(wrong_method.status, 405);
    let cli_unknown = agent.cli(&["stop", "0123456789abcdef"]);
    assert_eq!(cli_unknown.status.code(), Some(2));
    assert!(text(&cli_unknown.stderr).contains("no task 0123456789abcdef"));

    // The agent still serves, and the task is untouched.
    assert_eq!(agent.request("GET", "/v1/metadata", None).status, 200);
    let view = agent.inspect(&id);
    assert_eq!(view["DesiredStatus"], "RUNNING");
    assert_eq!(view["KnownStatus"], "RUNNING");
    let submits = agent
        .log()
        .iter()
        .filter(|line| line.contains("accepted through the API"))
        .count();
    assert_eq!(submits, 1, "no bad request created a task");
}

#[test]
fn sigterm_exits_0_promptly_and_leaves_the_containers_running() {
    let Some(docker) = docker_support::docker_client_or_skip("agent SIGTERM") else {
        return;
    };
    let mut agent = Agent::start(docker, AgentOptions::default());
    let id = agent.submit(&web_definition("survivor", free_port(), "survivor"));
    agent.wait_for_task_status(&id, "RUNNING");
    let docker_id = agent.inspect(&id)["Containers"][0]["DockerId"]
        .as_str()
        .expect("DockerId")
        .to_string();
    // A client waiting in a long poll must not hold the shutdown up.
    let poller = {
        let client = agent.client();
        std::thread::spawn(move || {
            client.request(
                "GET",
                "/v1/events?since=1000000&wait=60",
                None,
                Duration::from_secs(70),
            )
        })
    };
    agent.signal("TERM");
    let (status, took) = agent.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    let _ = poller.join();
    assert!(!agent.socket_path().exists(), "the socket is removed");
    let info = agent
        .docker
        .inspect_container(&docker_id)
        .expect("container still there");
    assert!(
        info.state.running,
        "the container keeps running after the agent exits"
    );
    // The CLI now explains that the agent is not there.
    let output = agent.cli(&["ps"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("deckhand run"));
}
