//! A seeded, single-threaded simulator for the managed task's state machine (tests only).
//!
//! It drives [`ManagedTask`] with a simulated Docker, a virtual clock and a random schedule:
//! calls finish in any order, some fail or time out, Docker events arrive late or out of order
//! relative to call results, containers exit with random codes, health changes, the stop comes
//! at any moment. After every step it checks the invariants the engine promises: statuses only
//! rise, never two calls in flight for one container, nothing pulled or created while the task
//! waits for earlier stops, events in order and without duplicates, and every task reaches
//! STOPPED and is cleaned up once it is asked to stop. Many seeds run in one test; a failure
//! prints the seed and the step log so it can be replayed.

use crate::engine::docker_events::DockerObservation;
use crate::engine::managed_task::{
    DockerCall, Effect, Input, ManagedTask, ManagedTaskSettings, Phase, TimerKind, TransitionOutput,
};
use crate::engine::transition::RuleConfig;
use crate::report::NewEvent;
use crate::runtime::{ContainerInfo, ContainerState, HealthState, RuntimeError};
use crate::task::{
    ContainerDefinition, ContainerStatus, Dependency, DependencyCondition, HealthCheck,
    HealthStatus, Millis, NetworkMode, PullBehavior, Task, TaskDefinition, TaskStatus,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// xorshift64*: small, seedable, good enough to shuffle a schedule.
struct Random(u64);

impl Random {
    fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SimState {
    Created,
    Running,
    Exited,
}

#[derive(Debug, Clone)]
struct SimContainer {
    name: String,
    state: SimState,
    exit_code: i64,
    health: Option<String>,
    started_at: Millis,
    finished_at: Millis,
}

/// A call in flight. Docker acts first (state change, events) and answers later, so events can
/// reach the task before the call's own result, as with the real daemon.
struct Pending {
    call: DockerCall,
    /// Set once Docker acted: the answer still to deliver (`None` inside for background calls).
    answer: Option<Option<Input>>,
}

struct Simulation {
    random: Random,
    now: Millis,
    machine: ManagedTask,
    docker: BTreeMap<String, SimContainer>,
    next_id: u64,
    pending: Vec<Pending>,
    /// Docker events not yet delivered, oldest first.
    events: Vec<(String, DockerObservation)>,
    timers: BTreeMap<TimerKind, Millis>,
    waiting_for_stops: bool,
    stop_sent: bool,
    stop_sequence: u64,
    wait_group_done: Vec<u64>,
    done: bool,
    /// Transition calls in flight per container.
    in_flight: HashMap<String, usize>,
    emitted: Vec<NewEvent>,
    removed_ids: HashSet<String>,
    last_known: Vec<ContainerStatus>,
    last_desired: Vec<ContainerStatus>,
    last_task_known: TaskStatus,
    log: Vec<String>,
    /// Failures are injected only while true (turned off to let the task finish).
    chaos: bool,
}

fn definition(name: &str) -> ContainerDefinition {
    ContainerDefinition {
        name: name.to_string(),
        image: format!("sim/{name}:1"),
        essential: true,
        command: None,
        entry_point: None,
        environment: Vec::new(),
        depends_on: Vec::new(),
        links: Vec::new(),
        volumes_from: Vec::new(),
        mount_points: Vec::new(),
        port_mappings: Vec::new(),
        health_check: None,
        stop_timeout_secs: None,
        start_timeout_secs: None,
        memory_mib: None,
        memory_reservation_mib: None,
        cpu: None,
        privileged: false,
        user: None,
        working_directory: None,
        docker_labels: BTreeMap::new(),
        log_configuration: None,
        restart_policy: None,
    }
}

fn random_task(random: &mut Random) -> Task {
    let count = 1 + random.below(4) as usize;
    let mut containers: Vec<ContainerDefinition> = Vec::new();
    for index in 0..count {
        let mut container = definition(&format!("c{index}"));
        container.essential = index == 0 || random.chance(50);
        if random.chance(30) {
            container.health_check = Some(HealthCheck {
                command: vec!["CMD-SHELL".into(), "true".into()],
                interval_secs: 1,
                timeout_secs: 1,
                retries: 1,
                start_period_secs: 0,
            });
            if random.chance(30) {
                container.start_timeout_secs = Some(1 + random.below(3));
            }
        }
        // Edges only onto earlier containers: acyclic by construction.
        for earlier in containers.iter() {
            if random.chance(35) {
                let condition = match random.below(4) {
                    0 => DependencyCondition::Start,
                    1 => DependencyCondition::Complete,
                    2 => DependencyCondition::Success,
                    _ if earlier.health_check.is_some() => DependencyCondition::Healthy,
                    _ => DependencyCondition::Start,
                };
                container.depends_on.push(Dependency {
                    container_name: earlier.name.clone(),
                    condition,
                });
            }
        }
        containers.push(container);
    }
    let definition = TaskDefinition {
        family: "sim".into(),
        revision: 1,
        network_mode: NetworkMode::Bridge,
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers,
    };
    let start_sequence = if random.chance(50) { 5 } else { 0 };
    let mut task = Task::new("f".repeat(32), "sim", definition, start_sequence, 1_000);
    let mut counter = 0;
    crate::engine::container_spec::assign_docker_names(&mut task, || {
        counter += 1;
        format!("{counter:08x}")
    });
    task
}

fn docker_time(millis: Millis) -> String {
    if millis == 0 {
        return "0001-01-01T00:00:00Z".to_string();
    }
    // Virtual time starts near the epoch: days stay within January 1970.
    let seconds = millis / 1000;
    format!(
        "1970-01-{:02}T{:02}:{:02}:{:02}.{:03}000000Z",
        1 + seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
        millis % 1000
    )
}

impl Simulation {
    fn new(seed: u64) -> Simulation {
        let mut random = Random::new(seed);
        let task = random_task(&mut random);
        let count = task.containers.len();
        let settings = ManagedTaskSettings {
            cluster: "sim".into(),
            rules: RuleConfig {
                pull_behavior: match random.below(4) {
                    0 => PullBehavior::Default,
                    1 => PullBehavior::Always,
                    2 => PullBehavior::Once,
                    _ => PullBehavior::PreferCached,
                },
                pull_dependent_containers_upfront: random.chance(30),
            },
            stop_timeout: Duration::from_secs(30),
            steady_check_interval: Duration::from_secs(300),
            cleanup_wait: Duration::from_secs(if random.chance(50) { 0 } else { 3 }),
            dependency_poll_interval: Duration::from_secs(5),
            sent_poll_interval: Duration::from_secs(30),
        };
        Simulation {
            random,
            now: 1_000,
            machine: ManagedTask::new(task, settings, None),
            docker: BTreeMap::new(),
            next_id: 0,
            pending: Vec::new(),
            events: Vec::new(),
            timers: BTreeMap::new(),
            waiting_for_stops: false,
            stop_sent: false,
            stop_sequence: 0,
            wait_group_done: Vec::new(),
            done: false,
            in_flight: HashMap::new(),
            emitted: Vec::new(),
            removed_ids: HashSet::new(),
            last_known: vec![ContainerStatus::None; count],
            last_desired: vec![ContainerStatus::None; count],
            last_task_known: TaskStatus::None,
            log: Vec::new(),
            chaos: true,
        }
    }

    fn fail(&self, message: String) -> ! {
        let tail: Vec<&String> = self.log.iter().rev().take(40).collect();
        panic!(
            "{message}\n--- last steps (newest first) ---\n{tail:#?}\n--- task ---\n{:#?}",
            self.machine.task()
        );
    }

    fn feed(&mut self, input: Input) {
        self.log.push(
            format!("t={} {input:?}", self.now)
                .chars()
                .take(200)
                .collect(),
        );
        let effects = self.machine.handle(input, self.now);
        self.perform(effects);
    }

    fn perform(&mut self, effects: Vec<Effect>) {
        let mut queue: std::collections::VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            match effect {
                Effect::Docker(call) => {
                    let transition_of = match &call {
                        DockerCall::Pull { container, .. }
                        | DockerCall::Create { container, .. }
                        | DockerCall::Start { container, .. } => Some(container.clone()),
                        DockerCall::Stop {
                            container,
                            background: false,
                            ..
                        } => Some(container.clone()),
                        _ => None,
                    };
                    if let Some(container) = transition_of {
                        if self.waiting_for_stops && !matches!(call, DockerCall::Stop { .. }) {
                            self.fail(format!("{call:?} issued while waiting for earlier stops"));
                        }
                        let count = self.in_flight.entry(container.clone()).or_insert(0);
                        *count += 1;
                        if *count > 1 {
                            self.fail(format!("two calls in flight for {container}: {call:?}"));
                        }
                    }
                    self.pending.push(Pending { call, answer: None });
                }
                Effect::Emit { event, reported } => {
                    self.check_event(&event);
                    self.emitted.push(event);
                    let more = self.machine.handle(Input::Reported(reported), self.now);
                    queue.extend(more);
                }
                Effect::Checkpoint => {}
                Effect::ArmTimer { timer, at } => {
                    self.timers.insert(timer, at);
                }
                Effect::WaitForStops { .. } => self.waiting_for_stops = true,
                Effect::StopWaitingForStops => self.waiting_for_stops = false,
                Effect::WaitGroupDone { sequence } => self.wait_group_done.push(sequence),
                Effect::TrackContainer { .. } => {}
                Effect::Done => self.done = true,
            }
        }
        self.check_invariants();
    }

    fn check_event(&self, event: &NewEvent) {
        let duplicate = self
            .emitted
            .iter()
            .any(|earlier| earlier.container == event.container && earlier.status == event.status);
        if duplicate {
            self.fail(format!("duplicate event {event:?}"));
        }
        let task = self.machine.task();
        match &event.container {
            Some(name) => {
                if event.status == "RUNNING"
                    && self.emitted.iter().any(|earlier| {
                        earlier.container.as_ref() == Some(name) && earlier.status == "STOPPED"
                    })
                {
                    self.fail(format!("{name} RUNNING after its STOPPED"));
                }
                if self
                    .emitted
                    .iter()
                    .any(|earlier| earlier.container.is_none() && earlier.status == "STOPPED")
                {
                    self.fail(format!(
                        "container event {event:?} after the task's STOPPED"
                    ));
                }
            }
            None if event.status == "RUNNING" => {
                for container in &task.containers {
                    let reported = self
                        .emitted
                        .iter()
                        .any(|earlier| earlier.container.as_deref() == Some(container.name()));
                    if !reported {
                        self.fail(format!(
                            "task RUNNING before any event of {}",
                            container.name()
                        ));
                    }
                }
            }
            None => {
                let gave_up = event
                    .reason
                    .as_deref()
                    .is_some_and(|reason| reason.starts_with("TaskStateError"));
                if !gave_up {
                    for container in &task.containers {
                        let stopped = self.emitted.iter().any(|earlier| {
                            earlier.container.as_deref() == Some(container.name())
                                && earlier.status == "STOPPED"
                        });
                        if !stopped {
                            self.fail(format!(
                                "task STOPPED before {} reported STOPPED",
                                container.name()
                            ));
                        }
                    }
                }
            }
        }
    }

    fn check_invariants(&mut self) {
        let task = self.machine.task();
        for (index, container) in task.containers.iter().enumerate() {
            if container.known_status < self.last_known[index] {
                self.fail(format!(
                    "{} known fell from {} to {}",
                    container.name(),
                    self.last_known[index],
                    container.known_status
                ));
            }
            if container.desired_status < self.last_desired[index] {
                self.fail(format!("{} desired fell", container.name()));
            }
        }
        if task.known_status < self.last_task_known {
            self.fail("task known fell".to_string());
        }
        self.last_known = task.containers.iter().map(|c| c.known_status).collect();
        self.last_desired = task.containers.iter().map(|c| c.desired_status).collect();
        self.last_task_known = task.known_status;
    }

    fn info(&self, id: &str) -> Option<ContainerInfo> {
        let container = self.docker.get(id)?;
        Some(ContainerInfo {
            id: id.to_string(),
            name: container.name.clone(),
            created: docker_time(1),
            state: ContainerState {
                status: match container.state {
                    SimState::Created => "created",
                    SimState::Running => "running",
                    SimState::Exited => "exited",
                }
                .into(),
                running: container.state == SimState::Running,
                exit_code: container.exit_code,
                started_at: docker_time(container.started_at),
                finished_at: docker_time(container.finished_at),
                health: container.health.clone().map(|status| HealthState {
                    status,
                    ..HealthState::default()
                }),
                ..ContainerState::default()
            },
            ..ContainerInfo::default()
        })
    }

    fn docker_event(&mut self, id: &str, status: ContainerStatus, exit_code: Option<i64>) {
        let at = i64::try_from(self.now).unwrap_or(0) * 1_000_000;
        self.events.push((
            id.to_string(),
            DockerObservation::Status {
                status,
                exit_code,
                at: Some(at),
            },
        ));
    }

    fn exit(&mut self, id: &str, code: i64) {
        let now = self.now;
        if let Some(container) = self.docker.get_mut(id) {
            if container.state == SimState::Running {
                container.state = SimState::Exited;
                container.exit_code = code;
                container.finished_at = now;
                self.docker_event(id, ContainerStatus::Stopped, Some(code));
            }
        }
    }

    fn timeout(operation: &str) -> RuntimeError {
        RuntimeError::Timeout {
            operation: operation.into(),
            after: Duration::from_secs(1),
        }
    }

    /// Moves one pending call forward: first Docker acts, on a later step the answer arrives.
    fn advance(&mut self, index: usize) {
        if self.pending[index].answer.is_none() {
            let call = self.pending[index].call.clone();
            let answer = self.act(call);
            self.pending[index].answer = Some(answer);
            return;
        }
        let pending = self.pending.swap_remove(index);
        if let Some(Some(input)) = pending.answer {
            if let Input::Transition { container, .. } = &input {
                if let Some(count) = self.in_flight.get_mut(container) {
                    *count = count.saturating_sub(1);
                }
            }
            self.feed(input);
        }
    }

    /// What Docker does for a call at `now`, and the answer it will give.
    fn act(&mut self, call: DockerCall) -> Option<Input> {
        let chaos = self.chaos;
        let fails = chaos && self.random.chance(6);
        let input = match call {
            DockerCall::Pull { container, .. } => Some(Input::Transition {
                container,
                target: ContainerStatus::Pulled,
                result: if fails {
                    Err(RuntimeError::CannotPull {
                        message: "simulated".into(),
                    })
                } else {
                    Ok(TransitionOutput::default())
                },
            }),
            DockerCall::Create { container, spec } => {
                let result = if fails {
                    Err(RuntimeError::Api {
                        status: 500,
                        message: "simulated".into(),
                    })
                } else {
                    self.next_id += 1;
                    let id = format!("{:064x}", self.next_id);
                    self.docker.insert(
                        id.clone(),
                        SimContainer {
                            name: container.clone(),
                            state: SimState::Created,
                            exit_code: 0,
                            health: None,
                            started_at: 0,
                            finished_at: 0,
                        },
                    );
                    let _ = spec;
                    self.docker_event(&id, ContainerStatus::Created, None);
                    Ok(TransitionOutput {
                        docker_id: Some(id),
                        info: None,
                    })
                };
                Some(Input::Transition {
                    container,
                    target: ContainerStatus::Created,
                    result,
                })
            }
            DockerCall::Start {
                container,
                docker_id,
            } => {
                // A timed-out start may or may not have happened.
                let happens = !fails || self.random.chance(50);
                if happens {
                    let now = self.now;
                    if let Some(sim) = self.docker.get_mut(&docker_id) {
                        if sim.state != SimState::Running {
                            sim.state = SimState::Running;
                            sim.started_at = now;
                            self.docker_event(&docker_id, ContainerStatus::Running, None);
                        }
                    }
                }
                let result = if fails {
                    Err(Self::timeout("start"))
                } else {
                    match self.info(&docker_id) {
                        Some(info) => Ok(TransitionOutput {
                            docker_id: None,
                            info: Some(info),
                        }),
                        None => Err(RuntimeError::NoSuchContainer {
                            message: docker_id.clone(),
                        }),
                    }
                };
                Some(Input::Transition {
                    container,
                    target: ContainerStatus::Running,
                    result,
                })
            }
            DockerCall::Stop {
                container,
                docker_id,
                background,
                ..
            } => {
                let result = if fails {
                    Err(Self::timeout("stop"))
                } else if !self.docker.contains_key(&docker_id) {
                    Err(RuntimeError::NoSuchContainer {
                        message: docker_id.clone(),
                    })
                } else {
                    self.exit(&docker_id, 143);
                    Ok(TransitionOutput {
                        docker_id: None,
                        info: self.info(&docker_id),
                    })
                };
                (!background).then_some(Input::Transition {
                    container,
                    target: ContainerStatus::Stopped,
                    result,
                })
            }
            DockerCall::Inspect {
                container,
                docker_id,
            } => Some(Input::Inspected {
                container,
                result: self
                    .info(&docker_id)
                    .ok_or(RuntimeError::NoSuchContainer { message: docker_id }),
            }),
            DockerCall::Remove { docker_ids, .. } => {
                for id in docker_ids {
                    self.docker.remove(&id);
                    self.removed_ids.insert(id);
                }
                Some(Input::Removed)
            }
        };
        input
    }

    /// One random step. Returns false when nothing at all can happen.
    fn step(&mut self) -> bool {
        self.now += self.random.below(300);
        let mut choices: Vec<u8> = Vec::new();
        if !self.pending.is_empty() {
            choices.extend([0, 0, 0]);
        }
        if !self.events.is_empty() {
            choices.extend([1, 1]);
        }
        if !self.timers.is_empty() {
            choices.push(2);
        }
        // The stop comes at a random moment, but not so early that few tasks get to run.
        if !self.stop_sent && self.chaos && self.random.chance(4) {
            choices.push(3);
        }
        if self.waiting_for_stops {
            choices.push(4);
        }
        let running: Vec<String> = self
            .docker
            .iter()
            .filter(|(_, c)| c.state == SimState::Running)
            .map(|(id, _)| id.clone())
            .collect();
        if !running.is_empty() && self.chaos && self.random.chance(20) {
            choices.extend([5, 6]);
        }
        if choices.is_empty() {
            return false;
        }
        match choices[self.random.below(choices.len() as u64) as usize] {
            0 => {
                let index = self.random.below(self.pending.len() as u64) as usize;
                self.advance(index);
            }
            1 => {
                // Mostly in order; sometimes a later event overtakes an earlier one.
                let index = if self.random.chance(80) {
                    0
                } else {
                    self.random.below(self.events.len() as u64) as usize
                };
                let (docker_id, observation) = self.events.remove(index);
                self.feed(Input::DockerEvent {
                    docker_id,
                    observation,
                });
            }
            2 => {
                let (kind, at) = self
                    .timers
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(kind, at)| (*kind, *at))
                    .expect("timers is not empty");
                self.timers.remove(&kind);
                self.now = self.now.max(at);
                self.feed(Input::TimerFired(kind));
            }
            3 => self.send_stop(),
            4 => {
                self.waiting_for_stops = false;
                self.feed(Input::WaitGroupReady);
            }
            5 => {
                let id = running[self.random.below(running.len() as u64) as usize].clone();
                let code = if self.random.chance(50) { 0 } else { 1 };
                self.exit(&id, code);
            }
            _ => {
                let id = running[self.random.below(running.len() as u64) as usize].clone();
                let healthy = self.random.chance(70);
                if let Some(container) = self.docker.get_mut(&id) {
                    container.health = Some(if healthy { "healthy" } else { "unhealthy" }.into());
                }
                self.events.push((
                    id,
                    DockerObservation::Health {
                        health: if healthy {
                            HealthStatus::Healthy
                        } else {
                            HealthStatus::Unhealthy
                        },
                    },
                ));
            }
        }
        true
    }

    fn send_stop(&mut self) {
        self.stop_sent = true;
        self.stop_sequence = 9;
        self.feed(Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 9,
            registered: true,
        });
    }

    fn run(&mut self, chaotic_steps: usize) {
        let effects = self.machine.start(self.now);
        self.perform(effects);
        for _ in 0..chaotic_steps {
            if self.done || !self.step() {
                break;
            }
        }
        // Calm down: no more failures, exits or health flips; ask for the stop; let it finish.
        self.chaos = false;
        if !self.stop_sent && !self.done {
            self.send_stop();
        }
        let mut budget = 10_000;
        while !self.done {
            if self.waiting_for_stops {
                self.waiting_for_stops = false;
                self.feed(Input::WaitGroupReady);
                continue;
            }
            if !self.step() {
                self.fail("stuck: nothing pending, no event, no timer, and not done".into());
            }
            budget -= 1;
            if budget == 0 {
                self.fail("did not finish within the step budget".into());
            }
        }
        self.check_finished();
    }

    fn check_finished(&self) {
        let task = self.machine.task();
        if task.known_status != TaskStatus::Stopped || self.machine.phase() != Phase::Done {
            self.fail("done without known STOPPED".into());
        }
        if !self
            .emitted
            .iter()
            .any(|event| event.container.is_none() && event.status == "STOPPED")
        {
            self.fail("cleaned up before STOPPED was reported".into());
        }
        for id in self.docker.keys() {
            if !self.removed_ids.contains(id) {
                self.fail(format!("container {id} was not removed at cleanup"));
            }
        }
        let expected_done: Vec<u64> = if self.stop_sent { vec![9] } else { Vec::new() };
        if self.wait_group_done != expected_done {
            self.fail(format!(
                "wait-group done calls {:?}, expected {expected_done:?}",
                self.wait_group_done
            ));
        }
        let _ = self.stop_sequence;
    }
}

#[test]
fn managed_task_keeps_its_invariants_over_many_seeds() {
    let seeds: u64 = std::env::var("DECKHAND_SIMULATION_SEEDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(3_000);
    // What the seeds covered, so a simulator that stopped exploring fails loudly.
    let mut reached_running = 0;
    let mut gave_up = 0;
    let mut steps = 0;
    for seed in 0..seeds {
        let result = std::panic::catch_unwind(|| {
            let mut simulation = Simulation::new(seed);
            simulation.run(200);
            (
                simulation
                    .emitted
                    .iter()
                    .any(|event| event.container.is_none() && event.status == "RUNNING"),
                simulation.emitted.iter().any(|event| {
                    event
                        .reason
                        .as_deref()
                        .is_some_and(|reason| reason.starts_with("TaskStateError"))
                }),
                simulation.log.len(),
            )
        });
        if let Ok((running, gave, step_count)) = &result {
            reached_running += usize::from(*running);
            gave_up += usize::from(*gave);
            steps += step_count;
        }
        if let Err(panic) = result {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("simulation seed {seed} failed: {message}");
        }
    }
    eprintln!(
        "simulated {seeds} seeds, {steps} inputs; {reached_running} reached RUNNING, {gave_up} gave up"
    );
    assert!(
        reached_running * 4 > seeds as usize,
        "too few seeds reached RUNNING"
    );
}
