//! The ECS reporter: tells ECS every state change of the tasks it owns, in order, exactly once
//! in the normal course, and keeps trying while ECS is out of reach.
//!
//! It reads the engine's durable, numbered event log from a cursor (`reportedThrough` in
//! `ECS_DATADIR/ecs.json`): events of local tasks are passed over, a container's change is
//! carried by the task change that follows it (SubmitTaskStateChange, as the ECS agent batches
//! them), and a container change with no task change behind it goes alone
//! (SubmitContainerStateChange) once another task's event comes next or it waited
//! [`CONTAINER_CHANGE_WAIT`]. After each acknowledged request the cursor is saved, then the
//! engine is told which task status ECS acknowledged (a task ECS owns is cleaned up only after
//! its STOPPED was). Only a crash between ECS's answer and the cursor's save sends a change
//! twice. A request that fails is retried with back-off (1 s → 30 s, ×1.3, jitter, the ECS
//! agent's figures) and nothing after it is sent meanwhile, so each task's changes arrive in
//! their order: ECS out of reach, 5xx and throttling, and refusals that a later attempt can
//! pass (an expired token while the credentials rotate, a signature refused for a skewed clock,
//! an inactive instance, anything else ECS may take later). Only a request ECS says is itself
//! wrong (`ClientException`, `InvalidParameterException`: [`after_failure`]) is dropped, logged
//! with its body, so one change ECS will never take does not hold back every later one.
//!
//! Tasks that could not be mapped from a payload have no events; the session saves them in the
//! same record (`rejected`) before the payload is acknowledged, and the reporter reports each
//! STOPPED with its reason first.

use crate::control::ecs::report::{
    container_state_change_body, task_state_change_body, ContainerChange, ContainerReportStatus,
    NetworkBinding, TaskChange, TaskReportStatus,
};
use crate::control::ecs::EcsError;
use crate::engine::EngineHandle;
use crate::event::Event;
use crate::task::{ContainerKind, Millis, Task, TaskStatus, ECS_SOURCE_PREFIX};
use crossbeam_channel::Receiver;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a container change waits for its task's change before it is sent alone.
pub const CONTAINER_CHANGE_WAIT: Duration = Duration::from_secs(2);
/// First and largest pause between attempts while ECS is out of reach.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Events read in one go.
const BATCH_EVENTS: usize = 256;

/// `ECS_DATADIR/ecs.json`: what the ECS connection must remember across restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EcsRecord {
    /// Sent again when re-registering, so ECS keeps this host's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_instance_arn: Option<String>,
    /// Every event numbered up to this one was reported to ECS (or is not ECS's).
    #[serde(default)]
    pub reported_through: u64,
    /// Payload tasks deckhand could not take, to be reported STOPPED with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedTask>,
    /// The highest ACS payload sequence number acknowledged (sent as `seqNum` on reconnect).
    #[serde(default)]
    pub seq_num: u64,
    /// What ECS acknowledged of each task it owns that the engine still holds, by task id:
    /// saved in the same write as the cursor, so a change a restore emits again (its
    /// checkpoint lagged behind the report) is recognised and not sent twice.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub acknowledged: BTreeMap<String, Acknowledged>,
}

/// What ECS acknowledged of one task: its status and each container's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acknowledged {
    #[serde(default, skip_serializing_if = "TaskStatus::is_none")]
    pub task: TaskStatus,
    /// Container name → `RUNNING` or `STOPPED`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub containers: BTreeMap<String, String>,
}

impl Acknowledged {
    fn container_has(&self, name: &str, status: &str) -> bool {
        self.containers
            .get(name)
            .is_some_and(|known| known == status || known == "STOPPED")
    }

    /// Records what `report` made ECS know.
    pub fn record(&mut self, report: &Report) {
        if let Some((_, status)) = report.acknowledges {
            self.task = self.task.max(status);
        }
        for (name, status) in &report.containers {
            if !self.container_has(name, status) {
                self.containers.insert(name.clone(), status.clone());
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RejectedTask {
    pub arn: String,
    pub reason: String,
}

/// The record file, shared by the session thread and the reporter (each changes its own
/// fields under the lock and saves the whole).
#[derive(Debug)]
pub struct RecordFile {
    path: PathBuf,
    record: std::sync::Mutex<EcsRecord>,
}

impl RecordFile {
    pub fn open(datadir: &Path) -> Result<RecordFile, String> {
        let path = datadir.join("ecs.json");
        let record = crate::state::load_record(&path, "ecs")
            .map_err(|error| error.to_string())?
            .unwrap_or_default();
        Ok(RecordFile {
            path,
            record: std::sync::Mutex::new(record),
        })
    }

    pub fn get(&self) -> EcsRecord {
        self.lock().clone()
    }

    /// Changes the record with `change` and saves it; on a failed save the record in memory
    /// stays as it was, so what is held never runs ahead of what is on disk.
    pub fn update(&self, change: impl FnOnce(&mut EcsRecord)) -> Result<(), String> {
        let mut held = self.lock();
        let mut next = held.clone();
        change(&mut next);
        if next == *held {
            return Ok(());
        }
        crate::state::save_record(&self.path, "ecs", &next).map_err(|error| error.to_string())?;
        *held = next;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EcsRecord> {
        self.record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the reporter calls ECS with (the real client, or a test's).
pub trait EcsCaller: Send + Sync {
    fn call(
        &self,
        operation: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, EcsError>;
}

impl EcsCaller for crate::control::ecs::EcsClient {
    fn call(
        &self,
        operation: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, EcsError> {
        crate::control::ecs::EcsClient::call(self, operation, body)
    }
}

/// One request the reporter makes, and what ECS acknowledging it means.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub operation: &'static str,
    pub body: serde_json::Value,
    /// The events it covers end here: the cursor moves to it once ECS answered.
    pub through: u64,
    /// The task and the status ECS then knows, for the engine.
    pub acknowledges: Option<(String, TaskStatus)>,
    /// The task the report is about (its id), and the container statuses it carries.
    pub task_id: String,
    pub containers: Vec<(String, String)>,
}

/// The task ARN of a task ECS owns.
pub fn ecs_arn(task: &Task) -> Option<&str> {
    task.source.as_deref()?.strip_prefix(ECS_SOURCE_PREFIX)
}

/// What the reporter does next with the events after its cursor.
#[derive(Debug, Clone, PartialEq)]
pub enum NextReport {
    /// Send this request; once ECS answered, the cursor moves to its `through`.
    Send(Report),
    /// The events up to this one need no request (local tasks, the sandbox, or what ECS
    /// already acknowledged): move the cursor there.
    PassOver(u64),
    /// A container change waits for its task's change (or nothing is there yet).
    Wait,
}

/// The next request for `events` (in order, all after the cursor): pure.
pub fn next_report(
    events: &[Event],
    tasks: &HashMap<String, Task>,
    acknowledged: &BTreeMap<String, Acknowledged>,
    cluster: &str,
    exclude_ipv6: bool,
    now: Millis,
) -> NextReport {
    let none = Acknowledged::default();
    let mut passed = None;
    let mut waiting: Vec<&Event> = Vec::new();
    let mut followed = false;
    for event in events {
        let task = tasks
            .get(&event.task)
            .filter(|task| ecs_arn(task).is_some());
        if let Some(first) = waiting.first() {
            if task.is_none() || first.task != event.task {
                followed = true;
                break;
            }
        }
        let Some(task) = task else {
            passed = Some(event.seq);
            continue;
        };
        let known = acknowledged.get(&task.id).unwrap_or(&none);
        match &event.container {
            Some(name) => {
                let internal = task
                    .containers
                    .iter()
                    .any(|c| c.name() == name && c.kind == ContainerKind::Sandbox);
                // A task status ECS knows covers the container changes up to it: each went
                // before, or with, its task's change.
                let covered = task.reported_status.max(known.task) >= status_of(event);
                let old_news = internal || covered || known.container_has(name, &event.status);
                match (old_news, waiting.is_empty()) {
                    (true, true) => passed = Some(event.seq),
                    (true, false) => {}
                    (false, _) => waiting.push(event),
                }
            }
            None => {
                let status = status_of(event);
                // Already acknowledged (an event a restore emitted again after its checkpoint
                // lagged): ECS knows it. Container changes before it still go, alone.
                if status <= task.reported_status.max(known.task) {
                    if waiting.is_empty() {
                        passed = Some(event.seq);
                        continue;
                    }
                    followed = true;
                    break;
                }
                return NextReport::Send(task_report(task, event, &waiting, cluster, exclude_ipv6));
            }
        }
    }
    let Some(first) = waiting.first() else {
        return passed.map_or(NextReport::Wait, NextReport::PassOver);
    };
    let waited = now.saturating_sub(first.time) >= CONTAINER_CHANGE_WAIT.as_millis() as u64;
    if !followed && !waited {
        return NextReport::Wait;
    }
    // Alone: the first one (the next round takes the rest).
    let task = &tasks[&first.task];
    let change = container_change(task, first);
    let arn = ecs_arn(task).unwrap_or_default();
    NextReport::Send(Report {
        operation: "SubmitContainerStateChange",
        body: container_state_change_body(cluster, arn, &change, exclude_ipv6),
        through: first.seq,
        acknowledges: None,
        task_id: task.id.clone(),
        containers: vec![(change.container_name.clone(), first.status.clone())],
    })
}

/// The task status an event's `RUNNING`/`STOPPED` stands for.
fn status_of(event: &Event) -> TaskStatus {
    if event.status == "STOPPED" {
        TaskStatus::Stopped
    } else {
        TaskStatus::Running
    }
}

fn seconds(millis: Option<Millis>) -> Option<f64> {
    millis.map(|millis| millis as f64 / 1000.0)
}

fn task_report(
    task: &Task,
    event: &Event,
    containers: &[&Event],
    cluster: &str,
    exclude_ipv6: bool,
) -> Report {
    let status = if event.status == "STOPPED" {
        TaskReportStatus::Stopped
    } else {
        TaskReportStatus::Running
    };
    let change = TaskChange {
        cluster: cluster.to_string(),
        task_arn: ecs_arn(task).unwrap_or_default().to_string(),
        status,
        reason: event.reason.clone(),
        pull_started_at: seconds(task.pull_started_at),
        pull_stopped_at: seconds(task.pull_stopped_at),
        execution_stopped_at: seconds(task.execution_stopped_at)
            .filter(|_| status == TaskReportStatus::Stopped),
        containers: containers
            .iter()
            .map(|container| container_change(task, container))
            .collect(),
    };
    let engine_status = match status {
        TaskReportStatus::Stopped => TaskStatus::Stopped,
        _ => TaskStatus::Running,
    };
    Report {
        operation: "SubmitTaskStateChange",
        body: task_state_change_body(&change, exclude_ipv6),
        through: event.seq,
        acknowledges: Some((task.id.clone(), engine_status)),
        task_id: task.id.clone(),
        containers: containers
            .iter()
            .filter_map(|event| Some((event.container.clone()?, event.status.clone())))
            .collect(),
    }
}

fn container_change(task: &Task, event: &Event) -> ContainerChange {
    let container = task
        .containers
        .iter()
        .find(|container| Some(container.name()) == event.container.as_deref());
    ContainerChange {
        container_name: event.container.clone().unwrap_or_default(),
        runtime_id: container.and_then(|container| container.docker_id.clone()),
        image_digest: None,
        status: if event.status == "STOPPED" {
            ContainerReportStatus::Stopped
        } else {
            ContainerReportStatus::Running
        },
        exit_code: event
            .exit_code
            .and_then(|code| i32::try_from(code).ok())
            .filter(|_| event.status == "STOPPED"),
        reason: event.reason.clone(),
        network_bindings: container
            .map(|container| {
                container
                    .ports
                    .iter()
                    .filter(|binding| binding.host_port != 0)
                    .map(|binding| NetworkBinding {
                        bind_ip: if binding.host_ip.is_empty() {
                            "0.0.0.0".to_string()
                        } else {
                            binding.host_ip.clone()
                        },
                        container_port: binding.container_port,
                        host_port: binding.host_port,
                        protocol: binding.protocol.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The body of a rejected payload task's STOPPED.
pub fn rejected_report(cluster: &str, rejected: &RejectedTask) -> serde_json::Value {
    task_state_change_body(
        &TaskChange {
            cluster: cluster.to_string(),
            task_arn: rejected.arn.clone(),
            status: TaskReportStatus::Stopped,
            reason: Some(rejected.reason.clone()),
            pull_started_at: None,
            pull_stopped_at: None,
            execution_stopped_at: None,
            containers: Vec::new(),
        },
        false,
    )
}

/// The reporter thread's settings.
pub struct Reporter {
    pub engine: Arc<dyn EngineHandle>,
    pub caller: Arc<dyn EcsCaller>,
    pub record: Arc<RecordFile>,
    pub cluster: String,
    pub exclude_ipv6: bool,
    /// Any message (or a disconnect) ends the loop.
    pub stop: Receiver<()>,
}

impl Reporter {
    /// Runs until `stop` fires. First tells the engine again what ECS acknowledged (the
    /// engine's own record of it may lag behind this one after a crash).
    pub fn run(self) {
        for (task_id, acknowledged) in self.record.get().acknowledged {
            if acknowledged.task != TaskStatus::None {
                self.engine
                    .control_plane_reported(&task_id, acknowledged.task);
            }
        }
        let mut retry = RETRY_FIRST;
        let mut last_unreachable_logged = false;
        loop {
            let outcome = self.round();
            let pause = match outcome {
                Round::Idle(pause) => {
                    retry = RETRY_FIRST;
                    pause
                }
                Round::Sent => {
                    retry = RETRY_FIRST;
                    if last_unreachable_logged {
                        log::info!("ECS: reachable again; state changes are being reported");
                        last_unreachable_logged = false;
                    }
                    Duration::ZERO
                }
                Round::Failed(error) => {
                    if !last_unreachable_logged {
                        log::warn!("ECS: cannot report state changes yet ({error}); retrying");
                        last_unreachable_logged = true;
                    } else {
                        log::debug!("ECS: still cannot report state changes ({error})");
                    }
                    let pause = jittered(retry);
                    retry = (retry.mul_f64(1.3)).min(RETRY_MAX);
                    pause
                }
            };
            if !pause.is_zero() {
                match self.stop.recv_timeout(pause) {
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
            } else if !matches!(
                self.stop.try_recv(),
                Err(crossbeam_channel::TryRecvError::Empty)
            ) {
                return;
            }
        }
    }

    fn round(&self) -> Round {
        let record = self.record.get();
        if let Some(rejected) = record.rejected.first() {
            let body = rejected_report(&self.cluster, rejected);
            return match self.submit("SubmitTaskStateChange", &body) {
                Ok(()) => {
                    let arn = rejected.arn.clone();
                    match self
                        .record
                        .update(|record| record.rejected.retain(|r| r.arn != arn))
                    {
                        Ok(()) => Round::Sent,
                        Err(error) => Round::Failed(format!("cannot save ecs.json: {error}")),
                    }
                }
                Err(error) => Round::Failed(error),
            };
        }
        let events = self
            .engine
            .events_since(record.reported_through, Duration::from_millis(500));
        if events.is_empty() {
            return Round::Idle(Duration::ZERO);
        }
        let events: Vec<Event> = events.into_iter().take(BATCH_EVENTS).collect();
        let tasks: HashMap<String, Task> = self
            .engine
            .tasks()
            .into_iter()
            .map(|task| (task.id.clone(), task))
            .collect();
        match next_report(
            &events,
            &tasks,
            &record.acknowledged,
            &self.cluster,
            self.exclude_ipv6,
            crate::clock::now_millis(),
        ) {
            NextReport::Wait => Round::Idle(Duration::from_millis(200)),
            NextReport::PassOver(through) => {
                if through <= record.reported_through {
                    return Round::Idle(Duration::from_millis(200));
                }
                match self
                    .record
                    .update(|record| record.reported_through = through)
                {
                    Ok(()) => Round::Sent,
                    Err(error) => Round::Failed(format!("cannot save ecs.json: {error}")),
                }
            }
            NextReport::Send(report) => {
                if let Err(error) = self.submit(report.operation, &report.body) {
                    return Round::Failed(error);
                }
                let saved = self.record.update(|record| {
                    record.reported_through = report.through;
                    record
                        .acknowledged
                        .entry(report.task_id.clone())
                        .or_default()
                        .record(&report);
                    // Tasks the engine no longer holds were cleaned up: nothing to recognise.
                    record.acknowledged.retain(|id, _| tasks.contains_key(id));
                });
                if let Err(error) = saved {
                    return Round::Failed(format!("cannot save ecs.json: {error}"));
                }
                if let Some((task_id, status)) = report.acknowledges {
                    self.engine.control_plane_reported(&task_id, status);
                }
                Round::Sent
            }
        }
    }

    /// One request; a refusal of the request itself ([`after_failure`]) is logged and counts
    /// as done, so one change ECS cannot take never holds back every later one.
    fn submit(&self, operation: &str, body: &serde_json::Value) -> Result<(), String> {
        match self.caller.call(operation, body) {
            Ok(_) => Ok(()),
            Err(error) => match after_failure(&error) {
                AfterFailure::Drop => {
                    log::error!("ECS refused {operation} ({error}); it is not sent again: {body}");
                    Ok(())
                }
                AfterFailure::Retry => Err(error.to_string()),
            },
        }
    }
}

/// What the reporter does with a request that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Send it again after the back-off; nothing after it goes first.
    Retry,
    /// ECS refused the request itself: sending it again gets the same answer.
    Drop,
}

/// The error types that refuse the request itself (the ECS agent drops a state change ECS
/// answered `InvalidParameterException`; `ClientException` is ECS's "the request is not valid
/// for this resource").
const REFUSED_FOR_GOOD: &[&str] = &["ClientException", "InvalidParameterException"];

/// Whether a failed report is sent again: everything is, except a refusal of the request
/// itself. Expired tokens, signatures (a skewed clock, credentials mid-rotation), throttling,
/// 5xx, an unreachable ECS, missing credentials and answers that break the protocol are all
/// conditions of the moment, as the ECS agent treats them (its task handler retries every
/// failure but `InvalidParameterException`). Pure.
pub fn after_failure(error: &EcsError) -> AfterFailure {
    match error.error_type() {
        Some(error_type) if REFUSED_FOR_GOOD.contains(&error_type) => AfterFailure::Drop,
        _ => AfterFailure::Retry,
    }
}

enum Round {
    Idle(Duration),
    Sent,
    Failed(String),
}

/// `pause` ± 20 %, from the clock's low bits (no randomness crate; jitter only spreads hosts).
pub fn jittered(pause: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    let factor = 0.8 + f64::from(nanos % 1000) / 2500.0;
    pause.mul_f64(factor)
}

#[cfg(test)]
mod tests;
