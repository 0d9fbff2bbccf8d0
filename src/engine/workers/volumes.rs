//! The Docker volumes of a create and of a cleanup (docs/ENGINE.md §2, Docker volumes): the ECS
//! agent's rules for using or creating the volume a container mounts, the preparation the create
//! worker makes before the create, and the removal of a task-scoped volume at cleanup.

use crate::engine::messages::{OwnedVolume, VolumeRequirement};
use crate::engine::transition::{docker_away, DockerCallKind};
use crate::runtime::{ContainerRuntime, RuntimeError, VolumeFailure, VolumeInfo};
use crate::task::labels::LABEL_TASK_ARN;
use crate::task::VolumeScope;

/// What the create worker does about one volume a container mounts, given what Docker has
/// under its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeStep {
    Create,
    UseExisting,
}

/// The ECS agent's rules for the volume a container mounts (`agent/api/task/task.go`,
/// `addSharedVolumes`; `agent/taskresource/volume/dockervolume.go`), as a pure decision over
/// what `GET /volumes/{name}` found:
/// - task scope: created when missing; one that exists is this task's own, from an earlier
///   attempt of this create (its name carries the task id), and is used;
/// - shared without autoprovision: it must exist;
/// - shared with autoprovision: created when missing; one that exists must have the driver,
///   driver options and labels the definition gives (ECS compares options and labels with
///   `ECS_SHARED_VOLUME_MATCH_FULL_CONFIG=true`; deckhand always does, and compares the driver
///   too).
///
/// The error text is ECS's, with the volume named.
pub fn volume_step(
    requirement: &VolumeRequirement,
    existing: Option<&VolumeInfo>,
) -> Result<VolumeStep, String> {
    let name = &requirement.volume.name;
    let shared = requirement.scope == VolumeScope::Shared;
    let Some(existing) = existing else {
        if shared && !requirement.autoprovision {
            return Err(format!(
                "initialize volume: volume detection failed, volume '{name}' does not exist \
                 and autoprovision is set to false"
            ));
        }
        return Ok(VolumeStep::Create);
    };
    if !shared || !requirement.autoprovision {
        return Ok(VolumeStep::UseExisting);
    }
    let wanted = &requirement.volume;
    let mismatch = |what: &str, existing: &dyn std::fmt::Debug, expected: &dyn std::fmt::Debug| {
        Err(format!(
            "initialize volume: volume '{name}' does not match existing volume {what}: \
             existing: {existing:?}, expected: {expected:?}"
        ))
    };
    if existing.driver != wanted.driver {
        return mismatch("driver", &existing.driver, &wanted.driver);
    }
    if existing.labels != wanted.labels {
        return mismatch("labels", &existing.labels, &wanted.labels);
    }
    if existing.options != wanted.driver_opts {
        return mismatch("options", &existing.options, &wanted.driver_opts);
    }
    Ok(VolumeStep::UseExisting)
}

/// Makes every volume a container mounts ready before its create: inspects each, then creates
/// it or uses it by [`volume_step`]. Idempotent, so a create made again (after a crash, after
/// Docker was away) repeats it harmlessly. Docker being away is passed on as it is (the create
/// is made again later); any other failure is a [`RuntimeError::Volume`] named as ECS names
/// it (`CannotInspectVolumeError`, `CannotCreateVolumeError`), which becomes the container's
/// create error.
pub(super) fn prepare_volumes(
    runtime: &dyn ContainerRuntime,
    requirements: &[VolumeRequirement],
) -> Result<(), RuntimeError> {
    for requirement in requirements {
        let name = &requirement.volume.name;
        let existing = match runtime.inspect_volume(name) {
            Ok(existing) => existing,
            Err(error) if docker_away(DockerCallKind::Inspect, &error) => return Err(error),
            Err(error) => {
                return Err(RuntimeError::Volume {
                    failure: VolumeFailure::Inspect,
                    message: format!("volume '{name}': {error}"),
                })
            }
        };
        let step = volume_step(requirement, existing.as_ref()).map_err(|message| {
            RuntimeError::Volume {
                failure: VolumeFailure::Unusable,
                message,
            }
        })?;
        if step == VolumeStep::Create {
            match runtime.create_volume(&requirement.volume) {
                Ok(()) => {}
                Err(error) if docker_away(DockerCallKind::Create, &error) => return Err(error),
                Err(error) => {
                    return Err(RuntimeError::Volume {
                        failure: VolumeFailure::Create,
                        message: format!("volume '{name}': {error}"),
                    })
                }
            }
        }
    }
    Ok(())
}

/// Removes a task-scoped volume at cleanup unless it carries another task's ARN label: its
/// name holds the task id, and it carries this task's ARN, or no label at all when an earlier
/// deckhand let Docker create it at the container's create. A volume already gone is removed.
pub(super) fn remove_owned_volume(
    runtime: &dyn ContainerRuntime,
    volume: &OwnedVolume,
) -> Result<(), RuntimeError> {
    let Some(info) = runtime.inspect_volume(&volume.name)? else {
        return Ok(());
    };
    match info.labels.get(LABEL_TASK_ARN) {
        Some(owner) if *owner != volume.task_arn => {
            log::warn!(
                "not removing volume {}: it belongs to task {owner}, not {}",
                volume.name,
                volume.task_arn
            );
            Ok(())
        }
        _ => runtime.remove_volume(&volume.name),
    }
}
