//! The engine's pure decision rules (docs/ENGINE.md §3–§8, §12): which state a container goes to
//! next, whether its dependencies are resolved, what a failed Docker call means, when to give up.
//!
//! Everything here is a plain function over the task model: no threads, no clock (callers pass
//! `now`), no I/O. The managed-task loop calls these and performs what they return; the tables in
//! the tests below prove each row of the reference behaviour.

use crate::task::{
    Container, ContainerError, ContainerErrorKind, ContainerStatus, DependencyCondition,
    HealthStatus, Millis, PullBehavior, Task, TaskStatus,
};
use std::time::Duration;

mod errors;
mod pull_credentials;
pub use errors::*;
pub use pull_credentials::*;

/// Configuration the rules depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuleConfig {
    pub pull_behavior: PullBehavior,
    /// `ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT`: pull before dependencies resolve (§4).
    pub pull_dependent_containers_upfront: bool,
}

/// The Docker call a transition makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DockerAction {
    Pull,
    Create,
    Start,
    Stop,
}

/// Whether a container's dependencies (§4) let it take its next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DependencyState {
    Resolved,
    Blocked { reason: String },
    Terminal { reason: String },
}

/// What the progress pass should do for one container (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextState {
    /// §3 rows 1–2: nothing to do.
    None,
    /// Row 3, dependency not yet resolved (incl. shutdown order).
    Blocked { reason: String },
    /// Row 3, a dependency can never be satisfied: the engine marks the container desired STOPPED with
    /// exit code 143 and posts a synthetic STOPPED change carrying a DependencyTerminal error (§4).
    Terminal { reason: String },
    /// Row 4: a start is in flight; wait for its result.
    StartInFlight,
    /// Row 5: desired STOPPED, never started: synthetic STOPPED, no Docker call.
    SyntheticStopped,
    /// Rows 6–7.
    Transition {
        target: ContainerStatus,
        action: DockerAction,
    },
}

/// §8 verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressVerdict {
    /// Task desired STOPPED: give up, task known STOPPED with a "could not reach STOPPED" reason.
    GiveUpStopped,
    /// An essential container is not RUNNING: desired change to STOPPED, seq 0.
    StopTask,
    Nothing,
}

/// §3: the next state of container `index` of `task`. First matching row wins.
///
/// Panics if `index` is out of range: the caller iterates over the task's own containers.
pub fn next_state(task: &Task, index: usize, config: &RuleConfig, now: Millis) -> NextState {
    let container = &task.containers[index];
    let known = container.known_status;
    let desired = container.desired_status;
    // Rows 1–2: at or past desired (an exited non-essential container is past RUNNING).
    if known >= desired {
        return NextState::None;
    }
    // Row 3: dependencies, including shutdown order for a container on its way to STOPPED.
    match dependency_state(task, index, config, now) {
        DependencyState::Resolved => {}
        DependencyState::Blocked { reason } => return NextState::Blocked { reason },
        DependencyState::Terminal { reason } => return NextState::Terminal { reason },
    }
    if desired == ContainerStatus::Stopped {
        if known < ContainerStatus::Running {
            // Row 4: marking it STOPPED while its start is in flight would strand a running
            // container; wait for the start's result, after which row 6 stops it.
            if container.applied_status == Some(ContainerStatus::Running) {
                return NextState::StartInFlight;
            }
            // A container that exists in Docker (known CREATED, with an id) is stopped through
            // Docker, never marked STOPPED unseen: its start may have happened without the task
            // learning it — the call timed out, ended in EOF or its inspection failed, or the
            // agent crashed while the start was out and restore could not inspect it since.
            // Docker answers a stop of a container that never ran at once.
            if known == ContainerStatus::Created && container.docker_id.is_some() {
                return NextState::Transition {
                    target: ContainerStatus::Stopped,
                    action: DockerAction::Stop,
                };
            }
            // Row 5: it never ran, so there is nothing to stop in Docker.
            return NextState::SyntheticStopped;
        }
        // Row 6.
        return NextState::Transition {
            target: ContainerStatus::Stopped,
            action: DockerAction::Stop,
        };
    }
    // Row 7: one step forward. `known < desired <= RUNNING` here, so `next()` is PULLED,
    // CREATED or RUNNING.
    match known {
        ContainerStatus::None => NextState::Transition {
            target: ContainerStatus::Pulled,
            action: DockerAction::Pull,
        },
        ContainerStatus::Pulled => NextState::Transition {
            target: ContainerStatus::Created,
            action: DockerAction::Create,
        },
        ContainerStatus::Created => NextState::Transition {
            target: ContainerStatus::Running,
            action: DockerAction::Start,
        },
        // Unreachable: known < desired and desired is not STOPPED means known < RUNNING.
        ContainerStatus::Running | ContainerStatus::Stopped => NextState::None,
    }
}

fn condition_name(condition: DependencyCondition) -> &'static str {
    match condition {
        DependencyCondition::Create => "CREATE",
        DependencyCondition::Start => "START",
        DependencyCondition::Complete => "COMPLETE",
        DependencyCondition::Success => "SUCCESS",
        DependencyCondition::Healthy => "HEALTHY",
    }
}

/// True when `dependency` is known STOPPED after failing before it ever ran: it was stopped with an
/// error (a failed pull, create or start, or its own terminal dependency) and has no start time.
/// deckhand treats this like "will never start" so that failures keep cascading after the
/// synthetic STOPPED of the failed container has been applied.
fn stopped_without_running(dependency: &Container) -> bool {
    dependency.known_status == ContainerStatus::Stopped
        && dependency.started_at.is_none()
        && dependency.applying_error.is_some()
}

/// Whether `condition` on `dependency` is met for a target whose desired status is `target_desired`.
fn condition_resolved(
    condition: DependencyCondition,
    dependency: &Container,
    target_desired: ContainerStatus,
) -> bool {
    let known = dependency.known_status;
    match condition {
        DependencyCondition::Create => known >= ContainerStatus::Created,
        DependencyCondition::Start => match known {
            ContainerStatus::Stopped => true,
            ContainerStatus::Running => true,
            ContainerStatus::Created => target_desired == ContainerStatus::Created,
            ContainerStatus::None | ContainerStatus::Pulled => false,
        },
        DependencyCondition::Complete => {
            known == ContainerStatus::Stopped && dependency.exit_code.is_some()
        }
        DependencyCondition::Success => {
            known == ContainerStatus::Stopped && dependency.exit_code == Some(0)
        }
        DependencyCondition::Healthy => {
            dependency.definition.health_check.is_some()
                && dependency.health == HealthStatus::Healthy
        }
    }
}

/// The terminal reason, if `condition` on `dependency` can never be satisfied (§4 "Terminal",
/// checked before resolution).
fn condition_terminal(
    condition: DependencyCondition,
    dependency: &Container,
    target: &Container,
    now: Millis,
) -> Option<String> {
    let name = dependency.name();
    let known = dependency.known_status;
    // The start timeout: only while the target has not been created and the dependency still
    // runs. A condition already met does not time out (it would otherwise fail a target whose own
    // pull took longer than the dependency's startTimeout).
    if matches!(
        condition,
        DependencyCondition::Success | DependencyCondition::Complete | DependencyCondition::Healthy
    ) && target.known_status < ContainerStatus::Created
        && known != ContainerStatus::Stopped
        && !condition_resolved(condition, dependency, target.desired_status)
    {
        if let (Some(started_at), Some(timeout_secs)) = (
            dependency.started_at,
            dependency.definition.start_timeout_secs,
        ) {
            let deadline = started_at.saturating_add(timeout_secs.saturating_mul(1000));
            if timeout_secs > 0 && now > deadline {
                return Some(format!(
                    "dependency {name:?} did not reach {} within its startTimeout of {timeout_secs}s",
                    condition_name(condition)
                ));
            }
        }
    }
    if condition == DependencyCondition::Success && known == ContainerStatus::Stopped {
        match dependency.exit_code {
            Some(0) => {}
            Some(code) => {
                return Some(format!(
                    "dependency {name:?} exited with code {code}, SUCCESS needs exit code 0"
                ))
            }
            None => {
                return Some(format!(
                    "dependency {name:?} stopped without an exit code, SUCCESS needs exit code 0"
                ))
            }
        }
    }
    // A stopped container never becomes healthy again.
    if condition == DependencyCondition::Healthy && known == ContainerStatus::Stopped {
        return Some(format!(
            "dependency {name:?} stopped before it was reported HEALTHY"
        ));
    }
    // "Will never start": nothing will move it past where it is now.
    let never_starts = known < ContainerStatus::Running
        && dependency.desired_status == ContainerStatus::Stopped
        && dependency.applied_status.is_none();
    let never_ran = stopped_without_running(dependency);
    let never = match condition {
        // A created container serves volumesFrom whether or not it will ever run.
        DependencyCondition::Create => {
            (never_starts && known < ContainerStatus::Created)
                || (never_ran && dependency.docker_id.is_none())
        }
        _ => never_starts || never_ran,
    };
    if never {
        return Some(format!(
            "dependency {name:?} will never start, so {} can never be met",
            condition_name(condition)
        ));
    }
    None
}

/// §4: whether container `index` may take its next step.
///
/// A target desired STOPPED obeys only shutdown order: it waits while any container with an edge
/// onto it is not known STOPPED. A target desired CREATED or RUNNING checks each of its
/// dependency edges (dependsOn, links as START, volumesFrom as CREATE): terminal conditions
/// first, then resolution.
pub fn dependency_state(
    task: &Task,
    index: usize,
    config: &RuleConfig,
    now: Millis,
) -> DependencyState {
    let target = &task.containers[index];
    let target_name = target.name();
    if target.desired_status == ContainerStatus::Stopped {
        let waiting_for: Vec<&str> = task
            .containers
            .iter()
            .filter(|other| {
                other.name() != target_name
                    && other.known_status != ContainerStatus::Stopped
                    && other
                        .definition
                        .dependencies()
                        .iter()
                        .any(|edge| edge.container_name == target_name)
            })
            .map(Container::name)
            .collect();
        if waiting_for.is_empty() {
            return DependencyState::Resolved;
        }
        return DependencyState::Blocked {
            reason: format!(
                "shutdown order: waiting for {} to stop first",
                quoted_list(&waiting_for)
            ),
        };
    }
    if target.desired_status != ContainerStatus::Created
        && target.desired_status != ContainerStatus::Running
    {
        return DependencyState::Resolved;
    }
    let edges = target.definition.dependencies();
    // Terminal first, over every edge: one that can never be met decides, whatever else waits.
    for edge in &edges {
        let Some(dependency) = task.container(&edge.container_name) else {
            return DependencyState::Terminal {
                reason: format!(
                    "dependency {:?} is not a container of this task",
                    edge.container_name
                ),
            };
        };
        if let Some(reason) = condition_terminal(edge.condition, dependency, target, now) {
            return DependencyState::Terminal { reason };
        }
    }
    // With pull-upfront the pull is not gated; gating starts at PULLED → CREATED.
    if config.pull_dependent_containers_upfront && target.known_status < ContainerStatus::Pulled {
        return DependencyState::Resolved;
    }
    for edge in &edges {
        if let Some(dependency) = task.container(&edge.container_name) {
            if !condition_resolved(edge.condition, dependency, target.desired_status) {
                return DependencyState::Blocked {
                    reason: format!(
                        "waiting for {:?} to reach {} (it is {})",
                        edge.container_name,
                        condition_name(edge.condition),
                        dependency.known_status
                    ),
                };
            }
        }
    }
    DependencyState::Resolved
}

fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// §5: the new task known status if it must rise, else None.
///
/// Task known = the lowest mapped container status, applied only if higher than the current one;
/// except that while the least-advanced container is RUNNING and an essential container is
/// STOPPED the task stays where it is, so it never reports RUNNING after an essential container
/// died and goes STOPPED with its last container.
pub fn derive_task_known_status(task: &Task) -> Option<TaskStatus> {
    let earliest = task
        .containers
        .iter()
        .map(|container| container.known_status)
        .min()?;
    let essential_stopped = task
        .containers
        .iter()
        .any(|container| container.essential() && container.known_status.is_stopped());
    if earliest == ContainerStatus::Running && essential_stopped {
        return None;
    }
    let derived = earliest.task_status();
    (derived > task.known_status).then_some(derived)
}

/// §5: true when an essential container is known or desired STOPPED (task desired must become STOPPED).
pub fn essential_container_stopped(task: &Task) -> bool {
    task.containers.iter().any(|container| {
        container.essential()
            && (container.known_status.is_stopped() || container.desired_status.is_stopped())
    })
}

/// The task's stopped reason when §5 stops it: the named error of the first essential container
/// known or desired STOPPED that carries one (`Name: container "app": message`), else ECS's
/// `Essential container in task exited`.
pub fn essential_stop_reason(task: &Task) -> String {
    task.containers
        .iter()
        .filter(|container| {
            container.essential()
                && (container.known_status.is_stopped() || container.desired_status.is_stopped())
        })
        .find_map(|container| {
            container
                .applying_error
                .as_ref()
                .map(|error| error.task_reason(container.name()))
        })
        .unwrap_or_else(|| ESSENTIAL_CONTAINER_EXITED.to_string())
}

/// ECS's reason for a task whose essential container exited.
pub const ESSENTIAL_CONTAINER_EXITED: &str = "Essential container in task exited";

/// §7: a change reporting RUNNING for a container known STOPPED: issue one stop (true) or ignore (false).
///
/// Guarded per container by `restopped` (the caller sets it when it issues the stop), so deckhand
/// never fights a user or another manager that restarts the container again.
pub fn restop_on_running_report(container: &Container) -> bool {
    container.known_status.is_stopped() && !container.restopped
}

/// §8: a pass started nothing, nothing in flight/waiting, task not steady.
pub fn unable_to_progress(task: &Task) -> ProgressVerdict {
    if is_steady(task) {
        return ProgressVerdict::Nothing;
    }
    if task.desired_status == TaskStatus::Stopped {
        return ProgressVerdict::GiveUpStopped;
    }
    let essential_not_running = task.containers.iter().any(|container| {
        container.essential() && container.known_status != ContainerStatus::Running
    });
    if essential_not_running {
        ProgressVerdict::StopTask
    } else {
        ProgressVerdict::Nothing
    }
}

/// §12: restart the container instead of applying its change to STOPPED?
///
/// Restart iff the policy is enabled, the container is not desired STOPPED, the exit code is
/// known and not ignored, and at least `restartAttemptPeriod` passed since the last restart (else
/// since it started; with neither recorded, it may restart).
pub fn should_restart(container: &Container, exit_code: Option<i64>, now: Millis) -> bool {
    let Some(policy) = &container.definition.restart_policy else {
        return false;
    };
    if !policy.enabled || container.desired_status.is_stopped() {
        return false;
    }
    let Some(code) = exit_code else {
        return false;
    };
    if policy.ignored_exit_codes.contains(&code) {
        return false;
    }
    match container.last_restart_at.or(container.started_at) {
        Some(since) => {
            now.saturating_sub(since) >= policy.restart_attempt_period_secs.saturating_mul(1000)
        }
        None => true,
    }
}

/// Stop grace for a container: its stopTimeout, else the configured default (a stopTimeout of 0
/// means "not set", as in ECS).
pub fn stop_grace(container: &Container, default: Duration) -> Duration {
    match container.definition.stop_timeout_secs {
        Some(secs) if secs > 0 => Duration::from_secs(secs),
        _ => default,
    }
}

/// Exit code recorded for a container stopped because a dependency can never be met (§4):
/// Docker's code for SIGTERM, as if it had been stopped.
pub const DEPENDENCY_TERMINAL_EXIT_CODE: i64 = 143;

/// The error carried by the synthetic STOPPED change of a container whose dependency can never
/// be met (§4); via §6's STOPPED row it makes the container known and desired STOPPED.
/// `reason` names the dependency and why (the container's own name is in its event, and the
/// task's reason adds it).
pub fn dependency_terminal_error(reason: &str) -> ContainerError {
    ContainerError {
        kind: ContainerErrorKind::DependencyTerminal,
        message: reason.to_string(),
    }
}

/// §1: raise every container's desired status to the task's (it never lowers one). Returns true
/// when any container changed.
pub fn raise_container_desired_statuses(task: &mut Task) -> bool {
    let target = task.desired_status.container_status();
    let mut changed = false;
    for container in &mut task.containers {
        if container.desired_status < target {
            container.desired_status = target;
            changed = true;
        }
    }
    changed
}

/// Steady: known RUNNING and desired ≤ RUNNING (§2 step 4).
pub fn is_steady(task: &Task) -> bool {
    task.known_status == TaskStatus::Running && task.desired_status <= TaskStatus::Running
}

#[cfg(test)]
#[rustfmt::skip] // The tables read best one case per line.
mod tests {
    //! One table per rule; each test is named after the reference row(s) it proves.

    use crate::runtime::RuntimeError;
    use super::*;
    use crate::task::{
        ContainerDefinition, Dependency, HealthCheck, RestartPolicy, TaskDefinition, VolumeFrom,
    };
    use ContainerStatus::{Created, Pulled, Running, Stopped};

    const NOW: Millis = 1_000_000;

    fn definition(name: &str) -> ContainerDefinition {
        ContainerDefinition::new(name, "deckhand-test/busybox:latest")
    }

    fn depends(
        mut target: ContainerDefinition,
        on: &str,
        condition: DependencyCondition,
    ) -> ContainerDefinition {
        target.depends_on.push(Dependency { container_name: on.to_string(), condition });
        target
    }

    fn healthy_checked(mut container: ContainerDefinition) -> ContainerDefinition {
        container.health_check = Some(HealthCheck {
            command: vec!["CMD".into(), "true".into()],
            interval_secs: 30,
            timeout_secs: 5,
            retries: 3,
            start_period_secs: 0,
        });
        container
    }

    fn task(containers: Vec<ContainerDefinition>) -> Task {
        Task::new(
            "0123456789abcdef0123456789abcdef".into(),
            "default",
            TaskDefinition {
                roles: Default::default(),
                family: "test".into(),
                revision: 1,
                network_mode: Default::default(),
                cpu: None,
                memory_mib: None,
                volumes: Vec::new(),
                containers,
                pid_mode: None,
                ipc_mode: None,
            },
            1,
            0,
        )
    }

    fn set(task: &mut Task, name: &str, known: ContainerStatus, desired: ContainerStatus) -> usize {
        let index = task.container_index(name).expect("test container exists");
        task.containers[index].known_status = known;
        task.containers[index].desired_status = desired;
        index
    }

    fn is_blocked(state: &NextState) -> bool {
        matches!(state, NextState::Blocked { .. })
    }

    fn is_terminal(state: &NextState) -> bool {
        matches!(state, NextState::Terminal { .. })
    }

    fn transition(target: ContainerStatus, action: DockerAction) -> NextState {
        NextState::Transition { target, action }
    }

    /// One container, no dependencies: (known, desired, applied) → next state.
    fn single(
        known: ContainerStatus,
        desired: ContainerStatus,
        applied: Option<ContainerStatus>,
    ) -> NextState {
        let mut task = task(vec![definition("app")]);
        let index = set(&mut task, "app", known, desired);
        task.containers[index].applied_status = applied;
        next_state(&task, index, &RuleConfig::default(), NOW)
    }

    #[test]
    fn next_state_row1_known_equals_desired() {
        for status in ContainerStatus::ALL {
            assert_eq!(single(status, status, None), NextState::None, "{status}");
        }
    }

    #[test]
    fn next_state_row2_known_past_desired() {
        let cases = [(Stopped, Running), (Running, Created), (Created, Pulled), (Stopped, Created)];
        for (known, desired) in cases {
            assert_eq!(single(known, desired, None), NextState::None, "{known} > {desired}");
        }
    }

    #[test]
    fn next_state_row3_dependency_blocked_or_terminal() {
        let mut waiting = task(vec![
            definition("db"),
            depends(definition("app"), "db", DependencyCondition::Start),
        ]);
        set(&mut waiting, "db", Created, Running);
        let app = set(&mut waiting, "app", Pulled, Running);
        assert!(is_blocked(&next_state(&waiting, app, &RuleConfig::default(), NOW)));

        let mut failed = waiting.clone();
        set(&mut failed, "db", Created, Stopped);
        assert!(is_terminal(&next_state(&failed, app, &RuleConfig::default(), NOW)));

        // Shutdown order is row 3 too: db may not stop while app still runs.
        let mut stopping = waiting.clone();
        let db = set(&mut stopping, "db", Running, Stopped);
        set(&mut stopping, "app", Running, Stopped);
        assert!(is_blocked(&next_state(&stopping, db, &RuleConfig::default(), NOW)));
    }

    #[test]
    fn next_state_row4_start_in_flight_waits() {
        for known in [ContainerStatus::None, Pulled, Created] {
            assert_eq!(single(known, Stopped, Some(Running)), NextState::StartInFlight, "{known}");
        }
        // Another call in flight (a create) is not row 4: the container never ran.
        assert_eq!(single(Pulled, Stopped, Some(Created)), NextState::SyntheticStopped);
    }

    #[test]
    fn next_state_row5_desired_stopped_never_started() {
        for known in [ContainerStatus::None, Pulled, Created] {
            assert_eq!(single(known, Stopped, None), NextState::SyntheticStopped, "{known}");
        }
    }

    #[test]
    fn next_state_row5_a_created_container_is_stopped_in_docker() {
        // Found by the simulator: the stop that answers a timed-out start failed (Docker was
        // briefly unreachable), and row 5 then marked the container STOPPED while Docker ran it;
        // and after a crash during a start, restore that could not inspect the container left
        // it CREATED while Docker ran it. A container Docker has is stopped through Docker,
        // whatever its last error.
        let kinds = [
            Some(ContainerErrorKind::Timeout),
            Some(ContainerErrorKind::StartEof),
            Some(ContainerErrorKind::InspectFailed),
            Some(ContainerErrorKind::Other),
            Some(ContainerErrorKind::CannotStart),
            Some(ContainerErrorKind::CannotPull),
            None,
        ];
        for kind in kinds {
            let mut task = task(vec![definition("app")]);
            let index = set(&mut task, "app", Created, Stopped);
            task.containers[index].docker_id = Some("id-1".into());
            task.containers[index].applying_error = kind.map(|kind| ContainerError {
                kind,
                message: "start failed".into(),
            });
            assert_eq!(
                next_state(&task, index, &RuleConfig::default(), NOW),
                transition(Stopped, DockerAction::Stop),
                "{kind:?}"
            );
            // Never created: nothing to stop.
            task.containers[index].docker_id = None;
            assert_eq!(
                next_state(&task, index, &RuleConfig::default(), NOW),
                NextState::SyntheticStopped,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn next_state_row6_desired_stopped_running_stops() {
        assert_eq!(single(Running, Stopped, None), transition(Stopped, DockerAction::Stop));
    }

    #[test]
    fn next_state_row7_one_step_forward() {
        let cases = [
            (ContainerStatus::None, Running, transition(Pulled, DockerAction::Pull)),
            (Pulled,                Running, transition(Created, DockerAction::Create)),
            (Created,               Running, transition(Running, DockerAction::Start)),
            (ContainerStatus::None, Created, transition(Pulled, DockerAction::Pull)),
            (Pulled,                Created, transition(Created, DockerAction::Create)),
        ];
        for (known, desired, expected) in cases {
            assert_eq!(single(known, desired, None), expected, "{known} → {desired}");
        }
    }

    /// A target "app" (known, desired) depending on "dep" by `condition`, "dep" shaped by `dep`.
    fn dependency_case(
        condition: DependencyCondition,
        app_known: ContainerStatus,
        app_desired: ContainerStatus,
        dep: &dyn Fn(&mut Container),
        config: RuleConfig,
    ) -> DependencyState {
        let mut task = task(vec![
            healthy_checked(definition("dep")),
            depends(definition("app"), "dep", condition),
        ]);
        dep(&mut task.containers[0]);
        let app = set(&mut task, "app", app_known, app_desired);
        dependency_state(&task, app, &config, NOW)
    }

    fn known(status: ContainerStatus) -> Box<dyn Fn(&mut Container)> {
        Box::new(move |container: &mut Container| {
            container.known_status = status;
            container.desired_status = Running.max(status);
        })
    }

    fn stopped_with(code: Option<i64>) -> Box<dyn Fn(&mut Container)> {
        Box::new(move |container: &mut Container| {
            container.known_status = Stopped;
            container.desired_status = Stopped;
            container.started_at = Some(NOW - 10_000);
            container.exit_code = code;
        })
    }

    fn running_with_health(health: HealthStatus) -> Box<dyn Fn(&mut Container)> {
        Box::new(move |container: &mut Container| {
            container.known_status = Running;
            container.desired_status = Running;
            container.started_at = Some(NOW - 1000);
            container.health = health;
        })
    }

    fn state_kind(state: &DependencyState) -> &'static str {
        match state {
            DependencyState::Resolved => "resolved",
            DependencyState::Blocked { .. } => "blocked",
            DependencyState::Terminal { .. } => "terminal",
        }
    }

    type DependencyCase = (&'static str, DependencyCondition, ContainerStatus, Box<dyn Fn(&mut Container)>, &'static str);

    #[test]
    fn dependency_section4_resolution_per_condition() {
        use DependencyCondition::*;
        // (case, condition, target desired, dependency, expected); the target is PULLED.
        let cases: Vec<DependencyCase> = vec![
            ("CREATE: D NONE",                   Create,   Running, known(ContainerStatus::None), "blocked"),
            ("CREATE: D PULLED",                 Create,   Running, known(Pulled), "blocked"),
            ("CREATE: D CREATED",                Create,   Running, known(Created), "resolved"),
            ("CREATE: D RUNNING",                Create,   Running, known(Running), "resolved"),
            ("CREATE: D STOPPED",                Create,   Running, stopped_with(Some(1)), "resolved"),
            ("START: D CREATED, target RUNNING", Start,    Running, known(Created), "blocked"),
            ("START: D RUNNING, target RUNNING", Start,    Running, known(Running), "resolved"),
            ("START: D STOPPED, target RUNNING", Start,    Running, stopped_with(Some(0)), "resolved"),
            ("START: D CREATED, target CREATED", Start,    Created, known(Created), "resolved"),
            ("START: D RUNNING, target CREATED", Start,    Created, known(Running), "resolved"),
            ("START: D PULLED, target CREATED",  Start,    Created, known(Pulled), "blocked"),
            ("COMPLETE: D RUNNING",              Complete, Running, known(Running), "blocked"),
            ("COMPLETE: D STOPPED exit 0",       Complete, Running, stopped_with(Some(0)), "resolved"),
            ("COMPLETE: D STOPPED exit 3",       Complete, Running, stopped_with(Some(3)), "resolved"),
            ("COMPLETE: D STOPPED no exit code", Complete, Running, stopped_with(None), "blocked"),
            ("SUCCESS: D RUNNING",               Success,  Running, known(Running), "blocked"),
            ("SUCCESS: D STOPPED exit 0",        Success,  Running, stopped_with(Some(0)), "resolved"),
            ("HEALTHY: D health unknown",        Healthy,  Running, running_with_health(HealthStatus::Unknown), "blocked"),
            ("HEALTHY: D unhealthy",             Healthy,  Running, running_with_health(HealthStatus::Unhealthy), "blocked"),
            ("HEALTHY: D healthy",               Healthy,  Running, running_with_health(HealthStatus::Healthy), "resolved"),
        ];
        for (name, condition, target_desired, dep, expected) in cases {
            let state = dependency_case(condition, Pulled, target_desired, &*dep, RuleConfig::default());
            assert_eq!(state_kind(&state), expected, "{name}: {state:?}");
        }
    }

    fn started_long_ago(timeout: Option<u64>, health: HealthStatus) -> Box<dyn Fn(&mut Container)> {
        Box::new(move |container: &mut Container| {
            container.known_status = Running;
            container.desired_status = Running;
            container.started_at = Some(NOW - 61_000);
            std::sync::Arc::make_mut(&mut container.definition).start_timeout_secs = timeout;
            container.health = health;
        })
    }

    fn never_starts(applied: Option<ContainerStatus>) -> Box<dyn Fn(&mut Container)> {
        Box::new(move |container: &mut Container| {
            container.known_status = Created;
            container.desired_status = Stopped;
            container.applied_status = applied;
        })
    }

    fn failed_before_running() -> Box<dyn Fn(&mut Container)> {
        Box::new(|container: &mut Container| {
            container.known_status = Stopped;
            container.desired_status = Stopped;
            container.applying_error = Some(ContainerError {
                kind: ContainerErrorKind::CannotCreate,
                message: "create failed".into(),
            });
        })
    }

    #[test]
    fn dependency_section4_terminal_conditions() {
        use DependencyCondition::*;
        use HealthStatus::{Healthy as IsHealthy, Unknown};
        // (case, condition, target known, dependency, expected); the target is desired RUNNING.
        let cases: Vec<DependencyCase> = vec![
            ("start timeout elapsed, SUCCESS",        Success,  Pulled,  started_long_ago(Some(60), Unknown), "terminal"),
            ("start timeout elapsed, COMPLETE",       Complete, Pulled,  started_long_ago(Some(60), Unknown), "terminal"),
            ("start timeout elapsed, HEALTHY",        Healthy,  Pulled,  started_long_ago(Some(60), Unknown), "terminal"),
            ("start timeout elapsed, already HEALTHY", Healthy, Pulled,  started_long_ago(Some(60), IsHealthy), "resolved"),
            ("start timeout not yet elapsed",         Success,  Pulled,  started_long_ago(Some(120), Unknown), "blocked"),
            ("start timeout 0 means none",            Success,  Pulled,  started_long_ago(Some(0), Unknown), "blocked"),
            ("no start timeout",                      Success,  Pulled,  started_long_ago(None, Unknown), "blocked"),
            ("start timeout not for START",           Start,    Pulled,  started_long_ago(Some(60), Unknown), "resolved"),
            ("start timeout not once target CREATED", Success,  Created, started_long_ago(Some(60), Unknown), "blocked"),
            ("SUCCESS, D exited 1",                   Success,  Pulled,  stopped_with(Some(1)), "terminal"),
            ("SUCCESS, D stopped, no exit code",      Success,  Pulled,  stopped_with(None), "terminal"),
            ("HEALTHY, D stopped",                    Healthy,  Pulled,  stopped_with(Some(0)), "terminal"),
            ("will never start: START",               Start,    Pulled,  never_starts(None), "terminal"),
            ("will never start: COMPLETE",            Complete, Pulled,  never_starts(None), "terminal"),
            ("will never start: SUCCESS",             Success,  Pulled,  never_starts(None), "terminal"),
            ("will never start: HEALTHY",             Healthy,  Pulled,  never_starts(None), "terminal"),
            ("will never start, CREATE already met",  Create,   Pulled,  never_starts(None), "resolved"),
            ("start in flight is not never",          Start,    Pulled,  never_starts(Some(Running)), "blocked"),
            ("failed before it ran, now STOPPED",     Start,    Pulled,  failed_before_running(), "terminal"),
            ("failed before create, CREATE",          Create,   Pulled,  failed_before_running(), "terminal"),
        ];
        for (name, condition, target_known, dep, expected) in cases {
            let state = dependency_case(condition, target_known, Running, &*dep, RuleConfig::default());
            assert_eq!(state_kind(&state), expected, "{name}: {state:?}");
        }
    }

    #[test]
    fn dependency_section4_terminal_when_not_in_task() {
        let mut task = task(vec![depends(definition("app"), "ghost", DependencyCondition::Start)]);
        let app = set(&mut task, "app", ContainerStatus::None, Running);
        let state = dependency_state(&task, app, &RuleConfig::default(), NOW);
        assert!(
            matches!(&state, DependencyState::Terminal { reason } if reason.contains("ghost")),
            "{state:?}"
        );
    }

    #[test]
    fn dependency_section4_pull_gated_unless_upfront() {
        let upfront = RuleConfig { pull_dependent_containers_upfront: true, ..RuleConfig::default() };
        let cases = [
            ("pull gated by default",          ContainerStatus::None, RuleConfig::default(), "blocked"),
            ("pull upfront",                   ContainerStatus::None, upfront, "resolved"),
            ("create gated even with upfront", Pulled,                upfront, "blocked"),
        ];
        for (name, target_known, config, expected) in cases {
            let state = dependency_case(DependencyCondition::Start, target_known, Running, &*known(Created), config);
            assert_eq!(state_kind(&state), expected, "{name}: {state:?}");
        }
        // Terminal is still checked before the upfront shortcut.
        let state = dependency_case(DependencyCondition::Start, ContainerStatus::None, Running, &*never_starts(None), upfront);
        assert_eq!(state_kind(&state), "terminal");
    }

    #[test]
    fn dependency_section4_links_are_start_and_volumes_from_is_create() {
        let mut linked = definition("app");
        linked.links.push("dep:database".into());
        let mut mounting = definition("app");
        mounting.volumes_from.push(VolumeFrom { source_container: "dep".into(), read_only: true });
        let cases = [
            ("link, D CREATED",        linked.clone(),   Created, "blocked"),
            ("link, D RUNNING",        linked,           Running, "resolved"),
            ("volumesFrom, D PULLED",  mounting.clone(), Pulled,  "blocked"),
            ("volumesFrom, D CREATED", mounting,         Created, "resolved"),
        ];
        for (name, app, dep_known, expected) in cases {
            let mut task = task(vec![definition("dep"), app]);
            set(&mut task, "dep", dep_known, Running);
            let index = set(&mut task, "app", Pulled, Running);
            let state = dependency_state(&task, index, &RuleConfig::default(), NOW);
            assert_eq!(state_kind(&state), expected, "{name}: {state:?}");
        }
    }

    #[test]
    fn dependency_section4_shutdown_order() {
        // app → db (dependsOn START), web → app (link), worker → db (volumesFrom).
        let mut web = definition("web");
        web.links.push("app".into());
        let mut worker = definition("worker");
        worker.volumes_from.push(VolumeFrom { source_container: "db".into(), read_only: false });
        let base = task(vec![
            definition("db"),
            depends(definition("app"), "db", DependencyCondition::Start),
            web,
            worker,
        ]);
        // (case, target, known of [db, app, web, worker], expected); everything desired STOPPED.
        type Case = (&'static str, &'static str, [ContainerStatus; 4], &'static str);
        let cases: [Case; 5] = [
            ("db waits for app and worker", "db",  [Running, Running, Stopped, Running], "blocked"),
            ("db waits for worker",         "db",  [Running, Stopped, Stopped, Running], "blocked"),
            ("db stops once both stopped",  "db",  [Running, Stopped, Stopped, Stopped], "resolved"),
            ("app waits for web",           "app", [Running, Running, Running, Running], "blocked"),
            ("web has no dependents",       "web", [Running, Running, Running, Running], "resolved"),
        ];
        for (name, target, known_statuses, expected) in cases {
            let mut task = base.clone();
            for (container, status) in task.containers.iter_mut().zip(known_statuses) {
                container.known_status = status;
                container.desired_status = Stopped;
            }
            let index = task.container_index(target).expect("test container exists");
            let state = dependency_state(&task, index, &RuleConfig::default(), NOW);
            assert_eq!(state_kind(&state), expected, "{name}: {state:?}");
        }
    }

    #[test]
    fn dependency_section4_desired_stopped_obeys_only_shutdown_order() {
        let state = dependency_case(DependencyCondition::Success, Created, Stopped, &*known(Running), RuleConfig::default());
        assert_eq!(state, DependencyState::Resolved);
    }

    #[test]
    fn task_status_section5_derivation() {
        use TaskStatus as T;
        // (case, [(essential, known); 2], task known, derived)
        type Case = (&'static str, [(bool, ContainerStatus); 2], TaskStatus, Option<TaskStatus>);
        let cases: [Case; 11] = [
            ("all NONE",                                 [(true, ContainerStatus::None), (true, ContainerStatus::None)], T::None, None),
            ("PULLED maps to NONE",                      [(true, Pulled), (true, Pulled)],   T::None,    None),
            ("lowest is CREATED",                        [(true, Created), (true, Running)], T::None,    Some(T::Created)),
            ("all RUNNING",                              [(true, Running), (true, Running)], T::Created, Some(T::Running)),
            ("already RUNNING",                          [(true, Running), (true, Running)], T::Running, None),
            ("never lowers",                             [(true, Created), (true, Running)], T::Running, None),
            ("non-essential exited, task runs on",       [(true, Running), (false, Stopped)], T::Running, None),
            ("non-essential exited before task RUNNING", [(true, Running), (false, Stopped)], T::Created, Some(T::Running)),
            ("essential STOPPED, other RUNNING: held",   [(true, Stopped), (false, Running)], T::Created, None),
            ("essential STOPPED, other CREATED",         [(true, Stopped), (true, Created)], T::None,    Some(T::Created)),
            ("all STOPPED",                              [(true, Stopped), (false, Stopped)], T::Running, Some(T::Stopped)),
        ];
        for (name, containers, task_known, expected) in cases {
            let mut defs = vec![definition("a"), definition("b")];
            for (def, (essential, _)) in defs.iter_mut().zip(containers) {
                def.essential = essential;
            }
            let mut task = task(defs);
            for (container, (_, status)) in task.containers.iter_mut().zip(containers) {
                container.known_status = status;
            }
            task.known_status = task_known;
            assert_eq!(derive_task_known_status(&task), expected, "{name}");
        }
    }

    #[test]
    fn task_status_section5_empty_task_derives_nothing() {
        let mut task = task(vec![definition("a")]);
        task.containers.clear();
        assert_eq!(derive_task_known_status(&task), None);
    }

    #[test]
    fn essential_container_stopped_section5() {
        // (case, essential, known, desired, expected)
        type Case = (&'static str, bool, ContainerStatus, ContainerStatus, bool);
        let cases: [Case; 5] = [
            ("essential running",             true,  Running, Running, false),
            ("essential known STOPPED",       true,  Stopped, Running, true),
            ("essential desired STOPPED",     true,  Running, Stopped, true),
            ("non-essential known STOPPED",   false, Stopped, Running, false),
            ("non-essential desired STOPPED", false, Created, Stopped, false),
        ];
        for (name, essential, known, desired, expected) in cases {
            let mut first = definition("a");
            first.essential = essential;
            let mut task = task(vec![first, definition("b")]);
            set(&mut task, "a", known, desired);
            set(&mut task, "b", Running, Running);
            assert_eq!(essential_container_stopped(&task), expected, "{name}");
        }
    }

    #[test]
    fn essential_stop_reason_names_the_first_error_of_a_stopped_essential_container() {
        // (case, a's essential, a's error, b's error, expected); a is desired STOPPED, b known
        // STOPPED and essential.
        type Case = (&'static str, bool, Option<ContainerErrorKind>, Option<ContainerErrorKind>, &'static str);
        let cases: [Case; 4] = [
            ("no error",                  true,  None,                                    None,                                   "Essential container in task exited"),
            ("a's create failed",         true,  Some(ContainerErrorKind::CannotCreate),  None,                                   "CannotCreateContainerError: container \"a\": CannotCreate"),
            ("non-essential a's error",   false, Some(ContainerErrorKind::CannotCreate),  Some(ContainerErrorKind::OutOfMemory),  "OutOfMemoryError: container \"b\": OutOfMemory"),
            ("the first container wins",  true,  Some(ContainerErrorKind::CannotPull),    Some(ContainerErrorKind::OutOfMemory),  "CannotPullContainerError: container \"a\": CannotPull"),
        ];
        for (case, a_essential, a_error, b_error, expected) in cases {
            let mut first = definition("a");
            first.essential = a_essential;
            let mut task = task(vec![first, definition("b")]);
            set(&mut task, "a", Created, Stopped);
            set(&mut task, "b", Stopped, Stopped);
            task.containers[0].applying_error = a_error.map(error);
            task.containers[1].applying_error = b_error.map(error);
            assert_eq!(essential_stop_reason(&task), expected, "{case}");
        }
    }

    fn error(kind: ContainerErrorKind) -> ContainerError {
        ContainerError { kind, message: format!("{kind:?}") }
    }

    #[test]
    fn error_outcome_section6_every_row() {
        use ContainerErrorKind as Kind;
        use PullBehavior as Pull;
        let reset_desired_stopped = ErrorOutcome { reset_known: true, container_desired_stopped: true, ..ErrorOutcome::default() };
        let reset_stop_now = ErrorOutcome { stop_in_background: true, ..reset_desired_stopped };
        let reset_only = ErrorOutcome { reset_known: true, ..ErrorOutcome::default() };
        let stopped = ErrorOutcome { set_known_to_target: true, container_desired_stopped: true, emit_events: true, ..ErrorOutcome::default() };
        let pull_stop_task = ErrorOutcome { set_known_to_target: true, stop_task: true, ..ErrorOutcome::default() };
        let pull_continue = ErrorOutcome { set_known_to_target: true, emit_events: true, ..ErrorOutcome::default() };
        // (case, target, error, pull behaviour, outcome)
        type Case = (&'static str, ContainerStatus, Kind, PullBehavior, ErrorOutcome);
        let cases: Vec<Case> = vec![
            ("PULLED, always",                     Pulled,  Kind::CannotPull, Pull::Always, pull_stop_task),
            ("PULLED, once",                       Pulled,  Kind::CannotPull, Pull::Once, pull_stop_task),
            ("PULLED, once, timeout",              Pulled,  Kind::Timeout, Pull::Once, pull_stop_task),
            ("PULLED, default",                    Pulled,  Kind::CannotPull, Pull::Default, pull_continue),
            ("PULLED, prefer-cached",              Pulled,  Kind::CannotPull, Pull::PreferCached, pull_continue),
            ("CREATED, any",                       Created, Kind::Other, Pull::Default, reset_desired_stopped),
            ("CREATED, timeout: no stop call",     Created, Kind::Timeout, Pull::Always, reset_desired_stopped),
            ("NONE is handled like CREATED",       ContainerStatus::None, Kind::Other, Pull::Default, reset_desired_stopped),
            ("RUNNING, timeout",                   Running, Kind::Timeout, Pull::Default, reset_stop_now),
            ("RUNNING, inspect failure",           Running, Kind::InspectFailed, Pull::Default, reset_stop_now),
            ("RUNNING, start EOF",                 Running, Kind::StartEof, Pull::Default, reset_stop_now),
            ("RUNNING, other",                     Running, Kind::Other, Pull::Default, reset_desired_stopped),
            ("RUNNING, vanished",                  Running, Kind::NoSuchContainer, Pull::Default, reset_desired_stopped),
            ("STOPPED, timeout",                   Stopped, Kind::Timeout, Pull::Default, reset_only),
            ("STOPPED, retriable other",           Stopped, Kind::Other, Pull::Default, reset_only),
            ("STOPPED, retriable unreachable",     Stopped, Kind::Unreachable, Pull::Default, reset_only),
            ("STOPPED, no such container",         Stopped, Kind::NoSuchContainer, Pull::Default, stopped),
            ("STOPPED, vanished",                  Stopped, Kind::Vanished, Pull::Default, stopped),
            ("STOPPED, dependency terminal",       Stopped, Kind::DependencyTerminal, Pull::Default, stopped),
        ];
        for (name, target, kind, pull_behavior, expected) in cases {
            assert_eq!(error_outcome(target, &error(kind), pull_behavior), expected, "{name}");
        }
    }

    #[test]
    fn docker_away_or_docker_answered_per_call_and_error() {
        use DockerCallKind as Call;
        let unreachable = RuntimeError::Unreachable { message: "connection refused".into() };
        let timeout = RuntimeError::Timeout { operation: "x".into(), after: Duration::from_secs(1) };
        let protocol = RuntimeError::Protocol { message: "connection closed mid-body".into() };
        let api_500 = RuntimeError::Api { status: 500, message: "server error".into() };
        let no_such_container = RuntimeError::NoSuchContainer { message: "abc".into() };
        let no_such_image = RuntimeError::NoSuchImage { message: "img".into() };
        let conflict = RuntimeError::Conflict { message: "name in use".into() };
        let cannot_pull = RuntimeError::CannotPull { message: "manifest unknown".into() };
        // (call, error, away?)
        let cases: Vec<(Call, &RuntimeError, bool)> = vec![
            (Call::Pull,    &unreachable,       true),
            (Call::Create,  &unreachable,       true),
            (Call::Start,   &unreachable,       true),
            (Call::Stop,    &unreachable,       true),
            (Call::Inspect, &unreachable,       true),
            (Call::Remove,  &unreachable,       true),
            (Call::Pull,    &timeout,           false), // a slow registry: the pull behaviour decides
            (Call::Create,  &timeout,           true),  // a hung daemon; the retry adopts by name
            (Call::Start,   &timeout,           false), // §6: it may be running
            (Call::Stop,    &timeout,           true),
            (Call::Inspect, &timeout,           true),
            (Call::Remove,  &timeout,           true),
            (Call::Pull,    &protocol,          true),
            (Call::Create,  &protocol,          true),
            (Call::Start,   &protocol,          false), // §6: start EOF, it may be running
            (Call::Stop,    &protocol,          true),
            (Call::Remove,  &protocol,          true),
            (Call::Pull,    &cannot_pull,       false),
            (Call::Pull,    &api_500,           false),
            (Call::Create,  &api_500,           false),
            (Call::Create,  &no_such_image,     false),
            (Call::Create,  &conflict,          false),
            (Call::Start,   &api_500,           false),
            (Call::Stop,    &api_500,           false),
            (Call::Stop,    &no_such_container, false),
            (Call::Inspect, &no_such_container, false),
            (Call::Remove,  &no_such_container, false),
        ];
        for (call, error, expected) in cases {
            assert_eq!(docker_away(call, error), expected, "{call:?} {error}");
        }
    }

    #[test]
    fn only_no_such_container_says_an_inspected_container_is_gone() {
        let cases = [
            (RuntimeError::NoSuchContainer { message: "abc".into() }, true),
            (RuntimeError::Api { status: 500, message: "server error".into() }, false),
            (RuntimeError::Protocol { message: "truncated answer".into() }, false),
            (RuntimeError::Unreachable { message: "refused".into() }, false),
            (RuntimeError::Timeout { operation: "inspect".into(), after: Duration::from_secs(30) }, false),
            (RuntimeError::Conflict { message: "x".into() }, false),
        ];
        for (error, expected) in cases {
            assert_eq!(inspect_says_gone(&error), expected, "{error}");
        }
    }

    #[test]
    fn docker_retry_backs_off_from_one_second_doubling_to_thirty() {
        let cases = [(0, 1), (1, 2), (2, 4), (3, 8), (4, 16), (5, 30), (6, 30), (40, 30), (u32::MAX, 30)];
        for (attempt, seconds) in cases {
            assert_eq!(docker_retry_delay(attempt), Duration::from_secs(seconds), "attempt {attempt}");
        }
    }

    #[test]
    fn a_transition_names_the_call_it_makes() {
        let cases = [
            (ContainerStatus::None, DockerCallKind::Create),
            (Pulled, DockerCallKind::Pull),
            (Created, DockerCallKind::Create),
            (Running, DockerCallKind::Start),
            (Stopped, DockerCallKind::Stop),
        ];
        for (target, call) in cases {
            assert_eq!(DockerCallKind::for_target(target), call, "{target}");
        }
        assert_eq!(DockerCallKind::from(DockerAction::Stop), DockerCallKind::Stop);
    }

    #[test]
    fn restop_section7_once_per_container() {
        // (case, known, already re-stopped, expected)
        let cases = [
            ("known STOPPED, first time: stop once",         Stopped, false, true),
            ("known STOPPED, already re-stopped: leave it",  Stopped, true,  false),
            ("known RUNNING: an ordinary repeat",            Running, false, false),
            ("known CREATED: an ordinary rise",              Created, false, false),
        ];
        for (name, known, restopped, expected) in cases {
            let mut container = Container::new(definition("app"));
            container.known_status = known;
            container.restopped = restopped;
            assert_eq!(restop_on_running_report(&container), expected, "{name}");
        }
    }

    #[test]
    fn unable_to_progress_section8() {
        use ProgressVerdict as V;
        use TaskStatus as T;
        // (case, task known, task desired, known of [essential main, non-essential sidecar], verdict)
        type Case = (&'static str, TaskStatus, TaskStatus, [ContainerStatus; 2], ProgressVerdict);
        let cases: [Case; 5] = [
            ("desired STOPPED: give up",                 T::Running, T::Stopped, [Running, Running], V::GiveUpStopped),
            ("desired RUNNING, essential not running",   T::Created, T::Running, [Created, Running], V::StopTask),
            ("desired RUNNING, essential still NONE",    T::None,    T::Running, [ContainerStatus::None, Running], V::StopTask),
            ("desired RUNNING, only sidecar not running", T::Created, T::Running, [Running, Created], V::Nothing),
            ("steady: nothing",                          T::Running, T::Running, [Running, Stopped], V::Nothing),
        ];
        for (name, task_known, task_desired, container_known, expected) in cases {
            let mut sidecar = definition("sidecar");
            sidecar.essential = false;
            let mut task = task(vec![definition("main"), sidecar]);
            task.known_status = task_known;
            task.desired_status = task_desired;
            for (container, status) in task.containers.iter_mut().zip(container_known) {
                container.known_status = status;
            }
            assert_eq!(unable_to_progress(&task), expected, "{name}");
        }
    }

    #[derive(Clone)]
    struct RestartCase {
        name: &'static str,
        policy: Option<RestartPolicy>,
        desired: ContainerStatus,
        exit_code: Option<i64>,
        started_at: Option<Millis>,
        last_restart_at: Option<Millis>,
        expected: bool,
    }

    #[test]
    fn restart_policy_section12() {
        let policy = |enabled: bool| RestartPolicy {
            enabled,
            ignored_exit_codes: vec![0, 42],
            restart_attempt_period_secs: 60,
        };
        let base = RestartCase {
            name: "enabled, code 1, ran 61 s",
            policy: Some(policy(true)),
            desired: Running,
            exit_code: Some(1),
            started_at: Some(NOW - 61_000),
            last_restart_at: None,
            expected: true,
        };
        let cases = [
            RestartCase { name: "no policy", policy: None, expected: false, ..base.clone() },
            RestartCase { name: "disabled", policy: Some(policy(false)), expected: false, ..base.clone() },
            RestartCase { name: "desired STOPPED", desired: Stopped, expected: false, ..base.clone() },
            RestartCase { name: "exit code unknown", exit_code: None, expected: false, ..base.clone() },
            RestartCase { name: "ignored exit code 0", exit_code: Some(0), expected: false, ..base.clone() },
            RestartCase { name: "ignored exit code 42", exit_code: Some(42), expected: false, ..base.clone() },
            RestartCase { name: "ran only 59 s", started_at: Some(NOW - 59_000), expected: false, ..base.clone() },
            RestartCase { name: "ran exactly the period", started_at: Some(NOW - 60_000), ..base.clone() },
            RestartCase { name: "last restart 30 s ago wins over start", last_restart_at: Some(NOW - 30_000), expected: false, ..base.clone() },
            RestartCase { name: "last restart 90 s ago", started_at: Some(NOW - 10_000), last_restart_at: Some(NOW - 90_000), ..base.clone() },
            RestartCase { name: "no start time recorded", started_at: None, ..base.clone() },
            RestartCase { name: "clock behind start time", started_at: Some(NOW + 5_000), expected: false, ..base.clone() },
            base,
        ];
        for case in cases {
            let mut definition = definition("app");
            definition.restart_policy = case.policy;
            let mut container = Container::new(definition);
            container.known_status = Running;
            container.desired_status = case.desired;
            container.started_at = case.started_at;
            container.last_restart_at = case.last_restart_at;
            assert_eq!(should_restart(&container, case.exit_code, NOW), case.expected, "{}", case.name);
        }
    }

    #[test]
    fn stop_grace_uses_stop_timeout_else_default() {
        let default = Duration::from_secs(30);
        let cases = [(None, 30), (Some(0), 30), (Some(5), 5), (Some(120), 120)];
        for (stop_timeout, expected) in cases {
            let mut definition = definition("app");
            definition.stop_timeout_secs = stop_timeout;
            let container = Container::new(definition);
            assert_eq!(stop_grace(&container, default), Duration::from_secs(expected), "{stop_timeout:?}");
        }
    }

    #[test]
    fn desired_section1_task_desired_only_raises_container_desired() {
        let mut task = task(vec![definition("a"), definition("b")]);
        set(&mut task, "a", Running, Running);
        set(&mut task, "b", Stopped, Stopped);
        task.desired_status = TaskStatus::Running;
        assert!(!raise_container_desired_statuses(&mut task), "b stays STOPPED, a is already RUNNING");
        assert_eq!(task.containers[1].desired_status, Stopped);
        task.desired_status = TaskStatus::Stopped;
        assert!(raise_container_desired_statuses(&mut task));
        assert_eq!(task.containers[0].desired_status, Stopped);
    }

    #[test]
    fn dependency_terminal_error_goes_through_the_stopped_row() {
        let error = dependency_terminal_error("dependency \"db\" will never start");
        assert_eq!(
            error.reason(),
            "CannotStartContainerError: dependency \"db\" will never start"
        );
        let outcome = error_outcome(Stopped, &error, PullBehavior::Default);
        assert!(outcome.set_known_to_target && outcome.container_desired_stopped && outcome.emit_events);
        assert_eq!(DEPENDENCY_TERMINAL_EXIT_CODE, 143);
    }

    #[test]
    fn is_steady_known_running_desired_at_most_running() {
        use TaskStatus as T;
        let cases = [
            (T::Running, T::Running, true),
            (T::Running, T::Stopped, false),
            (T::Created, T::Running, false),
            (T::Stopped, T::Stopped, false),
        ];
        for (known, desired, expected) in cases {
            let mut task = task(vec![definition("app")]);
            task.known_status = known;
            task.desired_status = desired;
            assert_eq!(is_steady(&task), expected, "{known}/{desired}");
        }
    }

    /// (case, error already carried, OOMKilled, State.Error, expected new error).
    type ReasonCase<'a> = (
        &'a str,
        Option<&'a ContainerError>,
        bool,
        &'a str,
        Option<ContainerError>,
    );

    #[test]
    fn a_stopped_containers_reason_comes_from_docker_unless_an_error_came_first() {
        let failed_start = ContainerError {
            kind: ContainerErrorKind::CannotStart,
            message: "cannot start: port is already allocated".to_string(),
        };
        let oom = Some(ContainerError {
            kind: ContainerErrorKind::OutOfMemory,
            message: "Container killed due to memory usage".to_string(),
        });
        let state_error = Some(ContainerError {
            kind: ContainerErrorKind::DockerState,
            message: "OCI runtime create failed: exec: \"nope\": not found".to_string(),
        });
        #[rustfmt::skip]
        let table: [ReasonCase; 7] = [
            ("plain exit",                    None,                false, "",    None),
            ("blank Docker error",            None,                false, "  \n", None),
            ("killed for memory",             None,                true,  "",    oom.clone()),
            ("memory wins over Docker error", None,                true,  "x",   oom.clone()),
            ("Docker error kept",             None,                false,
                "OCI runtime create failed: exec: \"nope\": not found\n",      state_error),
            ("earlier error wins over memory", Some(&failed_start), true,  "",   None),
            ("earlier error wins over Docker", Some(&failed_start), false, "x",  None),
        ];
        for (case, existing, oom_killed, docker_error, expected) in table {
            assert_eq!(
                exit_error_from_inspection(existing, oom_killed, docker_error),
                expected,
                "{case}"
            );
        }
    }
}
