//! The task model's definition half: what a task *is* — its containers, volumes, ports, health
//! checks, Linux parameters, and how its containers run — independent of the input format it came
//! from (ECS task-definition JSON, Compose, the ACS task shape). Re-exported by `model`, whose
//! other half is what deckhand knows about a task at run time.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// A container definition's settings and a task's volumes have rooms of their own; they are part
// of the model, under the same paths.
pub use crate::task::settings::*;
pub use crate::task::volumes::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    #[default]
    Bridge,
    Host,
    None,
    /// One network namespace for the whole task, held by its sandbox container on Docker's
    /// bridge, as a task gets on Fargate (docs/ENGINE.md §16).
    Awsvpc,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Bridge => "bridge",
            NetworkMode::Host => "host",
            NetworkMode::None => "none",
            NetworkMode::Awsvpc => "awsvpc",
        }
    }
}

/// What a container of a task is: one of the task definition's, or one deckhand adds itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ContainerKind {
    /// A container of the task definition.
    #[default]
    Normal,
    /// The sandbox of an `awsvpc` task: it holds the task's network namespace, which every
    /// other container of the task joins (ECS's pause container).
    Sandbox,
}

impl ContainerKind {
    pub fn is_normal(&self) -> bool {
        *self == ContainerKind::Normal
    }

    /// ECS's name for the kind (the `Type` of task metadata).
    pub fn ecs_type(self) -> &'static str {
        match self {
            ContainerKind::Normal => "NORMAL",
            ContainerKind::Sandbox => "CNI_PAUSE",
        }
    }
}

/// A dependsOn condition (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DependencyCondition {
    /// Implicit, from `volumesFrom`.
    Create,
    Start,
    Complete,
    Success,
    Healthy,
}

/// One dependency edge of a container: "this container needs `container_name` to reach `condition`".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub container_name: String,
    pub condition: DependencyCondition,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortMapping {
    /// The container port; for a `containerPortRange` mapping, the first port of the range.
    pub container_port: u16,
    /// `None` or 0: Docker picks an ephemeral host port (bridge mode). Always `None` for a range.
    pub host_port: Option<u16>,
    pub protocol: Protocol,
    /// `containerPortRange`: every port of the range is published, each on a host port Docker
    /// picks (bridge mode only). Absent from checkpoints written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port_range: Option<PortRange>,
}

/// An inclusive range of container ports, `first < last` (`"first-last"` in the definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortMapping {
    /// The container ports this mapping publishes: its range, or its one port.
    pub fn container_ports(&self) -> std::ops::RangeInclusive<u16> {
        match self.container_port_range {
            Some(range) => range.first..=range.last,
            None => self.container_port..=self.container_port,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountPoint {
    pub source_volume: String,
    pub container_path: String,
    pub read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeFrom {
    pub source_container: String,
    pub read_only: bool,
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

/// One container of a task definition, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDefinition {
    pub name: String,
    pub image: String,
    pub essential: bool,
    pub command: Option<Vec<String>>,
    pub entry_point: Option<Vec<String>>,
    /// `(name, value)` in definition order.
    pub environment: Vec<(String, String)>,
    /// Explicit `dependsOn` edges only; see [`ContainerDefinition::dependencies`] for all edges.
    pub depends_on: Vec<Dependency>,
    /// `name[:alias]` as written.
    pub links: Vec<String>,
    pub volumes_from: Vec<VolumeFrom>,
    pub mount_points: Vec<MountPoint>,
    pub port_mappings: Vec<PortMapping>,
    pub health_check: Option<HealthCheck>,
    pub stop_timeout_secs: Option<u64>,
    pub start_timeout_secs: Option<u64>,
    /// Hard limit, MiB.
    pub memory_mib: Option<u64>,
    /// Soft limit, MiB.
    pub memory_reservation_mib: Option<u64>,
    /// CPU units (1024 = one core), passed as CPU shares.
    pub cpu: Option<u64>,
    pub privileged: bool,
    pub user: Option<String>,
    pub working_directory: Option<String>,
    pub docker_labels: BTreeMap<String, String>,
    pub log_configuration: Option<LogConfiguration>,
    pub restart_policy: Option<RestartPolicy>,
    // The fields below are absent from checkpoints written before deckhand supported them; each
    // defaults to "not asked for" and is left out of a checkpoint when so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ulimits: Vec<Ulimit>,
    #[serde(default, skip_serializing_if = "LinuxParameters::is_empty")]
    pub linux_parameters: LinuxParameters,
    #[serde(default, skip_serializing_if = "is_false")]
    pub readonly_root_filesystem: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_hosts: Vec<ExtraHost>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_servers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_search_domains: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_controls: Vec<SystemControl>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub docker_security_options: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub disable_networking: bool,
    /// Docker's `OpenStdin`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub interactive: bool,
    /// Docker's `Tty`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pseudo_terminal: bool,
    /// `secrets[]`: environment variables whose values come from the secret store at create.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretReference>,
    /// `repositoryCredentials.credentialsParameter`: the secret-store reference of the
    /// `{"username","password"}` this container's pull sends to its registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_credentials: Option<String>,
    /// ECS's `dockerConfig` (a task from the ECS control plane): raw Docker JSON laid over the
    /// create request deckhand builds, as the ECS agent does. `None` for every other source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_config: Option<DockerConfigOverlay>,
    /// `firelensConfiguration`: this container is the task's FireLens log router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firelens_configuration: Option<FirelensConfiguration>,
    /// Docker's `StopSignal` (normalised by [`parse_stop_signal`]): the signal Docker's stop
    /// sends first. ECS task definitions have no field for it; a Compose `stop_signal` sets it
    /// (tasks.d, `deckhand submit`). `None`: the image's `STOPSIGNAL`, else SIGTERM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
    /// `environmentFiles[].value`: the S3 object ARNs whose variables are read at create (from
    /// the local mirror, else S3) and merged under `environment`, first file first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_files: Vec<String>,
    /// `resourceRequirements[]` of type `GPU`: how many of the host's GPUs the container is
    /// given (by id, when its task is admitted to the host's resources). 0: none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gpus: u32,
}

/// ECS's `dockerConfig` of a container: Docker's own create `Config` and `HostConfig` fields,
/// each a JSON object (checked when the task is read), merged over what deckhand builds from
/// the definition: objects merge key by key, anything else replaces (Go's `json.Unmarshal`
/// into a filled struct, which is what the ECS agent does). The ECS control plane puts task
/// definition parameters here that have no field of their own in its task shape (ulimits, log
/// configuration, memory reservation, …).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DockerConfigOverlay {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_config: Option<serde_json::Value>,
}

impl ContainerDefinition {
    /// An essential container running `image` with nothing else set: what a definition naming
    /// only `name` and `image` parses to. Code that builds definitions directly (tests, tools)
    /// starts here and sets the fields it cares about.
    pub fn new(name: impl Into<String>, image: impl Into<String>) -> ContainerDefinition {
        ContainerDefinition {
            name: name.into(),
            image: image.into(),
            essential: true,
            command: None,
            entry_point: None,
            environment: Vec::new(),
            depends_on: Vec::new(),
            links: Vec::new(),
            volumes_from: Vec::new(),
            mount_points: Vec::new(),
            port_mappings: Vec::new(),
            health_check: None,
            stop_timeout_secs: None,
            start_timeout_secs: None,
            memory_mib: None,
            memory_reservation_mib: None,
            cpu: None,
            privileged: false,
            user: None,
            working_directory: None,
            docker_labels: BTreeMap::new(),
            log_configuration: None,
            restart_policy: None,
            ulimits: Vec::new(),
            linux_parameters: LinuxParameters::default(),
            readonly_root_filesystem: false,
            hostname: None,
            extra_hosts: Vec::new(),
            dns_servers: Vec::new(),
            dns_search_domains: Vec::new(),
            system_controls: Vec::new(),
            docker_security_options: Vec::new(),
            disable_networking: false,
            interactive: false,
            pseudo_terminal: false,
            secrets: Vec::new(),
            repository_credentials: None,
            docker_config: None,
            firelens_configuration: None,
            stop_signal: None,
            environment_files: Vec::new(),
            gpus: 0,
        }
    }

    /// Every secret-store reference this container needs at pull and create, in definition
    /// order (repeats kept).
    pub fn secret_references(&self) -> Vec<&str> {
        let log_options = self
            .log_configuration
            .iter()
            .flat_map(|log| log.secret_options.iter());
        self.secrets
            .iter()
            .chain(log_options)
            .map(|secret| secret.value_from.as_str())
            .chain(self.repository_credentials.as_deref())
            .collect()
    }

    /// Every dependency edge of this container: explicit `dependsOn`, implicit START for each
    /// link, implicit CREATE for each `volumesFrom` source (§4).
    pub fn dependencies(&self) -> Vec<Dependency> {
        let mut all = self.depends_on.clone();
        for link in &self.links {
            let name = link.split(':').next().unwrap_or(link).to_string();
            all.push(Dependency {
                container_name: name,
                condition: DependencyCondition::Start,
            });
        }
        for source in &self.volumes_from {
            all.push(Dependency {
                container_name: source.source_container.clone(),
                condition: DependencyCondition::Create,
            });
        }
        all
    }
}

/// A validated task definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDefinition {
    pub family: String,
    /// 0 when the definition carried no revision.
    pub revision: u32,
    pub network_mode: NetworkMode,
    /// Task-level CPU units and memory MiB, if given.
    pub cpu: Option<u64>,
    pub memory_mib: Option<u64>,
    pub volumes: Vec<Volume>,
    pub containers: Vec<ContainerDefinition>,
    /// `pidMode`; `None`: each container has its own process namespace.
    pub pid_mode: Option<PidMode>,
    /// `ipcMode`; `None`: Docker's default IPC namespace.
    pub ipc_mode: Option<IpcMode>,
    /// `taskRoleArn` and `executionRoleArn` (ARNs, not secret): a local task's roles, used
    /// where `DECKHAND_TASK_ROLES` is `assume` or `host`. ECS's tasks carry credentials instead.
    #[serde(default, skip_serializing_if = "TaskRoleArns::is_empty")]
    pub roles: TaskRoleArns,
}

/// A task definition's IAM roles, by ARN.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRoleArns {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_role: Option<String>,
}

impl TaskRoleArns {
    pub fn is_empty(&self) -> bool {
        self.task_role.is_none() && self.execution_role.is_none()
    }
}

/// Linux signal names Docker takes as a stop signal (without `SIG`).
const SIGNAL_NAMES: &[&str] = &[
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "IOT", "BUS", "FPE", "KILL", "USR1", "SEGV",
    "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CLD", "CONT", "STOP", "TSTP", "TTIN",
    "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "POLL", "PWR", "SYS", "RTMIN",
    "RTMAX",
];

/// A container's stop signal as Docker's `StopSignal` takes it: `SIGQUIT` for `SIGQUIT`,
/// `quit` or `QUIT`; a number 1–64 as written; `SIGRTMIN+3`-style real-time signals. Anything
/// else is refused with the reason, so a typo is not discovered at the first stop.
pub fn parse_stop_signal(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if let Ok(number) = trimmed.parse::<u32>() {
        return if (1..=64).contains(&number) {
            Ok(number.to_string())
        } else {
            Err(format!("{trimmed:?} is not a signal number (1-64)"))
        };
    }
    let upper = trimmed.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let (base, offset) = match name.split_once(['+', '-']) {
        Some((base, offset)) => (base, Some(offset)),
        None => (name, None),
    };
    let known = SIGNAL_NAMES.contains(&base)
        && match offset {
            None => true,
            Some(offset) => {
                matches!(base, "RTMIN" | "RTMAX")
                    && offset.parse::<u32>().is_ok_and(|n| (1..=30).contains(&n))
            }
        };
    if known {
        Ok(format!("SIG{name}"))
    } else {
        Err(format!(
            "{trimmed:?} is not a Linux signal (for example SIGQUIT, SIGINT, SIGUSR1 or 3)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint keeps a Compose stop signal and the environment files (restore and a
    /// restart create the container as asked), and one written without them still loads.
    #[test]
    fn stop_signals_and_environment_files_survive_a_checkpoint() {
        let mut definition = ContainerDefinition::new("web", "nginx");
        let plain = serde_json::to_value(&definition).expect("serialises");
        assert!(plain.get("stop_signal").is_none() && plain.get("environment_files").is_none());
        let loaded: ContainerDefinition = serde_json::from_value(plain).expect("loads");
        assert_eq!(loaded, definition);
        definition.stop_signal = Some("SIGQUIT".into());
        definition.environment_files = vec!["arn:aws:s3:::bucket-a/app.env".into()];
        let saved = serde_json::to_string(&definition).expect("serialises");
        let loaded: ContainerDefinition = serde_json::from_str(&saved).expect("loads");
        assert_eq!(loaded, definition);
    }

    #[test]
    fn stop_signals_are_normalised_as_docker_takes_them_or_refused() {
        let cases = [
            ("SIGQUIT", Ok("SIGQUIT")),
            ("quit", Ok("SIGQUIT")),
            (" SIGint ", Ok("SIGINT")),
            ("3", Ok("3")),
            ("SIGRTMIN+3", Ok("SIGRTMIN+3")),
            ("rtmax-2", Ok("SIGRTMAX-2")),
            ("0", Err("not a signal number")),
            ("65", Err("not a signal number")),
            ("SIGQUITE", Err("not a Linux signal")),
            ("SIGTERM+1", Err("not a Linux signal")),
            ("", Err("not a Linux signal")),
            ("SIGé", Err("not a Linux signal")),
        ];
        for (text, expected) in cases {
            match (parse_stop_signal(text), expected) {
                (Ok(signal), Ok(expected)) => assert_eq!(signal, expected, "{text:?}"),
                (Err(message), Err(expected)) => {
                    assert!(message.contains(expected), "{text:?}: {message}")
                }
                (got, expected) => panic!("{text:?}: {got:?}, expected {expected:?}"),
            }
        }
    }
}
