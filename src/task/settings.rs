//! A container definition's settings (part of the model, re-exported by `model.rs`): health
//! check, log configuration, FireLens router, secret references, restart policy, ulimits, Linux
//! parameters, extra hosts, system controls, and the task-level namespace modes.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Container health check, in seconds as in the task definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheck {
    /// `["CMD", ...]`, `["CMD-SHELL", "..."]` or `["NONE"]`, as Docker takes it.
    pub command: Vec<String>,
    pub interval_secs: u32,
    pub timeout_secs: u32,
    pub retries: u32,
    pub start_period_secs: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogConfiguration {
    pub log_driver: String,
    pub options: BTreeMap<String, String>,
    /// `secretOptions[]`: log options whose values come from the secret store at create. Absent
    /// from checkpoints written before deckhand supported them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_options: Vec<SecretReference>,
}

/// The FireLens log router a `firelensConfiguration` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FirelensType {
    Fluentbit,
    Fluentd,
}

impl FirelensType {
    /// ECS's name of the type, as the task definition writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            FirelensType::Fluentbit => "fluentbit",
            FirelensType::Fluentd => "fluentd",
        }
    }
}

/// `firelensConfiguration`: this container is the task's FireLens log router. The options are
/// kept as written (`enable-ecs-log-metadata`, `config-file-type`, `config-file-value`); the
/// parser checked them and `task::firelens::router_options` reads them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirelensConfiguration {
    #[serde(rename = "type")]
    pub router_type: FirelensType,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// A value a container gets from deckhand's local secret store when it is created: a
/// `secrets[]` entry (an environment variable) or a log configuration's `secretOptions[]` entry
/// (a log option). Only the reference is held — in the model, the checkpoint and every view —;
/// the value is read from the store at create and sent to Docker, nowhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretReference {
    /// The variable or option name.
    pub name: String,
    /// `valueFrom` as written: a Secrets Manager ARN (with or without a JSON key suffix), an SSM
    /// parameter ARN or name; the key of the value in the secret store.
    pub value_from: String,
}

/// Per-container restart policy (§12).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartPolicy {
    pub enabled: bool,
    pub ignored_exit_codes: Vec<i64>,
    /// Seconds; 60–1800, default 300.
    pub restart_attempt_period_secs: u64,
}

/// `ulimits[]`: one resource limit of the container; `-1` means unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ulimit {
    /// ECS's name, which is also Docker's (`nofile`, `memlock`, …).
    pub name: String,
    pub soft_limit: i64,
    pub hard_limit: i64,
}

/// `linuxParameters.capabilities`: names as ECS writes them (`NET_ADMIN`, `ALL`), without the
/// `CAP_` prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelCapabilities {
    pub add: Vec<String>,
    pub drop: Vec<String>,
}

/// One of `linuxParameters.devices[].permissions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DevicePermission {
    Read,
    Write,
    Mknod,
}

/// `linuxParameters.devices[]`: a host device exposed to the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub host_path: String,
    /// `None`: the same path as on the host.
    pub container_path: Option<String>,
    /// Empty: read, write and mknod (Docker's default).
    pub permissions: Vec<DevicePermission>,
}

/// `linuxParameters.tmpfs[]`: a tmpfs mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tmpfs {
    pub container_path: String,
    /// Greater than 0.
    pub size_mib: u64,
    /// As written (`noexec`, `mode=1777`, …).
    pub mount_options: Vec<String>,
}

/// `linuxParameters`: the Linux-only settings of a container. The default asks for nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxParameters {
    /// Docker's `--init`: an init process as PID 1 that forwards signals and reaps children.
    pub init_process_enabled: bool,
    pub capabilities: KernelCapabilities,
    pub devices: Vec<Device>,
    pub tmpfs: Vec<Tmpfs>,
    /// Size of `/dev/shm`, MiB.
    pub shared_memory_size_mib: Option<u64>,
    /// Swap the container may use on top of its `memory`, MiB (0: none).
    pub max_swap_mib: Option<u64>,
    /// 0–100; applied only together with `max_swap_mib`, as ECS does.
    pub swappiness: Option<u64>,
}

impl LinuxParameters {
    pub fn is_empty(&self) -> bool {
        *self == LinuxParameters::default()
    }
}

/// `extraHosts[]`: a line added to the container's `/etc/hosts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraHost {
    pub hostname: String,
    pub ip_address: String,
}

/// `systemControls[]`: one namespaced kernel parameter (Docker's `--sysctl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemControl {
    pub namespace: String,
    pub value: String,
}

/// Task-level `pidMode`. `task` (one namespace for the task's containers) is held by the
/// sandbox, so it needs networkMode awsvpc (docs/ENGINE.md §4, §16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PidMode {
    /// The host's process namespace.
    Host,
    /// The sandbox's process namespace, joined by every container of the task.
    Task,
}

impl PidMode {
    /// The mode's name in a task definition.
    pub fn as_str(self) -> &'static str {
        match self {
            PidMode::Host => "host",
            PidMode::Task => "task",
        }
    }
}

/// Task-level `ipcMode`; `task` as for [`PidMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpcMode {
    /// The host's IPC namespace.
    Host,
    /// A private IPC namespace with no `/dev/shm` mounted.
    None,
    /// The sandbox's IPC namespace, joined by every container of the task.
    Task,
}

impl IpcMode {
    /// Docker's `HostConfig.IpcMode`.
    pub fn as_str(self) -> &'static str {
        match self {
            IpcMode::Host => "host",
            IpcMode::None => "none",
            IpcMode::Task => "task",
        }
    }
}
