//! Restore-time reconciliation of one checkpointed container with what Docker has
//! (docs/ENGINE.md §11 step 3), as a pure function: the caller looks the container up (by name
//! when the record has no Docker id, by id otherwise), passes what it saw, and applies the
//! outcome. No I/O here, so every row of the table is a unit test.
//!
//! | record      | Docker         | outcome                                                      |
//! |-------------|----------------|--------------------------------------------------------------|
//! | name, no ID | found by name  | adopt the ID; known = max(known, Docker state); copy metadata |
//! | name, no ID | absent         | unchanged: the create will run                               |
//! | ID          | inspect ok     | copy metadata; known = max(known, Docker state)              |
//! | ID          | inspect: 404   | known STOPPED; a vanished error unless already STOPPED       |
//! | ID          | not listed     | the same: a re-list by label confirms it is gone             |
//! | ID          | inspect fails otherwise | unchanged; reconcile again later                    |
//!
//! Docker state: running → RUNNING; dead → STOPPED; never started and no error → CREATED; else
//! STOPPED.
//!
//! Only Docker's "no such container" (or a re-list that does not show the container) means it
//! vanished. Any other failed inspect — Docker unreachable or timed out, a 500, a malformed or
//! truncated answer — says nothing about the container: marking it STOPPED would leave it
//! running in Docker, unmanaged, with a task that `deckhand stop` no longer stops. The outcome
//! asks the caller to reconcile it again instead (with back-off), and the record stays as it was.

use crate::ports::reported_port_bindings;
use crate::runtime::{ContainerInfo, PortBinding, RuntimeError};
use crate::task::time::parse_docker_time;
use crate::task::{
    Container, ContainerError, ContainerErrorKind, ContainerStatus, HealthStatus, Millis,
};

/// What the caller saw in Docker for one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DockerView {
    /// The record had no Docker id; a container with the record's Docker name exists.
    FoundByName(ContainerInfo),
    /// The record had no Docker id; no container has its name.
    AbsentByName,
    /// The record had a Docker id; inspecting it succeeded.
    Inspected(ContainerInfo),
    /// The record had a Docker id; inspecting it failed.
    InspectFailed(RuntimeError),
    /// The record had a Docker id; inspecting it failed with something other than "no such
    /// container", and a list of the task's containers by label, which Docker did answer, does
    /// not show it.
    NotListed { inspect_error: RuntimeError },
}

impl DockerView {
    /// This view with the port bindings deckhand records from an inspection
    /// (`ports::reported_port_bindings`): without IPv6 twins when `exclude_ipv6_twins`.
    pub fn with_reported_ports(self, exclude_ipv6_twins: bool) -> DockerView {
        let reported = |mut info: ContainerInfo| {
            info.ports = reported_port_bindings(&info.ports, exclude_ipv6_twins);
            info
        };
        match self {
            DockerView::FoundByName(info) => DockerView::FoundByName(reported(info)),
            DockerView::Inspected(info) => DockerView::Inspected(reported(info)),
            other => other,
        }
    }
}

/// Container fields Docker is the authority on, to copy into the record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InspectedMetadata {
    /// Only when Docker's state is STOPPED (a running container's exit code means nothing).
    pub exit_code: Option<i64>,
    pub created_at: Option<Millis>,
    pub started_at: Option<Millis>,
    pub finished_at: Option<Millis>,
    /// `None` when the container has no health check.
    pub health: Option<HealthStatus>,
    pub health_output: Option<String>,
    pub ports: Vec<PortBinding>,
    pub image_id: Option<String>,
}

/// What to change in the record. `ReconcileOutcome::apply_to` performs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileOutcome {
    /// A Docker id to adopt (the container was created before the crash but its id was not
    /// recorded).
    pub adopt_docker_id: Option<String>,
    /// The known status after reconciliation. Never lower than before.
    pub known_status: ContainerStatus,
    /// Docker's own state mapped to a status, when Docker showed the container. A caller sees
    /// here a container known STOPPED that Docker runs (§7: issue one stop).
    pub docker_status: Option<ContainerStatus>,
    pub metadata: Option<InspectedMetadata>,
    /// An error to record (container vanished), kept only if the container has none yet.
    pub error: Option<ContainerError>,
    /// Docker did not tell (it did not answer, or its answer was not one): nothing was learnt;
    /// reconcile this container again later.
    pub retry_when_docker_answers: bool,
}

impl ReconcileOutcome {
    fn unchanged(record: &Container) -> ReconcileOutcome {
        ReconcileOutcome {
            adopt_docker_id: None,
            known_status: record.known_status,
            docker_status: None,
            metadata: None,
            error: None,
            retry_when_docker_answers: false,
        }
    }

    /// Whether applying this outcome changes the record at all.
    pub fn changes(&self, record: &Container) -> bool {
        self.adopt_docker_id.is_some()
            || self.known_status != record.known_status
            || self.metadata.is_some()
            || (self.error.is_some() && record.applying_error.is_none())
    }

    /// Apply the outcome to the record; `now` stamps a known-status change.
    pub fn apply_to(&self, record: &mut Container, now: Millis) {
        if let Some(id) = &self.adopt_docker_id {
            record.docker_id = Some(id.clone());
        }
        if self.known_status > record.known_status {
            record.known_status = self.known_status;
            record.known_status_time = Some(now);
        }
        if let Some(metadata) = &self.metadata {
            if metadata.exit_code.is_some() {
                record.exit_code = metadata.exit_code;
            }
            record.created_at = metadata.created_at.or(record.created_at);
            record.started_at = metadata.started_at.or(record.started_at);
            record.finished_at = metadata.finished_at.or(record.finished_at);
            if let Some(health) = metadata.health {
                if health != record.health {
                    record.health_since = Some(now);
                }
                record.health = health;
                record.health_output = metadata.health_output.clone();
            }
            if !metadata.ports.is_empty() {
                record.ports = metadata.ports.clone();
            }
            if metadata.image_id.is_some() {
                record.image_id = metadata.image_id.clone();
            }
        }
        if record.applying_error.is_none() {
            record.applying_error = self.error.clone();
        }
    }
}

/// Docker's zero time, which it writes for "never".
const DOCKER_ZERO_TIME_PREFIX: &str = "0001-01-01";

/// Docker's container state as a container status (§11).
pub fn docker_state_status(info: &ContainerInfo) -> ContainerStatus {
    let state = &info.state;
    let never_started =
        state.started_at.is_empty() || state.started_at.starts_with(DOCKER_ZERO_TIME_PREFIX);
    if state.running {
        ContainerStatus::Running
    } else if state.dead {
        ContainerStatus::Stopped
    } else if never_started && state.error.is_empty() {
        ContainerStatus::Created
    } else {
        ContainerStatus::Stopped
    }
}

/// The fields of an inspect worth keeping in the record.
pub fn inspected_metadata(info: &ContainerInfo) -> InspectedMetadata {
    let status = docker_state_status(info);
    let health = info.state.health.as_ref().map(|h| match h.status.as_str() {
        "healthy" => HealthStatus::Healthy,
        "unhealthy" => HealthStatus::Unhealthy,
        _ => HealthStatus::Unknown,
    });
    InspectedMetadata {
        exit_code: (status == ContainerStatus::Stopped).then_some(info.state.exit_code),
        created_at: parse_docker_time(&info.created),
        started_at: parse_docker_time(&info.state.started_at),
        finished_at: parse_docker_time(&info.state.finished_at),
        health,
        health_output: info
            .state
            .health
            .as_ref()
            .and_then(|h| h.last_output.clone()),
        ports: info.ports.clone(),
        image_id: (!info.image_id.is_empty()).then(|| info.image_id.clone()),
    }
}

/// Reconcile one checkpointed container with what Docker showed for it.
pub fn reconcile_container(record: &Container, docker: DockerView) -> ReconcileOutcome {
    match docker {
        DockerView::AbsentByName => ReconcileOutcome::unchanged(record),
        DockerView::FoundByName(info) => {
            let docker_status = docker_state_status(&info);
            ReconcileOutcome {
                adopt_docker_id: Some(info.id.clone()),
                known_status: record.known_status.max(docker_status),
                docker_status: Some(docker_status),
                metadata: Some(inspected_metadata(&info)),
                error: None,
                retry_when_docker_answers: false,
            }
        }
        DockerView::Inspected(info) => {
            let docker_status = docker_state_status(&info);
            ReconcileOutcome {
                adopt_docker_id: None,
                known_status: record.known_status.max(docker_status),
                docker_status: Some(docker_status),
                metadata: Some(inspected_metadata(&info)),
                error: None,
                retry_when_docker_answers: false,
            }
        }
        DockerView::InspectFailed(inspect_error @ RuntimeError::NoSuchContainer { .. })
        | DockerView::NotListed { inspect_error } => {
            let already_stopped = record.known_status == ContainerStatus::Stopped;
            let error = (!already_stopped).then(|| ContainerError {
                kind: ContainerErrorKind::Vanished,
                message: format!(
                    "container {} ({}) was removed while deckhand was not watching: {inspect_error}",
                    record.name(),
                    record.docker_id.as_deref().unwrap_or("no id"),
                ),
            });
            ReconcileOutcome {
                known_status: ContainerStatus::Stopped,
                error,
                ..ReconcileOutcome::unchanged(record)
            }
        }
        // Unreachable, timed out, a 500, a malformed or truncated answer: not a fact about the
        // container.
        DockerView::InspectFailed(_) => ReconcileOutcome {
            retry_when_docker_answers: true,
            ..ReconcileOutcome::unchanged(record)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{ContainerState, HealthState};
    use crate::task::ContainerDefinition;
    use std::time::Duration;
    use ContainerStatus::{Created, Pulled, Running, Stopped};

    fn definition() -> ContainerDefinition {
        ContainerDefinition::new("web", "busybox")
    }

    fn record(known: ContainerStatus, docker_id: Option<&str>) -> Container {
        let mut container = Container::new(definition());
        container.docker_name = Some("deckhand-fam-1-web-0a1b2c".to_string());
        container.docker_id = docker_id.map(str::to_string);
        container.known_status = known;
        container.desired_status = Running;
        container
    }

    const ZERO: &str = "0001-01-01T00:00:00Z";
    const STARTED: &str = "2026-11-29T23:00:00.250000000Z";
    const FINISHED: &str = "2026-11-29T23:05:00Z";

    /// Docker's state block: (running, dead, started_at, error, exit code).
    fn info(
        running: bool,
        dead: bool,
        started_at: &str,
        error: &str,
        exit_code: i64,
    ) -> ContainerInfo {
        ContainerInfo {
            id: "f00d".repeat(16),
            name: "deckhand-fam-1-web-0a1b2c".to_string(),
            image: "busybox".to_string(),
            image_id: "sha256:abc".to_string(),
            created: "2026-11-29T22:59:59Z".to_string(),
            state: ContainerState {
                status: if running { "running" } else { "exited" }.to_string(),
                running,
                dead,
                exit_code,
                error: error.to_string(),
                started_at: started_at.to_string(),
                finished_at: if running || started_at == ZERO {
                    ZERO
                } else {
                    FINISHED
                }
                .to_string(),
                ..ContainerState::default()
            },
            ..ContainerInfo::default()
        }
    }

    fn running() -> ContainerInfo {
        info(true, false, STARTED, "", 0)
    }
    fn exited(code: i64) -> ContainerInfo {
        info(false, false, STARTED, "", code)
    }
    fn never_started() -> ContainerInfo {
        info(false, false, ZERO, "", 0)
    }
    fn start_failed() -> ContainerInfo {
        info(
            false,
            false,
            ZERO,
            "exec: \"nope\": executable file not found",
            127,
        )
    }
    fn dead() -> ContainerInfo {
        info(false, true, STARTED, "", 137)
    }

    #[test]
    fn docker_state_mapping_row_by_row() {
        let table = [
            ("running", running(), Running),
            ("dead", dead(), Stopped),
            ("never started, no error", never_started(), Created),
            ("never started, start error", start_failed(), Stopped),
            ("exited", exited(3), Stopped),
            (
                "running and dead flags: running wins",
                info(true, true, STARTED, "", 0),
                Running,
            ),
        ];
        for (row, info, expected) in table {
            assert_eq!(docker_state_status(&info), expected, "{row}");
        }
    }

    #[test]
    fn reconcile_table_row_by_row() {
        let id = "f00d".repeat(16);
        let vanished = Some(ContainerErrorKind::Vanished);
        let no_such = || RuntimeError::NoSuchContainer {
            message: "No such container: f00d".to_string(),
        };
        // (row, record known, record has id, Docker view,
        //  expected known, adopted id, error kind, retry, exit code)
        type Row = (
            &'static str,
            ContainerStatus,
            bool,
            DockerView,
            ContainerStatus,
            Option<String>,
            Option<ContainerErrorKind>,
            bool,
            Option<i64>,
        );
        let table: Vec<Row> = vec![
            (
                "no id, found running: adopt, RUNNING",
                Pulled,
                false,
                DockerView::FoundByName(running()),
                Running,
                Some(id.clone()),
                None,
                false,
                None,
            ),
            (
                "no id, found created: adopt, CREATED",
                Pulled,
                false,
                DockerView::FoundByName(never_started()),
                Created,
                Some(id.clone()),
                None,
                false,
                None,
            ),
            (
                "no id, found exited: adopt, STOPPED with exit code",
                ContainerStatus::None,
                false,
                DockerView::FoundByName(exited(2)),
                Stopped,
                Some(id.clone()),
                None,
                false,
                Some(2),
            ),
            (
                "no id, found but record is further: known does not fall",
                Stopped,
                false,
                DockerView::FoundByName(running()),
                Stopped,
                Some(id.clone()),
                None,
                false,
                None,
            ),
            (
                "no id, absent: unchanged, create will run",
                Pulled,
                false,
                DockerView::AbsentByName,
                Pulled,
                None,
                None,
                false,
                None,
            ),
            (
                "no id, absent, never pulled: unchanged",
                ContainerStatus::None,
                false,
                DockerView::AbsentByName,
                ContainerStatus::None,
                None,
                None,
                false,
                None,
            ),
            (
                "id, inspected running while known CREATED: RUNNING",
                Created,
                true,
                DockerView::Inspected(running()),
                Running,
                None,
                None,
                false,
                None,
            ),
            (
                "id, inspected exited while known RUNNING: STOPPED with exit code",
                Running,
                true,
                DockerView::Inspected(exited(1)),
                Stopped,
                None,
                None,
                false,
                Some(1),
            ),
            (
                "id, inspected dead: STOPPED",
                Running,
                true,
                DockerView::Inspected(dead()),
                Stopped,
                None,
                None,
                false,
                Some(137),
            ),
            (
                "id, start failed: STOPPED",
                Created,
                true,
                DockerView::Inspected(start_failed()),
                Stopped,
                None,
                None,
                false,
                Some(127),
            ),
            (
                "id, inspected created while known RUNNING: known does not fall",
                Running,
                true,
                DockerView::Inspected(never_started()),
                Running,
                None,
                None,
                false,
                None,
            ),
            (
                "id, known STOPPED but Docker runs it: stays STOPPED",
                Stopped,
                true,
                DockerView::Inspected(running()),
                Stopped,
                None,
                None,
                false,
                None,
            ),
            (
                "id, inspect fails: vanished, STOPPED",
                Running,
                true,
                DockerView::InspectFailed(no_such()),
                Stopped,
                None,
                vanished,
                false,
                None,
            ),
            (
                "id, no such container while CREATED: vanished, STOPPED",
                Created,
                true,
                DockerView::InspectFailed(no_such()),
                Stopped,
                None,
                vanished,
                false,
                None,
            ),
            (
                "id, inspect answers 500: unchanged, retry",
                Running,
                true,
                DockerView::InspectFailed(RuntimeError::Api {
                    status: 500,
                    message: "boom".to_string(),
                }),
                Running,
                None,
                None,
                true,
                None,
            ),
            (
                "id, inspect answers 500 while CREATED: unchanged, retry",
                Created,
                true,
                DockerView::InspectFailed(RuntimeError::Api {
                    status: 500,
                    message: "boom".to_string(),
                }),
                Created,
                None,
                None,
                true,
                None,
            ),
            (
                "id, malformed inspect answer: unchanged, retry",
                Running,
                true,
                DockerView::InspectFailed(RuntimeError::Protocol {
                    message: "inspect answer: expected value at line 1 column 1".to_string(),
                }),
                Running,
                None,
                None,
                true,
                None,
            ),
            (
                "id, truncated inspect answer: unchanged, retry",
                Running,
                true,
                DockerView::InspectFailed(RuntimeError::Protocol {
                    message: "inspect: connection closed mid-body".to_string(),
                }),
                Running,
                None,
                None,
                true,
                None,
            ),
            (
                "id, inspect answers 500 and the re-list does not show it: vanished",
                Running,
                true,
                DockerView::NotListed {
                    inspect_error: RuntimeError::Api {
                        status: 500,
                        message: "boom".to_string(),
                    },
                },
                Stopped,
                None,
                vanished,
                false,
                None,
            ),
            (
                "id, inspect fails, already STOPPED: no new error",
                Stopped,
                true,
                DockerView::InspectFailed(no_such()),
                Stopped,
                None,
                None,
                false,
                None,
            ),
            (
                "id, Docker unreachable: unchanged, retry",
                Running,
                true,
                DockerView::InspectFailed(RuntimeError::Unreachable {
                    message: "connection refused".to_string(),
                }),
                Running,
                None,
                None,
                true,
                None,
            ),
            (
                "id, inspect timed out: unchanged, retry",
                Running,
                true,
                DockerView::InspectFailed(RuntimeError::Timeout {
                    operation: "inspect".to_string(),
                    after: Duration::from_secs(30),
                }),
                Running,
                None,
                None,
                true,
                None,
            ),
        ];
        for (
            row,
            known,
            has_id,
            view,
            expected_known,
            expected_adopt,
            expected_error,
            expected_retry,
            expected_exit,
        ) in table
        {
            let before = record(known, has_id.then_some(id.as_str()));
            let outcome = reconcile_container(&before, view);
            assert_eq!(outcome.known_status, expected_known, "{row}: known");
            assert!(
                outcome.known_status >= before.known_status,
                "{row}: known only rises"
            );
            assert_eq!(outcome.adopt_docker_id, expected_adopt, "{row}: adopted id");
            assert_eq!(
                outcome.error.as_ref().map(|e| e.kind),
                expected_error,
                "{row}: error"
            );
            assert_eq!(
                outcome.retry_when_docker_answers, expected_retry,
                "{row}: retry"
            );
            let mut after = before.clone();
            outcome.apply_to(&mut after, 1_000);
            assert_eq!(after.known_status, expected_known, "{row}: applied known");
            assert_eq!(after.exit_code, expected_exit, "{row}: applied exit code");
            if let Some(adopted) = &expected_adopt {
                assert_eq!(after.docker_id.as_ref(), Some(adopted), "{row}: applied id");
            }
            if expected_known != before.known_status {
                assert_eq!(
                    after.known_status_time,
                    Some(1_000),
                    "{row}: known time stamped"
                );
            }
            assert_eq!(
                outcome.changes(&before),
                after != before,
                "{row}: changes()"
            );
        }
    }

    #[test]
    fn vanished_error_names_the_container_and_docker_error_and_keeps_a_first_error() {
        let mut before = record(Running, Some("abc123"));
        let outcome = reconcile_container(
            &before,
            DockerView::InspectFailed(RuntimeError::NoSuchContainer {
                message: "No such container: abc123".to_string(),
            }),
        );
        let message = &outcome.error.as_ref().expect("vanished error").message;
        assert!(
            message.contains("web") && message.contains("abc123"),
            "{message}"
        );
        assert!(message.contains("No such container"), "{message}");

        let first = ContainerError {
            kind: ContainerErrorKind::Timeout,
            message: "start timed out".to_string(),
        };
        before.applying_error = Some(first.clone());
        outcome.apply_to(&mut before, 5);
        assert_eq!(
            before.applying_error,
            Some(first),
            "the first error is kept"
        );
        assert_eq!(before.known_status, Stopped);
    }

    #[test]
    fn restore_records_ports_without_ipv6_twins_unless_configured() {
        let binding = |host_ip: &str| PortBinding {
            container_port: 80,
            protocol: "tcp".to_string(),
            host_port: 8080,
            host_ip: host_ip.to_string(),
        };
        let mut docker = running();
        docker.ports = vec![binding("0.0.0.0"), binding("::")];
        // (ECS_EXCLUDE_IPV6_PORTBINDING, recorded bindings)
        for (exclude, expected) in [
            (true, vec![binding("0.0.0.0")]),
            (false, vec![binding("0.0.0.0"), binding("::")]),
        ] {
            for view in [
                DockerView::Inspected(docker.clone()),
                DockerView::FoundByName(docker.clone()),
            ] {
                let mut container = record(Running, Some("abc123"));
                let outcome = reconcile_container(&container, view.with_reported_ports(exclude));
                outcome.apply_to(&mut container, 5);
                assert_eq!(container.ports, expected, "exclude={exclude}");
            }
        }
    }

    #[test]
    fn metadata_copies_times_health_ports_and_image() {
        let mut docker = running();
        docker.state.health = Some(HealthState {
            status: "healthy".to_string(),
            failing_streak: 0,
            last_output: Some("ok".to_string()),
            last_exit_code: Some(0),
        });
        docker.ports = vec![PortBinding {
            container_port: 80,
            protocol: "tcp".to_string(),
            host_port: 8080,
            host_ip: "0.0.0.0".to_string(),
        }];
        let mut container = record(Created, Some("f00d"));
        let outcome = reconcile_container(&container, DockerView::Inspected(docker.clone()));
        outcome.apply_to(&mut container, 42);
        assert_eq!(container.started_at, parse_docker_time(STARTED));
        assert_eq!(
            container.created_at,
            parse_docker_time("2026-11-29T22:59:59Z")
        );
        assert_eq!(container.finished_at, None, "zero time is never");
        assert_eq!(container.health, HealthStatus::Healthy);
        assert_eq!(container.health_since, Some(42));
        assert_eq!(container.health_output.as_deref(), Some("ok"));
        assert_eq!(container.ports, docker.ports);
        assert_eq!(container.image_id.as_deref(), Some("sha256:abc"));
        assert_eq!(
            container.exit_code, None,
            "a running container has no exit code"
        );
    }
}
