//! Restore after a restart (docs/ENGINE.md §11 step 3 and the leftover-container scan): bring
//! each checkpointed task in line with what Docker has now, before its loop starts again.
//!
//! The per-container rule is the pure `reconcile::reconcile_container`; this file only
//! looks each container up (by its fixed name when no Docker id was saved — a crash between the
//! create call and its answer — by id otherwise) and applies the outcome. Only Docker's "no
//! such container" means a container vanished; when an inspect fails otherwise and Docker does
//! answer a list of the task's containers by label, that list decides. A lookup that taught
//! nothing (Docker unreachable, timed out, a 500, a malformed answer) leaves the container as it
//! was, and the caller reconciles it again with back-off instead of declaring every container
//! vanished on a host whose Docker starts slowly or answers badly for a while.
//!
//! Leftovers: a container labelled with this cluster that no saved task knows (by id or by
//! fixed name) can only exist when state was deleted by hand. [`leftover_containers`] finds
//! them; the engine logs each and removes it only when `DECKHAND_REMOVE_ORPHANS=true`. The same
//! comparison runs whenever the Docker event stream reconnects ([`relist_plan`]): a container
//! created while the stream was down whose task never learned its id is adopted by name.
//!
//! The orchestration around those pure steps is here too: [`TaskEngine`]'s start-up pass over
//! its saved tasks (route their Docker ids, reconcile with back-off while Docker does not
//! answer, report leftovers, re-add unfinished stop numbers to the wait group, then start the
//! loops), and `EngineShared::relist_by_label`, which the events thread runs after each
//! reconnect.

use crate::clock::now_millis;
use crate::engine::container_spec::{LABEL_CLUSTER, LABEL_TASK_ARN};
use crate::engine::docker_events::DockerObservation;
use crate::engine::managed_task::{OwnerCommand, TaskInboxes};
use crate::engine::reconcile::{reconcile_container, DockerView};
use crate::engine::shared::TaskHandle;
use crate::engine::task_engine::{new_inboxes, EngineShared, TaskEngine};
use crate::engine::transition::{docker_away, exit_error_from_inspection, DockerCallKind};
use crate::runtime::{ContainerRuntime, ContainerSummary, RuntimeError};
use crate::task::{ContainerStatus, Millis, Task, TaskStatus};
use crossbeam_channel::Sender;
use std::collections::HashSet;
use std::sync::Arc;

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
    /// Docker answered an inspect of at least one container, but not with the container nor
    /// with "no such container" (a 500, a malformed or truncated answer): that container is
    /// left as it was; reconcile again later, or let the task's loop inspect it again.
    pub inspect_failed: bool,
}

/// Looks up one container and reconciles its record (§11 step 3).
fn docker_view(runtime: &dyn ContainerRuntime, task: &Task, index: usize) -> Option<DockerView> {
    let container = &task.containers[index];
    match (&container.docker_id, &container.docker_name) {
        (Some(docker_id), _) => Some(match runtime.inspect_container(docker_id) {
            Ok(info) => DockerView::Inspected(info),
            Err(error @ RuntimeError::NoSuchContainer { .. }) => DockerView::InspectFailed(error),
            Err(error) if docker_away(DockerCallKind::Inspect, &error) => {
                DockerView::InspectFailed(error)
            }
            // Docker answers, but not about this container: ask it for the task's containers
            // by label, which settles whether it still exists.
            Err(error) => {
                match runtime.list_containers(&[format!("{LABEL_TASK_ARN}={}", task.arn)]) {
                    Ok(listed) if !listed.iter().any(|summary| summary.id == *docker_id) => {
                        DockerView::NotListed {
                            inspect_error: error,
                        }
                    }
                    _ => DockerView::InspectFailed(error),
                }
            }
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
    exclude_ipv6_port_bindings: bool,
) -> TaskReconciled {
    let mut result = TaskReconciled::default();
    for index in 0..task.containers.len() {
        let Some(view) = docker_view(runtime, task, index) else {
            continue;
        };
        let view = view.with_reported_ports(exclude_ipv6_port_bindings);
        let adopted_by_name = matches!(view, DockerView::FoundByName(_));
        // Why a container that stopped while deckhand was away stopped (killed for memory, a
        // runtime error), for its STOPPED event.
        let exit_facts = match &view {
            DockerView::FoundByName(info) | DockerView::Inspected(info) if !info.state.running => {
                Some((info.state.oom_killed, info.state.error.clone()))
            }
            _ => None,
        };
        let unanswered = match &view {
            DockerView::InspectFailed(error) => docker_away(DockerCallKind::Inspect, error),
            _ => false,
        };
        let outcome = reconcile_container(&task.containers[index], view);
        if outcome.retry_when_docker_answers {
            if unanswered {
                result.docker_unreachable = true;
            } else {
                result.inspect_failed = true;
            }
            continue;
        }
        if outcome.changes(&task.containers[index]) {
            result.changed = true;
            if let Some(error) = &outcome.error {
                log::warn!("task {}: {}", task.id, error.reason());
            }
            outcome.apply_to(&mut task.containers[index], now);
            let container = &mut task.containers[index];
            if let (ContainerStatus::Stopped, Some((oom_killed, docker_error))) =
                (container.known_status, &exit_facts)
            {
                if let Some(reason) = exit_error_from_inspection(
                    container.applying_error.as_ref(),
                    *oom_killed,
                    docker_error,
                ) {
                    container.applying_error = Some(reason);
                }
            }
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

/// A listed container that a task knows by fixed name but never recorded the id of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adoption {
    pub task_id: String,
    pub docker_id: String,
    pub docker_name: String,
}

/// What a re-list by label (after the event stream reconnected) asks for: containers to hand
/// to their task by name, and containers of this cluster that belong to no task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelistPlan {
    pub adopt: Vec<Adoption>,
    pub orphans: Vec<ContainerSummary>,
}

/// Compares the containers Docker lists for this cluster with the tasks the engine holds: a
/// container whose name is the fixed name of a task's container that has no Docker id yet is
/// adopted by that task; one that no task knows by id or name is an orphan. Pure.
pub fn relist_plan(listed: &[ContainerSummary], tasks: &[Task]) -> RelistPlan {
    let mut unrecorded_names = std::collections::HashMap::new();
    for task in tasks {
        for container in &task.containers {
            if let (None, Some(name)) = (&container.docker_id, &container.docker_name) {
                unrecorded_names.insert(name.as_str(), task.id.as_str());
            }
        }
    }
    let adopt = listed
        .iter()
        .filter_map(|summary| {
            let name = summary.name.trim_start_matches('/');
            let task_id = unrecorded_names.get(name)?;
            Some(Adoption {
                task_id: task_id.to_string(),
                docker_id: summary.id.clone(),
                docker_name: name.to_string(),
            })
        })
        .collect();
    let orphans = leftover_containers(listed, tasks)
        .into_iter()
        .cloned()
        .collect();
    RelistPlan { adopt, orphans }
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

// Restore orchestration: the engine's start-up pass over its saved tasks, and the re-list by
// label after each reconnect of the event stream (both compare what Docker lists with what the
// tasks know, and hand leftovers to the same orphan rule).

/// Restore rounds for a task whose containers Docker lists but fails to inspect (a 500, a
/// malformed answer) before its loop starts anyway, with those containers as they were saved.
/// Docker not answering at all is waited for without limit: nothing can be done without it.
const RESTORE_INSPECT_ROUNDS: u32 = 5;

/// A saved task on its way back: reconciled (`changed`: it differs from its file) and routed,
/// its loop not started yet.
struct Prepared {
    task: Task,
    changed: bool,
    desired: Sender<OwnerCommand>,
    shutdown: Sender<()>,
    inboxes: TaskInboxes,
}

impl TaskEngine {
    /// §11: reconcile every saved task with Docker and start its loop. The Docker event
    /// subscription already exists (made in `start_with`), and each task's saved Docker ids are
    /// routed before any container is inspected, so no change in between is lost.
    pub(super) fn restore(&self, saved: Vec<Task>) -> std::io::Result<()> {
        let started = std::time::Instant::now();
        let runtime = Arc::clone(&self.shared.worker_context.runtime);
        let mut prepared: Vec<Prepared> = saved
            .into_iter()
            .map(|task| {
                let (desired, shutdown, inboxes) = new_inboxes();
                self.route_containers(&task, &inboxes.route);
                Prepared {
                    task,
                    changed: false,
                    desired,
                    shutdown,
                    inboxes,
                }
            })
            .collect();

        let mut waiting: Vec<usize> = (0..prepared.len()).collect();
        let mut backoff = self.shared.config.events_reconnect.initial;
        let mut round = 0;
        loop {
            round += 1;
            let mut unanswered = Vec::new();
            let mut answered_badly = 0;
            for index in waiting {
                let Prepared {
                    task,
                    changed,
                    inboxes,
                    ..
                } = &mut prepared[index];
                let outcome = reconcile_task(
                    runtime.as_ref(),
                    task,
                    now_millis(),
                    self.shared.config.exclude_ipv6_port_bindings,
                );
                *changed |= outcome.changed;
                if outcome.adopted {
                    self.route_containers(task, &inboxes.route);
                    // Events about it before its id was routed were dropped: re-inspect.
                    let _ = inboxes.route.resync.try_send(());
                }
                if outcome.docker_unreachable {
                    unanswered.push(index);
                } else if outcome.inspect_failed {
                    if round < RESTORE_INSPECT_ROUNDS {
                        answered_badly += 1;
                        unanswered.push(index);
                    } else {
                        // Docker answers, but keeps failing to inspect a container it still
                        // lists: start the task with that container as it was (never STOPPED
                        // for it), and let its loop inspect again, with back-off, once it runs.
                        log::warn!(
                            "restore: task {}: Docker keeps failing to inspect a container; \
                             starting the task with its saved status, its loop inspects again",
                            task.id
                        );
                        let _ = inboxes.route.resync.try_send(());
                    }
                }
            }
            if unanswered.is_empty() {
                break;
            }
            log::warn!(
                "restore: Docker does not answer (or answers an inspect with an error, for {} of \
                 them); {} saved task(s) wait to be reconciled; retrying in {}s",
                answered_badly,
                unanswered.len(),
                backoff.as_secs_f64()
            );
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(self.shared.config.events_reconnect.maximum);
            waiting = unanswered;
        }

        self.report_leftovers(
            &prepared
                .iter()
                .map(|prepared| prepared.task.clone())
                .collect::<Vec<_>>(),
        );

        let mut commands = self.shared.commands();
        // Every saved stop that has not finished blocks later starts again (§9), before any
        // loop runs.
        for Prepared { task, .. } in &prepared {
            if task.stop_sequence > 0 && task.known_status < TaskStatus::Stopped {
                self.shared.wait_group.add(task.stop_sequence, 1);
            }
            commands.last_sequence = commands
                .last_sequence
                .max(task.start_sequence)
                .max(task.stop_sequence);
        }
        // Host resources (§9a), before any loop asks whether it is admitted.
        self.shared
            .host_resources
            .restore(prepared.iter().map(|prepared| &prepared.task));
        let ledger = self.shared.host_resources.ledger();
        let (used_memory, used_cpu) = ledger.used();
        let capacity = ledger.capacity();
        if used_memory > capacity.memory_mib || used_cpu > capacity.cpu_units {
            log::warn!(
                "restore: the restored tasks hold {used_memory} MiB and {used_cpu} CPU units, more \
                 than the {} MiB and {} units this host now offers tasks; new tasks wait until \
                 enough of them stop",
                capacity.memory_mib,
                capacity.cpu_units
            );
        }
        let count = prepared.len();
        for Prepared {
            task,
            changed,
            desired,
            shutdown,
            inboxes,
        } in prepared
        {
            let unfinished_stop = (task.stop_sequence > 0
                && task.known_status < TaskStatus::Stopped)
                .then_some(task.stop_sequence);
            let stop_registered = task.stop_sequence > 0;
            let id = task.id.clone();
            let route = inboxes.route.clone();
            self.shared.publish_snapshot(&task);
            let thread = match self.spawn_task(task, unfinished_stop, changed, inboxes) {
                Ok(thread) => thread,
                Err(error) => {
                    if let Some(sequence) = unfinished_stop {
                        self.shared.wait_group.done(sequence);
                    }
                    return Err(error);
                }
            };
            commands.tasks.insert(
                id,
                TaskHandle {
                    desired,
                    shutdown,
                    stop_registered,
                    thread: Some(thread),
                    route,
                },
            );
        }
        drop(commands);
        if count > 0 {
            log::info!(
                "restored {count} task(s) in {} ms",
                started.elapsed().as_millis()
            );
        }
        Ok(())
    }

    /// Containers of this cluster that no saved task knows: reported, and removed only when
    /// `DECKHAND_REMOVE_ORPHANS=true`.
    fn report_leftovers(&self, tasks: &[Task]) {
        let runtime = &self.shared.worker_context.runtime;
        let filter = vec![format!("{}={}", LABEL_CLUSTER, self.shared.config.cluster)];
        let listed = match runtime.list_containers(&filter) {
            Ok(listed) => listed,
            Err(error) => {
                log::warn!("cannot list this cluster's containers to look for leftovers: {error}");
                return;
            }
        };
        let leftovers: Vec<ContainerSummary> = leftover_containers(&listed, tasks)
            .into_iter()
            .cloned()
            .collect();
        self.shared.handle_orphans(&leftovers, "at start-up");
    }
}

impl EngineShared {
    /// Containers of this cluster that belong to no task: each is logged, and removed only when
    /// `DECKHAND_REMOVE_ORPHANS=true`. `moment` says when they were found, for the log.
    fn handle_orphans(&self, orphans: &[ContainerSummary], moment: &str) {
        let runtime = &self.worker_context.runtime;
        for orphan in orphans {
            let name = orphan.name.trim_start_matches('/');
            if self.config.remove_orphans {
                match runtime.remove_container(&orphan.id, true) {
                    Ok(()) => log::warn!(
                        "removed leftover container {name} ({}) found {moment}: it carries this \
                         cluster's labels but belongs to no task (DECKHAND_REMOVE_ORPHANS=true)",
                        orphan.id
                    ),
                    Err(error) => log::warn!(
                        "cannot remove leftover container {name} ({}): {error}",
                        orphan.id
                    ),
                }
            } else {
                log::warn!(
                    "leftover container {name} ({}) found {moment} carries this cluster's labels but \
                     belongs to no task; leaving it alone (set DECKHAND_REMOVE_ORPHANS=true to remove \
                     such containers)",
                    orphan.id
                );
            }
        }
    }

    /// The re-list by label after the Docker event stream reconnected (Docker restarted, or the
    /// connection broke): containers created meanwhile whose task never recorded their id (a
    /// create whose answer was lost) are handed to that task, which adopts them by name; containers
    /// of this cluster that belong to no task are reported (and removed only when
    /// `DECKHAND_REMOVE_ORPHANS=true`). Runs on the events thread; never waits on a task.
    pub(super) fn relist_by_label(&self) {
        // Docker is back: every task that waits to retry a call Docker was away for makes it now
        // (those with containers in Docker were woken by the events thread already; this reaches
        // the ones still pulling or creating). A full one-slot inbox already holds a wake-up.
        for handle in self.commands().tasks.values() {
            let _ = handle.route.resync.try_send(());
        }
        // The tasks first, then the list: a container listed after this snapshot was created by a
        // task in it (a newer task's containers are created later), so nothing new looks orphaned.
        let tasks: Vec<Task> = self.snapshots().values().cloned().collect();
        let filter = vec![format!("{}={}", LABEL_CLUSTER, self.config.cluster)];
        let listed = match self.worker_context.runtime.list_containers(&filter) {
            Ok(listed) => listed,
            Err(error) => {
                log::warn!("cannot list this cluster's containers after the reconnect: {error}");
                return;
            }
        };
        let plan = relist_plan(&listed, &tasks);
        self.handle_orphans(&plan.orphans, "after Docker's event stream reconnected");
        if !plan.adopt.is_empty() {
            let commands = self.commands();
            for adoption in plan.adopt {
                let Some(handle) = commands.tasks.get(&adoption.task_id) else {
                    continue;
                };
                let observation = DockerObservation::FoundByName {
                    docker_name: adoption.docker_name,
                };
                if handle
                    .route
                    .docker_events
                    .try_send(Box::new((adoption.docker_id, observation)))
                    .is_err()
                {
                    log::warn!(
                        "task {}: its inbox is full; a container found by name is adopted at the \
                         next reconnect",
                        adoption.task_id
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::test_support::container_definition;
    use crate::task::{ContainerError, TaskDefinition};

    fn task_with(names: &[(&str, Option<&str>, Option<&str>)]) -> Task {
        let definition = TaskDefinition {
            roles: Default::default(),
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
            pid_mode: None,
            ipc_mode: None,
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

    #[test]
    fn a_relist_adopts_unrecorded_containers_by_name_and_reports_the_rest() {
        let mut other = task_with(&[("d", Some("deckhand-g-1-d-04"), Some("id-d"))]);
        other.id = "t2".to_string();
        let tasks = vec![
            task_with(&[
                ("a", Some("deckhand-f-1-a-01"), Some("id-a")),
                ("b", Some("deckhand-f-1-b-02"), None),
                ("c", Some("deckhand-f-1-c-03"), None),
            ]),
            other,
        ];
        let listed = vec![
            summary("id-a", "/deckhand-f-1-a-01"),
            summary("id-b", "/deckhand-f-1-b-02"),
            summary("id-d", "/deckhand-g-1-d-04"),
            summary("id-x", "/deckhand-f-1-a-99"),
        ];
        let plan = relist_plan(&listed, &tasks);
        assert_eq!(
            plan.adopt,
            vec![Adoption {
                task_id: "t1".to_string(),
                docker_id: "id-b".to_string(),
                docker_name: "deckhand-f-1-b-02".to_string(),
            }],
            "only b: a and d are recorded, c is not in Docker"
        );
        let orphans: Vec<&str> = plan.orphans.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(orphans, vec!["id-x"]);
        // Nothing held: everything listed is an orphan, nothing to adopt.
        let plan = relist_plan(&listed, &[]);
        assert!(plan.adopt.is_empty());
        assert_eq!(plan.orphans.len(), 4);
        // Nothing listed: nothing to do.
        assert_eq!(relist_plan(&[], &tasks), RelistPlan::default());
    }

    #[test]
    fn a_container_killed_for_memory_while_deckhand_was_away_is_restored_with_that_reason() {
        use crate::runtime::{ContainerInfo, ContainerState};
        use crate::task::ContainerStatus;
        let exited = |oom_killed: bool, error: &str| ContainerInfo {
            id: "id-a".to_string(),
            name: "deckhand-f-1-a-01".to_string(),
            state: ContainerState {
                status: "exited".to_string(),
                oom_killed,
                exit_code: 137,
                error: error.to_string(),
                started_at: "2026-01-01T00:00:00Z".to_string(),
                finished_at: "2026-01-01T00:00:01Z".to_string(),
                ..ContainerState::default()
            },
            ..ContainerInfo::default()
        };
        // (OOMKilled, State.Error, expected reason)
        let table = [
            (
                true,
                "",
                Some("OutOfMemoryError: Container killed due to memory usage"),
            ),
            (
                false,
                "runtime failed",
                Some("DockerStateError: runtime failed"),
            ),
            (false, "", None),
        ];
        for (oom_killed, error, expected) in table {
            let (pulls, _) = crossbeam_channel::unbounded();
            let runtime = crate::engine::test_support::UnitRuntime {
                pulls,
                inspect_answer: Some(exited(oom_killed, error)),
            };
            let mut task = task_with(&[("a", Some("deckhand-f-1-a-01"), Some("id-a"))]);
            task.containers[0].known_status = ContainerStatus::Running;
            let outcome = reconcile_task(&runtime, &mut task, 5_000, true);
            assert!(outcome.changed, "{oom_killed} {error:?}");
            let container = &task.containers[0];
            assert_eq!(container.known_status, ContainerStatus::Stopped);
            assert_eq!(container.exit_code, Some(137));
            assert_eq!(
                container
                    .applying_error
                    .as_ref()
                    .map(ContainerError::reason)
                    .as_deref(),
                expected,
                "{oom_killed} {error:?}"
            );
        }
    }
}
