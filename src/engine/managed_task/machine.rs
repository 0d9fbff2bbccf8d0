//! The managed task's state machine (docs/ENGINE.md §2): sans-I/O. [`ManagedTask::handle`] takes
//! one input (a desired change, a transition result, an inspection, a Docker event, a timer, a
//! delivery receipt) and the current time, applies the pure rules of `transition.rs`, and returns
//! effects (run a Docker call, emit an event, checkpoint, arm a timer, wait for or finish a
//! wait-group number, done). It owns no thread, socket or clock and writes no log (its log lines
//! are `Effect::Log`s), so tests and the simulator drive it step by step.

use crate::engine::container_spec::{create_request, task_volume_names};
use crate::engine::messages::{
    DockerCall, DockerObservation, Effect, Input, Reported, TimerKind, TransitionOutput,
};
use crate::engine::transition::{
    classify_error, derive_task_known_status, docker_away, docker_retry_delay, error_outcome,
    essential_container_stopped, exit_error_from_inspection, inspect_says_gone, is_steady,
    next_state, restop_on_running_report, should_restart, stop_grace, unable_to_progress,
    DockerAction, DockerCallKind, NextState, ProgressVerdict, RuleConfig,
};
use crate::report::NewEvent;
use crate::runtime::{ContainerInfo, PortBinding, RuntimeError};
use crate::task::{
    ContainerError, ContainerErrorKind, ContainerStatus, HealthStatus, Millis, Task, TaskStatus,
};
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
    /// Why the last checkpoint write failed: the file on disk is older than the task, so it is
    /// written again after the next input (a disk that was full may have room again).
    checkpoint_error: Option<String>,
    /// `Checkpoint` effects handed out whose answer has not come back yet.
    unanswered_checkpoints: usize,
    /// A failed checkpoint was written again since the last input (once per input).
    checkpoint_retried: bool,
    /// A desired change was handled and whoever sent it waits to hear that it is durable.
    acknowledgement_due: bool,
    /// An event the reporter could not record: logged once until recording works again.
    report_failing: bool,
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
            checkpoint_error: None,
            unanswered_checkpoints: 0,
            checkpoint_retried: false,
            acknowledgement_due: false,
            report_failing: false,
        }
    }

    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The task, to set up a case in the unit tests.
    #[cfg(test)]
    pub(super) fn task_mut(&mut self) -> &mut Task {
        &mut self.task
    }

    /// The task given to [`ManagedTask::new`] differs from its checkpoint (restore reconciled
    /// it with Docker): the first pass writes it.
    pub fn unsaved_changes(mut self) -> Self {
        self.dirty = true;
        self
    }

    /// The registered stop number the task has not finished, handed over (to be finished by
    /// whoever takes it) when the task's thread gives up on it.
    pub fn take_unfinished_stop(&mut self) -> Option<u64> {
        self.unfinished_stop.take()
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
        self.settle_durability(&mut effects);
        effects
    }

    /// Handles one input and returns what to do.
    pub fn handle(&mut self, input: Input, now: Millis) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.phase == Phase::Done {
            return effects;
        }
        match input {
            // A checkpoint's answer changes nothing of the task: no pass follows it.
            Input::CheckpointWritten => self.checkpoint_written(&mut effects),
            Input::CheckpointFailed { error } => self.checkpoint_failed(error, &mut effects),
            input => {
                if matches!(input, Input::Desired { .. }) {
                    self.acknowledgement_due = true;
                }
                self.own_inbox.push_back(input);
                self.run_until_quiet(now, &mut effects);
                self.checkpoint_retried = false;
                if self.checkpoint_error.is_some() && !effects.contains(&Effect::Checkpoint) {
                    self.retry_checkpoint(&mut effects);
                }
            }
        }
        self.settle_durability(&mut effects);
        effects
    }

    fn checkpoint_written(&mut self, effects: &mut Vec<Effect>) {
        self.unanswered_checkpoints = self.unanswered_checkpoints.saturating_sub(1);
        if self.checkpoint_error.take().is_some() {
            effects.push(Effect::Log {
                level: log::Level::Info,
                message: "checkpoint written again".to_string(),
            });
        }
    }

    fn checkpoint_failed(&mut self, error: String, effects: &mut Vec<Effect>) {
        self.unanswered_checkpoints = self.unanswered_checkpoints.saturating_sub(1);
        if self.checkpoint_error.is_none() {
            effects.push(Effect::Log {
                level: log::Level::Error,
                message: format!("checkpoint failed: {error}"),
            });
        }
        self.checkpoint_error = Some(error);
        if !self.checkpoint_retried {
            self.retry_checkpoint(effects);
        }
    }

    /// The file on disk is behind the task: try again now rather than only at the next change
    /// (a disk that was full may have room again), once per input.
    fn retry_checkpoint(&mut self, effects: &mut Vec<Effect>) {
        self.checkpoint_retried = true;
        effects.push(Effect::Checkpoint);
    }

    /// Counts the checkpoints handed out, and answers a desired change once every checkpoint
    /// since it has answered: durable if the last one was written.
    fn settle_durability(&mut self, effects: &mut Vec<Effect>) {
        self.unanswered_checkpoints += effects
            .iter()
            .filter(|effect| **effect == Effect::Checkpoint)
            .count();
        if self.acknowledgement_due && self.unanswered_checkpoints == 0 {
            self.acknowledgement_due = false;
            let result = match &self.checkpoint_error {
                None => Ok(()),
                Some(error) => Err(error.clone()),
            };
            effects.push(Effect::AcknowledgeDesired { result });
        }
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
            } => self.transition_answered(container, target, result, now, effects),
            Input::Inspected { container, result } => {
                self.inspected(container, result, now, effects)
            }
            Input::DockerEvent {
                docker_id,
                observation: DockerObservation::FoundByName { docker_name },
            } => self.adopt_by_name(docker_id, &docker_name, now, effects),
            Input::DockerEvent {
                docker_id,
                observation,
            } => self.docker_event(docker_id, observation, now, effects),
            Input::SyntheticStop { container, error } => {
                self.synthetic_stop(container, error, now, effects)
            }
            Input::Restarted {
                container,
                exit_code,
                result,
            } => self.restarted(container, exit_code, result, now, effects),
            Input::Resync => self.resync(effects),
            Input::TimerFired(TimerKind::DockerRetry) => self.docker_retry_fired(now, effects),
            Input::WaitGroupReady => self.wait_group_ready(),
            Input::TimerFired(TimerKind::SteadyCheck) => self.steady_check_fired(now, effects),
            Input::TimerFired(TimerKind::DependencyPoll) => self.dependency_poll_fired(effects),
            Input::TimerFired(TimerKind::Cleanup) => self.cleanup_if_due(now, effects),
            Input::Reported(reported) => self.reported(reported, now, effects),
            Input::ReportFailed { reported, error } => self.report_failed(reported, error, effects),
            // Answered in `handle`, outside the passes.
            Input::CheckpointWritten | Input::CheckpointFailed { .. } => {}
            Input::Removed => self.removed(effects),
            Input::RemoveDeferred { error } => self.removal_deferred(error, now, effects),
        }
    }

    /// A transition worker's answer: Docker away waits and retries; anything else is the
    /// container's change (§6 for errors).
    fn transition_answered(
        &mut self,
        container: String,
        target: ContainerStatus,
        result: Result<TransitionOutput, RuntimeError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
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

    /// An inspection's answer: Docker's view of the container (§11), or a 404 (vanished).
    fn inspected(
        &mut self,
        container: String,
        result: Result<ContainerInfo, RuntimeError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let Some(index) = self.task.container_index(&container) else {
            return;
        };
        if let Err(error) = &result {
            if !inspect_says_gone(error) {
                // Not a fact about the container (a 500, a malformed answer, Docker
                // away): its status stays as it was; inspect it again after a back-off.
                effects.push(Effect::Log {
                    level: log::Level::Debug,
                    message: format!(
                        "inspecting {container} failed: {error}; inspecting again later"
                    ),
                });
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
                    exit_code: (status == ContainerStatus::Stopped).then_some(info.state.exit_code),
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

    /// A Docker event routed to this task by Docker id.
    fn docker_event(
        &mut self,
        docker_id: String,
        observation: DockerObservation,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
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
                    && self.task.containers[index].applied_status == Some(ContainerStatus::Running)
                {
                    // Our own start call is in flight: its answer brings RUNNING together
                    // with the inspection (ports, start time), so a reader who sees RUNNING
                    // also sees the container's port bindings, as ECS reports them.
                    return;
                }
                let exited = status == ContainerStatus::Stopped && known < ContainerStatus::Stopped;
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

    /// A STOPPED the task posted to itself (§3 row 5, §4).
    fn synthetic_stop(
        &mut self,
        container: String,
        error: Option<ContainerError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
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

    /// A restart's answer (§12).
    fn restarted(
        &mut self,
        container: String,
        exit_code: Option<i64>,
        result: Result<(), RuntimeError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
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
                effects.push(Effect::Log {
                    level: log::Level::Info,
                    message: format!(
                        "restarted container {container} (restart {})",
                        restarted.restart_count
                    ),
                });
                self.docker_answered();
            }
            // Docker is away (it restarts, and took the container down with it): the
            // restart is made when Docker is back, not given up.
            Err(error) if docker_away(DockerCallKind::Start, &error) => {
                effects.push(Effect::Log {
                    level: log::Level::Warn,
                    message: format!(
                        "cannot restart container {container} while Docker is away \
                     ({error}); restarting it when Docker is back"
                    ),
                });
                self.restart_pending[index] = Some(exit_code);
                self.arm_docker_retry(now, effects);
            }
            Err(error) => {
                effects.push(Effect::Log {
                    level: log::Level::Warn,
                    message: format!("restarting container {container} failed: {error}"),
                });
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

    /// Docker events may have been missed, or Docker is back.
    fn resync(&mut self, effects: &mut Vec<Effect>) {
        // The event stream reconnected (Docker is back) or events were missed: what
        // waited for Docker is tried now rather than at the end of its back-off.
        self.retry_docker_now();
        self.inspect_all(effects);
        self.retry_pending_restarts(effects);
    }

    /// The back-off after Docker was away ended: make again what waited for it.
    fn docker_retry_fired(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        self.docker_retry_at = None;
        self.reinspect_failed(effects);
        self.retry_pending_restarts(effects);
        // Progressing: the pass that follows makes the due calls again.
        if std::mem::take(&mut self.remove_deferred) {
            self.cleanup_if_due(now, effects);
        }
    }

    /// Every earlier stop finished (§9).
    fn wait_group_ready(&mut self) {
        if self.phase == Phase::WaitingForStops {
            self.phase = Phase::Progressing;
        }
    }

    /// §2 step 4's steady re-check: emit what is unreported, re-inspect.
    fn steady_check_fired(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        self.steady_timer_armed = false;
        self.emit_unreported(now, effects);
        if self.task.known_status < TaskStatus::Stopped {
            self.inspect_all(effects);
        }
    }

    /// A task blocked on a dependency re-inspects its containers.
    fn dependency_poll_fired(&mut self, effects: &mut Vec<Effect>) {
        self.dependency_poll_armed = false;
        if self.phase == Phase::Progressing {
            self.inspect_all(effects);
        }
    }

    /// Cleanup removed the containers: the task is done.
    fn removed(&mut self, effects: &mut Vec<Effect>) {
        if self.phase == Phase::Removing {
            self.phase = Phase::Done;
            effects.push(Effect::Done);
        }
    }

    /// Cleanup could not remove everything while Docker was away: tried again after a back-off.
    fn removal_deferred(&mut self, error: RuntimeError, now: Millis, effects: &mut Vec<Effect>) {
        if self.phase == Phase::Removing {
            effects.push(Effect::Log {
                level: log::Level::Info,
                message: format!(
                    "cannot remove its containers while Docker is away ({error}); \
                 trying again"
                ),
            });
            self.phase = Phase::AwaitingCleanup;
            self.remove_deferred = true;
            self.arm_docker_retry(now, effects);
        }
    }

    /// The reporter recorded an event: `sent` rises, and cleanup may be due.
    fn reported(&mut self, reported: Reported, now: Millis, effects: &mut Vec<Effect>) {
        self.report_failing = false;
        match reported {
            Reported::Container { name, status } => {
                if let Some(index) = self.task.container_index(&name) {
                    let container = &mut self.task.containers[index];
                    if container.sent_status < status {
                        container.sent_status = status;
                        self.dirty = true;
                    }
                }
            }
            Reported::Task { status } => {
                if self.task.sent_status < status {
                    self.task.sent_status = status;
                    self.dirty = true;
                }
                self.cleanup_if_due(now, effects);
            }
        }
    }

    /// Not reported: `sent` stays below, cleanup waits for it, and the task emits it again at
    /// its next re-check (or after a restart).
    fn report_failed(&mut self, reported: Reported, error: String, effects: &mut Vec<Effect>) {
        match reported {
            Reported::Container { name, .. } => {
                if let Some(index) = self.task.container_index(&name) {
                    self.emitted_container[index] = self.task.containers[index].sent_status;
                }
            }
            Reported::Task { .. } => self.emitted_task = self.task.sent_status,
        }
        if !self.report_failing {
            self.report_failing = true;
            effects.push(Effect::Log {
                level: log::Level::Error,
                message: format!("cannot record a state-change event: {error}"),
            });
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
        effects.push(Effect::Log {
            level: log::Level::Info,
            message: format!(
                "adopted container {} ({docker_id}), found by its name {docker_name} after \
             Docker's event stream came back",
                container.name()
            ),
        });
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
            effects.push(Effect::Log {
                level: log::Level::Warn,
                message: format!(
                    "Docker is away ({error}); container {name} waits for it to go to \
                 {target}"
                ),
            });
        } else {
            effects.push(Effect::Log {
                level: log::Level::Debug,
                message: format!("Docker is still away ({error}); container {name} waits"),
            });
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
                effects.push(Effect::Log {
                    level: log::Level::Warn,
                    message: "cannot reach STOPPED by any further step; marking it STOPPED"
                        .to_string(),
                });
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
