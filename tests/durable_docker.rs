//! What happens to Docker while deckhand is not looking (real Docker, the whole agent):
//!
//! - the agent is down while an essential container is killed → after its restart the task is
//!   STOPPED with that container's exit code;
//! - the agent is down while a task's containers are stopped by hand → the same;
//! - the agent's connection to Docker breaks (a Unix-socket relay between the agent and Docker
//!   cuts every connection and refuses new ones for a moment) while a container is killed → the
//!   agent reconnects, re-inspects and stops the task, without a restart;
//! - Docker is cut off (the same relay) when a task is submitted → the task waits, nothing is
//!   held against it, and it starts once the connection is back; a stop asked while Docker is
//!   cut off leaves the containers running until Docker confirms the stop.

#[path = "support/docker.rs"]
mod docker_support;

#[path = "support/agent.rs"]
mod agent_support;

use agent_support::{Agent, AgentOptions};
use deckhand::runtime::ContainerRuntime;
use docker_support::{docker_client_or_skip, TempDir, TEST_IMAGE};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Two containers: `app` (essential) exits 3 on SIGTERM; `side` (not essential) exits 0.
fn two_container_definition(family: &str) -> String {
    format!(
        r#"{{
  "family": "{family}",
  "containerDefinitions": [
    {{"name": "app", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 2,
      "command": ["sh", "-c", "trap 'exit 3' TERM; while true; do sleep 1 & wait $!; done"]}},
    {{"name": "side", "image": "{TEST_IMAGE}", "essential": false, "stopTimeout": 2,
      "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]}}
  ]
}}"#
    )
}

fn container_id(agent: &Agent, task: &str, name: &str) -> String {
    let inspect = agent.inspect(task);
    inspect["Containers"]
        .as_array()
        .and_then(|containers| {
            containers
                .iter()
                .find(|container| container["Name"].as_str() == Some(name))
        })
        .and_then(|container| container["DockerId"].as_str())
        .unwrap_or_else(|| panic!("container {name} of task {task} has no Docker id: {inspect}"))
        .to_string()
}

fn container_exit_code(agent: &Agent, task: &str, name: &str) -> Option<i64> {
    agent.inspect(task)["Containers"]
        .as_array()
        .and_then(|containers| {
            containers
                .iter()
                .find(|container| container["Name"].as_str() == Some(name))
        })
        .and_then(|container| container["ExitCode"].as_i64())
}

#[test]
fn an_essential_container_killed_while_the_agent_is_down_stops_the_task_after_restart() {
    let Some(docker) = docker_client_or_skip("durable_docker killed while down") else {
        return;
    };
    let mut agent = Agent::start(docker.clone(), AgentOptions::default());
    let task = agent.submit(&two_container_definition("killed-while-down"));
    agent.wait_for_task_status(&task, "RUNNING");
    let app = container_id(&agent, &task, "app");
    agent.kill9();

    docker.kill_container(&app, "KILL").expect("docker kill");
    assert_eq!(
        docker
            .wait_container(&app, Duration::from_secs(30))
            .expect("the container exits"),
        137
    );

    agent.restart();
    let stopped = agent.wait_for_task_status(&task, "STOPPED");
    assert_eq!(
        stopped.reason.as_deref(),
        Some("Essential container in task exited")
    );
    let app_event = agent.wait_for_event(|event| {
        event.task == task && event.container.as_deref() == Some("app") && event.status == "STOPPED"
    });
    assert_eq!(app_event.exit_code, Some(137));
    assert_eq!(container_exit_code(&agent, &task, "app"), Some(137));
    // The non-essential container was stopped by the agent as part of the task's stop.
    let side = container_id(&agent, &task, "side");
    let side_state = docker.inspect_container(&side).expect("inspect side").state;
    assert!(!side_state.running, "{side_state:?}");
}

#[test]
fn a_task_stopped_by_hand_while_the_agent_is_down_is_stopped_after_restart() {
    let Some(docker) = docker_client_or_skip("durable_docker stopped by hand") else {
        return;
    };
    let mut agent = Agent::start(docker.clone(), AgentOptions::default());
    let task = agent.submit(&two_container_definition("stopped-by-hand"));
    agent.wait_for_task_status(&task, "RUNNING");
    let app = container_id(&agent, &task, "app");
    let side = container_id(&agent, &task, "side");
    agent.kill9();

    for id in [&side, &app] {
        docker
            .stop_container(id, Duration::from_secs(5))
            .expect("docker stop");
    }

    agent.restart();
    agent.wait_for_task_status(&task, "STOPPED");
    assert_eq!(container_exit_code(&agent, &task, "app"), Some(3));
    assert_eq!(container_exit_code(&agent, &task, "side"), Some(0));
    let inspect = agent.inspect(&task);
    assert_eq!(inspect["KnownStatus"], "STOPPED");
    // The containers are the same ones (adopted, never recreated), and only those exist.
    let ids: Vec<String> = agent.containers().into_iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&app) && ids.contains(&side), "{ids:?}");
}

/// A Unix-socket relay in front of Docker whose connections can all be cut at once.
struct DockerRelay {
    path: PathBuf,
    refusing: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<UnixStream>>>,
    _directory: TempDir,
}

impl DockerRelay {
    fn start(upstream: PathBuf) -> DockerRelay {
        let directory = TempDir::new("dh-relay");
        let path = directory.path.join("docker.sock");
        let listener = UnixListener::bind(&path).expect("bind the relay socket");
        let refusing = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        {
            let refusing = Arc::clone(&refusing);
            let connections = Arc::clone(&connections);
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    let Ok(client) = client else { return };
                    if refusing.load(Ordering::SeqCst) {
                        continue; // dropped: closed at once
                    }
                    let Ok(server) = UnixStream::connect(&upstream) else {
                        continue;
                    };
                    let mut held = connections.lock().expect("connections");
                    for stream in [&client, &server] {
                        if let Ok(clone) = stream.try_clone() {
                            held.push(clone);
                        }
                    }
                    drop(held);
                    relay_both_ways(client, server);
                }
            });
        }
        DockerRelay {
            path,
            refusing,
            connections,
            _directory: directory,
        }
    }

    fn docker_host(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// Breaks every open connection (the event stream among them) and refuses new ones.
    fn cut(&self) {
        self.refusing.store(true, Ordering::SeqCst);
        for stream in self.connections.lock().expect("connections").drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    fn reopen(&self) {
        self.refusing.store(false, Ordering::SeqCst);
    }
}

fn relay_both_ways(client: UnixStream, server: UnixStream) {
    let pairs = [
        (client.try_clone(), server.try_clone()),
        (server.try_clone(), client.try_clone()),
    ];
    for (from, to) in pairs {
        let (Ok(mut from), Ok(mut to)) = (from, to) else {
            continue;
        };
        std::thread::spawn(move || {
            let mut buffer = [0u8; 16 * 1024];
            loop {
                match from.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(count) => {
                        if to.write_all(&buffer[..count]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    }
}

fn docker_socket_path() -> PathBuf {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|host| host.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| Path::new("/var/run/docker.sock").to_path_buf())
}

#[test]
fn a_broken_docker_connection_is_reconnected_and_a_container_that_died_meanwhile_is_seen() {
    let Some(docker) = docker_client_or_skip("durable_docker broken connection") else {
        return;
    };
    let relay = DockerRelay::start(docker_socket_path());
    let agent = Agent::start(
        docker.clone(),
        AgentOptions {
            introspection: false,
            extra_env: vec![("DOCKER_HOST".to_string(), relay.docker_host())],
        },
    );
    let task = agent.submit(&two_container_definition("connection-cut"));
    agent.wait_for_task_status(&task, "RUNNING");
    let app = container_id(&agent, &task, "app");

    // The event stream breaks; the container dies while the agent cannot hear of it.
    relay.cut();
    agent.wait_for_log("Docker event stream");
    docker.kill_container(&app, "KILL").expect("docker kill");
    docker
        .wait_container(&app, Duration::from_secs(30))
        .expect("the container exits");
    relay.reopen();

    agent.wait_for_log("Docker event stream reconnected");
    let stopped = agent.wait_for_task_status(&task, "STOPPED");
    assert_eq!(
        stopped.reason.as_deref(),
        Some("Essential container in task exited")
    );
    assert_eq!(container_exit_code(&agent, &task, "app"), Some(137));
}

fn events_of_task(agent: &Agent, task: &str) -> Vec<(Option<String>, String)> {
    let response = agent.request("GET", "/v1/events?since=0", None);
    assert_eq!(response.status, 200, "{:?}", response.body);
    response.body["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|event| event["task"].as_str() == Some(task))
                .map(|event| {
                    (
                        event["container"].as_str().map(str::to_string),
                        event["status"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_task_submitted_while_docker_is_cut_off_starts_once_it_is_back_and_a_stop_waits_for_it() {
    let Some(docker) = docker_client_or_skip("durable_docker submit while Docker is cut off")
    else {
        return;
    };
    let relay = DockerRelay::start(docker_socket_path());
    let agent = Agent::start(
        docker.clone(),
        AgentOptions {
            introspection: false,
            extra_env: vec![("DOCKER_HOST".to_string(), relay.docker_host())],
        },
    );
    relay.cut();
    agent.wait_for_log("Docker event stream");
    let task = agent.submit(&two_container_definition("submitted-while-cut"));
    agent.wait_for_log("Docker is away");
    let waiting = agent.inspect(&task);
    assert_eq!(waiting["DesiredStatus"], "RUNNING", "{waiting}");
    assert_ne!(waiting["KnownStatus"], "STOPPED", "{waiting}");
    relay.reopen();
    agent.wait_for_task_status(&task, "RUNNING");
    assert!(
        !events_of_task(&agent, &task).contains(&(None, "STOPPED".to_string())),
        "nothing was held against the task: {:?}",
        events_of_task(&agent, &task)
    );
    let app = container_id(&agent, &task, "app");

    // A stop while Docker is cut off: accepted, but the containers run until Docker is back.
    relay.cut();
    let output = agent.cli(&["stop", &task]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    agent.wait_for_log("does not answer a ping");
    let inspect = agent.inspect(&task);
    assert_eq!(inspect["KnownStatus"], "RUNNING", "{inspect}");
    assert!(
        docker
            .inspect_container(&app)
            .expect("Docker itself answers")
            .state
            .running,
        "the container still runs"
    );
    relay.reopen();
    let stopped = agent.wait_for_task_status(&task, "STOPPED");
    assert_eq!(stopped.reason.as_deref(), Some("Task stopped by request"));
    assert!(
        !docker
            .inspect_container(&app)
            .expect("Docker answers")
            .state
            .running
    );
}
