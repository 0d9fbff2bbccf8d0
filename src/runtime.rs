//! `ContainerRuntime`: the one interface between the engine and Docker (ARCHITECTURE principle 3).
//!
//! The real implementation is the blocking Docker Engine client in `crate::docker`; tests use a
//! scripted fake (`tests/support/fake_runtime.rs`) that records calls and can delay, fail, time
//! out and reorder. The types here speak of containers and images only, never of tasks.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Errors the engine branches on. Docker's own message is always kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeError {
    /// The call did not finish within its deadline.
    Timeout {
        operation: String,
        after: Duration,
    },
    NoSuchContainer {
        message: String,
    },
    NoSuchImage {
        message: String,
    },
    /// 409 from Docker (name in use, container running, …).
    Conflict {
        message: String,
    },
    CannotPull {
        message: String,
    },
    /// The registry login of an image in Amazon ECR could not be had (`GetAuthorizationToken`
    /// refused or unreachable, no credentials): ECS's `CannotPullECRContainerError`. Made by
    /// the engine's workers before the pull; the message never holds a token.
    CannotPullEcr {
        message: String,
    },
    /// Any other non-success answer.
    Api {
        status: u16,
        message: String,
    },
    /// The socket is missing, refuses connections or is not ours to use.
    Unreachable {
        message: String,
    },
    /// Docker answered something that is not valid HTTP or JSON.
    Protocol {
        message: String,
    },
    /// The call panicked inside deckhand (a bug, usually on an answer it did not expect): no
    /// answer was had, so, like a timeout, its outcome is unknown. Made by the engine's
    /// workers, never by a runtime.
    Panicked {
        operation: String,
        message: String,
    },
    /// A volume a container mounts cannot be used as its task asks: Docker refused to inspect
    /// or create it, or a shared volume is missing (no autoprovision) or not the one the task
    /// describes. Made by the engine's workers before a create; the message names the volume
    /// and says why, in ECS's terms.
    Volume {
        failure: VolumeFailure,
        message: String,
    },
    /// A secret the call needs (an environment variable, a log option, the registry credentials
    /// of a pull) cannot be read from the local secret store. Made by the engine's workers
    /// before the Docker call; the message names the reference and why, never a value.
    ResourceInitialization {
        message: String,
    },
}

/// Which step of making a container's volume ready failed ([`RuntimeError::Volume`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeFailure {
    /// Docker refused to inspect the volume (ECS: `CannotInspectVolumeError`).
    Inspect,
    /// Docker refused to create the volume (ECS: `CannotCreateVolumeError`).
    Create,
    /// The volume is not one the task may use: a shared volume that is missing without
    /// autoprovision, or exists with another driver, options or labels.
    Unusable,
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Timeout { operation, after } => {
                write!(f, "{operation} timed out after {}s", after.as_secs_f64())
            }
            RuntimeError::NoSuchContainer { message } => write!(f, "no such container: {message}"),
            RuntimeError::NoSuchImage { message } => write!(f, "no such image: {message}"),
            RuntimeError::Conflict { message } => write!(f, "conflict: {message}"),
            RuntimeError::CannotPull { message } => write!(f, "cannot pull image: {message}"),
            RuntimeError::CannotPullEcr { message } => {
                write!(f, "CannotPullECRContainerError: {message}")
            }
            RuntimeError::Api { status, message } => {
                write!(f, "Docker API error {status}: {message}")
            }
            RuntimeError::Unreachable { message } => write!(f, "Docker unreachable: {message}"),
            RuntimeError::Protocol { message } => write!(f, "Docker protocol error: {message}"),
            RuntimeError::Panicked { operation, message } => {
                write!(f, "Docker {operation} call panicked: {message}")
            }
            RuntimeError::Volume { failure, message } => match failure {
                VolumeFailure::Inspect => write!(f, "CannotInspectVolumeError: {message}"),
                VolumeFailure::Create => write!(f, "CannotCreateVolumeError: {message}"),
                VolumeFailure::Unusable => f.write_str(message),
            },
            RuntimeError::ResourceInitialization { message } => {
                write!(f, "ResourceInitializationError: {message}")
            }
        }
    }
}

impl std::error::Error for RuntimeError {}

/// Credentials for a registry, sent as `X-Registry-Auth`. Its `Debug` output shows no password.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct RegistryAuth {
    pub username: String,
    pub password: String,
    pub server_address: String,
}

impl fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryAuth")
            .field("username", &self.username)
            .field("password", &format_args!("<redacted>"))
            .field("server_address", &self.server_address)
            .finish()
    }
}

/// Docker health check, durations as Docker takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    pub test: Vec<String>,
    pub interval: Duration,
    pub timeout: Duration,
    pub retries: u32,
    pub start_period: Duration,
}

pub use crate::ports::PortBinding;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogConfig {
    pub driver: String,
    pub options: BTreeMap<String, String>,
}

/// Everything `POST /containers/create` needs. Restart policy is always `no`: deckhand restarts.
/// Its `Debug` shows the environment's names and the log options' keys only: at create they hold
/// values from the secret store.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct CreateContainer {
    pub name: String,
    pub image: String,
    pub labels: BTreeMap<String, String>,
    /// `NAME=value`.
    pub env: Vec<String>,
    pub cmd: Option<Vec<String>>,
    pub entrypoint: Option<Vec<String>>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
    pub healthcheck: Option<HealthConfig>,
    /// `source:destination[:ro]` (host paths or named volumes).
    pub binds: Vec<String>,
    /// Container paths that get an anonymous volume.
    pub volumes: Vec<String>,
    /// `container[:ro]`.
    pub volumes_from: Vec<String>,
    /// `container_name:alias`.
    pub links: Vec<String>,
    pub port_bindings: Vec<PortBinding>,
    /// Bytes.
    pub memory: Option<i64>,
    /// Bytes.
    pub memory_reservation: Option<i64>,
    pub cpu_shares: Option<i64>,
    pub privileged: bool,
    pub log_config: Option<LogConfig>,
    /// `bridge`, `host`, `none`, or a network name.
    pub network_mode: Option<String>,
    /// Seconds Docker itself waits on `docker stop` (informational; deckhand passes `t`).
    pub stop_timeout: Option<u64>,
    /// `Config.StopSignal`: what Docker's stop sends first (deckhand's stop passes no signal,
    /// so Docker uses this one).
    pub stop_signal: Option<String>,
    /// `Config.Hostname`.
    pub hostname: Option<String>,
    /// `Config.NetworkDisabled`.
    pub network_disabled: bool,
    /// `Config.OpenStdin`.
    pub open_stdin: bool,
    /// `Config.Tty`.
    pub tty: bool,
    /// `HostConfig.ReadonlyRootfs`.
    pub readonly_rootfs: bool,
    /// `HostConfig.Init`: Docker's init process as PID 1.
    pub init: bool,
    /// `HostConfig.CapAdd` / `CapDrop`.
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    /// `HostConfig.Devices`.
    pub devices: Vec<DeviceMapping>,
    /// `HostConfig.Tmpfs`: container path → mount options (`noexec,size=64m`).
    pub tmpfs: BTreeMap<String, String>,
    /// `HostConfig.ShmSize`, bytes.
    pub shm_size: Option<i64>,
    /// `HostConfig.MemorySwap`, bytes: memory plus swap.
    pub memory_swap: Option<i64>,
    /// `HostConfig.MemorySwappiness`, 0–100.
    pub memory_swappiness: Option<i64>,
    /// `HostConfig.Ulimits`.
    pub ulimits: Vec<Ulimit>,
    /// `HostConfig.ExtraHosts`: `hostname:address`.
    pub extra_hosts: Vec<String>,
    /// `HostConfig.Dns` / `DnsSearch`.
    pub dns: Vec<String>,
    pub dns_search: Vec<String>,
    /// `HostConfig.Sysctls`.
    pub sysctls: BTreeMap<String, String>,
    /// `HostConfig.SecurityOpt`.
    pub security_opt: Vec<String>,
    /// `HostConfig.DeviceRequests`: these GPUs by id, from the NVIDIA driver (empty: none).
    pub gpu_ids: Vec<String>,
    /// `HostConfig.PidMode` / `IpcMode` (`host`, `none`, …).
    pub pid_mode: Option<String>,
    pub ipc_mode: Option<String>,
    /// ECS's `dockerConfig.config`: a JSON object of Docker create `Config` fields merged over
    /// the body built from the fields above (the ECS labels and the network mode are put back
    /// after it).
    pub config_overlay: Option<serde_json::Value>,
    /// ECS's `dockerConfig.hostConfig`: the same for `HostConfig`.
    pub host_config_overlay: Option<serde_json::Value>,
}

/// The top-level keys of an overlay, for `Debug`: its values may hold what `env` holds.
fn overlay_keys(overlay: &Option<serde_json::Value>) -> Option<Vec<&str>> {
    overlay.as_ref().map(|value| match value.as_object() {
        Some(map) => map.keys().map(String::as_str).collect(),
        None => Vec::new(),
    })
}

impl fmt::Debug for CreateContainer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let environment_names: Vec<String> = self
            .env
            .iter()
            .map(|entry| format!("{}=…", entry.split('=').next().unwrap_or_default()))
            .collect();
        let log_config = self.log_config.as_ref().map(|log| {
            let keys: Vec<&String> = log.options.keys().collect();
            (log.driver.as_str(), keys)
        });
        f.debug_struct("CreateContainer")
            .field("name", &self.name)
            .field("image", &self.image)
            .field("labels", &self.labels)
            .field("env", &environment_names)
            .field("cmd", &self.cmd)
            .field("entrypoint", &self.entrypoint)
            .field("working_dir", &self.working_dir)
            .field("user", &self.user)
            .field("healthcheck", &self.healthcheck)
            .field("binds", &self.binds)
            .field("volumes", &self.volumes)
            .field("volumes_from", &self.volumes_from)
            .field("links", &self.links)
            .field("port_bindings", &self.port_bindings)
            .field("memory", &self.memory)
            .field("memory_reservation", &self.memory_reservation)
            .field("cpu_shares", &self.cpu_shares)
            .field("privileged", &self.privileged)
            .field("log_config", &log_config)
            .field("network_mode", &self.network_mode)
            .field("stop_timeout", &self.stop_timeout)
            .field("stop_signal", &self.stop_signal)
            .field("hostname", &self.hostname)
            .field("network_disabled", &self.network_disabled)
            .field("open_stdin", &self.open_stdin)
            .field("tty", &self.tty)
            .field("readonly_rootfs", &self.readonly_rootfs)
            .field("init", &self.init)
            .field("cap_add", &self.cap_add)
            .field("cap_drop", &self.cap_drop)
            .field("devices", &self.devices)
            .field("tmpfs", &self.tmpfs)
            .field("shm_size", &self.shm_size)
            .field("memory_swap", &self.memory_swap)
            .field("memory_swappiness", &self.memory_swappiness)
            .field("ulimits", &self.ulimits)
            .field("extra_hosts", &self.extra_hosts)
            .field("dns", &self.dns)
            .field("dns_search", &self.dns_search)
            .field("sysctls", &self.sysctls)
            .field("security_opt", &self.security_opt)
            .field("gpu_ids", &self.gpu_ids)
            .field("pid_mode", &self.pid_mode)
            .field("ipc_mode", &self.ipc_mode)
            .field("config_overlay", &overlay_keys(&self.config_overlay))
            .field(
                "host_config_overlay",
                &overlay_keys(&self.host_config_overlay),
            )
            .finish()
    }
}

/// One host device exposed to a container (`HostConfig.Devices[]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceMapping {
    pub path_on_host: String,
    pub path_in_container: String,
    /// Some of `r`, `w`, `m`.
    pub cgroup_permissions: String,
}

/// One resource limit (`HostConfig.Ulimits[]`); `-1` is unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
}

/// Everything `POST /volumes/create` needs: a named volume of `driver` (`local` is Docker's
/// own) with the driver's options and the volume's labels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateVolume {
    pub name: String,
    pub driver: String,
    pub driver_opts: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// The fields of `GET /volumes/{name}` that deckhand uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VolumeInfo {
    pub name: String,
    pub driver: String,
    /// The driver options the volume was created with (Docker's `Options`).
    pub options: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthState {
    /// `starting`, `healthy`, `unhealthy` (Docker's words).
    pub status: String,
    pub failing_streak: u32,
    /// Output and exit code of the most recent probe.
    pub last_output: Option<String>,
    pub last_exit_code: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerState {
    /// `created`, `running`, `paused`, `restarting`, `removing`, `exited`, `dead`.
    pub status: String,
    pub running: bool,
    pub dead: bool,
    pub oom_killed: bool,
    pub exit_code: i64,
    /// Docker's error string for a failed start, empty when none.
    pub error: String,
    /// RFC 3339 as Docker writes it; `0001-01-01T00:00:00Z` means never.
    pub started_at: String,
    pub finished_at: String,
    pub health: Option<HealthState>,
}

/// The fields of `GET /containers/{id}/json` that deckhand uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerInfo {
    pub id: String,
    /// Without the leading `/`.
    pub name: String,
    pub image: String,
    pub image_id: String,
    pub created: String,
    pub labels: BTreeMap<String, String>,
    pub state: ContainerState,
    pub ports: Vec<PortBinding>,
    /// `(network name, IPv4 address)`.
    pub networks: Vec<(String, String)>,
    /// `(source, destination)`.
    pub mounts: Vec<(String, String)>,
}

/// One row of `GET /containers/json`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerSummary {
    pub id: String,
    /// Without the leading `/`.
    pub name: String,
    pub image: String,
    pub state: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
}

/// One row of `GET /images/json`: an image as image cleanup sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageSummary {
    /// `sha256:…`.
    pub id: String,
    /// `repository:tag` names; empty for an untagged image.
    pub repo_tags: Vec<String>,
    /// `repository@sha256:…` names.
    pub repo_digests: Vec<String>,
    /// Bytes.
    pub size: i64,
    /// When the image was built, Unix seconds.
    pub created: i64,
}

/// A container event from Docker's event stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeEvent {
    /// Container id.
    pub id: String,
    /// Docker's action: `create`, `start`, `die`, `stop`, `kill`, `destroy`, `oom`,
    /// `health_status: healthy`, …
    pub action: String,
    pub attributes: BTreeMap<String, String>,
    /// Nanoseconds since the epoch.
    pub time_nano: i64,
}

impl RuntimeEvent {
    /// `exitCode` attribute of a `die` event.
    pub fn exit_code(&self) -> Option<i64> {
        self.attributes.get("exitCode").and_then(|v| v.parse().ok())
    }
}

/// What an event subscription asks for; every field is an AND of Docker filters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFilter {
    /// `key` or `key=value` label filters.
    pub labels: Vec<String>,
    /// Explicit actions (`start`, `die`, `health_status`, …); empty = all.
    pub actions: Vec<String>,
    /// Unix seconds; replay events since then.
    pub since: Option<i64>,
}

/// Shuts a blocking stream down from another thread.
#[derive(Clone)]
pub struct StreamCanceller(Arc<dyn Fn() + Send + Sync>);

impl StreamCanceller {
    pub fn new(cancel: impl Fn() + Send + Sync + 'static) -> StreamCanceller {
        StreamCanceller(Arc::new(cancel))
    }

    pub fn cancel(&self) {
        (self.0)()
    }
}

impl fmt::Debug for StreamCanceller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StreamCanceller")
    }
}

/// A blocking stream of events.
pub trait EventStream: Send {
    /// The next event; `Ok(None)` once the stream ended (Docker closed it, or it was cancelled).
    fn next_event(&mut self) -> Result<Option<RuntimeEvent>, RuntimeError>;
    /// A handle that makes a blocked `next_event` return.
    fn canceller(&self) -> StreamCanceller;
}

/// Per-call deadlines, with the ECS defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    pub pull_total: Duration,
    pub pull_no_progress: Duration,
    pub create: Duration,
    pub start: Duration,
    /// Added to the stop's own `t`.
    pub stop_extra: Duration,
    pub inspect: Duration,
    pub remove: Duration,
    pub list: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            pull_total: Duration::from_secs(2 * 3600),
            pull_no_progress: Duration::from_secs(60),
            create: Duration::from_secs(4 * 60),
            start: Duration::from_secs(3 * 60),
            stop_extra: Duration::from_secs(30),
            inspect: Duration::from_secs(30),
            remove: Duration::from_secs(5 * 60),
            list: Duration::from_secs(60),
        }
    }
}

/// What part of a container's log to read (Docker's `GET /containers/{id}/logs` parameters;
/// stdout and stderr are always both asked for).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep the stream open and send new output as it is written, until the container stops.
    pub follow: bool,
    /// Only the last this many lines (`None`: all of them).
    pub tail: Option<u64>,
    /// Only output written at or after this time, as Docker takes it: Unix seconds, with an
    /// optional fraction (`1700000000.5`).
    pub since: Option<String>,
    /// Docker puts the RFC 3339 time each line was written before it.
    pub timestamps: bool,
}

/// An open container log: the bytes as Docker sends them (its multiplexed framing, or raw
/// output for a TTY container), and a way to end a read blocked on them from another thread.
pub struct LogStream {
    pub reader: Box<dyn std::io::Read + Send>,
    /// Ends the stream: a read blocked on `reader` returns (end of stream or an error).
    pub close: Box<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for LogStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LogStream")
    }
}

/// The container runtime the engine drives. Every method blocks until Docker answered or the
/// call's deadline passed. Implementations are shared between threads.
pub trait ContainerRuntime: Send + Sync + 'static {
    /// Pull `image` (a tag is always sent; `latest` when the reference has none).
    fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<(), RuntimeError>;
    fn inspect_image(&self, image: &str) -> Result<ImageInfo, RuntimeError>;
    /// Returns the new container's id.
    fn create_container(&self, spec: &CreateContainer) -> Result<String, RuntimeError>;
    /// Already running counts as success.
    fn start_container(&self, id: &str) -> Result<(), RuntimeError>;
    /// SIGTERM, then SIGKILL after `grace`. Already stopped counts as success.
    fn stop_container(&self, id: &str, grace: Duration) -> Result<(), RuntimeError>;
    /// By id or name.
    fn inspect_container(&self, id_or_name: &str) -> Result<ContainerInfo, RuntimeError>;
    /// Force-remove, with the container's anonymous volumes when `volumes`.
    fn remove_container(&self, id: &str, volumes: bool) -> Result<(), RuntimeError>;
    /// All containers (running or not) carrying every label filter (`key` or `key=value`).
    fn list_containers(
        &self,
        label_filters: &[String],
    ) -> Result<Vec<ContainerSummary>, RuntimeError>;
    /// Container events matching `filter`, as a blocking stream.
    fn events(&self, filter: &EventFilter) -> Result<Box<dyn EventStream>, RuntimeError>;
    /// Cheap liveness check.
    fn ping(&self) -> Result<(), RuntimeError>;
    /// Removes a named volume (the engine's per-task volumes, at cleanup). A volume that does
    /// not exist counts as removed. The default says the runtime cannot, so cleanup logs it.
    fn remove_volume(&self, name: &str) -> Result<(), RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: format!("this runtime cannot remove volume {name}"),
        })
    }
    /// Creates a named volume. Docker answers success for a name that exists already with the
    /// same driver, and keeps that volume as it is. The default says the runtime cannot.
    fn create_volume(&self, spec: &CreateVolume) -> Result<(), RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: format!("this runtime cannot create volume {}", spec.name),
        })
    }
    /// The named volume, or `Ok(None)` when Docker has no volume of that name (its 404). The
    /// default says the runtime cannot.
    fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>, RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: format!("this runtime cannot inspect volume {name}"),
        })
    }
    /// One sample of a container's resource usage, as the runtime's own JSON (Docker's
    /// `GET /containers/{id}/stats?stream=false`), for the task metadata endpoint's stats. The
    /// default says the runtime cannot.
    fn container_stats(&self, id: &str) -> Result<serde_json::Value, RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: format!("this runtime cannot read the stats of container {id}"),
        })
    }
    /// A container's log (stdout and stderr) as a stream, by id or name. The default says the
    /// runtime cannot.
    fn container_logs(&self, id: &str, _options: &LogOptions) -> Result<LogStream, RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: format!("this runtime cannot read the logs of container {id}"),
        })
    }
    /// The gateway address of the default bridge network (Docker's `GET /networks/bridge`,
    /// `IPAM.Config[].Gateway`, the first IPv4 one): where a bridge-mode container reaches the
    /// host. `Ok(None)` when the runtime has no such network or address.
    fn bridge_gateway(&self) -> Result<Option<std::net::Ipv4Addr>, RuntimeError> {
        Ok(None)
    }
    /// The Linux bridge device of the default bridge network (Docker's `GET /networks/bridge`,
    /// `Options["com.docker.network.bridge.name"]`, `docker0` unless the daemon was told
    /// otherwise): the interface bridge-mode containers' packets arrive on. `Ok(None)` when the
    /// runtime has no such network or does not name it.
    fn bridge_interface(&self) -> Result<Option<String>, RuntimeError> {
        Ok(None)
    }
    /// Every image (Docker's `GET /images/json`), for image cleanup. The default says the
    /// runtime cannot, so image cleanup skips its cycle.
    fn list_images(&self) -> Result<Vec<ImageSummary>, RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: "this runtime cannot list images".to_string(),
        })
    }
    /// Removes one image name (`DELETE /images/{name}`, never forced): a tag is untagged, and
    /// the image with its unused parent layers goes once no name holds it. An image a container
    /// uses, or one named by id that holds several names, is a `Conflict`; one that is not
    /// there, `NoSuchImage`. The default says the runtime cannot.
    fn remove_image(&self, name: &str) -> Result<(), RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: format!("this runtime cannot remove image {name}"),
        })
    }
    /// Makes image `repository:tag` from a root-filesystem tarball (Docker's import) and returns
    /// its id: how deckhand makes the sandbox image of `awsvpc` tasks without a registry. The
    /// default says the runtime cannot.
    fn import_image(
        &self,
        _tarball: &[u8],
        repository: &str,
        tag: &str,
    ) -> Result<String, RuntimeError> {
        Err(RuntimeError::Api {
            status: 501,
            message: format!("this runtime cannot import image {repository}:{tag}"),
        })
    }
    /// Docker's root directory (`DockerRootDir` of `GET /info`), whose file system image
    /// cleanup watches. `Ok(None)` when the runtime has none.
    fn docker_root_dir(&self) -> Result<Option<String>, RuntimeError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_request_debug_shows_no_environment_value_or_log_option_value() {
        let spec = CreateContainer {
            name: "deckhand-web-1-app-0001".into(),
            env: vec!["DB_PASSWORD=s3cr3t=with=equals".into(), "MODE".into()],
            log_config: Some(LogConfig {
                driver: "fluentd".into(),
                options: BTreeMap::from([("fluentd-address".into(), "token-9f2".into())]),
            }),
            ..CreateContainer::default()
        };
        let shown = format!("{spec:?}");
        assert!(shown.contains("DB_PASSWORD=…"), "{shown}");
        assert!(shown.contains("MODE=…"), "{shown}");
        assert!(shown.contains("fluentd-address"), "{shown}");
        assert!(shown.contains("deckhand-web-1-app-0001"), "{shown}");
        for value in ["s3cr3t", "with=equals", "token-9f2"] {
            assert!(!shown.contains(value), "{value} in {shown}");
        }
    }
}
