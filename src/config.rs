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

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::LevelFilter;

use crate::task::PullBehavior;

/// The exit code for bad configuration: `EX_CONFIG` from sysexits.h. The systemd unit names it in
/// `RestartPreventExitStatus=` so systemd does not restart an agent that cannot start.
pub const EXIT_CONFIG: u8 = 78;

/// The config file read when the agent runs as root and no `--config` is given.
pub const SYSTEM_CONFIG_FILE: &str = "/etc/deckhand/deckhand.conf";

/// One configuration key as documented: the packaged `deckhand.conf` lists each of these,
/// commented out, with its default and meaning (a unit test checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigKeyDoc {
    pub key: &'static str,
    /// The default when the agent runs as root (the packaged service).
    pub system_default: &'static str,
    /// One line for the config file and `--help` texts.
    pub meaning: &'static str,
}

/// Every key deckhand reads, in the order the packaged config file lists them.
pub const CONFIG_KEYS: &[ConfigKeyDoc] = &[
    ConfigKeyDoc {
        key: "DOCKER_HOST",
        system_default: "unix:///var/run/docker.sock",
        meaning: "Docker Engine endpoint; only unix:// sockets are supported",
    },
    ConfigKeyDoc {
        key: "ECS_CLUSTER",
        system_default: "default",
        meaning: "cluster name written into every container's com.amazonaws.ecs.cluster label",
    },
    ConfigKeyDoc {
        key: "ECS_DATADIR",
        system_default: "/var/lib/deckhand",
        meaning: "directory for task checkpoints and the event log (absolute path)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_API_SOCKET",
        system_default: "/run/deckhand/api.sock",
        meaning: "Unix socket of the local API used by the deckhand CLI (group deckhand may use it)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_TASKS_DIR",
        system_default: "/etc/deckhand/tasks.d",
        meaning: "directory of task-definition *.json files that should be running",
    },
    ConfigKeyDoc {
        key: "DECKHAND_INTROSPECTION_ADDR",
        system_default: "127.0.0.1:51678",
        meaning: "address of the read-only ECS introspection endpoint; empty turns it off",
    },
    ConfigKeyDoc {
        key: "ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION",
        system_default: "3h",
        meaning: "how long a stopped task's containers are kept before removal; under 1s means the default",
    },
    ConfigKeyDoc {
        key: "ECS_CONTAINER_STOP_TIMEOUT",
        system_default: "30s",
        meaning: "grace between SIGTERM and SIGKILL when stopping a container (minimum 1s)",
    },
    ConfigKeyDoc {
        key: "ECS_CONTAINER_START_TIMEOUT",
        system_default: "3m",
        meaning: "how long a Docker start call may take (minimum 45s)",
    },
    ConfigKeyDoc {
        key: "ECS_CONTAINER_CREATE_TIMEOUT",
        system_default: "4m",
        meaning: "how long a Docker create call may take (minimum 1m)",
    },
    ConfigKeyDoc {
        key: "ECS_IMAGE_PULL_TIMEOUT",
        system_default: "2h",
        meaning: "how long one image pull may take",
    },
    ConfigKeyDoc {
        key: "ECS_IMAGE_PULL_BEHAVIOR",
        system_default: "default",
        meaning: "when to pull images: default, always, once or prefer-cached",
    },
    ConfigKeyDoc {
        key: "ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT",
        system_default: "false",
        meaning: "pull a container's image before its dependencies are satisfied (true/false)",
    },
    ConfigKeyDoc {
        key: "ECS_DISABLE_PRIVILEGED",
        system_default: "false",
        meaning: "reject tasks with privileged containers (true/false)",
    },
    ConfigKeyDoc {
        key: "ECS_RESERVED_PORTS",
        system_default: "[22, 2375, 2376, 51678, 51679]",
        meaning: "host ports no task may bind, as a JSON list",
    },
    ConfigKeyDoc {
        key: "ECS_LOGLEVEL",
        system_default: "info",
        meaning: "log level: debug, info, warn, error or crit",
    },
    ConfigKeyDoc {
        key: "DECKHAND_STEADY_CHECK_INTERVAL",
        system_default: "5m",
        meaning: "how often a running task re-checks its containers with Docker",
    },
    ConfigKeyDoc {
        key: "DECKHAND_REMOVE_ORPHANS",
        system_default: "false",
        meaning: "remove labelled containers that belong to no known task at start (true/false)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_DOCKER_CONCURRENCY",
        system_default: "8",
        meaning: "Docker calls made at once, 1 to 64; stops go first and pulls never take the last worker",
    },
];

/// Who runs the agent, which decides where the default paths are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Effective uid 0: system paths under /etc, /var/lib and /run.
    System,
    /// Any other user: per-user XDG paths.
    User,
}

impl Scope {
    /// The scope of this process, from the effective uid on the `Uid:` line of
    /// `/proc/self/status` (real, effective, saved, fs). Reading it needs no extra crate and, unlike
    /// `$USER`, cannot be faked by the environment. If it cannot be read (no /proc), the system
    /// scope is assumed: a non-root user then gets a clear permission error on the system paths.
    pub fn of_current_process() -> Scope {
        match std::fs::read_to_string("/proc/self/status") {
            Ok(status) => scope_from_proc_status(&status).unwrap_or(Scope::System),
            Err(_) => Scope::System,
        }
    }
}

/// Reads the effective uid from the text of `/proc/<pid>/status`; `None` if the line is missing
/// or malformed.
pub fn scope_from_proc_status(status: &str) -> Option<Scope> {
    let uid_line = status.lines().find(|line| line.starts_with("Uid:"))?;
    let effective_uid: u32 = uid_line
        .trim_start_matches("Uid:")
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(if effective_uid == 0 {
        Scope::System
    } else {
        Scope::User
    })
}

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
    /// A value that does not parse or is out of range.
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
                value,
                origin,
                reason,
            } => write!(formatter, "{origin}: bad value {value:?} for {key}: {reason}"),
            ConfigError::NoUserDirectory { key, xdg_variable } => write!(
                formatter,
                "cannot choose a per-user default for {key}: neither {xdg_variable} nor HOME is set (set {key} explicitly)"
            ),
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
    pub task_cleanup_wait: Duration,
    pub container_stop_timeout: Duration,
    pub container_start_timeout: Duration,
    pub container_create_timeout: Duration,
    pub image_pull_timeout: Duration,
    pub image_pull_behavior: PullBehavior,
    pub pull_dependent_containers_upfront: bool,
    pub privileged_disabled: bool,
    pub reserved_ports: Vec<u16>,
    pub log_level: LevelFilter,
    pub steady_state_check_interval: Duration,
    pub remove_orphans: bool,
    /// `DECKHAND_DOCKER_CONCURRENCY`: the size of the engine's Docker worker pool.
    pub docker_concurrency: usize,
    /// Whose defaults were used.
    pub scope: Scope,
    /// The config file that was read, if one existed.
    pub config_file: Option<PathBuf>,
    /// Values that were adjusted (clamped, defaulted, overridden twice); the agent logs each once.
    pub warnings: Vec<String>,
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
            None => match scope {
                Scope::System => PathBuf::from(default_of("ECS_DATADIR")),
                Scope::User => {
                    user_directory(env, "ECS_DATADIR", "XDG_STATE_HOME", ".local/state")?
                        .join("deckhand")
                }
            },
        };
        let api_socket = match sources.value("DECKHAND_API_SOCKET") {
            Some(raw) => raw.parse_with(parse_absolute_path)?,
            None => match scope {
                Scope::System => PathBuf::from(default_of("DECKHAND_API_SOCKET")),
                // Without a runtime directory the socket lives beside the state, which the user
                // owns; a socket in /tmp could be squatted by another user.
                Scope::User => match absolute_env_path(env, "XDG_RUNTIME_DIR") {
                    Some(runtime_dir) => runtime_dir.join("deckhand").join("api.sock"),
                    None => data_dir.join("api.sock"),
                },
            },
        };
        let tasks_dir = match sources.value("DECKHAND_TASKS_DIR") {
            Some(raw) => raw.parse_with(parse_absolute_path)?,
            None => match scope {
                Scope::System => PathBuf::from(default_of("DECKHAND_TASKS_DIR")),
                Scope::User => {
                    user_directory(env, "DECKHAND_TASKS_DIR", "XDG_CONFIG_HOME", ".config")?
                        .join("deckhand")
                        .join("tasks.d")
                }
            },
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
            Some(raw) => raw.parse_with(|text| text.parse::<PullBehavior>())?,
            None => PullBehavior::Default,
        };
        let pull_dependent_containers_upfront =
            sources.boolean("ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT")?;
        let privileged_disabled = sources.boolean("ECS_DISABLE_PRIVILEGED")?;
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
            task_cleanup_wait,
            container_stop_timeout,
            container_start_timeout,
            container_create_timeout,
            image_pull_timeout,
            image_pull_behavior,
            pull_dependent_containers_upfront,
            privileged_disabled,
            reserved_ports,
            log_level,
            steady_state_check_interval,
            remove_orphans,
            docker_concurrency,
            scope,
            config_file: file.map(|(path, _)| path.to_path_buf()),
            warnings,
        })
    }

    /// The documented keys (name, system default, meaning), for help output and the packaged
    /// config file.
    pub fn describe() -> &'static [ConfigKeyDoc] {
        CONFIG_KEYS
    }
}

/// The config file read when no `--config` is given: the system file for root, else
/// `$XDG_CONFIG_HOME/deckhand/deckhand.conf` (or `~/.config/deckhand/deckhand.conf`).
pub fn default_config_file(
    scope: Scope,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, ConfigError> {
    match scope {
        Scope::System => Ok(PathBuf::from(SYSTEM_CONFIG_FILE)),
        Scope::User => Ok(
            user_directory(env, "--config", "XDG_CONFIG_HOME", ".config")?
                .join("deckhand")
                .join("deckhand.conf"),
        ),
    }
}

/// Renders the packaged `deckhand.conf`: a header and, per key, its meaning and the key commented
/// out with its system default. `packaging/deckhand.conf` is this text (a unit test checks it).
pub fn render_packaged_config_file() -> String {
    let mut text = String::from(
        "# deckhand configuration: KEY=VALUE lines, '#' starts a comment.\n\
         # Every key below is commented out and shows its default. Environment variables of the\n\
         # same name override this file. A bad value or an unknown key stops the agent with exit\n\
         # code 78 and a message naming the key and line (systemd does not restart it then).\n\
         # Durations are written like 90s, 5m, 1h30m or 500ms.\n",
    );
    for doc in CONFIG_KEYS {
        text.push('\n');
        text.push_str(&format!("# {}\n", doc.meaning));
        text.push_str(&format!("#{}={}\n", doc.key, doc.system_default));
    }
    text
}

fn default_of(key: &str) -> &'static str {
    CONFIG_KEYS
        .iter()
        .find(|doc| doc.key == key)
        .map(|doc| doc.system_default)
        .expect("every key read is in CONFIG_KEYS")
}

/// A value found for a key, with where it came from.
#[derive(Debug, Clone)]
struct RawValue {
    key: &'static str,
    value: String,
    origin: ValueOrigin,
}

impl RawValue {
    fn parse_with<T>(
        &self,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        parse(&self.value).map_err(|reason| ConfigError::BadValue {
            key: self.key,
            value: self.value.clone(),
            origin: self.origin.clone(),
            reason,
        })
    }
}

/// File values by key (the last assignment wins) and the environment, environment first.
struct Sources<'a> {
    file_values: &'a HashMap<&'static str, RawValue>,
    env: &'a dyn Fn(&str) -> Option<String>,
}

/// What to do with a duration below a key's minimum.
#[derive(Debug, Clone, Copy)]
enum MinimumRule {
    None,
    RaiseTo(Duration),
    ReplaceWithDefault(Duration),
}

impl Sources<'_> {
    /// The effective raw value of `key`, treating an empty value as unset.
    fn value(&self, key: &'static str) -> Option<RawValue> {
        self.value_keeping_empty(key)
            .filter(|raw| !raw.value.is_empty())
    }

    /// The effective raw value of `key`; an empty environment variable still counts as unset
    /// (shells export empty variables casually), but an empty file value is returned.
    fn value_keeping_empty(&self, key: &'static str) -> Option<RawValue> {
        if let Some(value) = (self.env)(key) {
            let value = value.trim().to_string();
            if !value.is_empty() || key == "DECKHAND_INTROSPECTION_ADDR" {
                return Some(RawValue {
                    key,
                    value,
                    origin: ValueOrigin::Environment,
                });
            }
        }
        self.file_values.get(key).cloned()
    }

    fn duration(
        &self,
        key: &'static str,
        minimum: MinimumRule,
        warnings: &mut Vec<String>,
    ) -> Result<Duration, ConfigError> {
        let default = parse_duration(default_of(key)).expect("built-in durations parse");
        let Some(raw) = self.value(key) else {
            return Ok(default);
        };
        let parsed = raw.parse_with(parse_duration)?;
        if parsed.is_zero() {
            warnings.push(format!(
                "{key}: a zero duration means not set; using the default {}",
                default_of(key)
            ));
            return Ok(default);
        }
        Ok(match minimum {
            MinimumRule::RaiseTo(floor) if parsed < floor => {
                warnings.push(format!(
                    "{key}: {} is below the minimum {}; using {}",
                    raw.value,
                    format_duration(floor),
                    format_duration(floor)
                ));
                floor
            }
            MinimumRule::ReplaceWithDefault(floor) if parsed < floor => {
                warnings.push(format!(
                    "{key}: {} is below the minimum {}; using the default {}",
                    raw.value,
                    format_duration(floor),
                    default_of(key)
                ));
                default
            }
            _ => parsed,
        })
    }

    fn boolean(&self, key: &'static str) -> Result<bool, ConfigError> {
        match self.value(key) {
            Some(raw) => raw.parse_with(parse_bool),
            None => Ok(parse_bool(default_of(key)).expect("built-in booleans parse")),
        }
    }
}

/// Parses the config file into values by key. Comments, blank lines, `export KEY=VALUE` and
/// quoted values are accepted; anything else that is not `KEY=VALUE` with a known key is an
/// error naming the file and line.
fn parse_config_file(
    path: &Path,
    text: &str,
    warnings: &mut Vec<String>,
) -> Result<HashMap<&'static str, RawValue>, ConfigError> {
    let mut values: HashMap<&'static str, RawValue> = HashMap::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let assignment = line
            .strip_prefix("export")
            .filter(|rest| rest.starts_with(char::is_whitespace))
            .map(str::trim_start)
            .unwrap_or(line);
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(ConfigError::Syntax {
                path: path.to_path_buf(),
                line: line_number,
                message: format!("expected KEY=VALUE, found {line:?}"),
            });
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(ConfigError::Syntax {
                path: path.to_path_buf(),
                line: line_number,
                message: format!("expected KEY=VALUE, found {line:?}"),
            });
        }
        let Some(known_key) = CONFIG_KEYS.iter().map(|doc| doc.key).find(|k| *k == key) else {
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                line: line_number,
                key: key.to_string(),
            });
        };
        let value = unquote(value.trim()).map_err(|message| ConfigError::Syntax {
            path: path.to_path_buf(),
            line: line_number,
            message: format!("{key}: {message}"),
        })?;
        let origin = ValueOrigin::File {
            path: path.to_path_buf(),
            line: line_number,
        };
        if let Some(previous) = values.get(known_key) {
            warnings.push(format!(
                "{known_key} is set twice ({} and line {line_number}); the later one wins",
                previous.origin
            ));
        }
        values.insert(
            known_key,
            RawValue {
                key: known_key,
                value: value.to_string(),
                origin,
            },
        );
    }
    Ok(values)
}

/// Strips one pair of matching surrounding quotes (`"…"` or `'…'`). An opening quote without its
/// closing twin is an error rather than a value with a stray quote in it.
fn unquote(value: &str) -> Result<&str, String> {
    for quote in ['"', '\''] {
        if let Some(rest) = value.strip_prefix(quote) {
            return rest
                .strip_suffix(quote)
                .ok_or_else(|| format!("unterminated {quote} quote in {value:?}"));
        }
    }
    Ok(value)
}

/// Parses a duration written as one or more `<integer><unit>` parts, units `ms`, `s`, `m`, `h`:
/// `90s`, `5m`, `1h30m`, `500ms`. `0` alone is zero (as ECS writes it). A bare number is an
/// error: seconds or milliseconds would both be a guess.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    const EXPECTED: &str = "expected a duration like 90s, 5m, 1h30m or 500ms";
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(format!("empty duration; {EXPECTED}"));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return Err(format!("{text:?} is not a duration; {EXPECTED}"));
        }
        let number: u64 = rest[..digits_end]
            .parse()
            .map_err(|_| format!("{text:?}: number too large; {EXPECTED}"))?;
        rest = &rest[digits_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let part = match unit {
            "ms" => Some(Duration::from_millis(number)),
            "s" => Some(Duration::from_secs(number)),
            "m" => number.checked_mul(60).map(Duration::from_secs),
            "h" => number.checked_mul(3600).map(Duration::from_secs),
            "" => return Err(format!("{text:?} has no unit; {EXPECTED}")),
            other => return Err(format!("{text:?} has unknown unit {other:?}; {EXPECTED}")),
        };
        total = part
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("{text:?} is too long a duration"))?;
    }
    Ok(total)
}

/// Writes a duration in the shortest form [`parse_duration`] reads back (`1h30m`, `45s`, `500ms`).
pub fn format_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0".to_string();
    }
    let mut text = String::new();
    let mut seconds = duration.as_secs();
    let millis = duration.subsec_millis();
    for (unit_seconds, unit) in [(3600, "h"), (60, "m"), (1, "s")] {
        if seconds >= unit_seconds {
            text.push_str(&format!("{}{unit}", seconds / unit_seconds));
            seconds %= unit_seconds;
        }
    }
    if millis > 0 {
        text.push_str(&format!("{millis}ms"));
    }
    text
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".to_string()),
    }
}

/// `unix:///path` → `/path`. deckhand's Docker client speaks only over a Unix socket.
fn parse_docker_host(text: &str) -> Result<PathBuf, String> {
    let Some(path) = text.strip_prefix("unix://") else {
        return Err(
            "expected unix:///path/to/docker.sock (only Unix sockets are supported)".into(),
        );
    };
    parse_absolute_path(path)
}

fn parse_absolute_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err("expected an absolute path".to_string())
    }
}

fn parse_socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>()
        .map_err(|_| "expected IP:PORT such as 127.0.0.1:51678, or empty to turn it off".into())
}

/// A JSON list of ports, as ECS writes `ECS_RESERVED_PORTS`: `[22, 2375]`.
fn parse_port_list(text: &str) -> Result<Vec<u16>, String> {
    serde_json::from_str::<Vec<u16>>(text)
        .map_err(|error| format!("expected a JSON list of ports 0-65535 like [22, 2375]: {error}"))
}

/// `DECKHAND_DOCKER_CONCURRENCY` above this is refused: more concurrent calls only queue inside
/// Docker, and each is a thread.
pub const MAXIMUM_DOCKER_CONCURRENCY: usize = 64;

/// A whole number of concurrent Docker calls, 1 to [`MAXIMUM_DOCKER_CONCURRENCY`].
fn parse_docker_concurrency(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(count) if (1..=MAXIMUM_DOCKER_CONCURRENCY).contains(&count) => Ok(count),
        _ => Err(format!(
            "expected a whole number of concurrent Docker calls from 1 to {MAXIMUM_DOCKER_CONCURRENCY}"
        )),
    }
}

/// ECS levels; `crit` has no own level in `log`, so it maps to `error`.
fn parse_log_level(text: &str) -> Result<LevelFilter, String> {
    match text.to_ascii_lowercase().as_str() {
        "debug" => Ok(LevelFilter::Debug),
        "info" => Ok(LevelFilter::Info),
        "warn" => Ok(LevelFilter::Warn),
        "error" | "crit" => Ok(LevelFilter::Error),
        _ => Err("expected debug, info, warn, error or crit".to_string()),
    }
}

/// An XDG variable's value if it is an absolute path; the XDG spec says to ignore relative ones.
fn absolute_env_path(env: &dyn Fn(&str) -> Option<String>, variable: &str) -> Option<PathBuf> {
    env(variable)
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
}

/// `$<xdg_variable>` if absolute, else `$HOME/<home_fallback>`.
fn user_directory(
    env: &dyn Fn(&str) -> Option<String>,
    key: &'static str,
    xdg_variable: &'static str,
    home_fallback: &str,
) -> Result<PathBuf, ConfigError> {
    if let Some(directory) = absolute_env_path(env, xdg_variable) {
        return Ok(directory);
    }
    match absolute_env_path(env, "HOME") {
        Some(home) => Ok(home.join(home_fallback)),
        None => Err(ConfigError::NoUserDirectory { key, xdg_variable }),
    }
}

#[cfg(test)]
mod tests;
