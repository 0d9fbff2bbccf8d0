//! The engine's pure decision rules (ENGINE-SEMANTICS §3–§8, §12): which state a container goes to
//! next, whether its dependencies are resolved, what a failed Docker call means, when to give up.
//!
//! Everything here is a plain function over the task model: no threads, no clock (callers pass
//! `now`), no I/O. The managed-task loop calls these and performs what they return; the tables in
//! the tests below prove each row of the reference behaviour.

use crate::task::{
    Container, ContainerError, ContainerStatus, Millis, PullBehavior, Task, TaskStatus,
};
use std::time::Duration;

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

/// §3: the next state of container `index` of `task`.
pub fn next_state(task: &Task, index: usize, config: &RuleConfig, now: Millis) -> NextState {
    let _ = (task, index, config, now);
    todo!()
}

/// §4: whether container `index` may take its next step.
pub fn dependency_state(
    task: &Task,
    index: usize,
    config: &RuleConfig,
    now: Millis,
) -> DependencyState {
    let _ = (task, index, config, now);
    todo!()
}

/// §5: the new task known status if it must rise, else None.
pub fn derive_task_known_status(task: &Task) -> Option<TaskStatus> {
    let _ = task;
    todo!()
}

/// §5: true when an essential container is known or desired STOPPED (task desired must become STOPPED).
pub fn essential_container_stopped(task: &Task) -> bool {
    let _ = task;
    todo!()
}

/// §6: what a failed transition result means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErrorOutcome {
    /// Restore known to its value before this change.
    pub reset_known: bool,
    /// E.g. PULLED under default/prefer-cached; STOPPED for no-such-container.
    pub set_known_to_target: bool,
    /// Task desired STOPPED (pull failure under always/once).
    pub stop_task: bool,
    pub container_desired_stopped: bool,
    /// Start timeout / EOF: it may be running, issue a stop now.
    pub stop_in_background: bool,
    pub emit_events: bool,
}

/// §6: what a failed transition result means. `target` is the status the call aimed at.
pub fn error_outcome(
    target: ContainerStatus,
    error: &ContainerError,
    pull_behavior: PullBehavior,
) -> ErrorOutcome {
    let _ = (target, error, pull_behavior);
    todo!()
}

/// §7: a change reporting RUNNING for a container known STOPPED: issue one stop (true) or ignore (false).
pub fn restop_on_running_report(container: &Container) -> bool {
    let _ = container;
    todo!()
}

/// §8 verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressVerdict {
    GiveUpStopped,
    StopTask,
    Nothing,
}

/// §8: a pass started nothing, nothing in flight/waiting, task not steady.
pub fn unable_to_progress(task: &Task) -> ProgressVerdict {
    let _ = task;
    todo!()
}

/// §12: restart the container instead of applying its change to STOPPED?
pub fn should_restart(container: &Container, exit_code: Option<i64>, now: Millis) -> bool {
    let _ = (container, exit_code, now);
    todo!()
}

/// Stop grace for a container: its stopTimeout, else the configured default.
pub fn stop_grace(container: &Container, default: Duration) -> Duration {
    let _ = (container, default);
    todo!()
}

/// Steady: known RUNNING and desired ≤ RUNNING (§2 step 4).
pub fn is_steady(task: &Task) -> bool {
    let _ = task;
    todo!()
}
