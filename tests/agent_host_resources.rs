//! Host resources (docs/ENGINE.md §9a) in the whole agent on real Docker: with
//! `ECS_RESERVED_MEMORY` set from this machine's `MemTotal` so that tasks are offered 1,100 MiB,
//! two tasks of 512 MiB run and a third waits — no container, `WaitingFor` in `inspect` — until
//! one of the two is stopped; a task needing more memory than the host offers, or a reserved
//! port, is refused with 400 naming the resource.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{Agent, AgentOptions};
use docker_support::TEST_IMAGE;

/// What the agent offers tasks in this test.
const OFFERED_MIB: u64 = 1100;

fn sleeper(family: &str, memory_mib: u64, host_port: Option<u16>) -> String {
    let ports = host_port
        .map(|port| format!(r#", "portMappings": [{{"containerPort": 80, "hostPort": {port}}}]"#))
        .unwrap_or_default();
    format!(
        r#"{{
  "family": "{family}",
  "containerDefinitions": [{{
    "name": "app",
    "image": "{TEST_IMAGE}",
    "command": ["sleep", "3600"],
    "memory": {memory_mib},
    "stopTimeout": 1{ports}
  }}]
}}"#
    )
}

fn error_of(response: &deckhand::cli::client::ApiResponse) -> String {
    response.body["error"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn two_of_three_512_mib_tasks_run_and_the_third_waits_until_one_stops() {
    let Some(docker) = docker_support::docker_client_or_skip("agent host resources") else {
        return;
    };
    let total = deckhand::host::read_mem_total_mib().expect("this host has /proc/meminfo");
    assert!(
        total > OFFERED_MIB,
        "this test needs more than {OFFERED_MIB} MiB"
    );
    let reserved = total - OFFERED_MIB;
    let agent = Agent::start(
        docker,
        AgentOptions {
            extra_env: vec![("ECS_RESERVED_MEMORY".into(), reserved.to_string())],
            ..AgentOptions::default()
        },
    );

    // Never fits: refused at submit, naming the resource, and nothing is accepted.
    let too_big = agent.request(
        "POST",
        "/v1/tasks",
        Some(sleeper("too-big", 2048, None).as_bytes()),
    );
    assert_eq!(too_big.status, 400, "{:?}", too_big.body);
    assert!(
        error_of(&too_big).contains(&format!(
            "memory: needs 2048 MiB, the host offers {OFFERED_MIB} MiB"
        )),
        "{:?}",
        too_big.body
    );
    let on_ssh = agent.request(
        "POST",
        "/v1/tasks",
        Some(sleeper("on-ssh", 16, Some(22)).as_bytes()),
    );
    assert_eq!(on_ssh.status, 400, "{:?}", on_ssh.body);
    assert!(
        error_of(&on_ssh).contains("port 22/tcp: reserved on this host (ECS_RESERVED_PORTS)"),
        "{:?}",
        on_ssh.body
    );
    let listed = agent.request("GET", "/v1/tasks", None);
    assert_eq!(listed.body["Tasks"], serde_json::json!([]));

    let first = agent.submit(&sleeper("first", 512, None));
    let second = agent.submit(&sleeper("second", 512, None));
    agent.wait_for_task_status(&first, "RUNNING");
    agent.wait_for_task_status(&second, "RUNNING");
    let third = agent.submit(&sleeper("third", 512, None));

    let view = agent.inspect(&third);
    assert_eq!(view["KnownStatus"], "NONE", "{view:#}");
    assert_eq!(view["DesiredStatus"], "RUNNING", "{view:#}");
    assert_eq!(
        view["WaitingFor"],
        format!("memory: needs 512 MiB, {} MiB free", OFFERED_MIB - 1024),
        "{view:#}"
    );
    assert!(view["Containers"][0].get("DockerId").is_none(), "{view:#}");
    assert!(agent.inspect(&first).get("WaitingFor").is_none());
    let names: Vec<String> = agent
        .containers()
        .iter()
        .map(|container| container.name.clone())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "only the two admitted tasks have containers: {names:?}"
    );

    let stop = agent.request("POST", &format!("/v1/tasks/{first}/stop"), None);
    assert_eq!(stop.status, 202, "{:?}", stop.body);
    agent.wait_for_task_status(&first, "STOPPED");
    agent.wait_for_task_status(&third, "RUNNING");
    let view = agent.inspect(&third);
    assert!(view.get("WaitingFor").is_none(), "{view:#}");
    assert!(view["Containers"][0]["DockerId"].is_string(), "{view:#}");
}
