//! The crash loop (real Docker, the whole agent): deckhand is SIGKILLed at a moment chosen from
//! the sequence of real operations — right after a submit or a stop answered, while the command
//! is still in flight, or after the k-th Docker event of the containers it is creating, starting
//! or stopping — then started again over the same data directory. After every restart:
//!
//! - every accepted task reaches its desired status (a STOPPED task may also be cleaned up);
//! - each task has exactly one container per container name (none duplicated by a create
//!   replayed after the crash), and a stopped task none still running;
//! - no container of the cluster belongs to no accepted task;
//! - the containers of a running task keep their Docker ids (adopted, not recreated);
//! - event sequence numbers have no gaps and never go back.
//!
//! `DECKHAND_CRASH_ITERATIONS` (default 30) and `DECKHAND_CRASH_SEED` (printed at the start;
//! set it to replay a run) steer it.

#[path = "support/docker.rs"]
mod docker_support;

#[path = "support/agent.rs"]
mod agent_support;

use agent_support::{Agent, AgentOptions};
use deckhand::cli::client::ApiClient;
use deckhand::report::Event;
use deckhand::runtime::{ContainerRuntime, EventFilter};
use docker_support::{docker_client_or_skip, EventCollector, TEST_IMAGE};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const DEFAULT_ITERATIONS: u64 = 30;
/// How long the agent has, after a restart, to bring every task to its desired status.
const CONVERGE_DEADLINE: Duration = Duration::from_secs(60);
/// The longest a test waits for the k-th Docker event before it kills the agent anyway.
const EVENT_WAIT: Duration = Duration::from_secs(10);
/// Tasks kept running at once (more only cost time).
const MAX_RUNNING: usize = 3;

/// xorshift64*: reproducible from the printed seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Desired {
    Running,
    Stopped,
}

#[derive(Debug)]
struct Accepted {
    id: String,
    arn: String,
    family: String,
    desired: Desired,
    container_names: Vec<String>,
    /// Docker id per container name, recorded the first time the task was seen RUNNING.
    running_ids: Option<BTreeMap<String, String>>,
}

/// When, in the operation, the agent is killed.
#[derive(Debug, Clone, Copy)]
enum KillPoint {
    /// Right after the command answered.
    AfterAnswer,
    /// While the request is in flight (its answer may or may not have been sent).
    InFlight,
    /// After the k-th Docker event of this cluster that follows the command.
    AfterDockerEvent(u64),
}

/// A container that stops at once on SIGTERM (busybox `sh` as PID 1 ignores it otherwise).
const TRAPPING_COMMAND: &str = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";

fn definition(family: &str, containers: usize) -> String {
    let mut entries = Vec::new();
    for index in 0..containers {
        let depends = if index == 1 {
            r#", "dependsOn": [{"containerName": "c0", "condition": "START"}]"#
        } else {
            ""
        };
        entries.push(format!(
            r#"{{"name": "c{index}", "image": "{TEST_IMAGE}", "essential": {essential},
                "command": ["sh", "-c", "{TRAPPING_COMMAND}"], "stopTimeout": 1{depends}}}"#,
            essential = index < 2,
        ));
    }
    format!(
        r#"{{"family": "{family}", "containerDefinitions": [{}]}}"#,
        entries.join(",")
    )
}

fn post(
    socket: &std::path::Path,
    target: &str,
    body: Option<Vec<u8>>,
) -> Option<(u16, serde_json::Value)> {
    ApiClient::new(socket)
        .request("POST", target, body.as_deref(), Duration::from_secs(30))
        .ok()
        .map(|response| (response.status, response.body))
}

fn get(agent: &Agent, target: &str) -> (u16, serde_json::Value) {
    let response = agent.request("GET", target, None);
    (response.status, response.body)
}

fn cluster_filter(agent: &Agent) -> EventFilter {
    EventFilter {
        labels: vec![format!("com.amazonaws.ecs.cluster={}", agent.cluster)],
        actions: Vec::new(),
        since: None,
    }
}

/// Waits for `count` Docker events (or gives up after [`EVENT_WAIT`] each).
fn wait_for_docker_events(events: &EventCollector, count: u64) -> u64 {
    let mut seen = 0;
    while seen < count {
        if events.next_within(EVENT_WAIT).is_none() {
            break;
        }
        seen += 1;
    }
    seen
}

/// Every accepted task at its desired status; `Err` names the first that is not.
fn all_converged(agent: &Agent, tasks: &[Accepted]) -> Result<(), String> {
    for task in tasks {
        let (status, body) = get(agent, &format!("/v1/tasks/{}", task.id));
        match (status, task.desired) {
            (404, Desired::Stopped) => continue,
            (404, Desired::Running) => {
                return Err(format!("task {} ({}) was lost", task.id, task.family))
            }
            (200, desired) => {
                let known = body["KnownStatus"].as_str().unwrap_or_default();
                let wanted = match desired {
                    Desired::Running => "RUNNING",
                    Desired::Stopped => "STOPPED",
                };
                if known != wanted {
                    return Err(format!(
                        "task {} ({}) is {known}, wants {wanted}",
                        task.id, task.family
                    ));
                }
            }
            (other, _) => return Err(format!("GET task {}: {other} {body}", task.id)),
        }
    }
    Ok(())
}

fn check_containers(agent: &Agent, tasks: &mut [Accepted]) {
    let containers = agent.containers();
    let mut by_task: BTreeMap<String, BTreeMap<String, Vec<(String, String)>>> = BTreeMap::new();
    for container in &containers {
        let arn = container
            .labels
            .get("com.amazonaws.ecs.task-arn")
            .cloned()
            .unwrap_or_default();
        let name = container
            .labels
            .get("com.amazonaws.ecs.container-name")
            .cloned()
            .unwrap_or_default();
        assert!(
            tasks.iter().any(|task| task.arn == arn),
            "container {} ({}) belongs to no accepted task (arn {arn:?})",
            container.name,
            container.id
        );
        by_task
            .entry(arn)
            .or_default()
            .entry(name)
            .or_default()
            .push((container.id.clone(), container.state.clone()));
    }
    for task in tasks.iter_mut() {
        let empty = BTreeMap::new();
        let containers = by_task.get(&task.arn).unwrap_or(&empty);
        for (name, copies) in containers {
            assert!(
                copies.len() == 1,
                "task {} has {} containers named {name}: {copies:?}",
                task.id,
                copies.len()
            );
        }
        match task.desired {
            Desired::Running => {
                let mut ids = BTreeMap::new();
                for name in &task.container_names {
                    let copies = containers.get(name).unwrap_or_else(|| {
                        panic!("running task {} has no container {name}", task.id)
                    });
                    let info = agent
                        .docker
                        .inspect_container(&copies[0].0)
                        .unwrap_or_else(|error| panic!("inspect {name}: {error}"));
                    assert!(
                        info.state.running,
                        "container {name} of running task {} is {:?}",
                        task.id, info.state
                    );
                    ids.insert(name.clone(), copies[0].0.clone());
                }
                match &task.running_ids {
                    Some(before) => assert_eq!(
                        before, &ids,
                        "the containers of running task {} changed ids across a restart",
                        task.id
                    ),
                    None => task.running_ids = Some(ids),
                }
            }
            Desired::Stopped => {
                for (name, copies) in containers {
                    // Docker's list can lag behind a state change; its inspect does not.
                    if let Ok(info) = agent.docker.inspect_container(&copies[0].0) {
                        assert!(
                            !info.state.running,
                            "container {name} ({}) of stopped task {} still runs: {:?}",
                            copies[0].0, task.id, info.state
                        );
                    }
                }
            }
        }
    }
}

/// Event numbers held by the agent are 1, 2, 3, … with no gap; returns the last one.
fn check_events(agent: &Agent, previous_last: u64) -> u64 {
    let (status, body) = get(agent, "/v1/events?since=0&wait=0");
    assert_eq!(status, 200, "{body}");
    let events: Vec<Event> = serde_json::from_value(body["events"].clone()).expect("events");
    let numbers: Vec<u64> = events.iter().map(|event| event.seq).collect();
    if let Some(first) = numbers.first() {
        assert_eq!(*first, 1, "the first event kept is not 1: {numbers:?}");
    }
    for pair in numbers.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "a gap in event numbers: {numbers:?}");
    }
    let last = numbers.last().copied().unwrap_or(0);
    assert!(
        last >= previous_last,
        "event numbers went back from {previous_last} to {last}"
    );
    last
}

#[test]
fn sigkill_at_any_moment_loses_no_task_and_duplicates_no_container() {
    let Some(docker) = docker_client_or_skip("durable_crash") else {
        return;
    };
    let iterations = std::env::var("DECKHAND_CRASH_ITERATIONS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(DEFAULT_ITERATIONS);
    let seed = std::env::var("DECKHAND_CRASH_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    println!("durable_crash: {iterations} iterations, DECKHAND_CRASH_SEED={seed}");
    eprintln!("durable_crash: {iterations} iterations, DECKHAND_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let mut agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![
                (
                    "ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".to_string(),
                    "2s".to_string(),
                ),
                // `DECKHAND_CRASH_LOGLEVEL=debug` shows every Docker call when replaying a seed.
                (
                    "ECS_LOGLEVEL".to_string(),
                    std::env::var("DECKHAND_CRASH_LOGLEVEL").unwrap_or_else(|_| "info".into()),
                ),
            ],
        },
    );
    let socket = agent.socket_path().to_path_buf();
    let mut tasks: Vec<Accepted> = Vec::new();
    let mut last_event = 0;
    let started = Instant::now();
    let mut kills = BTreeMap::<String, u64>::new();

    for iteration in 0..iterations {
        let running: Vec<usize> = (0..tasks.len())
            .filter(|&index| tasks[index].desired == Desired::Running)
            .collect();
        let submit = running.is_empty() || (running.len() < MAX_RUNNING && rng.below(2) == 0);
        let kill_point = match rng.below(4) {
            0 => KillPoint::AfterAnswer,
            1 => KillPoint::InFlight,
            _ => KillPoint::AfterDockerEvent(1 + rng.below(7)),
        };
        let events = EventCollector::subscribe(&agent.docker, &cluster_filter(&agent));
        let (what, target, body) = if submit {
            let family = format!("crash{iteration}");
            let containers = 2 + rng.below(2) as usize;
            (
                format!("submit {family} ({containers} containers)"),
                "/v1/tasks".to_string(),
                Some((family, containers)),
            )
        } else {
            let index = running[rng.below(running.len() as u64) as usize];
            (
                format!("stop {}", tasks[index].family),
                format!("/v1/tasks/{}/stop", tasks[index].id),
                None,
            )
        };
        let stopped_index = (!submit).then(|| {
            let id = target
                .trim_start_matches("/v1/tasks/")
                .trim_end_matches("/stop");
            tasks
                .iter()
                .position(|task| task.id == id)
                .expect("the task being stopped")
        });
        let request_body = body
            .as_ref()
            .map(|(family, containers)| definition(family, *containers).into_bytes());
        let answer = match kill_point {
            KillPoint::InFlight => {
                let socket = socket.clone();
                let target = target.clone();
                let request = std::thread::spawn(move || post(&socket, &target, request_body));
                agent.kill9();
                request.join().expect("the request thread")
            }
            _ => {
                let answer = post(&socket, &target, request_body);
                assert!(answer.is_some(), "{what}: the agent did not answer");
                if let KillPoint::AfterDockerEvent(count) = kill_point {
                    wait_for_docker_events(&events, count);
                }
                agent.kill9();
                answer
            }
        };
        drop(events);
        *kills
            .entry(format!(
                "{}/{kill_point:?}",
                if submit { "submit" } else { "stop" }
            ))
            .or_default() += 1;

        // What was accepted: certain when the answer came, asked after the restart otherwise.
        let accepted_now = match &answer {
            Some((201, body)) | Some((202, body)) => Some(body.clone()),
            Some((status, body)) => panic!("{what}: answered {status} {body}"),
            None => None,
        };
        agent.restart();
        if let Some((family, containers)) = &body {
            let found = match accepted_now {
                Some(body) => Some(body["id"].as_str().expect("id").to_string()),
                None => {
                    let (_, list) = get(&agent, "/v1/tasks");
                    list["Tasks"].as_array().and_then(|all| {
                        all.iter()
                            .find(|task| task["Family"].as_str() == Some(family.as_str()))
                            .and_then(|task| task["TaskARN"].as_str())
                            .and_then(|arn| arn.rsplit('/').next())
                            .map(str::to_string)
                    })
                }
            };
            if let Some(id) = found {
                let (_, inspect) = get(&agent, &format!("/v1/tasks/{id}"));
                tasks.push(Accepted {
                    arn: inspect["TaskARN"].as_str().unwrap_or_default().to_string(),
                    id,
                    family: family.clone(),
                    desired: Desired::Running,
                    container_names: (0..*containers).map(|index| format!("c{index}")).collect(),
                    running_ids: None,
                });
            }
        } else if let Some(index) = stopped_index {
            let stop_durable = match accepted_now {
                Some(_) => true,
                None => {
                    let (status, inspect) = get(&agent, &format!("/v1/tasks/{}", tasks[index].id));
                    status == 404 || inspect["DesiredStatus"].as_str() == Some("STOPPED")
                }
            };
            if stop_durable {
                tasks[index].desired = Desired::Stopped;
            }
        }

        let deadline = Instant::now() + CONVERGE_DEADLINE;
        loop {
            match all_converged(&agent, &tasks) {
                Ok(()) => break,
                Err(problem) if Instant::now() >= deadline => panic!(
                    "iteration {iteration} ({what}, killed {kill_point:?}; seed {seed}): {problem}"
                ),
                Err(_) => {
                    // Wait for the next state change (at most 1 s) rather than a fixed time.
                    let _ = agent.request(
                        "GET",
                        &format!("/v1/events?since={}&wait=1", check_events_floor(&agent)),
                        None,
                    );
                }
            }
        }
        check_containers(&agent, &mut tasks);
        last_event = check_events(&agent, last_event);
    }
    println!(
        "durable_crash: {iterations} kill -9 and restarts in {:.1}s, {} tasks accepted, kill points {kills:?}, last event {last_event} (seed {seed})",
        started.elapsed().as_secs_f64(),
        tasks.len()
    );
}

/// The newest event number the agent holds, so a long poll after it waits for the next change.
fn check_events_floor(agent: &Agent) -> u64 {
    let (_, body) = get(agent, "/v1/events?since=0&wait=0");
    body["events"]
        .as_array()
        .and_then(|events| events.last())
        .and_then(|event| event["seq"].as_u64())
        .unwrap_or(0)
}
