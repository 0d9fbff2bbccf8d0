//! §6 of docs/ENGINE.md as pure functions: what a failed Docker call means for a container and
//! its task (`error_outcome`, over the error kinds `classify_error` gives Docker's answers), which
//! failures are Docker being away rather than Docker's answer (`docker_away`, retried with
//! `docker_retry_delay`), when an inspection says a container is gone, and why a container that
//! stopped by itself stopped (`exit_error_from_inspection`).

use super::DockerAction;
use crate::runtime::{RuntimeError, VolumeFailure};
use crate::task::{ContainerError, ContainerErrorKind, ContainerStatus, PullBehavior};
use std::time::Duration;

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
///
/// Only Docker's answers come here: a failure for which [`docker_away`] holds (Docker
/// unreachable; a create or stop that timed out or lost its answer) is retried by the managed
/// task without touching the container, so the STOPPED rows for "unreachable" and "timeout" are
/// reached only through the error kinds themselves (they stay as the rule for such an error).
pub fn error_outcome(
    target: ContainerStatus,
    error: &ContainerError,
    pull_behavior: PullBehavior,
) -> ErrorOutcome {
    match target {
        ContainerStatus::Pulled => match pull_behavior {
            // A cached image must not stand in for one the owner asked to be pulled: the whole
            // task stops, even for a non-essential container.
            PullBehavior::Always | PullBehavior::Once => ErrorOutcome {
                set_known_to_target: true,
                stop_task: true,
                ..ErrorOutcome::default()
            },
            // Continue: create uses a cached image if there is one.
            PullBehavior::Default | PullBehavior::PreferCached => ErrorOutcome {
                set_known_to_target: true,
                emit_events: true,
                ..ErrorOutcome::default()
            },
        },
        // A failed create leaves nothing running: no stop call.
        ContainerStatus::None | ContainerStatus::Created => ErrorOutcome {
            reset_known: true,
            container_desired_stopped: true,
            ..ErrorOutcome::default()
        },
        ContainerStatus::Running => ErrorOutcome {
            reset_known: true,
            container_desired_stopped: true,
            // The start may have happened after all: stop it now rather than strand it.
            stop_in_background: matches!(
                error.kind,
                ContainerErrorKind::Timeout
                    | ContainerErrorKind::InspectFailed
                    | ContainerErrorKind::StartEof
            ),
            ..ErrorOutcome::default()
        },
        ContainerStatus::Stopped => match error.kind {
            // Not stopped, or not known to be: retry on a later pass (or a `die` event or the
            // steady re-check finishes it).
            ContainerErrorKind::Timeout
            | ContainerErrorKind::Other
            | ContainerErrorKind::Unreachable
            | ContainerErrorKind::InspectFailed
            | ContainerErrorKind::StartEof
            | ContainerErrorKind::CannotPull
            | ContainerErrorKind::CannotPullEcr
            | ContainerErrorKind::CannotCreate
            | ContainerErrorKind::CannotInspectVolume
            | ContainerErrorKind::CannotCreateVolume
            | ContainerErrorKind::CannotStart
            | ContainerErrorKind::ResourceInitialization
            | ContainerErrorKind::CannotStop => ErrorOutcome {
                reset_known: true,
                ..ErrorOutcome::default()
            },
            // Gone, or never going to run: it is as stopped as it will ever be.
            ContainerErrorKind::NoSuchContainer
            | ContainerErrorKind::Vanished
            | ContainerErrorKind::OutOfMemory
            | ContainerErrorKind::DockerState
            | ContainerErrorKind::DependencyTerminal => ErrorOutcome {
                set_known_to_target: true,
                container_desired_stopped: true,
                emit_events: true,
                ..ErrorOutcome::default()
            },
        },
    }
}

/// A Docker call, as [`docker_away`] tells its failures apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DockerCallKind {
    Pull,
    Create,
    Start,
    Stop,
    Inspect,
    Remove,
}

impl From<DockerAction> for DockerCallKind {
    fn from(action: DockerAction) -> DockerCallKind {
        match action {
            DockerAction::Pull => DockerCallKind::Pull,
            DockerAction::Create => DockerCallKind::Create,
            DockerAction::Start => DockerCallKind::Start,
            DockerAction::Stop => DockerCallKind::Stop,
        }
    }
}

impl DockerCallKind {
    /// The call a transition aimed at `target` makes (§3 row 7, row 6).
    pub fn for_target(target: ContainerStatus) -> DockerCallKind {
        match target {
            ContainerStatus::None | ContainerStatus::Created => DockerCallKind::Create,
            ContainerStatus::Pulled => DockerCallKind::Pull,
            ContainerStatus::Running => DockerCallKind::Start,
            ContainerStatus::Stopped => DockerCallKind::Stop,
        }
    }
}

/// Whether a failed Docker call means "Docker is away" (true) rather than "Docker answered no"
/// (false).
///
/// Docker being away — its socket refuses connections during a restart or an upgrade, or the
/// daemon hangs — is nobody's fault: the call is retried with back-off
/// ([`docker_retry_delay`]), the container keeps its status, and nothing counts against the
/// task. Only Docker's own answers (a refused create, a missing image, a conflict, any 4xx/5xx
/// with its message, "no such container") go through §6's error rules.
///
/// Per error:
/// - `Unreachable`: away, for every call.
/// - `Protocol` (no readable answer: the connection closed mid-answer, as it does when the
///   daemon restarts during a call, or bytes that are not HTTP/JSON): away, except for a start.
///   A pull meets it only before Docker's answer began: a progress stream Docker answered and
///   then garbled or cut off is a `CannotPull` (the Docker client decides so), which the pull
///   behaviour decides on like any failed pull.
/// - `Timeout`: away for create, stop, inspect and remove — short calls against the local
///   daemon, so one that times out means the daemon is hung, and repeating them is safe (a create
///   uses the container's fixed name and adopts what an earlier attempt made; a stop is
///   idempotent; the stop worker has already retried and pinged Docker before it reports).
///   Not away for a **start** (§6 is kept: a start whose answer was lost may have happened, so
///   the container is stopped in the background and the task does not wait on it) nor for a
///   **pull**: its deadline (`ECS_IMAGE_PULL_TIMEOUT`, 2 h, or no progress) bounds a download
///   from a registry, which is what is usually slow, so the pull behaviour decides as in ECS
///   (`default` goes on with a cached image; `always`/`once` stop the task).
/// - Everything else is an answer from Docker.
///
/// An inspect's failure is never a status either way: only "no such container" says the
/// container is gone ([`inspect_says_gone`]); any other failure is retried.
pub fn docker_away(call: DockerCallKind, error: &RuntimeError) -> bool {
    match error {
        RuntimeError::Unreachable { .. } => true,
        RuntimeError::Protocol { .. } => call != DockerCallKind::Start,
        RuntimeError::Timeout { .. } => {
            !matches!(call, DockerCallKind::Start | DockerCallKind::Pull)
        }
        // A call that panicked inside deckhand: Docker may well be up, and retrying the same
        // answer would panic again, so §6's rules decide (it is classified like a timeout).
        RuntimeError::NoSuchContainer { .. }
        | RuntimeError::NoSuchImage { .. }
        | RuntimeError::Conflict { .. }
        | RuntimeError::CannotPull { .. }
        | RuntimeError::CannotPullEcr { .. }
        | RuntimeError::Api { .. }
        | RuntimeError::Panicked { .. }
        | RuntimeError::Volume { .. }
        | RuntimeError::ResourceInitialization { .. } => false,
    }
}

/// Whether a failed inspect shows the container is gone: only Docker's "no such container"
/// (404) does. A 500, a malformed or truncated answer, a timeout or an unreachable socket say
/// nothing about the container, so its status stays as it was and the inspect is retried.
pub fn inspect_says_gone(error: &RuntimeError) -> bool {
    matches!(error, RuntimeError::NoSuchContainer { .. })
}

/// First wait before a call that failed because Docker was away is made again.
pub const DOCKER_RETRY_INITIAL: Duration = Duration::from_secs(1);

/// The longest wait between two attempts while Docker stays away.
pub const DOCKER_RETRY_MAXIMUM: Duration = Duration::from_secs(30);

/// The wait before retry number `attempt` (0 = the first retry) while Docker is away: 1 s
/// doubling up to 30 s. No jitter: the retries of different tasks are spread by when each one
/// failed, and every task with a container in Docker retries at once anyway when the event
/// stream reconnects.
pub fn docker_retry_delay(attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX);
    DOCKER_RETRY_INITIAL
        .saturating_mul(factor)
        .min(DOCKER_RETRY_MAXIMUM)
}

/// The message of a container the kernel killed for exceeding its memory limit, ECS's words
/// (reported as `OutOfMemoryError: Container killed due to memory usage`).
pub const OUT_OF_MEMORY_MESSAGE: &str = "Container killed due to memory usage";

/// Why a container stopped, from what Docker's inspection of the stopped container shows
/// (`State.OOMKilled`, `State.Error`), for its STOPPED event. An error the container already
/// carries (a failed call, a dependency that can never be met) was the first cause and wins, so
/// this returns `None` then; otherwise an out-of-memory kill, then Docker's own error text.
pub fn exit_error_from_inspection(
    existing: Option<&ContainerError>,
    oom_killed: bool,
    docker_state_error: &str,
) -> Option<ContainerError> {
    if existing.is_some() {
        return None;
    }
    if oom_killed {
        return Some(ContainerError {
            kind: ContainerErrorKind::OutOfMemory,
            message: OUT_OF_MEMORY_MESSAGE.to_string(),
        });
    }
    let docker_state_error = docker_state_error.trim();
    (!docker_state_error.is_empty()).then(|| ContainerError {
        kind: ContainerErrorKind::DockerState,
        message: docker_state_error.to_string(),
    })
}

/// Classifies a failed Docker call for the rules of §6 and for its ECS name: by the call that
/// failed (`target` is the status it aimed at), except a timeout, which ECS names the same for
/// every call, and a stop Docker has no container for, which §6 counts as stopped.
pub fn classify_error(target: ContainerStatus, error: &RuntimeError) -> ContainerError {
    let kind = match (target, error) {
        (_, RuntimeError::Timeout { .. }) => ContainerErrorKind::Timeout,
        (ContainerStatus::Stopped, RuntimeError::NoSuchContainer { .. }) => {
            ContainerErrorKind::NoSuchContainer
        }
        // A secret the call needed is not in the store: ECS's name, whichever call it was for.
        (_, RuntimeError::ResourceInitialization { .. }) => {
            ContainerErrorKind::ResourceInitialization
        }
        (_, RuntimeError::CannotPullEcr { .. }) => ContainerErrorKind::CannotPullEcr,
        (ContainerStatus::Pulled, _) => ContainerErrorKind::CannotPull,
        // A volume the create needs could not be made ready: named for the volume call that
        // failed, as ECS names it; a volume the task may not use is a failed create.
        (
            _,
            RuntimeError::Volume {
                failure: VolumeFailure::Inspect,
                ..
            },
        ) => ContainerErrorKind::CannotInspectVolume,
        (
            _,
            RuntimeError::Volume {
                failure: VolumeFailure::Create,
                ..
            },
        ) => ContainerErrorKind::CannotCreateVolume,
        (ContainerStatus::None | ContainerStatus::Created, _) => ContainerErrorKind::CannotCreate,
        // No answer was had: the start may have happened, so it is stopped (§6). A start whose
        // answer was lost (the connection closed mid-answer) or that panicked inside deckhand
        // is the same case as a start error ending in EOF.
        (
            ContainerStatus::Running,
            RuntimeError::Protocol { .. } | RuntimeError::Panicked { .. },
        ) => ContainerErrorKind::StartEof,
        (ContainerStatus::Running, _) if error.to_string().trim_end().ends_with("EOF") => {
            ContainerErrorKind::StartEof
        }
        (ContainerStatus::Running, _) => ContainerErrorKind::CannotStart,
        (ContainerStatus::Stopped, _) => ContainerErrorKind::CannotStop,
    };
    let message = match error {
        // The name says the pull failed; the registry's or Docker's words say why.
        RuntimeError::CannotPull { message } => message.clone(),
        // The kind carries the volume call's name; the message says which volume and why.
        RuntimeError::Volume { message, .. } => message.clone(),
        RuntimeError::ResourceInitialization { message }
        | RuntimeError::CannotPullEcr { message } => message.clone(),
        other => other.to_string(),
    };
    ContainerError { kind, message }
}
