//! The agent's configuration: defaults, the `KEY=VALUE` config file, environment overrides and
//! validation, all as pure functions of (file text, environment lookup, who runs the agent).
//!
//! Keys use the ECS container agent's variable names so an existing `ecs.config` reads the same
//! here. The file is `/etc/deckhand/deckhand.conf` (or `--config PATH`); every variable in the
//! environment overrides the file. Bad configuration is an error that names the key (and the
//! file and line), because an agent that guesses runs the wrong thing for hours; the binary maps
//! it to [`EXIT_CONFIG`] (78), which the systemd unit lists in `RestartPreventExitStatus=` so a
//! typo does not become a restart loop.
//!
//! Rules that are not obvious:
//! - An empty value (`ECS_CLUSTER=`) means "not set" and the default applies, as in ECS, except
//!   `DECKHAND_INTROSPECTION_ADDR=` which turns the introspection endpoint off.
//! - A duration of zero means "not set" (ECS reads zero as unset) and the default applies, with a
//!   warning.
//! - Below-minimum durations follow ECS: `ECS_CONTAINER_STOP_TIMEOUT`, `ECS_CONTAINER_START_TIMEOUT`
//!   and `ECS_CONTAINER_CREATE_TIMEOUT` are raised to their minimum; an
//!   `ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION` under one second is replaced by the default. Each
//!   adjustment is a line in [`Config::warnings`] for the agent to log once at start.
//! - The file is only for deckhand's keys: an unknown `ECS_*`/`DECKHAND_*` key or any other key is
//!   an error. Unknown variables in the environment are ignored (it holds many other things).
//! - Run by a non-root user, the default paths move to per-user XDG places so `deckhand run` works
//!   for a developer without root.
//! - `ECS_ENGINE_AUTH_TYPE` and `ECS_ENGINE_AUTH_DATA` (registry credentials, parsed by
//!   `crate::registry`) go together. The data is a secret: no error, warning or `Debug` output
//!   quotes it, nor a line of the file that looks like a JSON value spread over several lines.
//!
//! One concern per file: `keys.rs` is the key table (and the packaged config file it renders),
//! `scope.rs` who runs the agent and the default paths of each scope, `parse.rs` the `KEY=VALUE`
//! file, environment overrides and the value parsers; this file assembles [`Config`] from them.
//! It imports nothing of the rest of deckhand: the agent maps [`ImagePullBehavior`] onto the
//! engine's own type.

mod aws;
mod keys;
mod parse;
mod scope;

pub use aws::{AwsLogsConfig, EcsConfig, EnvironmentFilesConfig, TaskRoles};
pub use keys::{render_packaged_config_file, ConfigKeyDoc, CONFIG_KEYS};
pub use parse::{format_duration, parse_duration, MAXIMUM_DOCKER_CONCURRENCY};
pub use scope::{default_config_file, scope_from_proc_status, Scope, SYSTEM_CONFIG_FILE};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::LevelFilter;

use crate::registry::{parse_auth_data, AuthDataFormat, RegistryCredentials};
use keys::default_of;
use parse::{
    parse_absolute_path, parse_config_file, parse_docker_concurrency, parse_docker_host,
    parse_image_list, parse_images_per_cycle, parse_listen_port, parse_log_level, parse_memory_mib,
    parse_percent, parse_port_list, parse_socket_addr, MinimumRule, Sources,
};
use scope::{default_api_socket, default_data_dir, default_secrets_file, default_tasks_dir};

/// The exit code for bad configuration: `EX_CONFIG` from sysexits.h. The systemd unit names it in
/// `RestartPreventExitStatus=` so systemd does not restart an agent that cannot start.
pub const EXIT_CONFIG: u8 = 78;

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueOrigin {
    File { path: PathBuf, line: usize },
    Environment,
}

impl fmt::Display for ValueOrigin {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueOrigin::File { path, line } => write!(formatter, "{}:{}", path.display(), line),
            ValueOrigin::Environment => write!(formatter, "environment"),
        }
    }
}

/// Why the configuration cannot be used. Every variant names what is wrong and where.
#[derive(Debug)]
pub enum ConfigError {
    /// `--config PATH` was given and the file does not exist.
    MissingFile { path: PathBuf },
    /// The file exists but could not be read.
    UnreadableFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line that is not `KEY=VALUE`, a comment or blank.
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// A key in the file that deckhand does not read.
    UnknownKey {
        path: PathBuf,
        line: usize,
        key: String,
    },
    /// A value that does not parse or is out of range. The value of a secret key
    /// (`ECS_ENGINE_AUTH_DATA`) is held as `<redacted>` and left out of the message.
    BadValue {
        key: &'static str,
        value: String,
        origin: ValueOrigin,
        reason: String,
    },
    /// Run as a non-root user with neither the XDG variable nor `$HOME` set, so there is no
    /// per-user place for the default path of `key`.
    NoUserDirectory {
        key: &'static str,
        xdg_variable: &'static str,
    },
    /// A setting that another one needs is missing (`ECS_EXTERNAL=true` without a region).
    Required { message: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::MissingFile { path } => {
                write!(formatter, "config file {} does not exist", path.display())
            }
            ConfigError::UnreadableFile { path, source } => {
                write!(formatter, "cannot read config file {}: {source}", path.display())
            }
            ConfigError::Syntax {
                path,
                line,
                message,
            } => write!(formatter, "{}:{line}: {message}", path.display()),
            ConfigError::UnknownKey { path, line, key } => write!(
                formatter,
                "{}:{line}: unknown key {key} (a deckhand config file holds only the keys listed in the packaged deckhand.conf)",
                path.display()
            ),
            ConfigError::BadValue {
                key,
                origin,
                reason,
                ..
            } if keys::is_secret_key(key) => {
                write!(formatter, "{origin}: bad value for {key}: {reason}")
            }
            ConfigError::BadValue {
                key,
                value,
                origin,
                reason,
            } => write!(formatter, "{origin}: bad value {value:?} for {key}: {reason}"),
            ConfigError::NoUserDirectory { key, xdg_variable } => write!(
                formatter,
                "cannot choose a per-user default for {key}: neither {xdg_variable} nor HOME is set (set {key} explicitly)"
            ),
            ConfigError::Required { message } => formatter.write_str(message),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::UnreadableFile { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The agent's configuration, every value typed and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `DOCKER_HOST` as given, e.g. `unix:///var/run/docker.sock`.
    pub docker_host: String,
    /// The socket path inside `docker_host`.
    pub docker_socket_path: PathBuf,
    pub cluster: String,
    pub data_dir: PathBuf,
    pub api_socket: PathBuf,
    pub tasks_dir: PathBuf,
    /// `None` when `DECKHAND_INTROSPECTION_ADDR` is set empty.
    pub introspection_addr: Option<SocketAddr>,
    /// `DECKHAND_TASK_METADATA`: serve the task metadata endpoint and point containers at it.
    pub task_metadata: bool,
    /// `DECKHAND_TASK_METADATA_PORT`.
    pub task_metadata_port: u16,
    /// `DECKHAND_CREDENTIALS_ENDPOINT`: install the iptables redirect of `169.254.170.2:80` to
    /// the task metadata endpoint (README: credentials endpoint).
    pub credentials_endpoint: bool,
    /// `DECKHAND_TASK_ROLES`: where local tasks' role credentials come from.
    pub task_roles: TaskRoles,
    pub task_cleanup_wait: Duration,
    pub container_stop_timeout: Duration,
    pub container_start_timeout: Duration,
    pub container_create_timeout: Duration,
    pub image_pull_timeout: Duration,
    pub image_pull_behavior: ImagePullBehavior,
    pub pull_dependent_containers_upfront: bool,
    pub privileged_disabled: bool,
    /// `ECS_DISABLE_METRICS`: send no CPU and memory metrics to ECS's telemetry session
    /// (container health is still sent).
    pub disable_metrics: bool,
    /// `ECS_EXCLUDE_IPV6_PORTBINDING`: report a published port's IPv6 twin binding or not.
    pub exclude_ipv6_port_bindings: bool,
    pub reserved_ports: Vec<u16>,
    /// `ECS_RESERVED_PORTS_UDP`: UDP host ports no task may bind.
    pub reserved_ports_udp: Vec<u16>,
    /// `ECS_RESERVED_MEMORY`: MiB of the host's memory not offered to tasks.
    pub reserved_memory_mib: u64,
    /// `DECKHAND_GPU_IDS`: the host's GPU ids tasks are given; empty: found at start.
    pub gpu_ids: Vec<String>,
    pub log_level: LevelFilter,
    pub steady_state_check_interval: Duration,
    pub remove_orphans: bool,
    /// `DECKHAND_DOCKER_CONCURRENCY`: the size of the engine's Docker worker pool.
    pub docker_concurrency: usize,
    /// `ECS_ENGINE_AUTH_TYPE` + `ECS_ENGINE_AUTH_DATA`: credentials for private registries
    /// (empty when not set). Its `Debug` output shows no password.
    pub registry_credentials: RegistryCredentials,
    /// The image cleanup keys (`ECS_DISABLE_IMAGE_CLEANUP` and its companions).
    pub image_cleanup: ImageCleanupConfig,
    /// `DECKHAND_SECRETS_FILE`: the local secret store (read by the engine when a task needs it).
    pub secrets_file: PathBuf,
    /// `DECKHAND_ENVIRONMENT_FILES_DIR`: a directory mirroring S3 objects as `<bucket>/<key>`,
    /// synced by the operator while online; read first for both `environmentFiles` and FireLens
    /// `config-file-type: s3` files; `None`: not set.
    pub environment_files_dir: Option<PathBuf>,
    /// What says that awslogs containers can ship their logs (README: awslogs).
    pub aws_logs: AwsLogsConfig,
    /// The Amazon ECS connection (`ECS_EXTERNAL=true`); `None` runs local tasks only.
    pub ecs: Option<EcsConfig>,
    /// Where `environmentFiles` come from when the mirror has no copy (S3).
    pub environment_files: EnvironmentFilesConfig,
    /// `AWS_ENDPOINT_URL_<STS|SSM|SECRETS_MANAGER|ECR>` and `AWS_ENDPOINT_URL`, those set: the
    /// lookup `control::aws::AwsClient::new` takes (`|key| aws_endpoints.get(key).cloned()`).
    pub aws_endpoints: BTreeMap<String, String>,
    /// Whose defaults were used.
    pub scope: Scope,
    /// The config file that was read, if one existed.
    pub config_file: Option<PathBuf>,
    /// Values that were adjusted (clamped, defaulted, overridden twice); the agent logs each once.
    pub warnings: Vec<String>,
}

/// `ECS_IMAGE_PULL_BEHAVIOR`: when to pull a container's image (§13). The configuration's own
/// type, so that config imports nothing of the task model; the agent maps it onto the engine's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImagePullBehavior {
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

impl std::str::FromStr for ImagePullBehavior {
    type Err = String;
    fn from_str(value: &str) -> Result<ImagePullBehavior, String> {
        match value {
            "default" => Ok(ImagePullBehavior::Default),
            "always" => Ok(ImagePullBehavior::Always),
            "once" => Ok(ImagePullBehavior::Once),
            "prefer-cached" => Ok(ImagePullBehavior::PreferCached),
            other => Err(format!(
                "unknown image pull behavior {other:?} (expected default, always, once or prefer-cached)"
            )),
        }
    }
}

/// Image cleanup (docs/ENGINE.md §15), ECS's keys with ECS's defaults plus the disk marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageCleanupConfig {
    /// `ECS_DISABLE_IMAGE_CLEANUP`.
    pub disabled: bool,
    /// `ECS_IMAGE_CLEANUP_INTERVAL`.
    pub interval: Duration,
    /// `ECS_IMAGE_MINIMUM_CLEANUP_AGE`: from the first use by deckhand.
    pub minimum_age: Duration,
    /// `ECS_NUM_IMAGES_DELETE_PER_CYCLE`.
    pub images_per_cycle: u32,
    /// `ECS_ENABLE_UNTRACKED_IMAGE_CLEANUP`.
    pub untracked_cleanup: bool,
    /// `NON_ECS_IMAGE_MINIMUM_CLEANUP_AGE`: from the image's creation.
    pub untracked_minimum_age: Duration,
    /// `ECS_EXCLUDE_UNTRACKED_IMAGE`: never removed, tracked or not.
    pub excluded_images: Vec<String>,
    /// `DECKHAND_IMAGE_CLEANUP_DISK_HIGH`, percent.
    pub disk_high_percent: u8,
    /// `DECKHAND_IMAGE_CLEANUP_DISK_LOW`, percent, below the high mark.
    pub disk_low_percent: u8,
}

/// `ECS_IMAGE_CLEANUP_INTERVAL` below this is kept, with a warning (ECS replaces it).
pub const ECS_MINIMUM_IMAGE_CLEANUP_INTERVAL: Duration = Duration::from_secs(600);

fn read_image_cleanup(
    sources: &Sources<'_>,
    warnings: &mut Vec<String>,
) -> Result<ImageCleanupConfig, ConfigError> {
    let disabled = sources.boolean("ECS_DISABLE_IMAGE_CLEANUP")?;
    let interval = sources.duration(
        "ECS_IMAGE_CLEANUP_INTERVAL",
        MinimumRule::WarnBelow(ECS_MINIMUM_IMAGE_CLEANUP_INTERVAL),
        warnings,
    )?;
    let minimum_age =
        sources.duration("ECS_IMAGE_MINIMUM_CLEANUP_AGE", MinimumRule::None, warnings)?;
    let untracked_minimum_age = sources.duration(
        "NON_ECS_IMAGE_MINIMUM_CLEANUP_AGE",
        MinimumRule::None,
        warnings,
    )?;
    let images_per_cycle = match sources.value("ECS_NUM_IMAGES_DELETE_PER_CYCLE") {
        Some(raw) => {
            let count = raw.parse_with(parse_images_per_cycle)?;
            if count == 0 {
                warnings.push(
                    "ECS_NUM_IMAGES_DELETE_PER_CYCLE: 0 is below the ECS agent's minimum 1; \
                     using it anyway: images are removed only when the disk is past \
                     DECKHAND_IMAGE_CLEANUP_DISK_HIGH"
                        .to_string(),
                );
            }
            count
        }
        None => parse_images_per_cycle(default_of("ECS_NUM_IMAGES_DELETE_PER_CYCLE"))
            .expect("the built-in ECS_NUM_IMAGES_DELETE_PER_CYCLE parses"),
    };
    let untracked_cleanup = sources.boolean("ECS_ENABLE_UNTRACKED_IMAGE_CLEANUP")?;
    let excluded_images = match sources.value("ECS_EXCLUDE_UNTRACKED_IMAGE") {
        Some(raw) => raw.parse_with(parse_image_list)?,
        None => Vec::new(),
    };
    let disk_high_percent = match sources.value("DECKHAND_IMAGE_CLEANUP_DISK_HIGH") {
        Some(raw) => raw.parse_with(|text| parse_percent(text, 1..=100))?,
        None => parse_percent(default_of("DECKHAND_IMAGE_CLEANUP_DISK_HIGH"), 1..=100)
            .expect("the built-in DECKHAND_IMAGE_CLEANUP_DISK_HIGH parses"),
    };
    let disk_low_percent = match sources.value("DECKHAND_IMAGE_CLEANUP_DISK_LOW") {
        Some(raw) => {
            let low = raw.parse_with(|text| parse_percent(text, 0..=99))?;
            if low >= disk_high_percent {
                return Err(raw.refused(format!(
                    "must be below DECKHAND_IMAGE_CLEANUP_DISK_HIGH ({disk_high_percent})"
                )));
            }
            low
        }
        None => {
            let default = parse_percent(default_of("DECKHAND_IMAGE_CLEANUP_DISK_LOW"), 0..=99)
                .expect("the built-in DECKHAND_IMAGE_CLEANUP_DISK_LOW parses");
            // A high mark set at or below the default low one takes the low mark down with it.
            default.min(disk_high_percent.saturating_sub(1))
        }
    };
    Ok(ImageCleanupConfig {
        disabled,
        interval,
        minimum_age,
        images_per_cycle,
        untracked_cleanup,
        untracked_minimum_age,
        excluded_images,
        disk_high_percent,
        disk_low_percent,
    })
}

/// `ECS_ENGINE_AUTH_TYPE` and `ECS_ENGINE_AUTH_DATA` go together: one without the other is an
/// error (ECS logs a warning and pulls without credentials, which fails later and less clearly).
fn read_registry_credentials(sources: &Sources<'_>) -> Result<RegistryCredentials, ConfigError> {
    let auth_type = sources.value("ECS_ENGINE_AUTH_TYPE");
    let auth_data = sources.value("ECS_ENGINE_AUTH_DATA");
    match (auth_type, auth_data) {
        (None, None) => Ok(RegistryCredentials::default()),
        (Some(auth_type), Some(auth_data)) => {
            let format = auth_type.parse_with(|text| text.parse::<AuthDataFormat>())?;
            auth_data.parse_with(|text| parse_auth_data(format, text))
        }
        (Some(auth_type), None) => {
            auth_type.parse_with(|text| text.parse::<AuthDataFormat>())?;
            Err(auth_type.refused(
                "ECS_ENGINE_AUTH_DATA is not set: give the registry credentials there".into(),
            ))
        }
        (None, Some(auth_data)) => Err(auth_data.refused(
            "ECS_ENGINE_AUTH_TYPE is not set: say how the data is written (docker or dockercfg)"
                .into(),
        )),
    }
}

/// `ECS_CONTAINER_STOP_TIMEOUT` below this is raised to it.
pub const MINIMUM_CONTAINER_STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// `ECS_CONTAINER_START_TIMEOUT` below this is raised to it.
pub const MINIMUM_CONTAINER_START_TIMEOUT: Duration = Duration::from_secs(45);
/// `ECS_CONTAINER_CREATE_TIMEOUT` below this is raised to it.
pub const MINIMUM_CONTAINER_CREATE_TIMEOUT: Duration = Duration::from_secs(60);
/// `ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION` below this is replaced by the default.
pub const MINIMUM_TASK_CLEANUP_WAIT: Duration = Duration::from_secs(1);

impl Config {
    /// Loads the configuration for this process: its real environment and its effective uid.
    pub fn from_process_env(config_path: Option<&Path>) -> Result<Config, ConfigError> {
        let environment = |key: &str| std::env::var(key).ok();
        Config::load_for_scope(config_path, &environment, Scope::of_current_process())
    }

    /// Loads the configuration with `env` standing in for the environment, for the scope of the
    /// current process. `config_path` is `--config`; `None` reads the default file if it exists.
    pub fn load(
        config_path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        Config::load_for_scope(config_path, env, Scope::of_current_process())
    }

    /// Loads the configuration as `scope` would see it: reads the file (given, or the scope's
    /// default if present), then parses it with [`Config::from_sources`].
    pub fn load_for_scope(
        config_path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        scope: Scope,
    ) -> Result<Config, ConfigError> {
        let (path, required) = match config_path {
            Some(path) => (path.to_path_buf(), true),
            None => (default_config_file(scope, env)?, false),
        };
        let file_text = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                if required {
                    return Err(ConfigError::MissingFile { path });
                }
                None
            }
            Err(source) => return Err(ConfigError::UnreadableFile { path, source }),
        };
        let file = file_text.as_deref().map(|text| (path.as_path(), text));
        Config::from_sources(file, env, scope)
    }

    /// The pure core: builds the configuration from the file's path and text (if any), the
    /// environment and the scope. No I/O.
    pub fn from_sources(
        file: Option<(&Path, &str)>,
        env: &dyn Fn(&str) -> Option<String>,
        scope: Scope,
    ) -> Result<Config, ConfigError> {
        let mut warnings = Vec::new();
        let file_values = match file {
            Some((path, text)) => parse_config_file(path, text, &mut warnings)?,
            None => HashMap::new(),
        };
        let sources = Sources {
            file_values: &file_values,
            env,
        };

        let (docker_host, docker_socket_path) = match sources.value("DOCKER_HOST") {
            Some(raw) => {
                let socket_path = raw.parse_with(parse_docker_host)?;
                (raw.value, socket_path)
            }
            None => (
                default_of("DOCKER_HOST").to_string(),
                parse_docker_host(default_of("DOCKER_HOST"))
                    .expect("the built-in DOCKER_HOST parses"),
            ),
        };

        let cluster = sources
            .value("ECS_CLUSTER")
            .map(|raw| raw.value.clone())
            .unwrap_or_else(|| default_of("ECS_CLUSTER").to_string());

        let data_dir = match sources.value("ECS_DATADIR") {
            Some(raw) => raw.parse_with(parse_absolute_path)?,
            None => default_data_dir(scope, env)?,
        };
        let api_socket = match sources.value("DECKHAND_API_SOCKET") {
            Some(raw) => raw.parse_with(parse_absolute_path)?,
            None => default_api_socket(scope, env, &data_dir),
        };
        let tasks_dir = match sources.value("DECKHAND_TASKS_DIR") {
            Some(raw) => raw.parse_with(parse_absolute_path)?,
            None => default_tasks_dir(scope, env)?,
        };
        // Empty is meaningful here (off), so this key bypasses the "empty means unset" rule.
        let introspection_addr = match sources.value_keeping_empty("DECKHAND_INTROSPECTION_ADDR") {
            Some(raw) if raw.value.is_empty() => None,
            Some(raw) => Some(raw.parse_with(parse_socket_addr)?),
            None => Some(
                parse_socket_addr(default_of("DECKHAND_INTROSPECTION_ADDR"))
                    .expect("the built-in introspection address parses"),
            ),
        };

        let task_metadata = sources.boolean("DECKHAND_TASK_METADATA")?;
        let task_metadata_port = match sources.value("DECKHAND_TASK_METADATA_PORT") {
            Some(raw) => raw.parse_with(parse_listen_port)?,
            None => parse_listen_port(default_of("DECKHAND_TASK_METADATA_PORT"))
                .expect("the built-in task metadata port parses"),
        };
        let credentials_endpoint = sources.boolean("DECKHAND_CREDENTIALS_ENDPOINT")?;
        let task_roles = match sources.value("DECKHAND_TASK_ROLES") {
            Some(raw) => raw.parse_with(TaskRoles::parse)?,
            None => TaskRoles::Off,
        };

        let task_cleanup_wait = sources.duration(
            "ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION",
            MinimumRule::ReplaceWithDefault(MINIMUM_TASK_CLEANUP_WAIT),
            &mut warnings,
        )?;
        let container_stop_timeout = sources.duration(
            "ECS_CONTAINER_STOP_TIMEOUT",
            MinimumRule::RaiseTo(MINIMUM_CONTAINER_STOP_TIMEOUT),
            &mut warnings,
        )?;
        let container_start_timeout = sources.duration(
            "ECS_CONTAINER_START_TIMEOUT",
            MinimumRule::RaiseTo(MINIMUM_CONTAINER_START_TIMEOUT),
            &mut warnings,
        )?;
        let container_create_timeout = sources.duration(
            "ECS_CONTAINER_CREATE_TIMEOUT",
            MinimumRule::RaiseTo(MINIMUM_CONTAINER_CREATE_TIMEOUT),
            &mut warnings,
        )?;
        let image_pull_timeout =
            sources.duration("ECS_IMAGE_PULL_TIMEOUT", MinimumRule::None, &mut warnings)?;
        let steady_state_check_interval = sources.duration(
            "DECKHAND_STEADY_CHECK_INTERVAL",
            MinimumRule::None,
            &mut warnings,
        )?;

        let image_pull_behavior = match sources.value("ECS_IMAGE_PULL_BEHAVIOR") {
            Some(raw) => raw.parse_with(|text| text.parse::<ImagePullBehavior>())?,
            None => ImagePullBehavior::Default,
        };
        let pull_dependent_containers_upfront =
            sources.boolean("ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT")?;
        let privileged_disabled = sources.boolean("ECS_DISABLE_PRIVILEGED")?;
        let disable_metrics = sources.boolean("ECS_DISABLE_METRICS")?;
        let exclude_ipv6_port_bindings = sources.boolean("ECS_EXCLUDE_IPV6_PORTBINDING")?;
        let remove_orphans = sources.boolean("DECKHAND_REMOVE_ORPHANS")?;
        let docker_concurrency = match sources.value("DECKHAND_DOCKER_CONCURRENCY") {
            Some(raw) => raw.parse_with(parse_docker_concurrency)?,
            None => parse_docker_concurrency(default_of("DECKHAND_DOCKER_CONCURRENCY"))
                .expect("the built-in DECKHAND_DOCKER_CONCURRENCY parses"),
        };
        let reserved_ports = match sources.value("ECS_RESERVED_PORTS") {
            Some(raw) => raw.parse_with(parse_port_list)?,
            None => parse_port_list(default_of("ECS_RESERVED_PORTS"))
                .expect("the built-in reserved port list parses"),
        };
        let reserved_ports_udp = match sources.value("ECS_RESERVED_PORTS_UDP") {
            Some(raw) => raw.parse_with(parse_port_list)?,
            None => parse_port_list(default_of("ECS_RESERVED_PORTS_UDP"))
                .expect("the built-in reserved UDP port list parses"),
        };
        let reserved_memory_mib = match sources.value("ECS_RESERVED_MEMORY") {
            Some(raw) => raw.parse_with(parse_memory_mib)?,
            None => parse_memory_mib(default_of("ECS_RESERVED_MEMORY"))
                .expect("the built-in ECS_RESERVED_MEMORY parses"),
        };
        let gpu_ids = match sources.value("DECKHAND_GPU_IDS") {
            Some(raw) => raw.parse_with(crate::host::gpus::parse_id_list)?,
            None => Vec::new(),
        };
        let registry_credentials = read_registry_credentials(&sources)?;
        let secrets_file = match sources.value("DECKHAND_SECRETS_FILE") {
            Some(raw) => raw.parse_with(parse_absolute_path)?,
            None => default_secrets_file(scope, env)?,
        };
        let environment_files_dir = match sources.value("DECKHAND_ENVIRONMENT_FILES_DIR") {
            Some(raw) if raw.value.is_empty() => None,
            Some(raw) => Some(raw.parse_with(parse_absolute_path)?),
            None => None,
        };
        let aws_logs = aws::read_aws_logs(&sources, env)?;
        let ecs = aws::read_ecs(&sources, env)?;
        let environment_files = aws::read_environment_files(&sources, env)?;
        let aws_endpoints = aws::read_aws_endpoints(&sources);
        let image_cleanup = read_image_cleanup(&sources, &mut warnings)?;
        let log_level = match sources.value("ECS_LOGLEVEL") {
            Some(raw) => raw.parse_with(parse_log_level)?,
            None => LevelFilter::Info,
        };

        Ok(Config {
            docker_host,
            docker_socket_path,
            cluster,
            data_dir,
            api_socket,
            tasks_dir,
            introspection_addr,
            task_metadata,
            task_metadata_port,
            credentials_endpoint,
            task_roles,
            task_cleanup_wait,
            container_stop_timeout,
            container_start_timeout,
            container_create_timeout,
            image_pull_timeout,
            image_pull_behavior,
            pull_dependent_containers_upfront,
            privileged_disabled,
            disable_metrics,
            exclude_ipv6_port_bindings,
            reserved_ports,
            reserved_ports_udp,
            reserved_memory_mib,
            gpu_ids,
            log_level,
            steady_state_check_interval,
            remove_orphans,
            docker_concurrency,
            registry_credentials,
            image_cleanup,
            secrets_file,
            environment_files_dir,
            aws_logs,
            ecs,
            environment_files,
            aws_endpoints,
            scope,
            config_file: file.map(|(path, _)| path.to_path_buf()),
            warnings,
        })
    }

    /// Whether the AWS shared credentials file `text` has a section for `profile` with both
    /// access keys (the INI format of `~/.aws/credentials`). Pure; the agent reads the file.
    pub fn credentials_file_has_profile(text: &str, profile: &str) -> bool {
        let mut in_profile = false;
        let (mut key_id, mut secret) = (false, false);
        for line in text.lines() {
            let line = line.trim();
            if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                if in_profile && key_id && secret {
                    return true;
                }
                in_profile = section.trim() == profile;
                (key_id, secret) = (false, false);
            } else if in_profile {
                if let Some((key, value)) = line.split_once('=') {
                    let set = !value.trim().is_empty();
                    match key.trim() {
                        "aws_access_key_id" => key_id |= set,
                        "aws_secret_access_key" => secret |= set,
                        _ => {}
                    }
                }
            }
        }
        in_profile && key_id && secret
    }

    /// The documented keys (name, system default, meaning), for help output and the packaged
    /// config file.
    pub fn describe() -> &'static [ConfigKeyDoc] {
        CONFIG_KEYS
    }
}

#[cfg(test)]
mod tests;
