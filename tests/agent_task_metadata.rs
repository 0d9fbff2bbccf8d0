//! The task metadata endpoint in the whole agent on real Docker (docs/ENGINE.md §14): a busybox
//! container fetches its own metadata, its task's and the stats with `wget` from the URI in
//! `ECS_CONTAINER_METADATA_URI_V4` and writes them to a bind-mounted scratch directory, which
//! the test reads; the same URI keeps answering after the agent is killed and restarted; with
//! `DECKHAND_TASK_METADATA=false` containers get no variables. Each agent listens on a free port
//! of its own, never on 51679.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{free_port, Agent, AgentOptions};
use deckhand::runtime::ContainerRuntime;
use docker_support::{TempDir, TEST_IMAGE};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

const FILE_DEADLINE: Duration = Duration::from_secs(60);

fn metadata_agent(port: u16, extra: &[(&str, &str)]) -> Option<Agent> {
    let docker = docker_support::docker_client_or_skip("agent task metadata")?;
    let mut extra_env = vec![("DECKHAND_TASK_METADATA_PORT".to_string(), port.to_string())];
    extra_env.extend(
        extra
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string())),
    );
    Some(Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env,
        },
    ))
}

/// Waits until `path` exists (the container writes each file whole, with `mv`) and reads it.
fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + FILE_DEADLINE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} was not written within {FILE_DEADLINE:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn json_file(path: &Path) -> Value {
    let text = wait_for_file(path);
    serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("{}: {error}: {text}", path.display()))
}

/// One HTTP/1.0 request from the test process: (status, body).
fn http(address: &str, method: &str, path: &str) -> (u16, String) {
    let mut stream =
        TcpStream::connect(address).unwrap_or_else(|error| panic!("{address}: {error}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: test\r\nContent-Length: 0\r\n\r\n"
    )
    .expect("request written");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A shell loop that fetches `$ECS_CONTAINER_METADATA_URI_V4<suffix>` into `/out/<file>` until the
/// answer shows the container RUNNING (the agent may not have seen the start yet when the
/// container's first command runs), writing it whole with `mv`.
fn fetch_until_running(suffix: &str, file: &str) -> String {
    format!(
        "for i in $(seq 1 300); do \
           wget -q -O /out/{file}.tmp \"$ECS_CONTAINER_METADATA_URI_V4{suffix}\" \
             && grep -q '\"KnownStatus\":\"RUNNING\"' /out/{file}.tmp && break; \
           sleep 0.2; \
         done; mv /out/{file}.tmp /out/{file}"
    )
}

fn definition(family: &str, network_mode: &str, out: &Path, script: &str) -> String {
    let script = serde_json::to_string(script).expect("a JSON string");
    format!(
        r#"{{"family": "{family}", "networkMode": "{network_mode}",
            "volumes": [{{"name": "out", "host": {{"sourcePath": "{out}"}}}}],
            "containerDefinitions": [{{
              "name": "reader", "image": "{TEST_IMAGE}", "essential": true,
              "cpu": 128, "memory": 64,
              "environment": [{{"name": "ECS_CONTAINER_METADATA_URI_V4", "value": "http://not-this"}}],
              "dockerLabels": {{"test-role": "metadata-reader"}},
              "command": ["sh", "-c", {script}],
              "mountPoints": [{{"sourceVolume": "out", "containerPath": "/out"}}],
              "stopTimeout": 1
            }}]}}"#,
        out = out.display()
    )
}

#[test]
fn a_container_reads_its_own_metadata_its_task_and_stats() {
    let port = free_port();
    let Some(agent) = metadata_agent(port, &[]) else {
        return;
    };
    let out = TempDir::new("dh-metadata-out");
    let script = format!(
        "env > /out/env.tmp; mv /out/env.tmp /out/env; {}; {}; \
         wget -q -O /out/stats.tmp \"$ECS_CONTAINER_METADATA_URI_V4/stats\"; mv /out/stats.tmp /out/stats.json; \
         wget -q -O /out/taskstats.tmp \"$ECS_CONTAINER_METADATA_URI_V4/task/stats\"; mv /out/taskstats.tmp /out/taskstats.json; \
         wget -q -O /out/v3.tmp \"$ECS_CONTAINER_METADATA_URI\"; mv /out/v3.tmp /out/v3.json; \
         exec sleep 600",
        fetch_until_running("", "meta.json"),
        fetch_until_running("/task", "task.json"),
    );
    let id = agent.submit(&definition("metaread", "bridge", out.path(), &script));

    let env = wait_for_file(&out.path.join("env"));
    let uri = env
        .lines()
        .find_map(|line| line.strip_prefix("ECS_CONTAINER_METADATA_URI_V4="))
        .unwrap_or_else(|| panic!("no ECS_CONTAINER_METADATA_URI_V4 in {env}"))
        .to_string();
    let gateway = agent
        .docker
        .bridge_gateway()
        .expect("Docker answers")
        .expect("the default bridge has a gateway");
    assert!(
        uri.starts_with(&format!("http://{gateway}:{port}/v4/")),
        "the agent's URI, on the bridge gateway, replaced the definition's own: {uri}"
    );
    let token = uri.rsplit('/').next().expect("a token");
    assert_eq!(token.len(), 32, "{uri}");
    let v3_uri = env
        .lines()
        .find_map(|line| line.strip_prefix("ECS_CONTAINER_METADATA_URI="))
        .expect("ECS_CONTAINER_METADATA_URI");
    assert_eq!(v3_uri, uri.replace("/v4/", "/v3/"));

    let container = json_file(&out.path.join("meta.json"));
    let docker_id = container["DockerId"]
        .as_str()
        .expect("DockerId")
        .to_string();
    assert_eq!(docker_id.len(), 64, "{container}");
    assert_eq!(container["Name"], "reader");
    assert_eq!(container["Image"], TEST_IMAGE);
    assert!(
        container["DockerName"]
            .as_str()
            .is_some_and(|name| name.starts_with("deckhand-metaread-")),
        "{container}"
    );
    assert!(container["ImageID"]
        .as_str()
        .is_some_and(|image| image.starts_with("sha256:")));
    assert_eq!(container["KnownStatus"], "RUNNING");
    assert_eq!(container["DesiredStatus"], "RUNNING");
    assert_eq!(container["Labels"]["test-role"], "metadata-reader");
    assert_eq!(
        container["Labels"]["com.amazonaws.ecs.container-name"],
        "reader"
    );
    assert_eq!(
        container["Labels"]["com.amazonaws.ecs.cluster"],
        Value::String(agent.cluster.clone())
    );
    assert_eq!(container["Limits"]["CPU"].as_f64(), Some(128.0));
    assert_eq!(container["Limits"]["Memory"], 64);
    assert_eq!(container["Type"], "NORMAL");
    assert!(container["StartedAt"].is_string(), "{container}");
    let network = &container["Networks"][0];
    assert_eq!(network["NetworkMode"], "bridge", "{container}");
    let address = network["IPv4Addresses"][0]
        .as_str()
        .expect("an IPv4 address");
    assert!(address.parse::<std::net::Ipv4Addr>().is_ok(), "{address}");

    let task = json_file(&out.path.join("task.json"));
    assert_eq!(task["Cluster"], Value::String(agent.cluster.clone()));
    assert!(task["TaskARN"]
        .as_str()
        .is_some_and(|arn| arn.ends_with(&format!("/{id}"))));
    assert_eq!(task["Family"], "metaread");
    assert_eq!(
        task["Revision"], container["Labels"]["com.amazonaws.ecs.task-definition-version"],
        "a string, as in the label"
    );
    assert_eq!(task["KnownStatus"], "RUNNING");
    assert_eq!(task["LaunchType"], "EXTERNAL");
    assert_eq!(
        task["Containers"][0]["DockerId"],
        Value::String(docker_id.clone())
    );
    assert!(task["PullStartedAt"].is_string(), "{task}");

    let stats = json_file(&out.path.join("stats.json"));
    assert!(stats["memory_stats"].is_object(), "Docker's stats: {stats}");
    assert!(stats["cpu_stats"].is_object(), "{stats}");
    let task_stats = json_file(&out.path.join("taskstats.json"));
    assert!(
        task_stats[&docker_id]["memory_stats"].is_object(),
        "{task_stats}"
    );

    let v3 = json_file(&out.path.join("v3.json"));
    assert_eq!(v3["DockerId"], Value::String(docker_id));
    assert!(v3.get("LogDriver").is_none());

    // From the host: read-only, and a token no container has is not found.
    let host = uri
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("host:port")
        .to_string();
    let loopback = format!("127.0.0.1:{port}");
    for address in [host.as_str(), loopback.as_str()] {
        let path = format!("/v4/{token}");
        assert_eq!(http(address, "GET", &path).0, 200, "{address}");
        assert_eq!(http(address, "POST", &path).0, 405, "{address}");
        assert_eq!(
            http(address, "PUT", &format!("{path}/task")).0,
            405,
            "{address}"
        );
        let wrong = format!("/v4/{}", "0".repeat(32));
        assert_eq!(http(address, "GET", &wrong).0, 404, "{address}");
        assert_eq!(
            http(address, "GET", &format!("{wrong}/task")).0,
            404,
            "{address}"
        );
    }
}

#[test]
fn a_host_mode_container_reaches_the_endpoint_on_loopback() {
    let port = free_port();
    let Some(agent) = metadata_agent(port, &[]) else {
        return;
    };
    let out = TempDir::new("dh-metadata-host");
    let script = format!(
        "env > /out/env.tmp; mv /out/env.tmp /out/env; {}; exec sleep 600",
        fetch_until_running("", "meta.json")
    );
    agent.submit(&definition("metahost", "host", out.path(), &script));
    let env = wait_for_file(&out.path.join("env"));
    assert!(
        env.contains(&format!(
            "ECS_CONTAINER_METADATA_URI_V4=http://127.0.0.1:{port}/v4/"
        )),
        "{env}"
    );
    let container = json_file(&out.path.join("meta.json"));
    assert_eq!(container["Name"], "reader");
    assert_eq!(container["KnownStatus"], "RUNNING");
    assert_eq!(
        container["Networks"][0]["NetworkMode"], "host",
        "{container}"
    );
}

#[test]
fn the_same_uri_answers_after_the_agent_restarts() {
    let port = free_port();
    let Some(mut agent) = metadata_agent(port, &[]) else {
        return;
    };
    let out = TempDir::new("dh-metadata-restart");
    // Fetches its metadata again whenever the test removes the last answer.
    let script = "env > /out/env.tmp; mv /out/env.tmp /out/env; \
        while true; do \
          if [ ! -e /out/latest.json ]; then \
            wget -q -O /out/latest.tmp \"$ECS_CONTAINER_METADATA_URI_V4\" && mv /out/latest.tmp /out/latest.json; \
          fi; \
          sleep 0.2; \
        done";
    let id = agent.submit(&definition("metarestart", "bridge", out.path(), script));
    agent.wait_for_task_status(&id, "RUNNING");
    let env = wait_for_file(&out.path.join("env"));
    let uri = env
        .lines()
        .find_map(|line| line.strip_prefix("ECS_CONTAINER_METADATA_URI_V4="))
        .expect("the URI")
        .to_string();
    let before = json_file(&out.path.join("latest.json"));
    let docker_id = before["DockerId"].clone();
    assert!(docker_id.is_string(), "{before}");

    agent.kill9();
    agent.restart();
    std::fs::remove_file(out.path.join("latest.json")).expect("remove the last answer");
    let after = json_file(&out.path.join("latest.json"));
    assert_eq!(after["DockerId"], docker_id, "{after}");
    assert_eq!(after["Name"], "reader");
    // The container was not recreated: its environment still names the same URI, which answers.
    let host = uri
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("host:port")
        .to_string();
    let path = uri
        .trim_start_matches("http://")
        .split_once('/')
        .map(|(_, path)| format!("/{path}"))
        .expect("a path");
    let (status, body) = http(&host, "GET", &path);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn turned_off_containers_get_no_metadata_variables() {
    let port = free_port();
    let Some(agent) = metadata_agent(port, &[("DECKHAND_TASK_METADATA", "false")]) else {
        return;
    };
    agent.wait_for_log("task metadata endpoint off");
    let out = TempDir::new("dh-metadata-off");
    let script = "env > /out/env.tmp; mv /out/env.tmp /out/env; exec sleep 600";
    agent.submit(&definition("metaoff", "bridge", out.path(), script));
    let env = wait_for_file(&out.path.join("env"));
    assert!(
        env.lines()
            .any(|line| line == "ECS_CONTAINER_METADATA_URI_V4=http://not-this"),
        "only the definition's own value: {env}"
    );
    assert!(
        !env.contains("ECS_CONTAINER_METADATA_URI="),
        "no v3 variable: {env}"
    );
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens on the metadata port"
    );
}

#[test]
fn a_taken_port_leaves_the_agent_running_without_the_endpoint() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let port = holder.local_addr().expect("its address").port();
    let Some(agent) = metadata_agent(port, &[]) else {
        return;
    };
    agent.wait_for_log("the task metadata endpoint is off");
    let out = TempDir::new("dh-metadata-taken");
    let script = "env > /out/env.tmp; mv /out/env.tmp /out/env; exec sleep 600";
    agent.submit(&definition("metataken", "bridge", out.path(), script));
    let env = wait_for_file(&out.path.join("env"));
    assert!(
        !env.contains("ECS_CONTAINER_METADATA_URI="),
        "no variables without the endpoint: {env}"
    );
    drop(holder);
}
