//! `EngineHandle`: what the control sources (local API, ECS introspection, `tasks.d`) may ask of
//! the engine. The engine implements it; the API and control sources depend only on this trait,
//! so they never reach into a task's state.

use crate::report::Event;
pub use crate::runtime::{LogOptions, LogStream};
use crate::task::{RoleCredentialsIds, Task, TaskDefinition};
use std::fmt;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// No task with that id.
    NotFound { task: String },
    /// The command could not be made durable (disk full, read-only); nothing was accepted.
    Unavailable { reason: String },
    /// The agent is shutting down and accepts no commands.
    ShuttingDown,
    /// The task was refused (for example a privileged container while privileged is disabled).
    Rejected { reason: String },
    /// The command conflicts with who owns the task: a task Amazon ECS placed here is stopped
    /// in ECS, not locally.
    Conflict { reason: String },
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::NotFound { task } => write!(f, "no task {task}"),
            EngineError::Unavailable { reason } => write!(f, "command not accepted: {reason}"),
            EngineError::ShuttingDown => f.write_str("the agent is shutting down"),
            EngineError::Rejected { reason } => write!(f, "task rejected: {reason}"),
            EngineError::Conflict { reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for EngineError {}

pub trait EngineHandle: Send + Sync {
    /// Accept a task (desired RUNNING, next sequence number). Returns a snapshot of the new task
    /// (its `id` and `arn` set) once the task is accepted.
    fn submit(&self, definition: TaskDefinition) -> Result<Task, EngineError>;
    /// [`EngineHandle::submit`] for a control source that must find the task again after a
    /// crash: `source` is saved with the task (in the same durable write that accepts it) and
    /// shown in [`EngineHandle::tasks`] as `Task::source`.
    fn submit_from_source(
        &self,
        definition: TaskDefinition,
        source: String,
    ) -> Result<Task, EngineError>;
    /// Ask a task to stop (desired STOPPED, next sequence number). `task_id` is a full id. A
    /// task the control plane owns ([`Task::owned_by_control_plane`]) is refused with
    /// [`EngineError::Conflict`]: it is stopped through the control plane.
    fn stop(&self, task_id: &str) -> Result<(), EngineError>;
    /// [`EngineHandle::submit_from_source`] for a task the control plane placed here under its
    /// own `arn` (`arn:aws:ecs:<region>:<account>:task/<cluster>/<id>`): the task keeps that
    /// ARN, and its id is the ARN's task id where that is 32 hex characters. `credentials_ids`
    /// are the ids of its IAM roles' credentials (saved with the task: the credentials
    /// themselves the control plane puts in the engine's `CredentialsStore`).
    fn submit_with_arn(
        &self,
        _definition: TaskDefinition,
        arn: String,
        _source: String,
        _credentials_ids: RoleCredentialsIds,
    ) -> Result<Task, EngineError> {
        Err(EngineError::Unavailable {
            reason: format!("this engine cannot take task {arn} from a control plane"),
        })
    }
    /// The control plane's own stop of a task it owns (the one [`EngineHandle::stop`] refuses).
    fn stop_from_control_plane(&self, task_id: &str) -> Result<(), EngineError> {
        self.stop(task_id)
    }
    /// This host's container instance ARN, once a control plane registered it (ECS); shown by
    /// `/v1/metadata`.
    fn container_instance_arn(&self) -> Option<String> {
        None
    }
    /// Records the container instance ARN the control plane registered this host under.
    fn set_container_instance_arn(&self, _arn: String) {}
    /// The control plane acknowledged the report of `status` for task `task_id`; a task it owns
    /// is cleaned up only after it acknowledged STOPPED. Unknown tasks are ignored.
    fn control_plane_reported(&self, _task_id: &str, _status: crate::task::TaskStatus) {}
    /// A consistent snapshot of every task the engine holds (running, stopping, and stopped
    /// tasks not yet cleaned up).
    fn tasks(&self) -> Vec<Task>;
    /// Events with `seq > after`, waiting up to `wait` for at least one when there are none.
    fn events_since(&self, after: u64, wait: Duration) -> Vec<Event>;
    /// The cluster name used in ARNs and labels.
    fn cluster(&self) -> String;
    /// The task holding the container whose task metadata token (§14) is `token`, and that
    /// container's name in the task; `None` when no container has it.
    fn task_by_metadata_token(&self, token: &str) -> Option<(Task, String)> {
        find_by_metadata_token(self.tasks(), token)
    }
    /// One sample of a container's resource usage, as the runtime's JSON (Docker's stats
    /// object), for the task metadata endpoint. The default: this engine cannot.
    fn container_stats(&self, docker_id: &str) -> Result<serde_json::Value, EngineError> {
        Err(EngineError::Unavailable {
            reason: format!("no stats for container {docker_id} from this engine"),
        })
    }
    /// A container's log (stdout and stderr, as the runtime sends it) for `deckhand logs`;
    /// `docker_id` is one of a task's containers. Works while the container exists, stopped or
    /// not. The default: this engine cannot.
    fn container_logs(
        &self,
        docker_id: &str,
        _options: &LogOptions,
    ) -> Result<LogStream, EngineError> {
        Err(EngineError::Unavailable {
            reason: format!("no logs for container {docker_id} from this engine"),
        })
    }
}

/// The task among `tasks` with a container whose metadata token is `token`, and that
/// container's name. An empty token matches nothing.
pub fn find_by_metadata_token(
    tasks: impl IntoIterator<Item = Task>,
    token: &str,
) -> Option<(Task, String)> {
    if token.is_empty() {
        return None;
    }
    tasks.into_iter().find_map(|task| {
        let name = task
            .containers
            .iter()
            .find(|container| container.metadata_token.as_deref() == Some(token))?
            .name()
            .to_string();
        Some((task, name))
    })
}
