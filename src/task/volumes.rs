//! A task's volumes (part of the model, re-exported by `model.rs`): host paths and Docker
//! volumes, their scope and `dockerVolumeConfiguration`, and the Docker volume name behind each.

use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A task volume: a host path (`host_source_path`), or a Docker volume — scoped to the task
/// when neither a host path nor a `docker_volume_configuration` says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub name: String,
    pub host_source_path: Option<String>,
    /// The definition's `dockerVolumeConfiguration`, when it has one. Absent from checkpoints
    /// written before it existed (such a volume is a task-scoped `local` one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_volume_configuration: Option<DockerVolumeConfiguration>,
}

impl Volume {
    /// A volume with neither a host path nor a Docker configuration: a task-scoped `local`
    /// Docker volume.
    pub fn new(name: impl Into<String>) -> Volume {
        Volume {
            name: name.into(),
            host_source_path: None,
            docker_volume_configuration: None,
        }
    }

    /// Whether the volume is a Docker volume kept after the task (`scope: shared`).
    pub fn is_shared(&self) -> bool {
        self.docker_volume_configuration
            .as_ref()
            .is_some_and(|configuration| configuration.scope == VolumeScope::Shared)
    }
}

/// The Docker volume that backs a task volume without a host path: one per task, so the
/// task's containers share it and no other task sees it.
pub fn task_volume_name(task_id: &str, volume_name: &str) -> String {
    let kept: String = volume_name
        .chars()
        .filter(|character| character.is_ascii_alphanumeric() || "-_.".contains(*character))
        .collect();
    format!("deckhand-{task_id}-{kept}")
}

/// The Docker volume behind a task volume that has no host path: the volume's own name when it
/// is `shared` (ECS's rule: the next task finds it by that name), else the task's own
/// [`task_volume_name`]. `None` for a host path.
pub fn docker_volume_name(task: &Task, volume: &Volume) -> Option<String> {
    if volume.host_source_path.is_some() {
        return None;
    }
    Some(if volume.is_shared() {
        volume.name.clone()
    } else {
        task_volume_name(&task.id, &volume.name)
    })
}

/// The lifetime of a Docker volume (ECS's `scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum VolumeScope {
    /// Created with the task, removed at its cleanup.
    #[default]
    Task,
    /// Named after the volume itself and kept after the task, for the next task to use.
    Shared,
}

impl VolumeScope {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeScope::Task => "task",
            VolumeScope::Shared => "shared",
        }
    }
}

/// ECS's `dockerVolumeConfiguration`, validated (`autoprovision` only with `shared`), with the
/// driver defaulted to Docker's `local`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerVolumeConfiguration {
    #[serde(default)]
    pub scope: VolumeScope,
    /// A shared volume that does not exist is created (otherwise it must exist).
    #[serde(default)]
    pub autoprovision: bool,
    #[serde(default = "default_volume_driver")]
    pub driver: String,
    #[serde(default)]
    pub driver_opts: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Docker's own volume driver, ECS's default.
pub const DEFAULT_VOLUME_DRIVER: &str = "local";

fn default_volume_driver() -> String {
    DEFAULT_VOLUME_DRIVER.to_string()
}
