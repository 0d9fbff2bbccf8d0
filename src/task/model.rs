//! The task model: what a task *is* (its definition, independent of the input format it came
//! from) and what deckhand knows about it at run time (statuses, Docker ids, exit codes).
//!
//! Every control source (the local API, `tasks.d`, later a remote control plane) maps its input
//! onto these types. Only the owning managed-task loop writes the run-time fields.
//! Times are milliseconds since the Unix epoch (`Millis`), so that the same values serve the
//! checkpoint, the API and the pure rules (which take `now` as an argument).

use crate::role_credentials::RoleType;
use crate::task::status::{ContainerStatus, TaskStatus};
use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

pub use super::definition_model::*;

/// Docker health status of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum HealthStatus {
    #[default]
    Unknown,
    Healthy,
    Unhealthy,
}

/// The error a container change carries, classified for the rules of §6. Reported as
/// `Name: message` ([`ContainerError::reason`]), the name being ECS's for the kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerError {
    pub kind: ContainerErrorKind,
    /// Human-readable, without the error's name; Docker's own message where there is one.
    pub message: String,
}

/// What went wrong, fine enough that each kind has one ECS error name
/// ([`ContainerErrorKind::ecs_error_name`]) and coarse enough for §6's rules. Checkpoints keep
/// the kind, so a variant is never renamed or removed: `Unreachable` and `Other` are no longer
/// made (a failed call is now classified by the call it was) but still load from older files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerErrorKind {
    /// The Docker call did not answer within its deadline.
    Timeout,
    /// Docker says the container to stop does not exist.
    NoSuchContainer,
    /// The image could not be pulled.
    CannotPull,
    /// The registry login of an image in Amazon ECR could not be had.
    CannotPullEcr,
    /// Docker refused to create the container.
    CannotCreate,
    /// Docker refused to inspect a volume the container mounts, before its create.
    CannotInspectVolume,
    /// Docker refused to create a volume the container mounts, before its create.
    CannotCreateVolume,
    /// Docker refused to start the container (the container is not running).
    CannotStart,
    /// A start whose outcome is unknown, so the container may be running: an error whose
    /// message ends in `EOF`, an answer that could not be read, or a call that panicked.
    StartEof,
    /// Docker refused to stop the container.
    CannotStop,
    /// Inspecting the container after a transition failed.
    InspectFailed,
    /// A dependency can never be satisfied (§4).
    DependencyTerminal,
    /// The container vanished from Docker while the agent was not looking (§11).
    Vanished,
    /// Docker is not reachable. Only in checkpoints of earlier versions.
    Unreachable,
    /// The kernel killed the container for exceeding its memory limit (Docker's `OOMKilled`).
    OutOfMemory,
    /// The container stopped and Docker recorded an error for it (`State.Error`, e.g. a start
    /// that failed in the runtime).
    DockerState,
    /// Any other error. Only in checkpoints of earlier versions.
    Other,
    /// A secret the container needs could not be read from the local secret store (ECS:
    /// `ResourceInitializationError`, its name for secrets it could not retrieve).
    ResourceInitialization,
}

/// A network a container is attached to and its IPv4 address there, as Docker reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerNetwork {
    /// Docker's network name (`bridge` for the default bridge).
    pub name: String,
    /// Empty when Docker gave none (host and none network modes).
    pub ipv4_address: String,
}

/// Run-time state of one container. Only the owning managed-task loop writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Container {
    /// Shared, not copied: the definition never changes once the task is accepted, and every
    /// snapshot the engine publishes of the task (one per change) would otherwise copy it, about
    /// 1 KiB per container each time, plus the allocations freed when the snapshot is replaced.
    pub definition: std::sync::Arc<ContainerDefinition>,
    /// Absent from checkpoints of normal containers (and of every container written before
    /// sandboxes existed).
    #[serde(default, skip_serializing_if = "ContainerKind::is_normal")]
    pub kind: ContainerKind,
    /// Fixed once, before create, and checkpointed before the create call.
    pub docker_name: Option<String>,
    /// The secret path part of this container's task metadata endpoint URI (§14), fixed with
    /// the Docker name at acceptance. Absent from checkpoints written before it existed (such a
    /// container has no endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_token: Option<String>,
    pub docker_id: Option<String>,
    pub known_status: ContainerStatus,
    pub desired_status: ContainerStatus,
    pub sent_status: ContainerStatus,
    /// Target of a Docker call not yet answered. Never persisted.
    #[serde(skip)]
    pub applied_status: Option<ContainerStatus>,
    pub exit_code: Option<i64>,
    /// The first error this container met; used as the reason of its events.
    pub applying_error: Option<ContainerError>,
    pub health: HealthStatus,
    pub health_output: Option<String>,
    pub health_since: Option<Millis>,
    /// Host port bindings Docker reported.
    pub ports: Vec<crate::ports::PortBinding>,
    /// Networks and addresses Docker reported while the container ran (kept after it stops,
    /// as introspection shows them). Absent from checkpoints written before it existed.
    #[serde(default)]
    pub networks: Vec<ContainerNetwork>,
    pub image_id: Option<String>,
    pub created_at: Option<Millis>,
    pub started_at: Option<Millis>,
    pub finished_at: Option<Millis>,
    pub known_status_time: Option<Millis>,
    pub restart_count: u32,
    pub last_restart_at: Option<Millis>,
    /// Set once §7's re-stop was issued for this container.
    pub restopped: bool,
    /// The container runs with another log driver than its definition asks for (an awslogs
    /// container on a host with no AWS credentials or region), decided at its create. Absent
    /// from checkpoints written before it existed and when the definition's driver runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_fallback: Option<LogFallback>,
    /// The host's GPUs this container was given (their ids, as `NVIDIA_VISIBLE_DEVICES` names
    /// them), fixed when its task is admitted to the host's resources and checkpointed before
    /// its create, so a restore takes back the very GPUs it was created with. Empty for a
    /// container that asks for none; absent from checkpoints then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_ids: Vec<String>,
}

/// The log driver a container runs with instead of the one its definition asks for, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFallback {
    /// The driver that runs (`DECKHAND_LOG_DRIVER_FALLBACK`), with no options.
    pub log_driver: String,
    /// Why the definition's driver does not run.
    pub reason: String,
}

impl Container {
    pub fn new(definition: ContainerDefinition) -> Container {
        Container {
            definition: std::sync::Arc::new(definition),
            kind: ContainerKind::Normal,
            docker_name: None,
            metadata_token: None,
            docker_id: None,
            known_status: ContainerStatus::None,
            desired_status: ContainerStatus::None,
            sent_status: ContainerStatus::None,
            applied_status: None,
            exit_code: None,
            applying_error: None,
            health: HealthStatus::Unknown,
            health_output: None,
            health_since: None,
            ports: Vec::new(),
            networks: Vec::new(),
            image_id: None,
            created_at: None,
            started_at: None,
            finished_at: None,
            known_status_time: None,
            restart_count: 0,
            last_restart_at: None,
            restopped: false,
            log_fallback: None,
            gpu_ids: Vec::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.definition.name
    }

    pub fn essential(&self) -> bool {
        self.definition.essential
    }

    pub fn is_sandbox(&self) -> bool {
        self.kind == ContainerKind::Sandbox
    }
}

/// A task: its definition and what deckhand knows about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// 32 lowercase hex characters.
    pub id: String,
    /// `arn:aws:ecs:local:000000000000:task/<cluster>/<id>`.
    pub arn: String,
    pub family: String,
    pub revision: u32,
    pub network_mode: NetworkMode,
    pub cpu: Option<u64>,
    pub memory_mib: Option<u64>,
    pub volumes: Vec<Volume>,
    pub containers: Vec<Container>,
    /// Absent from checkpoints written before deckhand supported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_mode: Option<PidMode>,
    /// Absent from checkpoints written before deckhand supported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc_mode: Option<IpcMode>,
    pub known_status: TaskStatus,
    pub known_status_time: Option<Millis>,
    pub desired_status: TaskStatus,
    pub sent_status: TaskStatus,
    /// Sequence number of the command that started it (0 = none).
    pub start_sequence: u64,
    /// Sequence number of the stop registered in the wait group (0 = none).
    pub stop_sequence: u64,
    pub pull_started_at: Option<Millis>,
    pub pull_stopped_at: Option<Millis>,
    pub execution_stopped_at: Option<Millis>,
    /// Reason carried by the task's STOPPED event.
    pub stopped_reason: Option<String>,
    pub created_at: Millis,
    /// Where the task came from, set by a control source at submit and saved with the task,
    /// so that source can find its tasks again after a crash (`tasks.d:<file>:<content hash>`).
    /// `None` for tasks submitted through the API (and in checkpoints written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The highest task status the control plane that owns the task (Amazon ECS, for a task
    /// whose `source` is [`ECS_SOURCE_PREFIX`]`<arn>`) acknowledged; its containers are removed
    /// only after it acknowledged STOPPED. NONE for local tasks, which no one else is told of.
    #[serde(default, skip_serializing_if = "TaskStatus::is_none")]
    pub reported_status: TaskStatus,
    /// Why the task waits for host resources (memory, CPU, a host port) before it starts, as
    /// `inspect` shows it. Never saved: the engine fills it in the snapshots it hands out.
    #[serde(skip)]
    pub waiting_for: Option<String>,
    /// The credentials ids of the task's IAM roles (`/v2/credentials/<id>`), fixed when the task
    /// is accepted: ECS's from the payload, or deckhand's own. The ids are not secret and are
    /// saved, so a restored task knows them; the credentials are never saved
    /// ([`crate::role_credentials::CredentialsStore`] keeps them in memory). Absent from
    /// checkpoints of tasks without a role.
    #[serde(default, skip_serializing_if = "RoleCredentialsIds::is_empty")]
    pub credentials_ids: RoleCredentialsIds,
    /// The definition's `taskRoleArn` and `executionRoleArn` (saved: a restored local task
    /// assumes its roles again under the same ids).
    #[serde(default, skip_serializing_if = "TaskRoleArns::is_empty")]
    pub role_arns: TaskRoleArns,
}

/// The credentials id of each of a task's IAM roles, when it has that role.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleCredentialsIds {
    /// The task role's (`TaskApplication`): its containers get
    /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_role: Option<String>,
    /// The execution role's (`TaskExecution`): Docker's awslogs driver gets its endpoint; it is
    /// never in a container's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_role: Option<String>,
}

impl RoleCredentialsIds {
    pub fn is_empty(&self) -> bool {
        self.task_role.is_none() && self.execution_role.is_none()
    }

    /// The id of `role`, when the task has that role.
    pub fn id(&self, role: RoleType) -> Option<&str> {
        match role {
            RoleType::TaskApplication => self.task_role.as_deref(),
            RoleType::TaskExecution => self.execution_role.as_deref(),
        }
    }

    /// Each role the task has, with its id.
    pub fn each(&self) -> impl Iterator<Item = (RoleType, &str)> {
        RoleType::ALL
            .into_iter()
            .filter_map(|role| self.id(role).map(|id| (role, id)))
    }
}

/// The `source` of a task Amazon ECS placed on this host: `ecs:` and the task's ARN. Such a task
/// is stopped through ECS only, and cleaned up once ECS acknowledged its STOPPED.
pub const ECS_SOURCE_PREFIX: &str = "ecs:";

impl Task {
    /// The control plane owns this task (it came from Amazon ECS): local commands may read it but
    /// not stop it, and its cleanup waits for the control plane's acknowledgement.
    pub fn owned_by_control_plane(&self) -> bool {
        self.source
            .as_deref()
            .is_some_and(|source| source.starts_with(ECS_SOURCE_PREFIX))
    }

    /// A new task, desired RUNNING, from a validated definition.
    pub fn new(
        id: String,
        cluster: &str,
        definition: TaskDefinition,
        start_sequence: u64,
        now: Millis,
    ) -> Task {
        let arn = format!("arn:aws:ecs:local:000000000000:task/{cluster}/{id}");
        let mut containers: Vec<Container> = definition
            .containers
            .into_iter()
            .map(Container::new)
            .collect();
        // Before the sandbox: ECS leaves out this implicit dependency when the router depends
        // on another container, and the sandbox's edge is not one the definition asked for.
        crate::task::firelens::add_router_dependencies(&mut containers);
        if definition.network_mode == NetworkMode::Awsvpc {
            crate::task::sandbox::add_sandbox(&mut containers);
        }
        Task {
            id,
            arn,
            family: definition.family,
            revision: definition.revision,
            network_mode: definition.network_mode,
            cpu: definition.cpu,
            memory_mib: definition.memory_mib,
            volumes: definition.volumes,
            containers,
            pid_mode: definition.pid_mode,
            ipc_mode: definition.ipc_mode,
            role_arns: definition.roles,
            known_status: TaskStatus::None,
            known_status_time: None,
            desired_status: TaskStatus::Running,
            sent_status: TaskStatus::None,
            start_sequence,
            stop_sequence: 0,
            pull_started_at: None,
            pull_stopped_at: None,
            execution_stopped_at: None,
            stopped_reason: None,
            created_at: now,
            source: None,
            reported_status: TaskStatus::None,
            waiting_for: None,
            credentials_ids: RoleCredentialsIds::default(),
        }
    }

    /// A warning for each role the definition names that gets no credentials (no id:
    /// `DECKHAND_TASK_ROLES=off`), with the key's name.
    pub fn ignored_role_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let roles = [
            (
                "taskRoleArn",
                &self.role_arns.task_role,
                &self.credentials_ids.task_role,
            ),
            (
                "executionRoleArn",
                &self.role_arns.execution_role,
                &self.credentials_ids.execution_role,
            ),
        ];
        for (key, arn, id) in roles {
            if arn.is_some() && id.is_none() {
                warnings.push(format!(
                    "{key}: ignored: DECKHAND_TASK_ROLES is off (assume or host gives the \
                     task its credentials)"
                ));
            }
        }
        warnings
    }

    pub fn container(&self, name: &str) -> Option<&Container> {
        self.containers.iter().find(|c| c.name() == name)
    }

    pub fn container_index(&self, name: &str) -> Option<usize> {
        self.containers.iter().position(|c| c.name() == name)
    }

    /// The sandbox of an `awsvpc` task; `None` for every other network mode.
    pub fn sandbox(&self) -> Option<&Container> {
        self.containers.iter().find(|c| c.is_sandbox())
    }
}

/// `ECS_IMAGE_PULL_BEHAVIOR` (§13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PullBehavior {
    /// Always pull; on failure continue with a cached image.
    #[default]
    Default,
    /// Always pull; a failure stops the task.
    Always,
    /// Pull only if this agent never pulled the image successfully; a failure stops the task.
    Once,
    /// Pull only if the image is absent locally; on failure continue (create fails if absent).
    PreferCached,
}

impl std::str::FromStr for PullBehavior {
    type Err = String;
    fn from_str(value: &str) -> Result<PullBehavior, String> {
        match value {
            "default" => Ok(PullBehavior::Default),
            "always" => Ok(PullBehavior::Always),
            "once" => Ok(PullBehavior::Once),
            "prefer-cached" => Ok(PullBehavior::PreferCached),
            other => Err(format!(
                "unknown image pull behavior {other:?} (expected default, always, once or prefer-cached)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn volumes_saved_before_docker_volume_configurations_load_and_save_as_before() {
        // (saved JSON, what it loads as)
        let shared = Volume {
            docker_volume_configuration: Some(DockerVolumeConfiguration {
                scope: VolumeScope::Shared,
                autoprovision: false,
                driver: "local".into(),
                driver_opts: BTreeMap::new(),
                labels: BTreeMap::new(),
            }),
            ..Volume::new("db")
        };
        let table = [
            (
                r#"{"name":"data","host_source_path":null}"#,
                Volume::new("data"),
            ),
            (
                r#"{"name":"db","host_source_path":null,"docker_volume_configuration":{"scope":"shared"}}"#,
                shared,
            ),
        ];
        for (saved, expected) in table {
            let loaded: Volume = serde_json::from_str(saved).expect("loads");
            assert_eq!(loaded, expected, "{saved}");
        }
        assert_eq!(
            serde_json::to_string(&Volume::new("data")).expect("saves"),
            r#"{"name":"data","host_source_path":null}"#,
            "a volume without a Docker configuration is saved as before"
        );
    }

    #[test]
    fn a_role_without_a_credentials_id_is_named_as_ignored() {
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "web".into(),
            revision: 1,
            network_mode: NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![ContainerDefinition::new("app", "busybox")],
            pid_mode: None,
            ipc_mode: None,
        };
        let mut task = Task::new("t".into(), "c", definition, 1, 0);
        assert!(task.ignored_role_warnings().is_empty());
        task.role_arns.task_role = Some("arn:aws:iam::1:role/app".into());
        task.role_arns.execution_role = Some("arn:aws:iam::1:role/exec".into());
        let warnings = task.ignored_role_warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("taskRoleArn: ignored: DECKHAND_TASK_ROLES is off"));
        assert!(warnings[1].starts_with("executionRoleArn: ignored"));
        task.credentials_ids.task_role = Some("id".into());
        task.credentials_ids.execution_role = Some("id2".into());
        assert!(task.ignored_role_warnings().is_empty());
    }

    #[test]
    fn credentials_ids_are_saved_with_the_task_and_absent_without_a_role() {
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "web".into(),
            revision: 1,
            network_mode: NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![ContainerDefinition::new("app", "busybox")],
            pid_mode: None,
            ipc_mode: None,
        };
        let mut task = Task::new("0".repeat(32), "edge", definition, 1, 0);
        let saved = serde_json::to_string(&task).expect("saves");
        assert!(!saved.contains("credentials_ids"), "{saved}");
        task.credentials_ids.task_role = Some("app-id".into());
        let saved = serde_json::to_value(&task).expect("saves");
        assert_eq!(
            saved["credentials_ids"],
            serde_json::json!({"task_role": "app-id"})
        );
        let loaded: Task = serde_json::from_value(saved).expect("loads");
        assert_eq!(loaded.credentials_ids, task.credentials_ids);
        assert_eq!(
            loaded.credentials_ids.each().collect::<Vec<_>>(),
            [(RoleType::TaskApplication, "app-id")]
        );
    }
}
