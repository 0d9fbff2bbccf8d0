//! Container and task statuses (docs/ENGINE.md §1).
//!
//! The ordering is the derive: every status only rises, and the rules compare statuses with `<`.
//! Serialized as upper-case names; on load the legacy names `UNKNOWN` (= NONE) and `DEAD`
//! (= STOPPED) are accepted.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Status of one container: `NONE < PULLED < CREATED < RUNNING < STOPPED`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum ContainerStatus {
    #[default]
    #[serde(alias = "UNKNOWN")]
    None,
    Pulled,
    Created,
    Running,
    #[serde(alias = "DEAD")]
    Stopped,
}

impl ContainerStatus {
    pub const ALL: [ContainerStatus; 5] = [
        ContainerStatus::None,
        ContainerStatus::Pulled,
        ContainerStatus::Created,
        ContainerStatus::Running,
        ContainerStatus::Stopped,
    ];

    /// The status after this one, or `None` for STOPPED.
    pub fn next(self) -> Option<ContainerStatus> {
        match self {
            ContainerStatus::None => Some(ContainerStatus::Pulled),
            ContainerStatus::Pulled => Some(ContainerStatus::Created),
            ContainerStatus::Created => Some(ContainerStatus::Running),
            ContainerStatus::Running => Some(ContainerStatus::Stopped),
            ContainerStatus::Stopped => None,
        }
    }

    pub fn is_running(self) -> bool {
        self == ContainerStatus::Running
    }

    pub fn is_stopped(self) -> bool {
        self == ContainerStatus::Stopped
    }

    /// Container known → task status mapping (§1).
    pub fn task_status(self) -> TaskStatus {
        match self {
            ContainerStatus::None | ContainerStatus::Pulled => TaskStatus::None,
            ContainerStatus::Created => TaskStatus::Created,
            ContainerStatus::Running => TaskStatus::Running,
            ContainerStatus::Stopped => TaskStatus::Stopped,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ContainerStatus::None => "NONE",
            ContainerStatus::Pulled => "PULLED",
            ContainerStatus::Created => "CREATED",
            ContainerStatus::Running => "RUNNING",
            ContainerStatus::Stopped => "STOPPED",
        }
    }
}

impl fmt::Display for ContainerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Status of a task: `NONE < CREATED < RUNNING < STOPPED`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum TaskStatus {
    #[default]
    #[serde(alias = "UNKNOWN")]
    None,
    Created,
    Running,
    #[serde(alias = "DEAD")]
    Stopped,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 4] = [
        TaskStatus::None,
        TaskStatus::Created,
        TaskStatus::Running,
        TaskStatus::Stopped,
    ];

    pub fn is_terminal(self) -> bool {
        self == TaskStatus::Stopped
    }

    /// NONE: for serde's `skip_serializing_if` on fields most tasks never set.
    pub fn is_none(&self) -> bool {
        *self == TaskStatus::None
    }

    /// Task desired → container desired: the same name (§1).
    pub fn container_status(self) -> ContainerStatus {
        match self {
            TaskStatus::None => ContainerStatus::None,
            TaskStatus::Created => ContainerStatus::Created,
            TaskStatus::Running => ContainerStatus::Running,
            TaskStatus::Stopped => ContainerStatus::Stopped,
        }
    }

    /// How ECS shows a task status externally: `RUNNING`, `STOPPED`, or else `PENDING`.
    pub fn ecs_external(self) -> &'static str {
        match self {
            TaskStatus::Running => "RUNNING",
            TaskStatus::Stopped => "STOPPED",
            _ => "PENDING",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::None => "NONE",
            TaskStatus::Created => "CREATED",
            TaskStatus::Running => "RUNNING",
            TaskStatus::Stopped => "STOPPED",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_statuses_are_ordered() {
        for pair in ContainerStatus::ALL.windows(2) {
            assert!(pair[0] < pair[1]);
            assert_eq!(pair[0].next(), Some(pair[1]));
        }
        assert_eq!(ContainerStatus::Stopped.next(), None);
    }

    #[test]
    fn container_to_task_mapping_row_by_row() {
        let table = [
            (ContainerStatus::None, TaskStatus::None),
            (ContainerStatus::Pulled, TaskStatus::None),
            (ContainerStatus::Created, TaskStatus::Created),
            (ContainerStatus::Running, TaskStatus::Running),
            (ContainerStatus::Stopped, TaskStatus::Stopped),
        ];
        for (container, task) in table {
            assert_eq!(container.task_status(), task, "{container}");
        }
    }

    #[test]
    fn legacy_names_load() {
        let s: ContainerStatus = serde_json::from_str("\"UNKNOWN\"").unwrap();
        assert_eq!(s, ContainerStatus::None);
        let s: ContainerStatus = serde_json::from_str("\"DEAD\"").unwrap();
        assert_eq!(s, ContainerStatus::Stopped);
        let s: TaskStatus = serde_json::from_str("\"DEAD\"").unwrap();
        assert_eq!(s, TaskStatus::Stopped);
        assert_eq!(
            serde_json::to_string(&TaskStatus::Running).unwrap(),
            "\"RUNNING\""
        );
    }

    #[test]
    fn external_task_status() {
        assert_eq!(TaskStatus::None.ecs_external(), "PENDING");
        assert_eq!(TaskStatus::Created.ecs_external(), "PENDING");
        assert_eq!(TaskStatus::Running.ecs_external(), "RUNNING");
        assert_eq!(TaskStatus::Stopped.ecs_external(), "STOPPED");
    }
}
