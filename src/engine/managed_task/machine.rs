//! The managed task's state machine (docs/ENGINE.md §2): sans-I/O. [`ManagedTask::handle`] takes
//! one input (a desired change, a transition result, an inspection, a Docker event, a timer, a
//! delivery receipt) and the current time, applies the pure rules of `transition.rs`, and returns
//! effects (run a Docker call, emit an event, checkpoint, arm a timer, wait for or finish a
//! wait-group number, done). It owns no thread, socket or clock and writes no log (its log lines
//! are `Effect::Log`s), so tests and the simulator drive it step by step.

mod answers;
mod cleanup;
mod containers;
mod progress;

use crate::engine::container_spec::{
    add_metadata_environment, create_request, owned_volumes, volume_requirements,
};
use crate::engine::firelens::{task_directory, FirelensSetup};
use crate::engine::log_driver::AwsLogsSetup;
use crate::engine::messages::{
    DockerCall, DockerObservation, Effect, Input, Reported, TimerKind, TransitionOutput,
};
use crate::engine::transition::{
    classify_error, dependency_terminal_error, derive_task_known_status, docker_away,
    docker_retry_delay, error_outcome, essential_container_stopped, essential_stop_reason,
    exit_error_from_inspection, inspect_says_gone, is_steady, next_state, restop_on_running_report,
    should_restart, stop_grace, unable_to_progress, DockerAction, DockerCallKind, NextState,
    ProgressVerdict, RuleConfig, ESSENTIAL_CONTAINER_EXITED,
};
use crate::ports::reported_port_bindings;
use crate::report::NewEvent;
use crate::runtime::{ContainerInfo, PortBinding, RuntimeError};
use crate::task::metadata_endpoint::MetadataEndpoint;
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
    /// The task metadata endpoint containers are pointed at (§14); `None` when it is off.
    pub task_metadata: Option<MetadataEndpoint>,
    /// `ECS_EXCLUDE_IPV6_PORTBINDING`: record port bindings without IPv6 twins.
    pub exclude_ipv6_port_bindings: bool,
    /// Whether awslogs containers ship their logs or run with the fallback driver (§13).
    pub aws_logs: AwsLogsSetup,
    /// Where a FireLens router's files go and `config-file-type: s3` files come from.
    pub firelens: FirelensSetup,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before `start`.
    New,
    /// §2 step 3.
    WaitingForStops,
    /// §2 step 3, after the stops: waiting to be admitted to the host's resources (§9a).
    WaitingForResources,
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
    /// Whether the task's execution-role credentials are in the store (an input: its thread
    /// reads the store); true until told otherwise.
    execution_credentials_present: bool,
    pull_credentials_armed: bool,
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
            execution_credentials_present: true,
            pull_credentials_armed: false,
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

    /// Whether the task's execution-role credentials are in the store, read by its thread
    /// before each input: an ECR pull of a task with an execution role waits for them (§4).
    pub fn set_execution_credentials_present(&mut self, present: bool) {
        self.execution_credentials_present = present;
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
            } => self.adopt_by_name(docker_id, &docker_name, effects),
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
            Input::WaitGroupReady => self.wait_group_ready(effects),
            Input::ResourcesReady { gpu_ids } => self.resources_ready(&gpu_ids),
            Input::TimerFired(TimerKind::SteadyCheck) => self.steady_check_fired(now, effects),
            Input::TimerFired(TimerKind::DependencyPoll) => self.dependency_poll_fired(effects),
            Input::TimerFired(TimerKind::Cleanup) => self.cleanup_if_due(now, effects),
            // The pass that follows checks again (§4 pull credentials).
            Input::TimerFired(TimerKind::PullCredentials) => self.pull_credentials_armed = false,
            Input::Reported(reported) => self.reported(reported, now, effects),
            Input::ReportFailed { reported, error } => self.report_failed(reported, error, effects),
            // Answered in `handle`, outside the passes.
            Input::CheckpointWritten | Input::CheckpointFailed { .. } => {}
            Input::ControlPlaneReported { status } => {
                if self.task.reported_status < status {
                    self.task.reported_status = status;
                    self.dirty = true;
                    self.cleanup_if_due(now, effects);
                }
            }
            Input::Removed => self.removed(effects),
            Input::RemoveDeferred { error } => self.removal_deferred(error, now, effects),
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

    /// Every earlier stop finished (§9): now wait for the host's resources (§9a).
    fn wait_group_ready(&mut self, effects: &mut Vec<Effect>) {
        if self.phase == Phase::WaitingForStops {
            self.phase = Phase::WaitingForResources;
            effects.push(Effect::WaitForResources);
        }
    }

    /// The task was admitted to the host's resources (§9a): it may create its containers.
    fn resources_ready(&mut self, gpu_ids: &[String]) {
        if self.phase == Phase::WaitingForResources {
            self.phase = Phase::Progressing;
            self.hand_out_gpus(gpu_ids);
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
            // It is still in the host-resource queue (§9a): it leaves it now.
            effects.push(Effect::ReleaseResources);
        }
        if status == TaskStatus::Stopped && self.phase == Phase::WaitingForResources {
            self.phase = Phase::Progressing;
            effects.push(Effect::ReleaseResources);
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
                self.task.stopped_reason = Some(essential_stop_reason(&self.task));
            }
            self.raise_desired(TaskStatus::Stopped);
        }
    }
}
