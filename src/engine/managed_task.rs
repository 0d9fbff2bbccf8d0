//! One managed task: the sans-I/O state machine that owns a task's statuses
//! (ENGINE-SEMANTICS §2), and the thin thread loop that feeds it inputs and performs its effects.
//!
//! [`ManagedTask::handle`] takes one input (a desired change, a transition result, an inspection,
//! a Docker event, a timer, a delivery receipt) and the current time, applies the pure rules of
//! `transition.rs`, and returns effects (run a Docker call, emit an event, checkpoint, arm a timer,
//! wait for or finish a wait-group number, done). It owns no thread, socket or clock, so tests
//! drive it step by step. The loop in `run_managed_task` is the only place that waits: one
//! `select_biased!` over shutdown, the desired-status inbox, transition results, Docker events,
//! resync requests, the wait group and the timers. Each Docker call runs on the engine's Docker
//! worker pool, which posts its result back as an input (a panicked call as a failed one).

use crate::engine::container_spec::{create_request, task_volume_names};
use crate::engine::docker_events::DockerObservation;
use crate::engine::task_engine::EngineShared;
use crate::engine::transition::{
    derive_task_known_status, docker_away, docker_retry_delay, error_outcome,
    essential_container_stopped, exit_error_from_inspection, inspect_says_gone, is_steady,
    next_state, restop_on_running_report, should_restart, stop_grace, unable_to_progress,
    DockerAction, DockerCallKind, NextState, ProgressVerdict, RuleConfig,
};
use crate::engine::worker_pool::Job;
use crate::engine::workers::{
    answer_without_calling, call_class, input_for_panicked_call, operation_name, run_docker_call,
};
use crate::report::NewEvent;
use crate::runtime::{ContainerInfo, CreateContainer, PortBinding, RuntimeError};
use crate::task::{
    ContainerError, ContainerErrorKind, ContainerStatus, HealthStatus, Millis, Task, TaskStatus,
};
use crossbeam_channel::{bounded, Receiver, Sender};
use std::collections::VecDeque;
use std::time::Duration;

/// Exit code given to a container that can never start (Docker's SIGTERM code).
pub const CANNOT_START_EXIT_CODE: i64 = 143;

/// Room in a task's Docker-event inbox; beyond it the task re-inspects instead.
pub const DOCKER_EVENT_INBOX_CAPACITY: usize = 64;

/// What the state machine needs from the engine configuration.
#[derive(Debug, Clone)]
pub struct ManagedTaskSettings {
    pub cluster: String,
    pub rules: RuleConfig,
    /// `ECS_CONTAINER_STOP_TIMEOUT`: stop grace when the container sets none.
    pub stop_timeout: Duration,
    /// Steady-state re-check period (§2 step 4).
    pub steady_check_interval: Duration,
    /// `ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION`.
    pub cleanup_wait: Duration,
    /// How often a task blocked on a dependency re-inspects its containers.
    pub dependency_poll_interval: Duration,
    /// How often cleanup re-checks that STOPPED was reported.
    pub sent_poll_interval: Duration,
}

/// The timers a task arms; each kind has at most one deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerKind {
    SteadyCheck,
    DependencyPoll,
    Cleanup,
    /// Docker was away (unreachable, hung): make the calls that failed for it again.
    DockerRetry,
}

/// What a transition worker hands back on success.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransitionOutput {
    /// Set by a create.
    pub docker_id: Option<String>,
    /// The inspection made after a start or a stop.
    pub info: Option<ContainerInfo>,
}

/// A status that the reporter recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    Container {
        name: String,
        status: ContainerStatus,
    },
    Task {
        status: TaskStatus,
    },
}

/// Everything that can happen to a task.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The owner asks for a status. `registered`: the engine added `sequence` to the wait group
    /// for this task, so the task must finish it.
    Desired {
        status: TaskStatus,
        sequence: u64,
        registered: bool,
    },
    /// A transition worker's answer for the call aimed at `target`.
    Transition {
        container: String,
        target: ContainerStatus,
        result: Result<TransitionOutput, RuntimeError>,
    },
    /// An inspection (steady re-check, dependency poll, resync, refresh after `die`).
    Inspected {
        container: String,
        result: Result<ContainerInfo, RuntimeError>,
    },
    /// A Docker event routed to this task by Docker id.
    DockerEvent {
        docker_id: String,
        observation: DockerObservation,
    },
    /// A STOPPED the task posts to itself for a container that needs no Docker call (§3 row 5)
    /// or can never start (§4, with the error naming the dependency).
    SyntheticStop {
        container: String,
        error: Option<ContainerError>,
    },
    /// The answer of a restart (§12) made instead of applying a STOPPED with `exit_code`.
    Restarted {
        container: String,
        exit_code: Option<i64>,
        result: Result<(), RuntimeError>,
    },
    /// Docker events may have been missed: re-inspect.
    Resync,
    /// Every earlier stop finished (§9).
    WaitGroupReady,
    TimerFired(TimerKind),
    /// The reporter recorded an event.
    Reported(Reported),
    /// The reporter could not record an event (the durable log failed): it is emitted again at
    /// the next re-check (steady state, or cleanup's wait for the STOPPED report).
    ReportFailed(Reported),
    /// Cleanup removed the containers.
    Removed,
    /// Cleanup could not remove everything because Docker was away: it is tried again.
    RemoveDeferred {
        error: RuntimeError,
    },
}

/// A Docker call the loop runs on a worker thread.
#[derive(Debug, Clone, PartialEq)]
pub enum DockerCall {
    Pull {
        container: String,
        image: String,
    },
    Create {
        container: String,
        spec: Box<CreateContainer>,
    },
    Start {
        container: String,
        docker_id: String,
    },
    /// `background`: the result is not a transition of this task (§6 start timeout, §7 re-stop).
    Stop {
        container: String,
        docker_id: String,
        grace: Duration,
        background: bool,
    },
    Inspect {
        container: String,
        docker_id: String,
    },
    /// §12: start an exited container again under its restart policy.
    Restart {
        container: String,
        docker_id: String,
        exit_code: Option<i64>,
    },
    /// Cleanup: force-remove the containers (by id, or by fixed name when a create's answer was
    /// lost) with their anonymous volumes, then the task volumes.
    Remove {
        docker_ids: Vec<String>,
        volumes: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Docker(DockerCall),
    /// Record an event; the loop answers with `Input::Reported`.
    Emit {
        event: NewEvent,
        reported: Reported,
    },
    /// The task changed: publish the snapshot and write the checkpoint.
    Checkpoint,
    ArmTimer {
        timer: TimerKind,
        at: Millis,
    },
    /// Start waiting for every stop numbered ≤ `sequence` (§9).
    WaitForStops {
        sequence: u64,
    },
    StopWaitingForStops,
    /// Finish a stop number this task was handed as registered.
    WaitGroupDone {
        sequence: u64,
    },
    /// Route Docker events for `docker_id` to this task.
    TrackContainer {
        docker_id: String,
    },
    /// The task is cleaned up: forget it.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before `start`.
    New,
    /// §2 step 3.
    WaitingForStops,
    /// §2 step 4.
    Progressing,
    /// §2 steps 5–7: known STOPPED, waiting for the cleanup deadline and the STOPPED report.
    AwaitingCleanup,
    /// §2 step 8: removal in flight.
    Removing,
    Done,
}

/// The managed task's state machine.
#[derive(Debug)]
pub struct ManagedTask {
    task: Task,
    settings: ManagedTaskSettings,
    phase: Phase,
    /// A stop number this task was handed as registered and has not finished yet.
    unfinished_stop: Option<u64>,
    /// Highest status handed to the reporter per container (by index) and for the task; `sent`
    /// on the model is only raised when the reporter confirms.
    emitted_container: Vec<ContainerStatus>,
    emitted_task: TaskStatus,
    /// When Docker last saw each container (by index) finish, in nanoseconds: tells an old
    /// `start` report from a real restart (§7). Not persisted; unknown after a restore.
    finished_nanos: Vec<Option<i64>>,
    /// An exit (by index) seen while the start call was unanswered, under a restart policy:
    /// handled once the start's answer arrived.
    exit_during_start: Vec<Option<ContainerChange>>,
    /// When each container (by index) was last restarted, once Docker confirmed that restart.
    /// Not persisted: after a restore, reconciliation has read Docker's state afresh.
    restart_confirmed_at: Vec<Option<Millis>>,
    /// When Docker saw the exit (nanoseconds) that each container's last restart answered: a
    /// report of that very exit can come in the millisecond the restart was decided.
    restart_trigger_nanos: Vec<Option<i64>>,
    steady_timer_armed: bool,
    dependency_poll_armed: bool,
    cleanup_at: Option<Millis>,
    /// Docker was away for a call: until this time (the armed `DockerRetry` timer) the task
    /// makes no new transition call, and then makes again whatever is still due.
    docker_retry_at: Option<Millis>,
    /// Consecutive rounds in which Docker was away: the back-off step of the next retry.
    docker_retry_attempt: u32,
    /// Containers (by index) whose last inspect failed without saying they are gone: inspected
    /// again when the `DockerRetry` timer fires.
    reinspect: Vec<bool>,
    /// Cleanup's removal failed because Docker was away: made again when `DockerRetry` fires.
    remove_deferred: bool,
    /// A restart (§12, by container index) that failed because Docker was away, with the exit
    /// code it answers: made again when Docker is back.
    restart_pending: Vec<Option<Option<i64>>>,
    /// Inputs the task posts to itself (synthetic changes), handled before the next pass.
    own_inbox: VecDeque<Input>,
    dirty: bool,
}

/// A change to one container, whatever its origin.
#[derive(Debug, Clone, PartialEq, Default)]
struct ContainerChange {
    status: ContainerStatus,
    error: Option<ContainerError>,
    /// A transition worker's answer: clears `applied`.
    from_transition: bool,
    exit_code: Option<i64>,
    info: Option<ContainerInfo>,
    /// When Docker saw the change, in nanoseconds (event time, or the start/finish time an
    /// inspection shows).
    observed_at: Option<i64>,
    /// A restart was tried for this STOPPED already (and failed): apply it normally.
    restart_failed: bool,
}

/// Classifies a failed Docker call for the rules of §6.
pub fn classify_error(target: ContainerStatus, error: &RuntimeError) -> ContainerError {
    let kind = match error {
        RuntimeError::Timeout { .. } => ContainerErrorKind::Timeout,
        // No answer was had, as after a timeout: a start may have happened (so it is stopped in
        // the background), a stop may not have (so it is tried again).
        RuntimeError::Panicked { .. } => ContainerErrorKind::Timeout,
        RuntimeError::NoSuchContainer { .. } => ContainerErrorKind::NoSuchContainer,
        RuntimeError::Unreachable { .. } => ContainerErrorKind::Unreachable,
        _ if target == ContainerStatus::Pulled => ContainerErrorKind::CannotPull,
        RuntimeError::CannotPull { .. } => ContainerErrorKind::CannotPull,
        _ if target == ContainerStatus::Running
            && error.to_string().trim_end().ends_with("EOF") =>
        {
            ContainerErrorKind::StartEof
        }
        // A start whose answer was lost (the connection closed mid-answer) is the same case
        // as a start error ending in EOF: it may have happened, so it is stopped (§6).
        RuntimeError::Protocol { .. } if target == ContainerStatus::Running => {
            ContainerErrorKind::StartEof
        }
        _ => ContainerErrorKind::Other,
    };
    ContainerError {
        kind,
        message: error.to_string(),
    }
}

/// Docker's view of a container as a status (§11): running → RUNNING; dead → STOPPED; never
/// started and no error → CREATED; anything else → STOPPED.
pub fn status_from_inspect(info: &ContainerInfo) -> ContainerStatus {
    let state = &info.state;
    if state.running {
        ContainerStatus::Running
    } else if state.dead {
        ContainerStatus::Stopped
    } else if state.status == "created" && state.error.is_empty() {
        ContainerStatus::Created
    } else {
        ContainerStatus::Stopped
    }
}

/// Docker's RFC 3339 times, read by the crate's one parser (kept here under the names callers use).
pub use crate::task::time::{parse_docker_time, parse_docker_time_nanos};

/// The time (nanoseconds) an inspection shows for reaching `status`: StartedAt for RUNNING,
/// FinishedAt for STOPPED.
fn observed_time(status: ContainerStatus, info: &ContainerInfo) -> Option<i64> {
    match status {
        ContainerStatus::Running => parse_docker_time_nanos(&info.state.started_at),
        ContainerStatus::Stopped => parse_docker_time_nanos(&info.state.finished_at),
        _ => None,
    }
}

/// Docker's `(network, IPv4 address)` pairs as the model keeps them.
fn network_addresses(networks: &[(String, String)]) -> Vec<crate::task::ContainerNetwork> {
    networks
        .iter()
        .map(|(name, address)| crate::task::ContainerNetwork {
            name: name.clone(),
            ipv4_address: address.clone(),
        })
        .collect()
}

fn health_from_info(info: &ContainerInfo) -> Option<(HealthStatus, Option<String>)> {
    let health = info.state.health.as_ref()?;
    let status = match health.status.as_str() {
        "healthy" => HealthStatus::Healthy,
        "unhealthy" => HealthStatus::Unhealthy,
        _ => HealthStatus::Unknown,
    };
    Some((status, health.last_output.clone()))
}

impl ManagedTask {
    /// A task to manage. `unfinished_stop`: a stop number registered for it that it must finish
    /// (the engine registers stops on its own thread; restore re-adds them).
    pub fn new(task: Task, settings: ManagedTaskSettings, unfinished_stop: Option<u64>) -> Self {
        let emitted_container = task
            .containers
            .iter()
            .map(|container| container.sent_status)
            .collect();
        let emitted_task = task.sent_status;
        let finished_nanos = vec![None; task.containers.len()];
        let exit_during_start = vec![None; task.containers.len()];
        let reinspect = vec![false; task.containers.len()];
        let restart_confirmed_at = vec![None; task.containers.len()];
        let restart_trigger_nanos = vec![None; task.containers.len()];
        ManagedTask {
            exit_during_start,
            reinspect,
            docker_retry_at: None,
            docker_retry_attempt: 0,
            remove_deferred: false,
            restart_pending: vec![None; task.containers.len()],
            restart_confirmed_at,
            restart_trigger_nanos,
            task,
            settings,
            phase: Phase::New,
            unfinished_stop,
            finished_nanos,
            emitted_container,
            emitted_task,
            steady_timer_armed: false,
            dependency_poll_armed: false,
            cleanup_at: None,
            own_inbox: VecDeque::new(),
            dirty: false,
        }
    }

    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The task given to [`ManagedTask::new`] differs from its checkpoint (restore reconciled
    /// it with Docker): the first pass writes it.
    pub fn unsaved_changes(mut self) -> Self {
        self.dirty = true;
        self
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// §2 steps 1–3: derive statuses, re-emit what is undelivered, then wait for earlier stops
    /// or begin progressing.
    pub fn start(&mut self, now: Millis) -> Vec<Effect> {
        let mut effects = Vec::new();
        // Checkpoint only what changed: restoring 1,000 unchanged tasks must not write 1,000
        // files (the caller marks changes made before the loop with `unsaved_changes`).
        let before = self.task.clone();
        let desired = self.task.desired_status.container_status();
        for container in &mut self.task.containers {
            if container.desired_status < desired {
                container.desired_status = desired;
            }
        }
        self.apply_essential_rule();
        if let Some(known) = derive_task_known_status(&self.task) {
            // A restored task keeps the time it reached its status: cleanup of a task that was
            // STOPPED before the restart is clocked from then, not from the restart.
            if known != self.task.known_status || self.task.known_status_time.is_none() {
                self.task.known_status = known;
                self.task.known_status_time = Some(now);
            }
        }
        for index in 0..self.task.containers.len() {
            self.emit_container_event_if_due(index, now, &mut effects);
        }
        self.emit_task_event_if_due(now, &mut effects);
        self.dirty = self.dirty || self.task != before;
        if self.task.known_status == TaskStatus::Stopped {
            self.enter_stopped(now, &mut effects);
        } else if self.task.start_sequence > 0 && self.task.desired_status != TaskStatus::Stopped {
            self.phase = Phase::WaitingForStops;
            effects.push(Effect::WaitForStops {
                sequence: self.task.start_sequence,
            });
        } else {
            self.phase = Phase::Progressing;
        }
        self.run_until_quiet(now, &mut effects);
        effects
    }

    /// Handles one input and returns what to do.
    pub fn handle(&mut self, input: Input, now: Millis) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.phase == Phase::Done {
            return effects;
        }
        self.own_inbox.push_back(input);
        self.run_until_quiet(now, &mut effects);
        effects
    }

    /// Processes inputs (the given one, then whatever the task posts to itself) and progress
    /// passes until nothing more happens.
    fn run_until_quiet(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        loop {
            while let Some(input) = self.own_inbox.pop_front() {
                self.process(input, now, effects);
            }
            if self.phase == Phase::Progressing {
                self.progress(now, effects);
            }
            if self.own_inbox.is_empty() {
                break;
            }
        }
        if self.dirty {
            self.dirty = false;
            // The change is recorded before any event about it leaves and before any Docker
            // call it leads to: a reader who saw the event finds the snapshot and the checkpoint
            // at least as new, and a container's fixed name (and the fact that its create is
            // under way) is on disk before the create, so a crash mid-create is adopted by name
            // at restore instead of duplicated.
            let first_event = effects
                .iter()
                .position(|effect| matches!(effect, Effect::Emit { .. } | Effect::Docker(_)))
                .unwrap_or(effects.len());
            effects.insert(first_event, Effect::Checkpoint);
        }
    }

    fn process(&mut self, input: Input, now: Millis, effects: &mut Vec<Effect>) {
        match input {
            Input::Desired {
                status,
                sequence,
                registered,
            } => self.desired_change(status, sequence, registered, effects),
            Input::Transition {
                container,
                target,
                result,
            } => {
                let Some(index) = self.task.container_index(&container) else {
                    return;
                };
                if let Err(error) = &result {
                    if docker_away(DockerCallKind::for_target(target), error) {
                        self.docker_away_for_transition(index, target, error, now, effects);
                        return;
                    }
                }
                self.docker_answered();
                let change = match result {
                    Ok(output) => {
                        if let Some(docker_id) = &output.docker_id {
                            self.task.containers[index].docker_id = Some(docker_id.clone());
                            self.dirty = true;
                            effects.push(Effect::TrackContainer {
                                docker_id: docker_id.clone(),
                            });
                        }
                        if target == ContainerStatus::Pulled {
                            self.task.pull_stopped_at = Some(now);
                        }
                        ContainerChange {
                            status: target,
                            from_transition: true,
                            exit_code: output.info.as_ref().and_then(|info| {
                                (target == ContainerStatus::Stopped).then_some(info.state.exit_code)
                            }),
                            observed_at: output
                                .info
                                .as_ref()
                                .and_then(|info| observed_time(target, info)),
                            info: output.info,
                            ..ContainerChange::default()
                        }
                    }
                    Err(error) => {
                        if target == ContainerStatus::Pulled {
                            self.task.pull_stopped_at = Some(now);
                        }
                        ContainerChange {
                            status: target,
                            error: Some(classify_error(target, &error)),
                            from_transition: true,
                            ..ContainerChange::default()
                        }
                    }
                };
                self.container_change(index, change, now, effects);
                if let Some(exit) = self.exit_during_start[index].take() {
                    self.container_change(index, exit, now, effects);
                }
            }
            Input::Inspected { container, result } => {
                let Some(index) = self.task.container_index(&container) else {
                    return;
                };
                if let Err(error) = &result {
                    if !inspect_says_gone(error) {
                        // Not a fact about the container (a 500, a malformed answer, Docker
                        // away): its status stays as it was; inspect it again after a back-off.
                        log::debug!(
                            "task {}: inspecting {container} failed: {error}; inspecting again later",
                            self.task.id
                        );
                        self.reinspect[index] = true;
                        self.arm_docker_retry(now, effects);
                        return;
                    }
                }
                self.docker_answered();
                self.reinspect[index] = false;
                match result {
                    Ok(info) => {
                        let status = status_from_inspect(&info);
                        let change = ContainerChange {
                            status,
                            exit_code: (status == ContainerStatus::Stopped)
                                .then_some(info.state.exit_code),
                            observed_at: observed_time(status, &info),
                            info: Some(info),
                            ..ContainerChange::default()
                        };
                        self.container_change(index, change, now, effects);
                    }
                    Err(RuntimeError::NoSuchContainer { message }) => {
                        let known = self.task.containers[index].known_status;
                        // A container adopted by its name (its id is known, its create's answer
                        // was lost) that is gone again was removed from outside, like one known
                        // CREATED or RUNNING: it vanished, rather than being made once more
                        // under a new id.
                        let exists_for_the_task = known >= ContainerStatus::Created
                            || self.task.containers[index].docker_id.is_some();
                        if exists_for_the_task && known < ContainerStatus::Stopped {
                            let change = ContainerChange {
                                status: ContainerStatus::Stopped,
                                error: Some(ContainerError {
                                    kind: ContainerErrorKind::Vanished,
                                    message: format!("container vanished from Docker: {message}"),
                                }),
                                ..ContainerChange::default()
                            };
                            self.container_change(index, change, now, effects);
                        }
                    }
                    // Handled above.
                    Err(_) => {}
                }
            }
            Input::DockerEvent {
                docker_id,
                observation: DockerObservation::FoundByName { docker_name },
            } => self.adopt_by_name(docker_id, &docker_name, now, effects),
            Input::DockerEvent {
                docker_id,
                observation,
            } => {
                let Some(index) = self
                    .task
                    .containers
                    .iter()
                    .position(|container| container.docker_id.as_deref() == Some(&docker_id))
                else {
                    return;
                };
                match observation {
                    DockerObservation::Status {
                        status,
                        exit_code,
                        at,
                    } => {
                        let change = ContainerChange {
                            status,
                            exit_code,
                            observed_at: at,
                            ..ContainerChange::default()
                        };
                        let known = self.task.containers[index].known_status;
                        if status == ContainerStatus::Running
                            && known < ContainerStatus::Running
                            && self.task.containers[index].applied_status
                                == Some(ContainerStatus::Running)
                        {
                            // Our own start call is in flight: its answer brings RUNNING together
                            // with the inspection (ports, start time), so a reader who sees RUNNING
                            // also sees the container's port bindings, as ECS reports them.
                            return;
                        }
                        let exited =
                            status == ContainerStatus::Stopped && known < ContainerStatus::Stopped;
                        // Applied at once: the STOPPED event must not wait on Docker, which
                        // answers an inspection of a just-died container only after it has
                        // finished handling the exit. A memory kill was recorded by the `oom`
                        // event that came first.
                        self.container_change(index, change, now, effects);
                        if exited {
                            // Then one inspection, in the background, for what the event does
                            // not say: the exit code of a `stop`, the finish time, and Docker's
                            // own error (recorded on the container if none came first).
                            effects.push(Effect::Docker(DockerCall::Inspect {
                                container: self.task.containers[index].name().to_string(),
                                docker_id,
                            }));
                        }
                    }
                    DockerObservation::Health { health } => {
                        self.set_health(index, health, None, now);
                    }
                    DockerObservation::OutOfMemory => self.record_out_of_memory(index),
                    // Handled above: it names a container by its name, not its id.
                    DockerObservation::FoundByName { .. } => {}
                }
            }
            Input::SyntheticStop { container, error } => {
                let Some(index) = self.task.container_index(&container) else {
                    return;
                };
                let change = ContainerChange {
                    status: ContainerStatus::Stopped,
                    error,
                    from_transition: true,
                    ..ContainerChange::default()
                };
                self.container_change(index, change, now, effects);
            }
            Input::Restarted {
                container,
                exit_code,
                result,
            } => {
                let Some(index) = self.task.container_index(&container) else {
                    return;
                };
                let restarted = &mut self.task.containers[index];
                if restarted.applied_status == Some(ContainerStatus::Running) {
                    restarted.applied_status = None;
                }
                match result {
                    Ok(()) => {
                        self.restart_confirmed_at[index] = restarted.last_restart_at;
                        log::info!(
                            "task {}: restarted container {container} (restart {})",
                            self.task.id,
                            restarted.restart_count
                        );
                        self.docker_answered();
                    }
                    // Docker is away (it restarts, and took the container down with it): the
                    // restart is made when Docker is back, not given up.
                    Err(error) if docker_away(DockerCallKind::Start, &error) => {
                        log::warn!(
                            "task {}: cannot restart container {container} while Docker is away \
                             ({error}); restarting it when Docker is back",
                            self.task.id
                        );
                        self.restart_pending[index] = Some(exit_code);
                        self.arm_docker_retry(now, effects);
                    }
                    Err(error) => {
                        log::warn!(
                            "task {}: restarting container {container} failed: {error}",
                            self.task.id
                        );
                        // A restart that timed out (or lost its answer) may have started the
                        // container after all: stop it, as §6 does for a start, as the
                        // container's own transition, so that it becomes STOPPED with the
                        // stop's answer rather than while Docker may still run it.
                        let may_run = error_outcome(
                            ContainerStatus::Running,
                            &classify_error(ContainerStatus::Running, &error),
                            self.settings.rules.pull_behavior,
                        )
                        .stop_in_background;
                        let container = &mut self.task.containers[index];
                        match (may_run, container.docker_id.clone()) {
                            (true, Some(docker_id)) => {
                                container.applied_status = Some(ContainerStatus::Stopped);
                                self.dirty = true;
                                effects.push(Effect::Docker(DockerCall::Stop {
                                    container: container.name().to_string(),
                                    docker_id,
                                    grace: stop_grace(container, self.settings.stop_timeout),
                                    background: false,
                                }));
                            }
                            _ => {
                                let change = ContainerChange {
                                    status: ContainerStatus::Stopped,
                                    exit_code,
                                    restart_failed: true,
                                    ..ContainerChange::default()
                                };
                                self.container_change(index, change, now, effects);
                            }
                        }
                    }
                }
                // An exit held while the restart call was out (the restarted container exited
                // again) is handled now that its answer cleared `applied`, as after a start.
                if let Some(exit) = self.exit_during_start[index].take() {
                    self.container_change(index, exit, now, effects);
                }
            }
            Input::Resync => {
                // The event stream reconnected (Docker is back) or events were missed: what
                // waited for Docker is tried now rather than at the end of its back-off.
                self.retry_docker_now();
                self.inspect_all(effects);
                self.retry_pending_restarts(effects);
            }
            Input::TimerFired(TimerKind::DockerRetry) => {
                self.docker_retry_at = None;
                self.reinspect_failed(effects);
                self.retry_pending_restarts(effects);
                // Progressing: the pass that follows makes the due calls again.
                if std::mem::take(&mut self.remove_deferred) {
                    self.cleanup_if_due(now, effects);
                }
            }
            Input::WaitGroupReady => {
                if self.phase == Phase::WaitingForStops {
                    self.phase = Phase::Progressing;
                }
            }
            Input::TimerFired(TimerKind::SteadyCheck) => {
                self.steady_timer_armed = false;
                self.emit_unreported(now, effects);
                if self.task.known_status < TaskStatus::Stopped {
                    self.inspect_all(effects);
                }
            }
            Input::TimerFired(TimerKind::DependencyPoll) => {
                self.dependency_poll_armed = false;
                if self.phase == Phase::Progressing {
                    self.inspect_all(effects);
                }
            }
            Input::TimerFired(TimerKind::Cleanup) => self.cleanup_if_due(now, effects),
            Input::Reported(Reported::Container { name, status }) => {
                if let Some(index) = self.task.container_index(&name) {
                    let container = &mut self.task.containers[index];
                    if container.sent_status < status {
                        container.sent_status = status;
                        self.dirty = true;
                    }
                }
            }
            Input::ReportFailed(Reported::Container { name, .. }) => {
                if let Some(index) = self.task.container_index(&name) {
                    self.emitted_container[index] = self.task.containers[index].sent_status;
                }
            }
            Input::ReportFailed(Reported::Task { .. }) => {
                self.emitted_task = self.task.sent_status;
            }
            Input::Reported(Reported::Task { status }) => {
                if self.task.sent_status < status {
                    self.task.sent_status = status;
                    self.dirty = true;
                }
                self.cleanup_if_due(now, effects);
            }
            Input::Removed => {
                if self.phase == Phase::Removing {
                    self.phase = Phase::Done;
                    effects.push(Effect::Done);
                }
            }
            Input::RemoveDeferred { error } => {
                if self.phase == Phase::Removing {
                    log::info!(
                        "task {}: cannot remove its containers while Docker is away ({error}); \
                         trying again",
                        self.task.id
                    );
                    self.phase = Phase::AwaitingCleanup;
                    self.remove_deferred = true;
                    self.arm_docker_retry(now, effects);
                }
            }
        }
    }

    /// §2 "Desired change", with §9's registration handled by the engine.
    fn desired_change(
        &mut self,
        status: TaskStatus,
        sequence: u64,
        registered: bool,
        effects: &mut Vec<Effect>,
    ) {
        if registered {
            if status == TaskStatus::Stopped
                && self.task.stop_sequence == 0
                && self.unfinished_stop.is_none()
            {
                self.task.stop_sequence = sequence;
                self.dirty = true;
                if self.task.known_status == TaskStatus::Stopped {
                    // Already past the point where the stop is marked done.
                    effects.push(Effect::WaitGroupDone { sequence });
                } else {
                    self.unfinished_stop = Some(sequence);
                }
            } else {
                // Not kept as this task's stop number: finish it so it never blocks a start.
                effects.push(Effect::WaitGroupDone { sequence });
            }
        }
        if status <= self.task.desired_status {
            return;
        }
        // A stop (or start) asked while Docker was away is tried at once: Docker may be back.
        self.retry_docker_now();
        self.raise_desired(status);
        if status == TaskStatus::Stopped && self.task.stopped_reason.is_none() && sequence != 0 {
            self.task.stopped_reason = Some("Task stopped by request".to_string());
        }
        if status == TaskStatus::Stopped && self.phase == Phase::WaitingForStops {
            self.phase = Phase::Progressing;
            effects.push(Effect::StopWaitingForStops);
        }
    }

    fn raise_desired(&mut self, status: TaskStatus) {
        if status <= self.task.desired_status {
            return;
        }
        self.task.desired_status = status;
        let container_desired = status.container_status();
        for container in &mut self.task.containers {
            if container.desired_status < container_desired {
                container.desired_status = container_desired;
            }
        }
        self.dirty = true;
    }

    /// §5: an essential container known or desired STOPPED takes the task to desired STOPPED.
    fn apply_essential_rule(&mut self) {
        if self.task.desired_status < TaskStatus::Stopped && essential_container_stopped(&self.task)
        {
            if self.task.stopped_reason.is_none() {
                self.task.stopped_reason = Some("Essential container in task exited".to_string());
            }
            self.raise_desired(TaskStatus::Stopped);
        }
    }

    fn set_health(
        &mut self,
        index: usize,
        health: HealthStatus,
        output: Option<String>,
        now: Millis,
    ) {
        let container = &mut self.task.containers[index];
        if container.definition.health_check.is_none() {
            return;
        }
        if container.health != health {
            container.health = health;
            container.health_since = Some(now);
            self.dirty = true;
        }
        if output.is_some() && container.health_output != output {
            container.health_output = output;
            self.dirty = true;
        }
    }

    fn copy_metadata(&mut self, index: usize, change: &ContainerChange, now: Millis) {
        let container = &mut self.task.containers[index];
        if let Some(exit_code) = change.exit_code {
            container.exit_code = Some(exit_code);
        }
        let mut health = None;
        if let Some(info) = &change.info {
            if !info.image_id.is_empty() {
                container.image_id = Some(info.image_id.clone());
            }
            let ports: Vec<PortBinding> = info.ports.clone();
            if !ports.is_empty() {
                container.ports = ports;
            }
            // A stopped container's inspect has lost its addresses: keep the last ones seen.
            if info.networks.iter().any(|(_, address)| !address.is_empty()) {
                container.networks = network_addresses(&info.networks);
            }
            if let Some(created) = parse_docker_time(&info.created) {
                container.created_at = Some(created);
            }
            if let Some(started) = parse_docker_time(&info.state.started_at) {
                container.started_at = Some(started);
            }
            if !info.state.running {
                if let Some(finished) = parse_docker_time(&info.state.finished_at) {
                    container.finished_at = Some(finished);
                }
            }
            health = health_from_info(info);
        }
        if let (ContainerStatus::Stopped, Some(observed)) = (change.status, change.observed_at) {
            let finished = &mut self.finished_nanos[index];
            *finished = Some(finished.map_or(observed, |known| known.max(observed)));
        }
        let container = &mut self.task.containers[index];
        // A failed call carries no fact about the container: it did not start or finish.
        if change.error.is_none() {
            let at = change
                .observed_at
                .and_then(|nanos| u64::try_from(nanos / 1_000_000).ok())
                .unwrap_or(now);
            if change.status == ContainerStatus::Running && container.started_at.is_none() {
                container.started_at = Some(at);
            }
            if change.status == ContainerStatus::Stopped && container.finished_at.is_none() {
                container.finished_at = Some(at);
            }
        }
        if let Some((status, output)) = health {
            self.set_health(index, status, output, now);
        }
        self.dirty = true;
    }

    /// The re-list after a reconnect found `docker_id` under the fixed name of one of this task's
    /// containers that never recorded an id (its create's answer was lost): record the id, route
    /// its events here, and inspect it for its status. A container that has an id already (the
    /// create's answer came after the list) keeps it.
    fn adopt_by_name(
        &mut self,
        docker_id: String,
        docker_name: &str,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        if self
            .task
            .containers
            .iter()
            .any(|container| container.docker_id.as_deref() == Some(docker_id.as_str()))
        {
            return;
        }
        let Some(index) = self.task.containers.iter().position(|container| {
            container.docker_id.is_none() && container.docker_name.as_deref() == Some(docker_name)
        }) else {
            return;
        };
        let container = &mut self.task.containers[index];
        log::info!(
            "task {}: adopted container {} ({docker_id}), found by its name {docker_name} after \
             Docker's event stream came back",
            self.task.id,
            container.name()
        );
        container.docker_id = Some(docker_id.clone());
        self.dirty = true;
        effects.push(Effect::TrackContainer {
            docker_id: docker_id.clone(),
        });
        effects.push(Effect::Docker(DockerCall::Inspect {
            container: container.name().to_string(),
            docker_id,
        }));
        // Docker has it, so it was created (see `progress`).
        self.adopted_is_created(index, now, effects);
    }

    /// A container whose Docker id the task holds while it still counts as not created (adopted
    /// by its name after a create's answer was lost) was created: the task goes on from CREATED
    /// — its inspection says more — and never creates it again under a new id; if it is removed
    /// from outside meanwhile, its start finds it gone. Waits for a call still out for it (the
    /// lost create's retry), so there are never two at once.
    fn adopted_is_created(&mut self, index: usize, now: Millis, effects: &mut Vec<Effect>) {
        let container = &self.task.containers[index];
        if container.known_status < ContainerStatus::Created
            && container.docker_id.is_some()
            && container.applied_status.is_none()
        {
            let change = ContainerChange {
                status: ContainerStatus::Created,
                ..ContainerChange::default()
            };
            self.container_change(index, change, now, effects);
        }
    }

    /// Docker's `oom` event: the container was killed (or is about to exit) for exceeding its
    /// memory limit. Recorded at once so the STOPPED event that follows carries the reason; an
    /// error the container already carries was the first cause and stays.
    fn record_out_of_memory(&mut self, index: usize) {
        let container = &mut self.task.containers[index];
        if let Some(reason) =
            exit_error_from_inspection(container.applying_error.as_ref(), true, "")
        {
            container.applying_error = Some(reason);
            self.dirty = true;
        }
    }

    /// A STOPPED change whose inspection shows why the container stopped (killed for memory,
    /// Docker's own error) gives the container that reason, unless an earlier error already did.
    fn record_exit_reason(&mut self, index: usize, change: &ContainerChange) {
        let (ContainerStatus::Stopped, None, Some(info)) =
            (change.status, &change.error, &change.info)
        else {
            return;
        };
        let container = &mut self.task.containers[index];
        if let Some(reason) = exit_error_from_inspection(
            container.applying_error.as_ref(),
            info.state.oom_killed,
            &info.state.error,
        ) {
            container.applying_error = Some(reason);
            self.dirty = true;
        }
    }

    /// §2 "Container change".
    fn container_change(
        &mut self,
        index: usize,
        change: ContainerChange,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let stop_default = self.settings.stop_timeout;
        let container = &mut self.task.containers[index];
        // `applied` marks the call in flight and is cleared by that call's own answer only: an
        // event may raise known to the target first (Docker's `start` before the start call
        // returns), and clearing then would let a second call (a stop) run beside the first.
        if change.from_transition && container.applied_status == Some(change.status) {
            container.applied_status = None;
        }
        // §7: a container known STOPPED reported running again: one stop, no status change.
        // A report Docker made before the container finished is old news (a `start` event
        // overtaken by the stop's own result), not a restart.
        if change.status == ContainerStatus::Running
            && container.known_status == ContainerStatus::Stopped
        {
            let stale = matches!(
                (change.observed_at, self.finished_nanos[index]),
                (Some(observed), Some(finished)) if observed <= finished
            );
            if !stale && restop_on_running_report(container) {
                container.restopped = true;
                self.dirty = true;
                if let Some(docker_id) = container.docker_id.clone() {
                    effects.push(Effect::Docker(DockerCall::Stop {
                        container: container.name().to_string(),
                        docker_id,
                        grace: stop_grace(container, stop_default),
                        background: true,
                    }));
                }
            }
            return;
        }
        // An exit Docker saw before this container's last restart was decided (a late `die`
        // event, an inspection made before the restart landed), or the very exit that restart
        // answered, is old news once Docker confirmed the restart: applying it would mark the
        // restarted, running container STOPPED. While the restart call is out, such a report
        // waits for the answer; a restart that failed leaves that exit standing.
        if change.status == ContainerStatus::Stopped
            && change.error.is_none()
            && !change.from_transition
            && !change.restart_failed
        {
            let trigger = self.restart_trigger_nanos[index];
            let before = |restarted: Option<Millis>| match (change.observed_at, restarted) {
                (Some(observed), Some(restarted)) => {
                    observed / 1_000_000 < i64::try_from(restarted).unwrap_or(i64::MAX)
                        || trigger.is_some_and(|exit| observed <= exit)
                }
                _ => false,
            };
            if before(self.restart_confirmed_at[index]) {
                return;
            }
            if container.applied_status == Some(ContainerStatus::Running)
                && container.known_status == ContainerStatus::Running
                && before(container.last_restart_at)
            {
                self.exit_during_start[index] = Some(change);
                return;
            }
        }
        if change.status <= container.known_status {
            // A repeat of the current status still refreshes metadata (health, exit code, times).
            if change.status == container.known_status && change.error.is_none() {
                self.copy_metadata(index, &change, now);
                self.record_exit_reason(index, &change);
            }
            return;
        }
        // §12 while the start call is still unanswered (Docker's `start` event made the
        // container RUNNING, then it exited before the call returned): hold the exit until that
        // answer clears `applied`, so the restart is decided then and never runs beside the
        // start call.
        if change.status == ContainerStatus::Stopped
            && change.error.is_none()
            && !change.from_transition
            && !change.restart_failed
            && container.applied_status == Some(ContainerStatus::Running)
            && container.known_status == ContainerStatus::Running
            && should_restart(container, change.exit_code, now)
        {
            self.exit_during_start[index] = Some(change);
            return;
        }
        // §12: an exit under a restart policy starts the container again instead; on success
        // the change is dropped (known stays RUNNING, no event).
        if change.status == ContainerStatus::Stopped
            && change.error.is_none()
            && !change.from_transition
            && !change.restart_failed
            && container.applied_status.is_none()
            && should_restart(container, change.exit_code, now)
        {
            if let Some(docker_id) = container.docker_id.clone() {
                container.restart_count += 1;
                container.last_restart_at = Some(now);
                self.restart_trigger_nanos[index] = change.observed_at;
                container.applied_status = Some(ContainerStatus::Running);
                if change.exit_code.is_some() {
                    container.exit_code = change.exit_code;
                }
                self.dirty = true;
                effects.push(Effect::Docker(DockerCall::Restart {
                    container: container.name().to_string(),
                    docker_id,
                    exit_code: change.exit_code,
                }));
                return;
            }
        }
        let previous_known = container.known_status;
        container.known_status = change.status;
        container.known_status_time = Some(now);
        self.copy_metadata(index, &change, now);
        self.record_exit_reason(index, &change);

        if let Some(error) = &change.error {
            let outcome = error_outcome(change.status, error, self.settings.rules.pull_behavior);
            let container = &mut self.task.containers[index];
            if container.applying_error.is_none() {
                container.applying_error = Some(error.clone());
            }
            if outcome.reset_known {
                container.known_status = previous_known;
            }
            if outcome.container_desired_stopped {
                container.desired_status = ContainerStatus::Stopped;
            }
            if outcome.stop_in_background {
                if let Some(docker_id) = container.docker_id.clone() {
                    // The start may have happened: stop it as this container's own transition,
                    // so it reaches STOPPED with the stop's answer. Left untracked, §3 row 5 made
                    // it STOPPED at once, and the task could finish its stop number (letting a
                    // replacement start) while Docker still ran the container.
                    container.applied_status = Some(ContainerStatus::Stopped);
                    effects.push(Effect::Docker(DockerCall::Stop {
                        container: container.name().to_string(),
                        docker_id,
                        grace: stop_grace(container, stop_default),
                        background: false,
                    }));
                }
            }
            if outcome.stop_task {
                if self.task.stopped_reason.is_none() {
                    self.task.stopped_reason = Some(error.message.clone());
                }
                self.raise_desired(TaskStatus::Stopped);
            }
            if !outcome.emit_events {
                self.apply_essential_rule();
                return;
            }
        }

        let container = &self.task.containers[index];
        if container.known_status == ContainerStatus::Stopped && container.essential() {
            if self.task.execution_stopped_at.is_none() {
                self.task.execution_stopped_at = Some(now);
            }
            if self.task.stopped_reason.is_none() {
                let reason = match &container.applying_error {
                    Some(error) => format!(
                        "Essential container {} stopped: {}",
                        container.name(),
                        error.message
                    ),
                    None => "Essential container in task exited".to_string(),
                };
                self.task.stopped_reason = Some(reason);
            }
        }
        self.emit_container_event_if_due(index, now, effects);
        if let Some(known) = derive_task_known_status(&self.task) {
            self.task.known_status = known;
            self.task.known_status_time = Some(now);
            self.emit_task_event_if_due(now, effects);
            if known == TaskStatus::Stopped {
                self.enter_stopped(now, effects);
            }
        }
        self.apply_essential_rule();
    }

    fn emit_container_event_if_due(
        &mut self,
        index: usize,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let container = &self.task.containers[index];
        let known = container.known_status;
        if !matches!(known, ContainerStatus::Running | ContainerStatus::Stopped)
            || self.emitted_container[index] >= known
            || container.sent_status >= known
        {
            return;
        }
        self.emitted_container[index] = known;
        effects.push(Effect::Emit {
            event: NewEvent {
                time: now,
                task: self.task.id.clone(),
                container: Some(container.name().to_string()),
                status: known.as_str().to_string(),
                exit_code: if known == ContainerStatus::Stopped {
                    container.exit_code
                } else {
                    None
                },
                reason: container
                    .applying_error
                    .as_ref()
                    .map(|error| error.message.clone()),
            },
            reported: Reported::Container {
                name: container.name().to_string(),
                status: known,
            },
        });
    }

    /// Emits again what the reporter failed to record (a no-op for events still on their way).
    fn emit_unreported(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        for index in 0..self.task.containers.len() {
            self.emit_container_event_if_due(index, now, effects);
        }
        self.emit_task_event_if_due(now, effects);
    }

    fn emit_task_event_if_due(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        let known = self.task.known_status;
        if !matches!(known, TaskStatus::Running | TaskStatus::Stopped)
            || self.emitted_task >= known
            || self.task.sent_status >= known
        {
            return;
        }
        self.emitted_task = known;
        effects.push(Effect::Emit {
            event: NewEvent {
                time: now,
                task: self.task.id.clone(),
                container: None,
                status: known.as_str().to_string(),
                exit_code: None,
                reason: if known == TaskStatus::Stopped {
                    self.task.stopped_reason.clone()
                } else {
                    None
                },
            },
            reported: Reported::Task { status: known },
        });
    }

    /// §2 step 5 onwards: finish the stop number, arm the cleanup clock.
    fn enter_stopped(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if matches!(
            self.phase,
            Phase::AwaitingCleanup | Phase::Removing | Phase::Done
        ) {
            return;
        }
        if self.phase == Phase::WaitingForStops {
            effects.push(Effect::StopWaitingForStops);
        }
        self.phase = Phase::AwaitingCleanup;
        if let Some(sequence) = self.unfinished_stop.take() {
            effects.push(Effect::WaitGroupDone { sequence });
        }
        let stopped_at = self.task.known_status_time.unwrap_or(now);
        let wait = u64::try_from(self.settings.cleanup_wait.as_millis()).unwrap_or(u64::MAX);
        let at = stopped_at.saturating_add(wait);
        self.cleanup_at = Some(at);
        self.dirty = true;
        if at <= now {
            self.own_inbox
                .push_back(Input::TimerFired(TimerKind::Cleanup));
        } else {
            effects.push(Effect::ArmTimer {
                timer: TimerKind::Cleanup,
                at,
            });
        }
    }

    /// §2 steps 6–8: once the deadline passed and STOPPED was reported, remove the containers.
    fn cleanup_if_due(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if self.phase != Phase::AwaitingCleanup {
            return;
        }
        let Some(at) = self.cleanup_at else {
            return;
        };
        if now < at {
            effects.push(Effect::ArmTimer {
                timer: TimerKind::Cleanup,
                at,
            });
            return;
        }
        if self.task.sent_status < TaskStatus::Stopped {
            self.emit_unreported(now, effects);
            let poll =
                u64::try_from(self.settings.sent_poll_interval.as_millis()).unwrap_or(u64::MAX);
            effects.push(Effect::ArmTimer {
                timer: TimerKind::Cleanup,
                at: now.saturating_add(poll),
            });
            return;
        }
        self.phase = Phase::Removing;
        effects.push(Effect::Docker(DockerCall::Remove {
            // By id; by the fixed name where no id is known: a create whose answer was lost (a
            // time-out that happened, a crash) or that Docker made only after a restore looked
            // the name up may have left a container under it. Removing a name Docker does not
            // know is a harmless 404.
            docker_ids: self
                .task
                .containers
                .iter()
                .filter_map(|container| {
                    container
                        .docker_id
                        .clone()
                        .or_else(|| container.docker_name.clone())
                })
                .collect(),
            volumes: task_volume_names(&self.task),
        }));
    }

    /// A transition call failed because Docker was away (ENGINE-SEMANTICS §6 does not apply):
    /// nothing is in flight any more, the container keeps its status and no error is recorded,
    /// and the call is made again after a back-off.
    fn docker_away_for_transition(
        &mut self,
        index: usize,
        target: ContainerStatus,
        error: &RuntimeError,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let container = &mut self.task.containers[index];
        if container.applied_status == Some(target) {
            container.applied_status = None;
        }
        let name = container.name().to_string();
        if self.docker_retry_attempt == 0 {
            log::warn!(
                "task {}: Docker is away ({error}); container {name} waits for it to go to \
                 {target}",
                self.task.id
            );
        } else {
            log::debug!(
                "task {}: Docker is still away ({error}); container {name} waits",
                self.task.id
            );
        }
        self.arm_docker_retry(now, effects);
        // An exit held until the start call answered (§12) is applied now that it did: the
        // start Docker never received is made again, the exit is news about the container.
        if let Some(exit) = self.exit_during_start[index].take() {
            self.container_change(index, exit, now, effects);
        }
    }

    /// Arms the `DockerRetry` timer with the next back-off step, unless it is armed already (one
    /// step per round, however many calls failed in it).
    fn arm_docker_retry(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if self.docker_retry_at.is_some() {
            return;
        }
        let delay = Self::millis(docker_retry_delay(self.docker_retry_attempt));
        self.docker_retry_attempt = self.docker_retry_attempt.saturating_add(1);
        let at = now.saturating_add(delay);
        self.docker_retry_at = Some(at);
        effects.push(Effect::ArmTimer {
            timer: TimerKind::DockerRetry,
            at,
        });
    }

    /// Docker answered a call: the next time it is away, the back-off starts again from 1 s.
    fn docker_answered(&mut self) {
        self.docker_retry_attempt = 0;
    }

    /// Makes what waits for Docker due now (the armed timer firing later finds nothing to do
    /// but a pass).
    fn retry_docker_now(&mut self) {
        self.docker_retry_at = None;
    }

    /// Inspects again the containers whose last inspect taught nothing.
    fn reinspect_failed(&mut self, effects: &mut Vec<Effect>) {
        if matches!(self.phase, Phase::Removing | Phase::Done) {
            return;
        }
        let containers = self.task.containers.iter().zip(&self.restart_pending);
        for ((container, restart_pending), reinspect) in containers.zip(&mut self.reinspect) {
            // A container restarted next is not inspected: the inspection would only race it.
            if !std::mem::take(reinspect) || restart_pending.is_some() {
                continue;
            }
            if let Some(docker_id) = &container.docker_id {
                effects.push(Effect::Docker(DockerCall::Inspect {
                    container: container.name().to_string(),
                    docker_id: docker_id.clone(),
                }));
            }
        }
    }

    /// Makes again the restarts Docker was away for. A container desired STOPPED meanwhile is
    /// not restarted: the pass stops it (Docker answers that stop with its exit).
    fn retry_pending_restarts(&mut self, effects: &mut Vec<Effect>) {
        for index in 0..self.task.containers.len() {
            let Some(exit_code) = self.restart_pending[index].take() else {
                continue;
            };
            let container = &mut self.task.containers[index];
            if container.desired_status.is_stopped() || container.applied_status.is_some() {
                continue;
            }
            let Some(docker_id) = container.docker_id.clone() else {
                continue;
            };
            container.applied_status = Some(ContainerStatus::Running);
            effects.push(Effect::Docker(DockerCall::Restart {
                container: container.name().to_string(),
                docker_id,
                exit_code,
            }));
        }
    }

    fn inspect_all(&mut self, effects: &mut Vec<Effect>) {
        for (container, restart_pending) in self.task.containers.iter().zip(&self.restart_pending) {
            // Known to have exited, and restarted next: an inspection would only race it.
            if restart_pending.is_some() {
                continue;
            }
            if let Some(docker_id) = &container.docker_id {
                if container.known_status < ContainerStatus::Stopped {
                    effects.push(Effect::Docker(DockerCall::Inspect {
                        container: container.name().to_string(),
                        docker_id: docker_id.clone(),
                    }));
                }
            }
        }
    }

    fn millis(duration: Duration) -> Millis {
        u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
    }

    /// The steady re-check period with a small per-task spread (±30 s on long periods), so
    /// many tasks do not inspect all at once.
    fn steady_check_delay(&self) -> Millis {
        let base = Self::millis(self.settings.steady_check_interval);
        if base < 120_000 {
            return base;
        }
        let spread: u64 = self.task.id.bytes().map(u64::from).sum::<u64>() % 60_001;
        base - 30_000 + spread
    }

    /// §2 "Progress pass".
    fn progress(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if self.task.known_status == TaskStatus::Stopped {
            return;
        }
        if is_steady(&self.task) {
            if !self.steady_timer_armed {
                self.steady_timer_armed = true;
                effects.push(Effect::ArmTimer {
                    timer: TimerKind::SteadyCheck,
                    at: now.saturating_add(self.steady_check_delay()),
                });
            }
            return;
        }
        for index in 0..self.task.containers.len() {
            self.adopted_is_created(index, now, effects);
        }
        let mut acted = false;
        let mut in_flight = false;
        let mut blocked = false;
        for index in 0..self.task.containers.len() {
            if self.task.containers[index].applied_status.is_some() {
                in_flight = true;
                continue;
            }
            match next_state(&self.task, index, &self.settings.rules, now) {
                NextState::None => {}
                NextState::Blocked { .. } => blocked = true,
                NextState::StartInFlight => in_flight = true,
                NextState::Terminal { reason } => {
                    let container = &mut self.task.containers[index];
                    container.desired_status = ContainerStatus::Stopped;
                    container.exit_code = Some(CANNOT_START_EXIT_CODE);
                    let name = container.name().to_string();
                    self.dirty = true;
                    self.post_synthetic_stop(
                        index,
                        Some(ContainerError {
                            kind: ContainerErrorKind::DependencyTerminal,
                            message: format!("cannot start container {name}: {reason}"),
                        }),
                    );
                    acted = true;
                }
                NextState::SyntheticStopped => {
                    self.post_synthetic_stop(index, None);
                    acted = true;
                }
                // Docker was away: the call waits for the retry timer, and the task for the call.
                NextState::Transition { .. } if self.docker_retry_at.is_some() => in_flight = true,
                NextState::Transition { target, action } => {
                    self.begin_transition(index, target, action, now, effects);
                    acted = true;
                }
            }
        }
        if acted || in_flight {
            return;
        }
        if blocked {
            if !self.dependency_poll_armed {
                self.dependency_poll_armed = true;
                effects.push(Effect::ArmTimer {
                    timer: TimerKind::DependencyPoll,
                    at: now.saturating_add(Self::millis(self.settings.dependency_poll_interval)),
                });
            }
            return;
        }
        match unable_to_progress(&self.task) {
            ProgressVerdict::GiveUpStopped => {
                log::warn!(
                    "task {}: cannot reach STOPPED by any further step; marking it STOPPED",
                    self.task.id
                );
                self.task.known_status = TaskStatus::Stopped;
                self.task.known_status_time = Some(now);
                if self.task.stopped_reason.is_none() {
                    self.task.stopped_reason = Some(
                        "TaskStateError: the task could not reach STOPPED; giving up".to_string(),
                    );
                }
                self.dirty = true;
                self.emit_task_event_if_due(now, effects);
                self.enter_stopped(now, effects);
            }
            ProgressVerdict::StopTask => {
                if self.task.stopped_reason.is_none() {
                    self.task.stopped_reason =
                        Some("An essential container cannot make progress".to_string());
                }
                self.own_inbox.push_back(Input::Desired {
                    status: TaskStatus::Stopped,
                    sequence: 0,
                    registered: false,
                });
            }
            ProgressVerdict::Nothing => {}
        }
    }

    /// A no-call STOPPED goes through the task's own inbox so it takes the normal change path.
    fn post_synthetic_stop(&mut self, index: usize, error: Option<ContainerError>) {
        let name = self.task.containers[index].name().to_string();
        // Marks the container as having a change pending so the same pass does not post twice.
        self.task.containers[index].applied_status = Some(ContainerStatus::Stopped);
        self.own_inbox.push_back(Input::SyntheticStop {
            container: name,
            error,
        });
    }

    fn begin_transition(
        &mut self,
        index: usize,
        target: ContainerStatus,
        action: DockerAction,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let container = &self.task.containers[index];
        let name = container.name().to_string();
        let call =
            match action {
                DockerAction::Pull => {
                    if self.task.pull_started_at.is_none() {
                        self.task.pull_started_at = Some(now);
                    }
                    Ok(DockerCall::Pull {
                        container: name.clone(),
                        image: container.definition.image.clone(),
                    })
                }
                DockerAction::Create => create_request(&self.task, index, &self.settings.cluster)
                    .map(|spec| DockerCall::Create {
                        container: name.clone(),
                        spec: Box::new(spec),
                    }),
                DockerAction::Start => match &container.docker_id {
                    Some(docker_id) => Ok(DockerCall::Start {
                        container: name.clone(),
                        docker_id: docker_id.clone(),
                    }),
                    None => Err(format!("container {name} has no Docker id to start")),
                },
                DockerAction::Stop => match &container.docker_id {
                    Some(docker_id) => Ok(DockerCall::Stop {
                        container: name.clone(),
                        docker_id: docker_id.clone(),
                        grace: stop_grace(container, self.settings.stop_timeout),
                        background: false,
                    }),
                    None => {
                        // Never created in Docker: nothing to stop.
                        self.post_synthetic_stop(index, None);
                        return;
                    }
                },
            };
        self.task.containers[index].applied_status = Some(target);
        self.dirty = true;
        match call {
            Ok(call) => effects.push(Effect::Docker(call)),
            Err(message) => self.own_inbox.push_back(Input::Transition {
                container: name,
                target,
                result: Err(RuntimeError::Api { status: 0, message }),
            }),
        }
    }
}

/// The inboxes the engine and the events thread write to.
#[derive(Debug, Clone)]
pub struct TaskRoute {
    pub docker_events: Sender<(String, DockerObservation)>,
    pub resync: Sender<()>,
}

impl TaskRoute {
    /// A route and its receiving ends, for tests of the routing.
    pub fn new_for_test(
        capacity: usize,
    ) -> (
        TaskRoute,
        Receiver<(String, DockerObservation)>,
        Receiver<()>,
    ) {
        let (docker_events, docker_events_receiver) = bounded(capacity);
        let (resync, resync_receiver) = bounded(1);
        (
            TaskRoute {
                docker_events,
                resync,
            },
            docker_events_receiver,
            resync_receiver,
        )
    }
}

/// A desired-status command on a task's inbox (see [`Input::Desired`]).
#[derive(Debug, Clone)]
pub struct DesiredCommand {
    pub status: TaskStatus,
    pub sequence: u64,
    pub registered: bool,
    /// Answered once the change is durable (its checkpoint written), or with why it is not:
    /// a stop is acknowledged only after that.
    pub durable: Option<Sender<Result<(), String>>>,
}

/// The receiving ends of a task's inboxes, owned by its thread.
pub struct TaskInboxes {
    pub shutdown: Receiver<()>,
    pub desired: Receiver<DesiredCommand>,
    pub docker_events: Receiver<(String, DockerObservation)>,
    pub resync: Receiver<()>,
    /// Kept by the loop so the Docker-event and resync inboxes never read as disconnected.
    pub route: TaskRoute,
}

/// What the loop holds besides the state machine: armed timers, the wait-group receiver, the
/// Docker ids it registered for routing.
#[derive(Default)]
struct LoopState {
    timers: std::collections::BTreeMap<TimerKind, std::time::Instant>,
    wait_group_ready: Option<Receiver<()>>,
    tracked_docker_ids: Vec<String>,
    /// The last checkpoint write failed with this (the file on disk is older than the task).
    checkpoint_error: Option<String>,
    /// Who waits for the desired change being handled to be durable.
    durable_reply: Option<Sender<Result<(), String>>>,
    /// An event the reporter could not record; logged once until recording works again.
    report_failing: bool,
    /// The registered stop number of the desired change being handled: taken off the inbox but
    /// not yet owned by the state machine, so a panic in between must still finish it.
    registered_stop_in_hand: Option<u64>,
    /// The task is desired STOPPED: shared with its calls still queued in the worker pool, so a
    /// pull that was waiting for a worker is skipped rather than made.
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Milliseconds since the epoch, now.
pub fn now_millis() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The only place a managed task waits. `None`: shut down.
fn next_event(
    inboxes: &TaskInboxes,
    results: &Receiver<Box<Input>>,
    state: &mut LoopState,
) -> Option<Input> {
    let never_ready = crossbeam_channel::never();
    let ready = state.wait_group_ready.as_ref().unwrap_or(&never_ready);
    let next_timer = state
        .timers
        .iter()
        .min_by_key(|(_, deadline)| **deadline)
        .map(|(kind, deadline)| (*kind, *deadline));
    let timer = match next_timer {
        Some((_, deadline)) => crossbeam_channel::at(deadline),
        None => crossbeam_channel::never(),
    };
    crossbeam_channel::select_biased! {
        recv(inboxes.shutdown) -> _ => None,
        recv(inboxes.desired) -> command => command.ok().map(|command| {
            state.durable_reply = command.durable;
            state.registered_stop_in_hand = command.registered.then_some(command.sequence);
            Input::Desired {
                status: command.status,
                sequence: command.sequence,
                registered: command.registered,
            }
        }),
        // Docker events before worker results: an event is usually older news than the
        // answer of a call made after it (a `start` event and then the stop's result).
        recv(inboxes.docker_events) -> event => event.ok().map(|(docker_id, observation)| {
            Input::DockerEvent { docker_id, observation }
        }),
        recv(results) -> input => input.ok().map(|input| *input),
        recv(inboxes.resync) -> _ => Some(Input::Resync),
        recv(ready) -> _ => {
            state.wait_group_ready = None;
            Some(Input::WaitGroupReady)
        },
        recv(timer) -> _ => {
            let (kind, _) = next_timer.expect("the timer channel is `never` when no timer is armed");
            state.timers.remove(&kind);
            Some(Input::TimerFired(kind))
        },
    }
}

/// Performs effects in order; a delivery receipt is fed straight back so later events of the
/// same task are built on it. Returns true once the task is done.
fn perform(
    machine: &mut ManagedTask,
    effects: Vec<Effect>,
    state: &mut LoopState,
    shared: &EngineShared,
    route: &TaskRoute,
    results: &Sender<Box<Input>>,
) -> bool {
    if machine.task().desired_status == TaskStatus::Stopped
        && !state
            .stopping
            .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        // Its calls still queued (a pull behind slow pulls) are answered now, out of turn.
        shared.docker_pool.wake();
    }
    let mut queue: VecDeque<Effect> = effects.into();
    while let Some(effect) = queue.pop_front() {
        match effect {
            Effect::Docker(call) => {
                log::debug!("task {}: {call:?}", machine.task().id);
                spawn_worker(machine.task(), shared, call, results, &state.stopping)
            }
            Effect::Emit { event, reported } => {
                log::info!(
                    "task {}: {}{}{}{}",
                    event.task,
                    event
                        .container
                        .as_deref()
                        .map(|name| format!("container {name} "))
                        .unwrap_or_default(),
                    event.status,
                    event
                        .exit_code
                        .map(|code| format!(" (exit code {code})"))
                        .unwrap_or_default(),
                    event
                        .reason
                        .as_deref()
                        .map(|reason| format!(": {reason}"))
                        .unwrap_or_default()
                );
                match shared.reporter.record(event) {
                    Ok(_) => {
                        state.report_failing = false;
                        queue.extend(machine.handle(Input::Reported(reported), now_millis()));
                    }
                    Err(error) => {
                        // Not reported: `sent` stays below, cleanup waits for it, and the
                        // task emits it again at its next re-check (or after a restart).
                        queue.extend(machine.handle(Input::ReportFailed(reported), now_millis()));
                        if !state.report_failing {
                            log::error!(
                                "task {}: cannot record a state-change event: {error}",
                                machine.task().id
                            );
                            state.report_failing = true;
                        }
                    }
                }
            }
            Effect::Checkpoint => {
                // On disk first, then visible: whoever sees the snapshot finds the file as new.
                let written = shared.checkpoint(machine.task());
                shared.publish_snapshot(machine.task());
                match written {
                    Ok(()) => {
                        if state.checkpoint_error.take().is_some() {
                            log::info!("task {}: checkpoint written again", machine.task().id);
                        }
                    }
                    Err(error) => {
                        let message = error.to_string();
                        if state.checkpoint_error.is_none() {
                            log::error!("task {}: checkpoint failed: {message}", machine.task().id);
                        }
                        state.checkpoint_error = Some(message);
                    }
                }
            }
            Effect::ArmTimer { timer, at } => {
                let delay = Duration::from_millis(at.saturating_sub(now_millis()));
                state
                    .timers
                    .insert(timer, std::time::Instant::now() + delay);
            }
            Effect::WaitForStops { sequence } => {
                state.wait_group_ready = Some(shared.wait_group.ready(sequence));
            }
            Effect::StopWaitingForStops => state.wait_group_ready = None,
            Effect::WaitGroupDone { sequence } => shared.wait_group.done(sequence),
            Effect::TrackContainer { docker_id } => {
                shared
                    .docker_index
                    .write()
                    .unwrap_or_else(|poison| poison.into_inner())
                    .insert(docker_id.clone(), route.clone());
                state.tracked_docker_ids.push(docker_id);
            }
            Effect::Done => return true,
        }
    }
    false
}

/// Queues `call` on the engine's Docker worker pool; its answer comes back on `results`. A call
/// whose worker panics still answers, as a failed call (`input_for_panicked_call`), so the task's
/// error rules apply and the container never stays "in flight".
/// What the worker pool calls a task's Docker call in its logs: the task id's first 8
/// characters (cut on a character boundary: a user's task id may be any text) and the operation.
fn worker_label(task_id: &str, operation: &str) -> String {
    format!(
        "task {}: {operation}",
        crate::text::truncate_chars(task_id, 8)
    )
}

fn spawn_worker(
    task: &Task,
    shared: &EngineShared,
    call: DockerCall,
    results: &Sender<Box<Input>>,
    task_stopping: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    #[cfg(test)]
    let family = task.family.clone();
    let label = worker_label(&task.id, operation_name(&call));
    let context = shared.worker_context.clone();
    let results_for_work = results.clone();
    let results_for_panic = results.clone();
    let call_for_panic = call.clone();
    let task_stopping = std::sync::Arc::clone(task_stopping);
    let unwanted = std::sync::Arc::clone(&task_stopping);
    let skippable = answer_without_calling(&call, true).is_some();
    let job = Job {
        class: call_class(&call),
        label,
        work: Box::new(move || {
            #[cfg(test)]
            test_hooks::panic_in_worker_if_asked(&family);
            // Read when a worker takes the call, not when it was queued.
            let stopping = task_stopping.load(std::sync::atomic::Ordering::Relaxed);
            let answer = match answer_without_calling(&call, stopping) {
                Some(answer) => Some(answer),
                None => run_docker_call(&context, call),
            };
            if let Some(input) = answer {
                // The task may be gone (shut down); then nobody needs the answer.
                let _ = results_for_work.send(Box::new(input));
            }
        }),
        on_panic: Box::new(move |message| {
            if let Some(input) = input_for_panicked_call(&call_for_panic, &message) {
                let _ = results_for_panic.send(Box::new(input));
            }
        }),
        unwanted: skippable.then_some(unwanted),
    };
    if let Err(job) = shared.docker_pool.submit(job) {
        // Only while the engine shuts down, after every task's loop ended: nobody waits.
        log::debug!("{}: not made, the engine is shutting down", job.label);
    }
}

/// The managed task's thread: start, then wait for one input at a time, handle it, perform
/// the effects; on `Done`, forget the task. On shutdown it just returns (containers keep running).
///
/// A panic in the loop (a bug) must not wedge the engine: it is caught and logged, the stop
/// number the task held is finished (so later starts are not blocked forever), and the task is
/// forgotten in memory. Its checkpoint stays on disk, so the next start of the agent restores
/// it; its containers keep running meanwhile.
pub(crate) fn run_managed_task(
    mut machine: ManagedTask,
    inboxes: TaskInboxes,
    shared: std::sync::Arc<EngineShared>,
) {
    let task_id = machine.task().id.clone();
    let mut state = LoopState::default();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_managed_task_loop(&mut machine, &inboxes, &shared, &mut state)
    }));
    match outcome {
        Ok(false) => {}
        Ok(true) => shared.forget(&task_id, &state.tracked_docker_ids, &inboxes.desired, true),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            log::error!(
                "task {task_id}: its managed-task loop panicked ({message}); releasing its stop \
                 number and dropping it from memory; it is restored from its checkpoint at the \
                 next start of deckhand"
            );
            // The stop numbers this task holds: the one its state machine owns, and the one of a
            // change it was handed but had not taken over yet. Each is finished once, so later
            // starts do not wait for a task that is gone.
            let owned = machine.unfinished_stop.take();
            let in_hand = state.registered_stop_in_hand.take();
            if let Some(sequence) = owned {
                shared.wait_group.done(sequence);
            }
            if let Some(sequence) = in_hand.filter(|sequence| Some(*sequence) != owned) {
                shared.wait_group.done(sequence);
            }
            if let Some(reply) = state.durable_reply.take() {
                let _ = reply.send(Err(format!("task {task_id} failed internally: {message}")));
            }
            shared.forget(&task_id, &state.tracked_docker_ids, &inboxes.desired, false);
        }
    }
}

/// The loop itself; true once the task is done (cleaned up), false on shutdown.
fn run_managed_task_loop(
    machine: &mut ManagedTask,
    inboxes: &TaskInboxes,
    shared: &EngineShared,
    state: &mut LoopState,
) -> bool {
    // Boxed: an unbounded channel allocates its slots 31 at a time and keeps one block per
    // live channel, so unboxed `Input`s would cost every idle task about 14 KiB.
    let (results_sender, results) = crossbeam_channel::unbounded::<Box<Input>>();
    let effects = machine.start(now_millis());
    let mut done = perform(
        machine,
        effects,
        state,
        shared,
        &inboxes.route,
        &results_sender,
    );
    while !done {
        let Some(input) = next_event(inboxes, &results, state) else {
            return false;
        };
        #[cfg(test)]
        test_hooks::panic_if_asked(machine.task(), &input);
        let effects = machine.handle(input, now_millis());
        // The state machine owns the stop number now (or finished it).
        state.registered_stop_in_hand = None;
        done = perform(
            machine,
            effects,
            state,
            shared,
            &inboxes.route,
            &results_sender,
        );
        if state.checkpoint_error.is_some() {
            // The file on disk is behind the task: try again now rather than only at the next
            // change (a disk that was full may have room again).
            if shared.checkpoint(machine.task()).is_ok() {
                log::info!("task {}: checkpoint written again", machine.task().id);
                state.checkpoint_error = None;
            }
        }
        if let Some(reply) = state.durable_reply.take() {
            let answer = match &state.checkpoint_error {
                None => Ok(()),
                Some(error) => Err(error.clone()),
            };
            let _ = reply.send(answer);
        }
    }
    true
}

/// Test-only hooks into the thread loop (never compiled into the binary).
#[cfg(test)]
pub(crate) mod test_hooks {
    use super::{Input, Task};
    use std::sync::Mutex;

    /// Families whose task loop panics when it is handed a desired change, as a bug in the
    /// state machine would. Unit tests run in parallel: each uses a family of its own.
    pub(crate) static PANIC_ON_DESIRED_FOR_FAMILIES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    /// Families whose Docker calls panic in their worker before any runtime call, as a bug in
    /// the worker's own code would.
    pub(crate) static PANIC_IN_WORKER_FOR_FAMILIES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    pub(crate) fn panic_in_worker_if_asked(family: &str) {
        let asked = PANIC_IN_WORKER_FOR_FAMILIES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .any(|asked| asked == family);
        if asked {
            panic!("test hook: a worker of family {family} panics");
        }
    }

    pub(crate) fn panic_if_asked(task: &Task, input: &Input) {
        let asked = PANIC_ON_DESIRED_FOR_FAMILIES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .contains(&task.family);
        if asked && matches!(input, Input::Desired { .. }) {
            panic!("test hook: task {} panics on a desired change", task.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_container_task() -> Task {
        let definition = crate::task::TaskDefinition {
            family: "unit".into(),
            revision: 1,
            network_mode: crate::task::NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![crate::engine::test_support::container_definition(
                "app",
                "unit/app:1",
            )],
        };
        let mut task = Task::new("a".repeat(32), "unit", definition, 0, 0);
        crate::engine::container_spec::assign_docker_names(&mut task, || "0001".into());
        task
    }

    fn settings(cleanup_wait: Duration) -> ManagedTaskSettings {
        ManagedTaskSettings {
            cluster: "unit".into(),
            rules: RuleConfig::default(),
            stop_timeout: Duration::from_secs(30),
            steady_check_interval: Duration::from_secs(300),
            cleanup_wait,
            dependency_poll_interval: Duration::from_secs(5),
            sent_poll_interval: Duration::from_secs(30),
        }
    }

    fn transition(target: ContainerStatus, docker_id: Option<&str>) -> Input {
        Input::Transition {
            container: "app".into(),
            target,
            result: Ok(TransitionOutput {
                docker_id: docker_id.map(str::to_string),
                info: None,
            }),
        }
    }

    fn removes(effects: &[Effect]) -> bool {
        effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Remove { .. })))
    }

    #[test]
    fn the_checkpoint_comes_before_the_create_call_and_before_any_event() {
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        let started = machine.start(1_000);
        assert!(started
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Pull { .. }))));
        let effects = machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        let checkpoint = effects
            .iter()
            .position(|effect| *effect == Effect::Checkpoint)
            .expect("the pull's answer changes the task: checkpoint");
        let create = effects
            .iter()
            .position(|effect| matches!(effect, Effect::Docker(DockerCall::Create { .. })))
            .expect("then the create");
        assert!(checkpoint < create, "{effects:?}");
        let effects = machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        let effects = [
            effects,
            machine.handle(transition(ContainerStatus::Running, None), 1_003),
        ]
        .concat();
        let first_emit = effects
            .iter()
            .position(|effect| matches!(effect, Effect::Emit { .. }))
            .expect("RUNNING is emitted");
        let last_checkpoint_before = effects[..first_emit].contains(&Effect::Checkpoint);
        assert!(last_checkpoint_before, "{effects:?}");
    }

    #[test]
    fn an_event_the_reporter_failed_to_record_is_emitted_again_while_cleanup_waits() {
        let mut task = one_container_task();
        task.desired_status = TaskStatus::Stopped;
        task.known_status = TaskStatus::Stopped;
        task.known_status_time = Some(10_000);
        let container = &mut task.containers[0];
        container.desired_status = ContainerStatus::Stopped;
        container.known_status = ContainerStatus::Stopped;
        container.sent_status = ContainerStatus::Stopped;
        container.docker_id = Some("id-1".into());
        let mut machine = ManagedTask::new(task, settings(Duration::from_secs(60)), None);
        let task_stopped_emits = |effects: &[Effect]| {
            effects
                .iter()
                .filter(|effect| {
                    matches!(effect, Effect::Emit { reported: Reported::Task { status }, .. }
                        if *status == TaskStatus::Stopped)
                })
                .count()
        };
        let effects = machine.start(20_000);
        assert_eq!(task_stopped_emits(&effects), 1, "{effects:?}");
        // While the event is on its way, a re-check emits nothing twice.
        let effects = machine.handle(Input::TimerFired(TimerKind::Cleanup), 80_000);
        assert_eq!(task_stopped_emits(&effects), 0, "{effects:?}");
        assert!(!removes(&effects), "not reported yet: no removal");
        // The durable log refused it: the next re-check emits it again.
        machine.handle(
            Input::ReportFailed(Reported::Task {
                status: TaskStatus::Stopped,
            }),
            80_001,
        );
        let effects = machine.handle(Input::TimerFired(TimerKind::Cleanup), 110_000);
        assert_eq!(task_stopped_emits(&effects), 1, "{effects:?}");
        let effects = machine.handle(
            Input::Reported(Reported::Task {
                status: TaskStatus::Stopped,
            }),
            110_001,
        );
        assert!(removes(&effects), "reported: removal starts");
    }

    #[test]
    fn a_restored_stopped_task_is_cleaned_up_on_its_saved_clock() {
        // Saved STOPPED at t=10 s, reported; restored at t=100 s with a 60 s cleanup wait: the
        // deadline (70 s) has passed, so the removal starts at once instead of 60 s later.
        let mut task = one_container_task();
        task.desired_status = TaskStatus::Stopped;
        task.known_status = TaskStatus::Stopped;
        task.known_status_time = Some(10_000);
        task.sent_status = TaskStatus::Stopped;
        let container = &mut task.containers[0];
        container.desired_status = ContainerStatus::Stopped;
        container.known_status = ContainerStatus::Stopped;
        container.sent_status = ContainerStatus::Stopped;
        container.docker_id = Some("id-1".into());
        let mut machine = ManagedTask::new(task, settings(Duration::from_secs(60)), None);
        let effects = machine.start(100_000);
        assert!(removes(&effects), "{effects:?}");
        assert_eq!(machine.task().known_status_time, Some(10_000));
    }

    #[test]
    fn cleanup_waits_for_the_deadline_and_for_stopped_to_be_reported() {
        let mut machine = ManagedTask::new(
            one_container_task(),
            settings(Duration::from_secs(60)),
            None,
        );
        let mut now = 1_000;
        machine.start(now);
        machine.handle(transition(ContainerStatus::Pulled, None), now);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), now);
        machine.handle(transition(ContainerStatus::Running, None), now);
        assert_eq!(machine.task().known_status, TaskStatus::Running);
        machine.handle(
            Input::Desired {
                status: TaskStatus::Stopped,
                sequence: 2,
                registered: true,
            },
            now,
        );
        now += 10;
        // The stop's answer: known STOPPED, the stop number is finished, events go out, and
        // the cleanup clock starts. The reporter's receipts are withheld.
        let effects = machine.handle(transition(ContainerStatus::Stopped, None), now);
        assert!(effects.contains(&Effect::WaitGroupDone { sequence: 2 }));
        assert!(effects.contains(&Effect::ArmTimer {
            timer: TimerKind::Cleanup,
            at: now + 60_000,
        }));
        let task_stopped_emitted = effects.iter().any(|effect| {
            matches!(
                effect,
                Effect::Emit {
                    reported: Reported::Task {
                        status: TaskStatus::Stopped
                    },
                    ..
                }
            )
        });
        assert!(task_stopped_emitted);
        assert_eq!(machine.phase(), Phase::AwaitingCleanup);

        // Too early: the timer re-arms for the deadline.
        let early = machine.handle(Input::TimerFired(TimerKind::Cleanup), now + 30_000);
        assert!(!removes(&early));
        // Deadline passed, but STOPPED is not reported yet: poll again later, remove nothing.
        let unreported = machine.handle(Input::TimerFired(TimerKind::Cleanup), now + 60_000);
        assert!(!removes(&unreported));
        assert!(unreported.contains(&Effect::ArmTimer {
            timer: TimerKind::Cleanup,
            at: now + 60_000 + 30_000,
        }));
        // The receipt arrives: now the containers go, then the task is done.
        let reported = machine.handle(
            Input::Reported(Reported::Task {
                status: TaskStatus::Stopped,
            }),
            now + 61_000,
        );
        assert!(reported.contains(&Effect::Docker(DockerCall::Remove {
            docker_ids: vec!["id-1".to_string()],
            volumes: Vec::new(),
        })));
        assert_eq!(
            machine.handle(Input::Removed, now + 62_000),
            vec![Effect::Done]
        );
        assert_eq!(machine.phase(), Phase::Done);
        assert!(machine.handle(Input::Resync, now + 63_000).is_empty());
    }

    #[test]
    fn a_stop_while_waiting_for_earlier_stops_ends_the_wait() {
        let mut task = one_container_task();
        task.start_sequence = 7;
        let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
        let effects = machine.start(1_000);
        assert!(effects.contains(&Effect::WaitForStops { sequence: 7 }));
        assert!(!effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(_))));
        let effects = machine.handle(
            Input::Desired {
                status: TaskStatus::Stopped,
                sequence: 8,
                registered: true,
            },
            1_001,
        );
        assert!(effects.contains(&Effect::StopWaitingForStops));
        assert!(effects.contains(&Effect::WaitGroupDone { sequence: 8 }));
        assert!(!effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Pull { .. }))));
        assert_eq!(machine.task().known_status, TaskStatus::Stopped);
    }

    #[test]
    fn worker_labels_cut_task_ids_between_characters() {
        let table = [
            ("0123456789abcdef", "task 01234567: pull"),
            ("abc", "task abc: pull"),
            // Byte 8 falls inside a character here: a byte cut would panic.
            ("abcdefg\u{FFFD}xyz", "task abcdefg\u{FFFD}: pull"),
            ("éééééééééé", "task éééééééé: pull"),
        ];
        for (task_id, expected) in table {
            assert_eq!(worker_label(task_id, "pull"), expected, "{task_id:?}");
        }
    }

    #[test]
    fn docker_times_parse_to_epoch_millis() {
        let table = [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2024-02-29T12:34:56.789123456Z", Some(1_709_210_096_789)),
            ("2024-02-29T13:34:56.5+01:00", Some(1_709_210_096_500)),
            ("0001-01-01T00:00:00Z", None),
            ("", None),
            ("yesterday", None),
        ];
        for (text, expected) in table {
            assert_eq!(parse_docker_time(text), expected, "{text}");
        }
    }

    #[test]
    fn inspect_state_maps_to_status() {
        let info = |status: &str, running: bool, dead: bool, error: &str| ContainerInfo {
            state: crate::runtime::ContainerState {
                status: status.to_string(),
                running,
                dead,
                error: error.to_string(),
                ..Default::default()
            },
            ..Default::default()
        };
        let table = [
            (info("running", true, false, ""), ContainerStatus::Running),
            (info("paused", true, false, ""), ContainerStatus::Running),
            (info("dead", false, true, ""), ContainerStatus::Stopped),
            (info("created", false, false, ""), ContainerStatus::Created),
            (
                info("created", false, false, "oci error"),
                ContainerStatus::Stopped,
            ),
            (info("exited", false, false, ""), ContainerStatus::Stopped),
        ];
        for (input, expected) in table {
            assert_eq!(status_from_inspect(&input), expected, "{:?}", input.state);
        }
    }

    #[test]
    fn runtime_errors_are_classified_for_the_error_table() {
        let timeout = RuntimeError::Timeout {
            operation: "start".into(),
            after: Duration::from_secs(1),
        };
        let api = |message: &str| RuntimeError::Api {
            status: 500,
            message: message.into(),
        };
        let table = [
            (
                ContainerStatus::Running,
                timeout.clone(),
                ContainerErrorKind::Timeout,
            ),
            (
                ContainerStatus::Stopped,
                RuntimeError::NoSuchContainer {
                    message: "x".into(),
                },
                ContainerErrorKind::NoSuchContainer,
            ),
            (
                ContainerStatus::Pulled,
                api("denied"),
                ContainerErrorKind::CannotPull,
            ),
            (
                ContainerStatus::Running,
                api("read: EOF"),
                ContainerErrorKind::StartEof,
            ),
            (
                ContainerStatus::Created,
                api("read: EOF"),
                ContainerErrorKind::Other,
            ),
            (
                ContainerStatus::Created,
                RuntimeError::Unreachable {
                    message: "gone".into(),
                },
                ContainerErrorKind::Unreachable,
            ),
            (
                ContainerStatus::Running,
                RuntimeError::Protocol {
                    message: "start container: connection closed mid-body".into(),
                },
                ContainerErrorKind::StartEof,
            ),
        ];
        for (target, error, kind) in table {
            assert_eq!(
                classify_error(target, &error).kind,
                kind,
                "{target} {error}"
            );
        }
    }

    /// A task whose one container runs (id `id-1`), and its state machine.
    fn running_machine() -> ManagedTask {
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        machine.handle(transition(ContainerStatus::Running, None), 1_003);
        assert_eq!(machine.task().known_status, TaskStatus::Running);
        machine
    }

    /// A running container under a restart policy (60 s between restarts) that exits at 90 s
    /// and is restarted at 100 s.
    fn restarted_machine() -> ManagedTask {
        let mut task = one_container_task();
        task.containers[0].definition.restart_policy = Some(crate::task::RestartPolicy {
            enabled: true,
            ignored_exit_codes: Vec::new(),
            restart_attempt_period_secs: 60,
        });
        let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        machine.handle(transition(ContainerStatus::Running, None), 1_003);
        let effects = machine.handle(die_at(1, 90_000), 100_000);
        assert!(
            effects
                .iter()
                .any(|effect| matches!(effect, Effect::Docker(DockerCall::Restart { .. }))),
            "{effects:?}"
        );
        machine
    }

    fn die_at(exit_code: i64, at_millis: i64) -> Input {
        Input::DockerEvent {
            docker_id: "id-1".into(),
            observation: DockerObservation::Status {
                status: ContainerStatus::Stopped,
                exit_code: Some(exit_code),
                at: Some(at_millis * 1_000_000),
            },
        }
    }

    fn restarted_ok() -> Input {
        Input::Restarted {
            container: "app".into(),
            exit_code: Some(1),
            result: Ok(()),
        }
    }

    #[test]
    fn an_exit_seen_before_the_restart_it_caused_does_not_stop_the_restarted_container() {
        // Found by the simulator: the inspection that follows the `die` event is made before
        // the restart lands and answers after it; the exit it shows is the one the restart
        // already answered.
        let mut machine = restarted_machine();
        machine.handle(restarted_ok(), 100_010);
        let mut stale = exited_info(1, false, "");
        stale.state.finished_at = "1970-01-01T00:01:30Z".into();
        for late in [
            Input::Inspected {
                container: "app".into(),
                result: Ok(stale),
            },
            die_at(1, 90_000),
        ] {
            let effects = machine.handle(late, 100_020);
            assert!(container_stops(&effects).is_empty(), "{effects:?}");
            assert_eq!(
                machine.task().containers[0].known_status,
                ContainerStatus::Running
            );
        }
        // A later exit is a new one.
        let effects = machine.handle(die_at(1, 100_030), 100_040);
        assert_eq!(container_stops(&effects).len(), 1, "{effects:?}");
    }

    #[test]
    fn an_exit_during_a_restart_call_is_handled_once_the_restart_answers() {
        // Found by the simulator: the exit was held for the restart's answer and then forgotten
        // (the container stayed RUNNING in deckhand's view), until an unrelated later answer
        // for the container applied it.
        let mut machine = restarted_machine();
        let task = &mut machine.task;
        if let Some(policy) = &mut task.containers[0].definition.restart_policy {
            policy.restart_attempt_period_secs = 0;
        }
        // The restarted container exits again before the restart call answers.
        let effects = machine.handle(die_at(1, 100_005), 100_006);
        assert!(container_stops(&effects).is_empty(), "{effects:?}");
        let effects = machine.handle(restarted_ok(), 100_010);
        assert!(
            effects
                .iter()
                .any(|effect| matches!(effect, Effect::Docker(DockerCall::Restart { .. }))),
            "the held exit restarts the container again: {effects:?}"
        );
        assert_eq!(machine.task().containers[0].restart_count, 2);
    }

    #[test]
    fn a_restart_that_timed_out_is_stopped_before_the_container_counts_as_stopped() {
        // Found by the simulator: Docker restarted the container but the call timed out; the
        // container was marked STOPPED and kept running, unmanaged, until cleanup.
        let mut machine = restarted_machine();
        let effects = machine.handle(
            Input::Restarted {
                container: "app".into(),
                exit_code: Some(1),
                result: Err(RuntimeError::Timeout {
                    operation: "start".into(),
                    after: Duration::from_secs(1),
                }),
            },
            100_010,
        );
        assert!(
            effects.iter().any(|effect| matches!(
                effect,
                Effect::Docker(DockerCall::Stop {
                    background: false,
                    ..
                })
            )),
            "{effects:?}"
        );
        // STOPPED with the stop's answer, not before.
        assert!(container_stops(&effects).is_empty(), "{effects:?}");
        let effects = machine.handle(transition(ContainerStatus::Stopped, None), 100_020);
        assert_eq!(container_stops(&effects).len(), 1, "{effects:?}");
        // A refused restart (Docker answered) did not start anything: no stop.
        let mut machine = restarted_machine();
        let effects = machine.handle(
            Input::Restarted {
                container: "app".into(),
                exit_code: Some(1),
                result: Err(RuntimeError::Api {
                    status: 500,
                    message: "no".into(),
                }),
            },
            100_010,
        );
        assert!(
            !effects
                .iter()
                .any(|effect| matches!(effect, Effect::Docker(DockerCall::Stop { .. }))),
            "{effects:?}"
        );
    }

    #[test]
    fn a_start_that_timed_out_is_stopped_before_the_container_counts_as_stopped() {
        // Found by the simulator: the start timed out (Docker had started the container), the
        // stop went out in the background, and §3 row 5 made the container STOPPED at once: the
        // task finished its stop number and a replacement started beside the running container.
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        machine.handle(
            Input::Desired {
                status: TaskStatus::Stopped,
                sequence: 7,
                registered: true,
            },
            1_003,
        );
        let effects = machine.handle(
            Input::Transition {
                container: "app".into(),
                target: ContainerStatus::Running,
                result: Err(RuntimeError::Timeout {
                    operation: "start".into(),
                    after: Duration::from_secs(1),
                }),
            },
            1_004,
        );
        assert!(
            effects.iter().any(|effect| matches!(
                effect,
                Effect::Docker(DockerCall::Stop {
                    background: false,
                    ..
                })
            )),
            "{effects:?}"
        );
        assert!(
            !effects
                .iter()
                .any(|effect| matches!(effect, Effect::WaitGroupDone { .. })),
            "the stop number waits for the stop's answer: {effects:?}"
        );
        assert_eq!(machine.task().known_status, TaskStatus::Created);
        let effects = machine.handle(transition(ContainerStatus::Stopped, None), 1_005);
        assert!(
            effects
                .iter()
                .any(|effect| matches!(effect, Effect::WaitGroupDone { sequence: 7 })),
            "{effects:?}"
        );
        assert_eq!(machine.task().known_status, TaskStatus::Stopped);
    }

    #[test]
    fn an_exit_seen_before_a_restart_that_did_not_happen_stops_the_container() {
        // Found by the simulator: the restart timed out without Docker making it, the stop that
        // answers a possible start failed, and the earlier exit, dropped as "answered by the
        // restart", left the exited container RUNNING for good.
        let mut machine = restarted_machine();
        machine.handle(
            Input::Restarted {
                container: "app".into(),
                exit_code: Some(1),
                result: Err(RuntimeError::Timeout {
                    operation: "start".into(),
                    after: Duration::from_secs(1),
                }),
            },
            100_010,
        );
        machine.handle(
            Input::Transition {
                container: "app".into(),
                target: ContainerStatus::Stopped,
                result: Err(RuntimeError::Unreachable {
                    message: "restarting".into(),
                }),
            },
            100_020,
        );
        let mut exited = exited_info(1, false, "");
        exited.state.finished_at = "1970-01-01T00:01:30Z".into();
        let effects = machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Ok(exited),
            },
            100_030,
        );
        assert_eq!(container_stops(&effects).len(), 1, "{effects:?}");
    }

    #[test]
    fn cleanup_removes_by_fixed_name_every_container_without_a_docker_id() {
        // Found by the simulator: a create the crashed process sent landed after restore had
        // looked its name up; the restored task (which had not sent that create itself) was
        // stopped and cleaned up without it, and the container was left in Docker.
        let mut task = one_container_task();
        task.desired_status = TaskStatus::Stopped;
        task.sent_status = TaskStatus::Stopped;
        let name = task.containers[0].docker_name.clone();
        let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
        let mut effects = machine.start(1_000);
        for _ in 0..3 {
            if removes(&effects) {
                break;
            }
            effects = machine.handle(Input::TimerFired(TimerKind::Cleanup), 1_000);
        }
        let removed: Vec<String> = effects
            .iter()
            .find_map(|effect| match effect {
                Effect::Docker(DockerCall::Remove { docker_ids, .. }) => Some(docker_ids.clone()),
                _ => None,
            })
            .unwrap_or_default();
        assert_eq!(removed, name.into_iter().collect::<Vec<_>>(), "{effects:?}");
    }

    #[test]
    fn within_the_millisecond_of_a_restart_the_answered_exit_is_old_and_a_later_one_is_new() {
        // A fast Docker: the exit, the restart decision, the restart and a new exit all in one
        // millisecond. Nanoseconds tell the exit the restart answered from a new one.
        let mut task = one_container_task();
        task.containers[0].definition.restart_policy = Some(crate::task::RestartPolicy {
            enabled: true,
            ignored_exit_codes: Vec::new(),
            restart_attempt_period_secs: 0,
        });
        let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        machine.handle(transition(ContainerStatus::Running, None), 1_003);
        let exit = |extra_nanos: i64| Input::DockerEvent {
            docker_id: "id-1".into(),
            observation: DockerObservation::Status {
                status: ContainerStatus::Stopped,
                exit_code: Some(1),
                at: Some(200_000 * 1_000_000 + extra_nanos),
            },
        };
        let restarts = |effects: &[Effect]| {
            effects
                .iter()
                .filter(|effect| matches!(effect, Effect::Docker(DockerCall::Restart { .. })))
                .count()
        };
        assert_eq!(restarts(&machine.handle(exit(400), 200_000)), 1);
        machine.handle(restarted_ok(), 200_000);
        // The same exit again (its inspection, a few hundred nanoseconds earlier): old news.
        let effects = machine.handle(exit(100), 200_000);
        assert!(container_stops(&effects).is_empty(), "{effects:?}");
        assert_eq!(restarts(&effects), 0, "{effects:?}");
        // The restarted container exits within the same millisecond: a new exit, restarted.
        let effects = machine.handle(exit(900), 200_000);
        assert_eq!(restarts(&effects), 1, "{effects:?}");
        assert_eq!(machine.task().containers[0].restart_count, 2);
    }

    #[test]
    fn a_start_event_during_our_start_call_waits_for_the_calls_answer() {
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        let effects = machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        assert!(
            effects
                .iter()
                .any(|effect| matches!(effect, Effect::Docker(DockerCall::Start { .. }))),
            "{effects:?}"
        );
        // Docker's `start` event arrives before the start call answers.
        let effects = machine.handle(
            Input::DockerEvent {
                docker_id: "id-1".into(),
                observation: DockerObservation::Status {
                    status: ContainerStatus::Running,
                    exit_code: None,
                    at: None,
                },
            },
            1_003,
        );
        assert!(
            !effects
                .iter()
                .any(|effect| matches!(effect, Effect::Emit { .. })),
            "no RUNNING before the call's answer: {effects:?}"
        );
        assert_eq!(
            machine.task().containers[0].known_status,
            ContainerStatus::Created
        );
        // The answer (with its inspection) makes it RUNNING.
        let effects = machine.handle(transition(ContainerStatus::Running, None), 1_004);
        assert!(effects
            .iter()
            .any(|effect| matches!(effect, Effect::Emit { .. })));
        assert_eq!(
            machine.task().containers[0].known_status,
            ContainerStatus::Running
        );
    }

    fn die_event(exit_code: i64) -> Input {
        Input::DockerEvent {
            docker_id: "id-1".into(),
            observation: DockerObservation::Status {
                status: ContainerStatus::Stopped,
                exit_code: Some(exit_code),
                at: None,
            },
        }
    }

    fn exited_info(exit_code: i64, oom_killed: bool, error: &str) -> ContainerInfo {
        ContainerInfo {
            id: "id-1".into(),
            name: "app".into(),
            state: crate::runtime::ContainerState {
                status: "exited".into(),
                oom_killed,
                exit_code,
                error: error.into(),
                finished_at: "2026-01-01T00:00:00.5Z".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The container STOPPED events among `effects`: (exit code, reason).
    fn container_stops(effects: &[Effect]) -> Vec<(Option<i64>, Option<String>)> {
        effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Emit { event, .. }
                    if event.container.is_some() && event.status == "STOPPED" =>
                {
                    Some((event.exit_code, event.reason.clone()))
                }
                _ => None,
            })
            .collect()
    }

    fn oom_event() -> Input {
        Input::DockerEvent {
            docker_id: "id-1".into(),
            observation: DockerObservation::OutOfMemory,
        }
    }

    fn inspections(effects: &[Effect]) -> usize {
        effects
            .iter()
            .filter(|effect| matches!(effect, Effect::Docker(DockerCall::Inspect { .. })))
            .count()
    }

    fn expected_task_reason(container_reason: Option<&str>) -> String {
        match container_reason {
            Some(reason) => format!("Essential container app stopped: {reason}"),
            None => "Essential container in task exited".to_string(),
        }
    }

    #[test]
    fn an_exit_is_stopped_at_once_carrying_an_out_of_memory_kill_docker_announced_first() {
        let oom = Some(crate::engine::transition::OUT_OF_MEMORY_REASON.to_string());
        // (case, an `oom` event before the `die`, an error the container carried already,
        // expected reason on the STOPPED event).
        let timeout = ContainerError {
            kind: ContainerErrorKind::Timeout,
            message: "stop timed out".into(),
        };
        #[rustfmt::skip]
        let table = [
            ("oom then die", true, None, oom.clone()),
            ("die alone", false, None, None),
            ("earlier error stays", true, Some(timeout.clone()), Some("stop timed out".to_string())),
        ];
        for (case, out_of_memory, earlier_error, reason) in table {
            let mut machine = running_machine();
            machine.task.containers[0].applying_error = earlier_error.clone();
            if out_of_memory {
                let effects = machine.handle(oom_event(), 1_999);
                assert!(container_stops(&effects).is_empty(), "{case}: {effects:?}");
                assert_eq!(
                    machine.task().containers[0].known_status,
                    ContainerStatus::Running,
                    "{case}: `oom` alone is no exit"
                );
            }
            let effects = machine.handle(die_event(137), 2_000);
            assert_eq!(
                container_stops(&effects),
                vec![(Some(137), reason.clone())],
                "{case}: STOPPED goes out with the die, before any inspection answers: {effects:?}"
            );
            assert_eq!(
                inspections(&effects),
                1,
                "{case}: one background inspection follows: {effects:?}"
            );
            let task = machine.task();
            assert_eq!(task.known_status, TaskStatus::Stopped, "{case}");
            assert_eq!(
                task.stopped_reason.as_deref(),
                Some(expected_task_reason(reason.as_deref()).as_str()),
                "{case}"
            );
            if let Some(earlier_error) = earlier_error {
                assert_eq!(
                    task.containers[0].applying_error,
                    Some(earlier_error),
                    "{case}"
                );
            }
            // A second report of the same exit changes nothing and asks for no inspection.
            let effects = machine.handle(die_event(137), 2_001);
            assert!(container_stops(&effects).is_empty(), "{case}: {effects:?}");
            assert_eq!(inspections(&effects), 0, "{case}: {effects:?}");
        }
    }

    /// (case, the background inspection's answer, expected container error afterwards).
    type LateInspectionCase = (
        &'static str,
        Result<ContainerInfo, RuntimeError>,
        Option<ContainerError>,
    );

    #[test]
    fn a_late_inspection_records_why_the_container_stopped_on_the_container() {
        let oom = ContainerError {
            kind: ContainerErrorKind::OutOfMemory,
            message: crate::engine::transition::OUT_OF_MEMORY_REASON.to_string(),
        };
        let docker_error = ContainerError {
            kind: ContainerErrorKind::DockerState,
            message: "exec: \"x\": not found".into(),
        };
        #[rustfmt::skip]
        let table: [LateInspectionCase; 5] = [
            ("killed for memory", Ok(exited_info(137, true, "")), Some(oom)),
            ("Docker's error", Ok(exited_info(137, false, "exec: \"x\": not found")), Some(docker_error)),
            ("plain exit", Ok(exited_info(137, false, "")), None),
            ("inspection failed", Err(RuntimeError::Timeout { operation: "inspect".into(), after: Duration::from_secs(30) }), None),
            ("container gone", Err(RuntimeError::NoSuchContainer { message: "gone".into() }), None),
        ];
        for (case, result, expected_error) in table {
            let mut machine = running_machine();
            let effects = machine.handle(die_event(137), 2_000);
            assert_eq!(container_stops(&effects), vec![(Some(137), None)], "{case}");
            let effects = machine.handle(
                Input::Inspected {
                    container: "app".into(),
                    result,
                },
                2_002,
            );
            assert!(
                container_stops(&effects).is_empty(),
                "{case}: the STOPPED event went out already: {effects:?}"
            );
            let container = &machine.task().containers[0];
            assert_eq!(container.known_status, ContainerStatus::Stopped, "{case}");
            assert_eq!(container.exit_code, Some(137), "{case}");
            assert_eq!(container.applying_error, expected_error, "{case}");
            if expected_error.is_some() {
                assert!(
                    effects.contains(&Effect::Checkpoint),
                    "{case}: the recorded reason is saved: {effects:?}"
                );
            }
        }
    }

    #[test]
    fn a_late_inspection_showing_an_oom_kill_leaves_an_earlier_error_as_the_reason() {
        let mut machine = running_machine();
        let error = ContainerError {
            kind: ContainerErrorKind::Timeout,
            message: "stop timed out".into(),
        };
        machine.task.containers[0].applying_error = Some(error.clone());
        let effects = machine.handle(die_event(137), 2_000);
        assert_eq!(
            container_stops(&effects),
            vec![(Some(137), Some("stop timed out".to_string()))]
        );
        machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Ok(exited_info(137, true, "")),
            },
            2_001,
        );
        assert_eq!(machine.task().containers[0].applying_error, Some(error));
    }

    #[test]
    fn a_container_found_by_its_name_after_a_reconnect_is_adopted_once() {
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        machine.start(1_000);
        let effects = machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        assert!(effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Create { .. }))));
        let docker_name = machine.task().containers[0]
            .docker_name
            .clone()
            .expect("the fixed name is set before the create");
        let found = |docker_id: &str, docker_name: &str| Input::DockerEvent {
            docker_id: docker_id.into(),
            observation: DockerObservation::FoundByName {
                docker_name: docker_name.into(),
            },
        };
        // Another name is not this container.
        let effects = machine.handle(found("id-7", "deckhand-other-1"), 1_002);
        assert!(effects.is_empty(), "{effects:?}");
        assert_eq!(machine.task().containers[0].docker_id, None);

        let effects = machine.handle(found("id-7", &docker_name), 1_003);
        assert_eq!(
            machine.task().containers[0].docker_id.as_deref(),
            Some("id-7")
        );
        assert!(
            effects.contains(&Effect::TrackContainer {
                docker_id: "id-7".into()
            }),
            "{effects:?}"
        );
        assert!(
            effects.contains(&Effect::Docker(DockerCall::Inspect {
                container: "app".into(),
                docker_id: "id-7".into()
            })),
            "{effects:?}"
        );
        assert!(effects.contains(&Effect::Checkpoint), "the id is saved");
        // Found again (a second reconnect), or under another id: the recorded id stays.
        assert!(machine
            .handle(found("id-7", &docker_name), 1_004)
            .is_empty());
        assert!(machine
            .handle(found("id-8", &docker_name), 1_005)
            .is_empty());
        assert_eq!(
            machine.task().containers[0].docker_id.as_deref(),
            Some("id-7")
        );
        // The create's own answer, arriving late with the same id, changes nothing more.
        machine.handle(transition(ContainerStatus::Created, Some("id-7")), 1_006);
        assert_eq!(
            machine.task().containers[0].known_status,
            ContainerStatus::Created
        );
    }

    #[test]
    fn a_container_adopted_by_its_name_is_never_created_again_under_a_new_id() {
        // Found by the simulator: a create timed out but happened; Docker's event stream came
        // back and the container was adopted by its name; a user removed it; the task's retried
        // create then made a second container under a new id.
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        let docker_name = machine.task().containers[0]
            .docker_name
            .clone()
            .expect("the fixed name is set before the create");
        // The create was sent and its answer lost: Docker was away.
        machine.handle(
            failed(
                ContainerStatus::Created,
                RuntimeError::Timeout {
                    operation: "create".into(),
                    after: Duration::from_secs(1),
                },
            ),
            1_002,
        );
        let effects = machine.handle(
            Input::DockerEvent {
                docker_id: "id-7".into(),
                observation: DockerObservation::FoundByName { docker_name },
            },
            1_003,
        );
        assert_eq!(
            machine.task().containers[0].known_status,
            ContainerStatus::Created,
            "Docker has it, so it was created: {effects:?}"
        );
        assert!(
            !effects
                .iter()
                .any(|effect| matches!(effect, Effect::Docker(DockerCall::Create { .. }))),
            "no second create: {effects:?}"
        );
        // Removed from outside: its inspection says so, and it vanished.
        machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Err(RuntimeError::NoSuchContainer {
                    message: "id-7".into(),
                }),
            },
            1_004,
        );
        let container = &machine.task().containers[0];
        assert_eq!(container.known_status, ContainerStatus::Stopped);
        assert_eq!(container.docker_id.as_deref(), Some("id-7"));
    }

    fn failed(target: ContainerStatus, error: RuntimeError) -> Input {
        Input::Transition {
            container: "app".into(),
            target,
            result: Err(error),
        }
    }

    fn unreachable() -> RuntimeError {
        RuntimeError::Unreachable {
            message: "cannot connect to /var/run/docker.sock: connection refused".into(),
        }
    }

    fn docker_calls(effects: &[Effect]) -> Vec<&DockerCall> {
        effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Docker(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    fn retry_armed_at(effects: &[Effect]) -> Option<Millis> {
        effects.iter().find_map(|effect| match effect {
            Effect::ArmTimer {
                timer: TimerKind::DockerRetry,
                at,
            } => Some(*at),
            _ => None,
        })
    }

    fn emits_stopped(effects: &[Effect]) -> bool {
        effects
            .iter()
            .any(|effect| matches!(effect, Effect::Emit { event, .. } if event.status == "STOPPED"))
    }

    #[test]
    fn a_pull_while_docker_is_away_waits_and_retries_with_back_off_until_the_task_runs() {
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        let effects = machine.start(1_000);
        assert!(matches!(
            docker_calls(&effects)[..],
            [DockerCall::Pull { .. }]
        ));
        // Docker is away: no STOPPED, nothing recorded against the container, a retry in 1 s,
        // and no call until then.
        let mut now = 1_100;
        let effects = machine.handle(failed(ContainerStatus::Pulled, unreachable()), now);
        assert!(!emits_stopped(&effects), "{effects:?}");
        assert!(docker_calls(&effects).is_empty(), "{effects:?}");
        assert_eq!(retry_armed_at(&effects), Some(now + 1_000));
        let task = machine.task();
        assert_eq!(task.desired_status, TaskStatus::Running);
        assert_eq!(task.known_status, TaskStatus::None);
        assert_eq!(task.containers[0].known_status, ContainerStatus::None);
        assert_eq!(task.containers[0].applied_status, None, "nothing in flight");
        assert_eq!(task.containers[0].applying_error, None);
        assert_eq!(task.stopped_reason, None);
        // Something else happening meanwhile does not make the call early.
        let effects = machine.handle(Input::WaitGroupReady, now + 10);
        assert!(docker_calls(&effects).is_empty(), "{effects:?}");
        // Each round still away doubles the wait: 1, 2, 4, 8, 16, then 30 s.
        for expected_wait in [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000] {
            now += expected_wait;
            let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), now);
            assert!(
                matches!(docker_calls(&effects)[..], [DockerCall::Pull { .. }]),
                "{effects:?}"
            );
            let effects = machine.handle(failed(ContainerStatus::Pulled, unreachable()), now);
            let next_wait = match expected_wait {
                16_000 | 30_000 => 30_000,
                wait => wait * 2,
            };
            assert_eq!(
                retry_armed_at(&effects),
                Some(now + next_wait),
                "after {expected_wait}"
            );
            assert!(!emits_stopped(&effects));
        }
        // Docker is back: the task goes on to RUNNING.
        now += 30_000;
        let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), now);
        assert!(matches!(
            docker_calls(&effects)[..],
            [DockerCall::Pull { .. }]
        ));
        machine.handle(transition(ContainerStatus::Pulled, None), now + 1);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), now + 2);
        machine.handle(transition(ContainerStatus::Running, None), now + 3);
        assert_eq!(machine.task().known_status, TaskStatus::Running);
        assert_eq!(machine.task().stopped_reason, None);
    }

    #[test]
    fn a_create_that_timed_out_or_lost_its_answer_is_made_again_not_counted_against_the_task() {
        for error in [
            RuntimeError::Timeout {
                operation: "create container".into(),
                after: Duration::from_secs(240),
            },
            RuntimeError::Protocol {
                message: "create container: connection closed mid-body".into(),
            },
            unreachable(),
        ] {
            let mut machine =
                ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
            machine.start(1_000);
            machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
            let effects = machine.handle(failed(ContainerStatus::Created, error.clone()), 1_002);
            assert_eq!(retry_armed_at(&effects), Some(2_002), "{error}");
            assert_eq!(
                machine.task().desired_status,
                TaskStatus::Running,
                "{error}"
            );
            let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 2_002);
            assert!(
                matches!(docker_calls(&effects)[..], [DockerCall::Create { .. }]),
                "{error}: {effects:?}"
            );
        }
    }

    #[test]
    fn dockers_own_answers_still_count_against_the_task() {
        // A refused create (a missing image): §6 as before, the task stops, no retry.
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        let effects = machine.handle(
            failed(
                ContainerStatus::Created,
                RuntimeError::NoSuchImage {
                    message: "unit/app:1".into(),
                },
            ),
            1_002,
        );
        assert_eq!(retry_armed_at(&effects), None);
        assert_eq!(machine.task().desired_status, TaskStatus::Stopped);
        assert_eq!(machine.task().known_status, TaskStatus::Stopped);
    }

    #[test]
    fn a_stop_while_docker_is_away_completes_only_when_docker_confirms_it() {
        let mut machine = running_machine();
        let effects = machine.handle(
            Input::Desired {
                status: TaskStatus::Stopped,
                sequence: 5,
                registered: true,
            },
            2_000,
        );
        assert!(matches!(
            docker_calls(&effects)[..],
            [DockerCall::Stop { .. }]
        ));
        // The stop worker retried, then found Docker does not answer a ping.
        let effects = machine.handle(failed(ContainerStatus::Stopped, unreachable()), 12_000);
        assert!(!emits_stopped(&effects), "{effects:?}");
        assert!(!effects.contains(&Effect::WaitGroupDone { sequence: 5 }));
        assert_eq!(retry_armed_at(&effects), Some(13_000));
        let task = machine.task();
        assert_eq!(task.containers[0].known_status, ContainerStatus::Running);
        assert_eq!(task.known_status, TaskStatus::Running);
        assert_eq!(task.containers[0].applying_error, None);
        // A hung daemon (the stop timed out) is waited out the same way.
        let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 13_000);
        assert!(matches!(
            docker_calls(&effects)[..],
            [DockerCall::Stop { .. }]
        ));
        let effects = machine.handle(
            failed(
                ContainerStatus::Stopped,
                RuntimeError::Timeout {
                    operation: "stop container".into(),
                    after: Duration::from_secs(40),
                },
            ),
            60_000,
        );
        assert_eq!(retry_armed_at(&effects), Some(62_000));
        assert_eq!(machine.task().known_status, TaskStatus::Running);
        // Docker's event stream reconnects: the stop is made at once, and its answer ends it.
        let effects = machine.handle(Input::Resync, 61_000);
        assert!(
            docker_calls(&effects)
                .iter()
                .any(|call| matches!(call, DockerCall::Stop { .. })),
            "{effects:?}"
        );
        let effects = machine.handle(transition(ContainerStatus::Stopped, None), 61_500);
        assert!(emits_stopped(&effects));
        assert!(effects.contains(&Effect::WaitGroupDone { sequence: 5 }));
        assert_eq!(machine.task().known_status, TaskStatus::Stopped);
    }

    #[test]
    fn an_inspect_that_fails_without_saying_gone_leaves_the_status_and_is_retried() {
        let failures = [
            RuntimeError::Api {
                status: 500,
                message: "Internal Server Error".into(),
            },
            RuntimeError::Protocol {
                message: "inspect answer: EOF while parsing an object".into(),
            },
            unreachable(),
            RuntimeError::Timeout {
                operation: "inspect container".into(),
                after: Duration::from_secs(30),
            },
        ];
        for error in failures {
            let mut machine = running_machine();
            let effects = machine.handle(Input::TimerFired(TimerKind::SteadyCheck), 400_000);
            assert!(matches!(
                docker_calls(&effects)[..],
                [DockerCall::Inspect { .. }]
            ));
            let effects = machine.handle(
                Input::Inspected {
                    container: "app".into(),
                    result: Err(error.clone()),
                },
                400_100,
            );
            assert!(!emits_stopped(&effects), "{error}: {effects:?}");
            assert_eq!(
                machine.task().containers[0].known_status,
                ContainerStatus::Running
            );
            assert_eq!(
                machine.task().desired_status,
                TaskStatus::Running,
                "{error}"
            );
            assert_eq!(machine.task().containers[0].applying_error, None, "{error}");
            assert_eq!(retry_armed_at(&effects), Some(401_100), "{error}");
            let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 401_100);
            assert!(
                matches!(docker_calls(&effects)[..], [DockerCall::Inspect { .. }]),
                "{error}: {effects:?}"
            );
        }
        // Only Docker's "no such container" says it is gone.
        let mut machine = running_machine();
        let effects = machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Err(RuntimeError::NoSuchContainer {
                    message: "id-1".into(),
                }),
            },
            400_100,
        );
        assert!(emits_stopped(&effects));
        assert_eq!(
            machine.task().containers[0]
                .applying_error
                .as_ref()
                .map(|e| e.kind),
            Some(ContainerErrorKind::Vanished)
        );
    }

    #[test]
    fn inspect_failures_change_no_status_and_arm_one_retry_per_round() {
        let mut machine = running_machine();
        let effects = machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Err(RuntimeError::Api {
                    status: 500,
                    message: "boom".into(),
                }),
            },
            2_000,
        );
        assert!(!emits_stopped(&effects));
        assert_eq!(machine.task().known_status, TaskStatus::Running);
        // A second failure in the same round does not arm a second timer.
        let effects = machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Err(unreachable()),
            },
            2_001,
        );
        assert_eq!(retry_armed_at(&effects), None);
    }

    #[test]
    fn cleanup_removes_again_when_docker_was_away() {
        let mut machine = running_machine();
        machine.handle(
            Input::Desired {
                status: TaskStatus::Stopped,
                sequence: 0,
                registered: false,
            },
            2_000,
        );
        machine.handle(transition(ContainerStatus::Stopped, None), 2_001);
        machine.handle(
            Input::Reported(Reported::Container {
                name: "app".into(),
                status: ContainerStatus::Stopped,
            }),
            2_002,
        );
        let effects = machine.handle(
            Input::Reported(Reported::Task {
                status: TaskStatus::Stopped,
            }),
            2_003,
        );
        assert!(removes(&effects), "{effects:?}");
        let effects = machine.handle(
            Input::RemoveDeferred {
                error: unreachable(),
            },
            2_100,
        );
        assert_eq!(retry_armed_at(&effects), Some(3_100));
        assert!(!effects.contains(&Effect::Done));
        let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 3_100);
        assert!(removes(&effects), "the removal is made again: {effects:?}");
        assert_eq!(machine.handle(Input::Removed, 3_200), vec![Effect::Done]);
    }

    #[test]
    fn a_restart_docker_was_away_for_is_made_when_docker_is_back() {
        let mut task = one_container_task();
        task.containers[0].definition.restart_policy = Some(crate::task::RestartPolicy {
            enabled: true,
            ignored_exit_codes: Vec::new(),
            restart_attempt_period_secs: 60,
        });
        let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        machine.handle(transition(ContainerStatus::Running, None), 1_003);
        let effects = machine.handle(die_event(1), 100_000);
        assert!(docker_calls(&effects)
            .iter()
            .any(|call| matches!(call, DockerCall::Restart { .. })));
        let restarted = |result: Result<(), RuntimeError>| Input::Restarted {
            container: "app".into(),
            exit_code: Some(1),
            result,
        };
        // Docker went down with the container: the restart waits for it, nothing stops (nor
        // does the inspection after the exit, which fails too).
        machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Err(unreachable()),
            },
            100_050,
        );
        let effects = machine.handle(restarted(Err(unreachable())), 100_100);
        assert!(!emits_stopped(&effects), "{effects:?}");
        assert_eq!(
            retry_armed_at(&effects),
            None,
            "armed once for the round, by the inspection"
        );
        assert_eq!(machine.task().known_status, TaskStatus::Running);
        // Back-off expired: still away. Only the restart is made, no inspection beside it.
        let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 101_100);
        assert!(
            matches!(docker_calls(&effects)[..], [DockerCall::Restart { .. }]),
            "{effects:?}"
        );
        let effects = machine.handle(restarted(Err(unreachable())), 101_200);
        assert_eq!(retry_armed_at(&effects), Some(103_200));
        // Docker is back (its event stream reconnects): the restart is made at once, and the
        // container is not inspected meanwhile (that would race the restart).
        let effects = machine.handle(Input::Resync, 102_000);
        assert!(
            matches!(docker_calls(&effects)[..], [DockerCall::Restart { .. }]),
            "{effects:?}"
        );
        let effects = machine.handle(restarted(Ok(())), 102_100);
        assert!(!emits_stopped(&effects));
        assert_eq!(
            machine.task().containers[0].known_status,
            ContainerStatus::Running
        );
        assert_eq!(machine.task().containers[0].restart_count, 1);
        assert_eq!(machine.task().containers[0].applied_status, None);
    }
}
