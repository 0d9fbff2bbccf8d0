//! Restore after a restart (ENGINE-SEMANTICS §11 step 3 and the leftover-container scan): bring
//! each checkpointed task in line with what Docker has now, before its loop starts again.
//!
//! The per-container rule is the pure `state::reconcile::reconcile_container`; this file only
//! looks each container up (by its fixed name when no Docker id was saved — a crash between the
//! create call and its answer — by id otherwise) and applies the outcome. A lookup that failed
//! because Docker did not answer teaches nothing, so the caller waits and reconciles again
//! instead of declaring every container vanished on a host whose Docker starts slowly.
//!
//! Leftovers: a container labelled with this cluster that no saved task knows (by id or by
//! fixed name) can only exist when state was deleted by hand. [`leftover_containers`] finds
//! them; the engine logs each and removes it only when `DECKHAND_REMOVE_ORPHANS=true`.

use crate::runtime::{ContainerRuntime, ContainerSummary, RuntimeError};
use crate::state::reconcile::{reconcile_container, DockerView};
use crate::task::{Millis, Task};
use std::collections::HashSet;

/// What reconciling one task found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskReconciled {
    /// The record changed (an id adopted, a status raised, metadata copied, an error recorded).
    pub changed: bool,
    /// A container was adopted by name: events about it before its id was known were not routed,
    /// so the task re-inspects once its loop runs.
    pub adopted: bool,
    /// Docker did not answer for at least one container: reconcile this task again later.
    pub docker_unreachable: bool,
}

/// Looks up one container and reconciles its record (§11 step 3).
fn docker_view(runtime: &dyn ContainerRuntime, task: &Task, index: usize) -> Option<DockerView> {
    let container = &task.containers[index];
    match (&container.docker_id, &container.docker_name) {
        (Some(docker_id), _) => Some(match runtime.inspect_container(docker_id) {
            Ok(info) => DockerView::Inspected(info),
            Err(error) => DockerView::InspectFailed(error),
        }),
        (None, Some(docker_name)) => Some(match runtime.inspect_container(docker_name) {
            Ok(info) => DockerView::FoundByName(info),
            Err(RuntimeError::NoSuchContainer { .. }) => DockerView::AbsentByName,
            // Unreachable or timed out: the outcome asks to retry. Any other failure says
            // nothing either; treat the name as free: a create that finds it taken adopts it.
            Err(error @ (RuntimeError::Unreachable { .. } | RuntimeError::Timeout { .. })) => {
                DockerView::InspectFailed(error)
            }
            Err(_) => DockerView::AbsentByName,
        }),
        // No name yet: the container was never sent to Docker.
        (None, None) => None,
    }
}

/// Reconciles every container of `task` with Docker. Containers Docker did not answer for are
/// left as they were (and reported in the result).
pub fn reconcile_task(
    runtime: &dyn ContainerRuntime,
    task: &mut Task,
    now: Millis,
) -> TaskReconciled {
    let mut result = TaskReconciled::default();
    for index in 0..task.containers.len() {
        let Some(view) = docker_view(runtime, task, index) else {
            continue;
        };
        let adopted_by_name = matches!(view, DockerView::FoundByName(_));
        let outcome = reconcile_container(&task.containers[index], view);
        if outcome.retry_when_docker_answers {
            result.docker_unreachable = true;
            continue;
        }
        if outcome.changes(&task.containers[index]) {
            result.changed = true;
            if let Some(error) = &outcome.error {
                log::warn!("task {}: {}", task.id, error.message);
            }
            outcome.apply_to(&mut task.containers[index], now);
        }
        if adopted_by_name {
            result.adopted = true;
            log::info!(
                "task {}: adopted container {} ({}), created before the restart",
                task.id,
                task.containers[index].name(),
                task.containers[index].docker_id.as_deref().unwrap_or("")
            );
        }
    }
    result
}

/// Containers Docker lists for this cluster that belong to none of `tasks` (by Docker id or by
/// fixed name).
pub fn leftover_containers<'a>(
    listed: &'a [ContainerSummary],
    tasks: &[Task],
) -> Vec<&'a ContainerSummary> {
    let mut known_ids = HashSet::new();
    let mut known_names = HashSet::new();
    for container in tasks.iter().flat_map(|task| &task.containers) {
        if let Some(id) = &container.docker_id {
            known_ids.insert(id.as_str());
        }
        if let Some(name) = &container.docker_name {
            known_names.insert(name.as_str());
        }
    }
    listed
        .iter()
        .filter(|summary| {
            let name = summary.name.trim_start_matches('/');
            !known_ids.contains(summary.id.as_str()) && !known_names.contains(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::test_support::container_definition;
    use crate::task::TaskDefinition;

    fn task_with(names: &[(&str, Option<&str>, Option<&str>)]) -> Task {
        let definition = TaskDefinition {
            family: "f".to_string(),
            revision: 1,
            network_mode: Default::default(),
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: names
                .iter()
                .map(|(name, _, _)| container_definition(name, "busybox"))
                .collect(),
        };
        let mut task = Task::new("t1".to_string(), "c", definition, 1, 0);
        for (container, (_, docker_name, docker_id)) in task.containers.iter_mut().zip(names) {
            container.docker_name = docker_name.map(str::to_string);
            container.docker_id = docker_id.map(str::to_string);
        }
        task
    }

    fn summary(id: &str, name: &str) -> ContainerSummary {
        ContainerSummary {
            id: id.to_string(),
            name: name.to_string(),
            ..ContainerSummary::default()
        }
    }

    #[test]
    fn leftovers_are_containers_no_task_knows_by_id_or_name() {
        let tasks = vec![task_with(&[
            ("a", Some("deckhand-f-1-a-01"), Some("id-a")),
            ("b", Some("deckhand-f-1-b-02"), None),
            ("c", None, None),
        ])];
        let listed = vec![
            summary("id-a", "deckhand-f-1-a-01"),
            summary("id-b", "/deckhand-f-1-b-02"),
            summary("id-x", "deckhand-f-1-a-99"),
            summary("id-y", "something-else"),
        ];
        let leftovers: Vec<&str> = leftover_containers(&listed, &tasks)
            .into_iter()
            .map(|summary| summary.id.as_str())
            .collect();
        assert_eq!(leftovers, vec!["id-x", "id-y"]);
        assert_eq!(leftover_containers(&listed, &[]).len(), 4);
    }
}
