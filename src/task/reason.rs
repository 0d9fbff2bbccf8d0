//! How a container's error is reported: ECS's named-error form `Name: message`, the name being
//! the one the ECS agent gives the same failure (`CannotPullContainerError`, `DockerTimeoutError`,
//! …), so dashboards, alerts and scripts written for ECS match deckhand's events, `inspect` and
//! introspection. The name is a pure function of the error's kind and the text is rendered when
//! reported, never stored, so a checkpoint written before names existed (it keeps the kind and
//! the message) reports in the same form.

use crate::task::{ContainerError, ContainerErrorKind};

/// ECS's name for an error of no known kind (the ECS agent's fallback for an unnamed error).
pub const UNKNOWN_ERROR_NAME: &str = "UnknownError";

impl ContainerErrorKind {
    /// The ECS agent's name for this kind of failure.
    pub fn ecs_error_name(self) -> &'static str {
        match self {
            ContainerErrorKind::Timeout => "DockerTimeoutError",
            ContainerErrorKind::CannotPull => "CannotPullContainerError",
            ContainerErrorKind::CannotPullEcr => "CannotPullECRContainerError",
            ContainerErrorKind::CannotCreate => "CannotCreateContainerError",
            ContainerErrorKind::CannotInspectVolume => "CannotInspectVolumeError",
            ContainerErrorKind::CannotCreateVolume => "CannotCreateVolumeError",
            // A refused start, a start whose outcome is unknown, and a dependency that can
            // never be met (ECS wraps the dependency's error in the start error).
            ContainerErrorKind::CannotStart
            | ContainerErrorKind::StartEof
            | ContainerErrorKind::DependencyTerminal => "CannotStartContainerError",
            // ECS reports a stop of a container Docker does not have as a failed stop.
            ContainerErrorKind::CannotStop | ContainerErrorKind::NoSuchContainer => {
                "CannotStopContainerError"
            }
            ContainerErrorKind::InspectFailed => "CannotInspectContainerError",
            ContainerErrorKind::Vanished => "ContainerVanishedError",
            ContainerErrorKind::OutOfMemory => "OutOfMemoryError",
            ContainerErrorKind::DockerState => "DockerStateError",
            ContainerErrorKind::ResourceInitialization => "ResourceInitializationError",
            // Kinds of earlier checkpoints that do not say which call failed.
            ContainerErrorKind::Unreachable | ContainerErrorKind::Other => UNKNOWN_ERROR_NAME,
        }
    }
}

impl ContainerError {
    /// The message without the error's name: a checkpoint of an earlier version may already
    /// hold the named form (the out-of-memory reason did), which must not be named twice.
    pub fn message_without_name(&self) -> &str {
        let name = self.kind.ecs_error_name();
        self.message
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(&self.message)
    }

    /// The reason reported for the container: `Name: message`.
    pub fn reason(&self) -> String {
        format!(
            "{}: {}",
            self.kind.ecs_error_name(),
            self.message_without_name()
        )
    }

    /// The reason reported for the task this error stopped: the container's reason with the
    /// container named after the error's name, which stays first for whoever matches on it.
    pub fn task_reason(&self, container_name: &str) -> String {
        format!(
            "{}: container {container_name:?}: {}",
            self.kind.ecs_error_name(),
            self.message_without_name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_KIND: [ContainerErrorKind; 18] = [
        ContainerErrorKind::Timeout,
        ContainerErrorKind::CannotInspectVolume,
        ContainerErrorKind::CannotCreateVolume,
        ContainerErrorKind::NoSuchContainer,
        ContainerErrorKind::CannotPull,
        ContainerErrorKind::CannotPullEcr,
        ContainerErrorKind::CannotCreate,
        ContainerErrorKind::CannotStart,
        ContainerErrorKind::StartEof,
        ContainerErrorKind::CannotStop,
        ContainerErrorKind::InspectFailed,
        ContainerErrorKind::DependencyTerminal,
        ContainerErrorKind::Vanished,
        ContainerErrorKind::Unreachable,
        ContainerErrorKind::OutOfMemory,
        ContainerErrorKind::DockerState,
        ContainerErrorKind::Other,
        ContainerErrorKind::ResourceInitialization,
    ];

    #[test]
    fn each_kind_has_the_ecs_agents_name() {
        // (kind, its name in the ECS agent)
        let table = [
            (ContainerErrorKind::Timeout, "DockerTimeoutError"),
            (
                ContainerErrorKind::NoSuchContainer,
                "CannotStopContainerError",
            ),
            (ContainerErrorKind::CannotPull, "CannotPullContainerError"),
            (
                ContainerErrorKind::CannotPullEcr,
                "CannotPullECRContainerError",
            ),
            (
                ContainerErrorKind::CannotCreate,
                "CannotCreateContainerError",
            ),
            (
                ContainerErrorKind::CannotInspectVolume,
                "CannotInspectVolumeError",
            ),
            (
                ContainerErrorKind::CannotCreateVolume,
                "CannotCreateVolumeError",
            ),
            (ContainerErrorKind::CannotStart, "CannotStartContainerError"),
            (ContainerErrorKind::StartEof, "CannotStartContainerError"),
            (ContainerErrorKind::CannotStop, "CannotStopContainerError"),
            (
                ContainerErrorKind::InspectFailed,
                "CannotInspectContainerError",
            ),
            (
                ContainerErrorKind::DependencyTerminal,
                "CannotStartContainerError",
            ),
            (ContainerErrorKind::Vanished, "ContainerVanishedError"),
            (ContainerErrorKind::Unreachable, "UnknownError"),
            (ContainerErrorKind::OutOfMemory, "OutOfMemoryError"),
            (ContainerErrorKind::DockerState, "DockerStateError"),
            (
                ContainerErrorKind::ResourceInitialization,
                "ResourceInitializationError",
            ),
            (ContainerErrorKind::Other, "UnknownError"),
        ];
        assert_eq!(table.len(), EVERY_KIND.len(), "every kind is in the table");
        for (kind, name) in table {
            assert_eq!(kind.ecs_error_name(), name, "{kind:?}");
        }
    }

    #[test]
    fn every_name_is_one_word_ending_in_error() {
        for kind in EVERY_KIND {
            let name = kind.ecs_error_name();
            assert!(name.ends_with("Error"), "{kind:?}: {name}");
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{kind:?}: {name}"
            );
        }
    }

    #[test]
    fn reasons_are_rendered_as_name_colon_message() {
        // (kind, stored message, container reason, task reason for container "app")
        let table = [
            (
                ContainerErrorKind::CannotPull,
                "pull access denied for nothing-here",
                "CannotPullContainerError: pull access denied for nothing-here",
                "CannotPullContainerError: container \"app\": pull access denied for nothing-here",
            ),
            (
                ContainerErrorKind::DependencyTerminal,
                "dependency \"db\" will never start, so START can never be met",
                "CannotStartContainerError: dependency \"db\" will never start, so START can never be met",
                "CannotStartContainerError: container \"app\": dependency \"db\" will never start, so START can never be met",
            ),
            // A checkpoint of an earlier version stored the out-of-memory reason named already.
            (
                ContainerErrorKind::OutOfMemory,
                "OutOfMemoryError: Container killed due to memory usage",
                "OutOfMemoryError: Container killed due to memory usage",
                "OutOfMemoryError: container \"app\": Container killed due to memory usage",
            ),
            (
                ContainerErrorKind::OutOfMemory,
                "Container killed due to memory usage",
                "OutOfMemoryError: Container killed due to memory usage",
                "OutOfMemoryError: container \"app\": Container killed due to memory usage",
            ),
            // Only the kind's own name is taken off, not another one.
            (
                ContainerErrorKind::DockerState,
                "OutOfMemoryError: x",
                "DockerStateError: OutOfMemoryError: x",
                "DockerStateError: container \"app\": OutOfMemoryError: x",
            ),
            (
                ContainerErrorKind::Other,
                "Docker API error 500: boom",
                "UnknownError: Docker API error 500: boom",
                "UnknownError: container \"app\": Docker API error 500: boom",
            ),
            (ContainerErrorKind::Timeout, "", "DockerTimeoutError: ", "DockerTimeoutError: container \"app\": "),
        ];
        for (kind, message, reason, task_reason) in table {
            let error = ContainerError {
                kind,
                message: message.to_string(),
            };
            assert_eq!(error.reason(), reason, "{kind:?} {message:?}");
            assert_eq!(
                error.task_reason("app"),
                task_reason,
                "{kind:?} {message:?}"
            );
        }
    }

    #[test]
    fn kinds_of_earlier_checkpoints_still_load() {
        // The kinds as checkpoints of earlier versions spell them.
        for spelling in [
            "timeout",
            "no_such_container",
            "cannot_pull",
            "start_eof",
            "inspect_failed",
            "dependency_terminal",
            "vanished",
            "unreachable",
            "out_of_memory",
            "docker_state",
            "other",
        ] {
            let json = format!(r#"{{"kind":"{spelling}","message":"m"}}"#);
            let error: ContainerError = serde_json::from_str(&json).expect(&json);
            assert!(error.reason().ends_with(": m"), "{spelling}");
        }
    }
}
