//! `networkMode: awsvpc` in the whole agent on real Docker: a Fargate-shaped task definition
//! (web server + sidecar, task-level cpu and memory, no host ports of its own) runs unchanged.
//! Its containers share one network namespace held by the sandbox deckhand adds (the sidecar
//! reaches the web server on 127.0.0.1; with `pidMode`/`ipcMode` `task` it also sees the web
//! server's process and `/dev/shm`, and the task metadata endpoint answers it), its port answers
//! on the host, `inspect` shows the
//! task's address, the sandbox's image is made on the host without a registry, a `kill -9` of
//! the agent leaves exactly one sandbox, and cleanup removes every container. A sandbox killed
//! outside deckhand stops its task.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{free_port, http_get_eventually, Agent, AgentOptions, DEADLINE};
use deckhand::runtime::{ContainerRuntime, ContainerSummary};
use std::process::Command;
use std::time::{Duration, Instant};

const SANDBOX_NAME: &str = "~internal~ecs~pause";

fn fargate_definition(port: u16) -> String {
    let web = format!(
        "mkdir -p /www && echo 'hello from awsvpc' > /www/index.html && \
         echo shared > /dev/shm/from-web && exec httpd -f -p {port} -h /www"
    );
    // The sidecar has no port of its own: it finds the web server on the task's localhost.
    let sidecar = format!(
        "trap 'exit 0' TERM; \
         until page=$(wget -q -O - http://127.0.0.1:{port}/); do sleep 0.2; done; \
         echo \"sidecar reached web: $page\"; \
         echo \"shm: $(cat /dev/shm/from-web)\"; \
         if ps | grep -q '[h]ttpd -f'; then echo 'pid: sees httpd'; fi; \
         until meta=$(wget -q -O - \"$ECS_CONTAINER_METADATA_URI_V4/task\"); do sleep 0.2; done; \
         echo \"metadata: $(echo \"$meta\" | grep -o '\"Family\":\"fargate-web\"')\"; \
         while true; do sleep 1; done"
    );
    format!(
        r#"{{
  "family": "fargate-web",
  "networkMode": "awsvpc",
  "pidMode": "task",
  "ipcMode": "task",
  "requiresCompatibilities": ["FARGATE"],
  "cpu": "256",
  "memory": "512",
  "containerDefinitions": [
    {{"name": "web", "image": "{image}", "essential": true, "stopTimeout": 2,
      "command": ["sh", "-c", {web}],
      "portMappings": [{{"containerPort": {port}, "protocol": "tcp"}}]}},
    {{"name": "sidecar", "image": "{image}", "essential": true, "stopTimeout": 2,
      "command": ["sh", "-c", {sidecar}]}}
  ]
}}"#,
        image = docker_support::TEST_IMAGE,
        web = serde_json::Value::String(web),
        sidecar = serde_json::Value::String(sidecar),
    )
}

fn container_name_label(container: &ContainerSummary) -> &str {
    container
        .labels
        .get("com.amazonaws.ecs.container-name")
        .map(String::as_str)
        .unwrap_or_default()
}

fn sandboxes(agent: &Agent) -> Vec<ContainerSummary> {
    agent
        .containers()
        .into_iter()
        .filter(|container| container_name_label(container) == SANDBOX_NAME)
        .collect()
}

fn docker_network_mode(id: &str) -> String {
    let output = Command::new("docker")
        .args(["inspect", "-f", "{{.HostConfig.NetworkMode}}", id])
        .output()
        .expect("docker inspect runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Waits until `deckhand logs TASK CONTAINER` shows `expected`.
fn wait_for_container_output(agent: &Agent, task: &str, container: &str, expected: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let output = agent.cli(&["logs", task, container]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        if text.contains(expected) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{container} never printed {expected:?}; it printed {text:?} (stderr {:?})",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_fargate_task_shares_one_namespace_publishes_its_port_survives_a_crash_and_is_cleaned_up() {
    let Some(docker) = docker_support::docker_client_or_skip("agent awsvpc") else {
        return;
    };
    let mut agent = Agent::start(
        docker.clone(),
        AgentOptions {
            introspection: false,
            extra_env: vec![("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into())],
        },
    );
    let port = free_port();
    let validate_path = agent.directory.path.join("fargate.json");
    std::fs::write(&validate_path, fargate_definition(port)).expect("write definition");
    let validated = agent.cli(&["validate", &validate_path.to_string_lossy()]);
    assert_eq!(validated.status.code(), Some(0), "{validated:?}");

    let task = agent.submit(&fargate_definition(port));
    agent.wait_for_task_status(&task, "RUNNING");

    // The port answers on the host, and the sidecar reached the web server on localhost.
    let page = http_get_eventually(port, "hello from awsvpc");
    assert!(page.contains("hello from awsvpc"), "{page}");
    wait_for_container_output(
        &agent,
        &task,
        "sidecar",
        "sidecar reached web: hello from awsvpc",
    );
    // pidMode and ipcMode task: the sidecar sees the web server's process and its /dev/shm.
    wait_for_container_output(&agent, &task, "sidecar", "shm: shared");
    wait_for_container_output(&agent, &task, "sidecar", "pid: sees httpd");
    // The task metadata endpoint answers inside the task's namespace, at the bridge gateway.
    wait_for_container_output(
        &agent,
        &task,
        "sidecar",
        "metadata: \"Family\":\"fargate-web\"",
    );

    // One sandbox, made from the image deckhand imported; the task's containers join it.
    let containers = agent.containers();
    assert_eq!(containers.len(), 3, "{containers:?}");
    let sandbox = sandboxes(&agent).pop().expect("a sandbox container");
    assert_eq!(sandbox.image, "deckhand/sandbox:1");
    assert!(docker.inspect_image("deckhand/sandbox:1").is_ok());
    assert_eq!(docker_network_mode(&sandbox.id), "bridge");
    for container in containers.iter().filter(|c| c.id != sandbox.id) {
        let mode = docker_network_mode(&container.id);
        assert!(
            mode == format!("container:{}", sandbox.id)
                || mode == format!("container:{}", sandbox.name),
            "{}: {mode}",
            container.name
        );
    }

    // inspect: every container has the task's address, the web container its port, and the
    // sandbox is there as ECS shows its pause container.
    let inspected = agent.inspect(&task);
    let listed = inspected["Containers"]
        .as_array()
        .expect("containers")
        .clone();
    let by_name = |name: &str| {
        listed
            .iter()
            .find(|container| container["Name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {inspected}"))
            .clone()
    };
    let address = by_name(SANDBOX_NAME)["Networks"][0]["IPv4Addresses"][0]
        .as_str()
        .expect("the sandbox's address")
        .to_string();
    assert!(!address.is_empty());
    assert_eq!(by_name(SANDBOX_NAME)["Type"], "CNI_PAUSE");
    for name in ["web", "sidecar"] {
        let container = by_name(name);
        assert_eq!(container["Type"], "NORMAL");
        assert_eq!(container["Networks"][0]["NetworkMode"], "awsvpc", "{name}");
        assert_eq!(
            container["Networks"][0]["IPv4Addresses"][0],
            address.as_str(),
            "{name}"
        );
    }
    assert_eq!(by_name("web")["Ports"][0]["HostPort"], port);
    assert_eq!(by_name("web")["Ports"][0]["ContainerPort"], port);

    // `ps` counts the owner's containers only.
    let ps = agent.cli(&["ps"]);
    let ps_text = String::from_utf8_lossy(&ps.stdout);
    let row = ps_text
        .lines()
        .find(|line| task.starts_with(line.split_whitespace().next().unwrap_or("-")))
        .unwrap_or_else(|| panic!("no row for {task} in {ps_text}"));
    assert!(row.contains(" 2/2 "), "{row}");

    // A crash of the agent: on restart it adopts what Docker has, and makes nothing twice.
    agent.kill9();
    agent.restart();
    assert_eq!(sandboxes(&agent).len(), 1);
    assert_eq!(agent.containers().len(), 3);
    let page = http_get_eventually(port, "hello from awsvpc");
    assert!(page.contains("hello from awsvpc"), "after restart: {page}");
    let inspected = agent.inspect(&task);
    assert_eq!(inspected["KnownStatus"], "RUNNING", "{inspected}");

    // Stop: the task's containers stop before the sandbox, and cleanup removes all three.
    let stopped = agent.cli(&["stop", "--wait", &task]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    let deadline = Instant::now() + DEADLINE;
    while !agent.containers().is_empty() {
        assert!(
            Instant::now() < deadline,
            "cleanup left {:?}",
            agent.containers()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The sandbox is deckhand's: no state change of it is ever reported.
    let events = agent.request("GET", "/v1/events?since=0", None);
    let events = events.body["events"].as_array().expect("events").clone();
    assert!(
        events.iter().any(|event| event["container"] == "web"),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|event| event["container"] == SANDBOX_NAME),
        "{events:?}"
    );
}

#[test]
fn a_sandbox_killed_outside_deckhand_stops_its_task() {
    let Some(docker) = docker_support::docker_client_or_skip("agent awsvpc sandbox killed") else {
        return;
    };
    let agent = Agent::start(
        docker.clone(),
        AgentOptions {
            introspection: false,
            extra_env: Vec::new(),
        },
    );
    let port = free_port();
    let task = agent.submit(&fargate_definition(port));
    agent.wait_for_task_status(&task, "RUNNING");
    let sandbox = sandboxes(&agent).pop().expect("a sandbox container");

    // Someone kills the namespace holder: the task has no network any more, and the sandbox is
    // essential, so the task stops, its other containers first.
    docker
        .kill_container(&sandbox.id, "KILL")
        .expect("docker kill");
    let stopped = agent.wait_for_task_status(&task, "STOPPED");
    let reason = stopped.reason.unwrap_or_default();
    assert!(
        reason.contains("Essential container in task exited"),
        "{reason}"
    );
    for container in agent.containers() {
        let running = container.state == "running";
        assert!(
            !running,
            "{} still runs after its task stopped",
            container.name
        );
    }
}
