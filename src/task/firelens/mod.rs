//! FireLens in the model (pure): which container is a task's log router, what its options say,
//! the implicit dependency of every `awsfirelens` container on it, where its files live and how
//! the router and the application containers are wired to them — as the ECS agent does it
//! (`agent/taskresource/firelens/`, `agent/api/task/task.go`, `agent/engine/docker_task_engine.go`).
//! The router's generated configuration is [`render`]'s.
//!
//! The wiring: per task, `<data dir>/firelens/<task id>/` holds `config/fluent.conf` (the
//! generated configuration), `config/external.conf` (a `config-file-type: s3` file) and
//! `socket/`, which the router sees as `/var/run/` and where it listens on `fluent.sock`. Each
//! `awsfirelens` container runs Docker's `fluentd` log driver aimed at that socket, tagged
//! `<container name>-firelens-<task id>`, and each output section of the configuration matches
//! its container's tag.

pub mod render;

pub use crate::task::environment_files::{parse_s3_arn, S3Object};
use crate::task::{Container, ContainerDefinition, Dependency, DependencyCondition, FirelensType};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The log driver that hands a container's logs to the task's router.
pub const AWSFIRELENS: &str = "awsfirelens";
/// The router option that turns the ECS metadata filter off (default: on).
pub const OPTION_ECS_LOG_METADATA: &str = "enable-ecs-log-metadata";
/// The router options that include a configuration file of the user's: `file` (a path inside
/// the router's image) or `s3` (an S3 object ARN).
pub const OPTION_CONFIG_FILE_TYPE: &str = "config-file-type";
pub const OPTION_CONFIG_FILE_VALUE: &str = "config-file-value";
/// The router options ECS reads; any other is ignored (with a warning at validation).
pub const ROUTER_OPTIONS: [&str; 3] = [
    OPTION_ECS_LOG_METADATA,
    OPTION_CONFIG_FILE_TYPE,
    OPTION_CONFIG_FILE_VALUE,
];
/// An `awsfirelens` option that sizes Docker's fluentd driver buffer, not the router's output.
pub const LOG_DRIVER_BUFFER_LIMIT: &str = "log-driver-buffer-limit";
/// `awsfirelens` options that become grep filters on the container's records.
pub const INCLUDE_PATTERN: &str = "include-pattern";
pub const EXCLUDE_PATTERN: &str = "exclude-pattern";

/// The router's socket, inside the router (its directory is the task's `socket/`).
pub const ROUTER_SOCKET_PATH: &str = "/var/run/fluent.sock";
const ROUTER_SOCKET_DIRECTORY: &str = "/var/run/";
const SOCKET_FILE: &str = "fluent.sock";
const CONFIG_FILE: &str = "fluent.conf";
const EXTERNAL_CONFIG_FILE: &str = "external.conf";

/// The port of the router's TCP forward input (bridge and awsvpc tasks), which application
/// containers find in `FLUENT_HOST`/`FLUENT_PORT`.
pub const FLUENT_PORT: &str = "24224";

/// One `config-file-type`: what the generated configuration includes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExternalConfig {
    /// A file inside the router's image.
    File { path: String },
    /// An S3 object, served from the operator's mirror (`DECKHAND_ENVIRONMENT_FILES_DIR`).
    S3 { arn: String, object: S3Object },
}

/// What a router's options say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterOptions {
    /// `enable-ecs-log-metadata`: add the cluster, task ARN and task definition to each record.
    pub ecs_log_metadata: bool,
    pub external: Option<ExternalConfig>,
}

/// A router option that cannot be honoured: which one, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    pub option: &'static str,
    pub message: String,
}

/// Go's `strconv.ParseBool`, which the ECS agent reads `enable-ecs-log-metadata` with.
fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Reads a router's options as the ECS agent does, refusing what it would fail on: an unknown
/// `config-file-type`, a type without its value, a malformed S3 ARN. An
/// `enable-ecs-log-metadata` that is not a boolean is refused too (the ECS agent ignores it
/// with a warning and turns the metadata off).
pub fn router_options(options: &BTreeMap<String, String>) -> Result<RouterOptions, OptionError> {
    let ecs_log_metadata = match options.get(OPTION_ECS_LOG_METADATA) {
        None => true,
        Some(value) => parse_go_bool(value).ok_or_else(|| OptionError {
            option: OPTION_ECS_LOG_METADATA,
            message: format!("invalid value {value:?}: expected true or false"),
        })?,
    };
    let external = match options.get(OPTION_CONFIG_FILE_TYPE) {
        None => None,
        Some(kind) => {
            let value = options
                .get(OPTION_CONFIG_FILE_VALUE)
                .ok_or_else(|| OptionError {
                    option: OPTION_CONFIG_FILE_VALUE,
                    message: format!(
                        "option {OPTION_CONFIG_FILE_TYPE} is specified but \
                         {OPTION_CONFIG_FILE_VALUE} is not specified"
                    ),
                })?;
            match kind.as_str() {
                "file" if value.starts_with('/') && !value.contains(['\n', '\r', '\0']) => {
                    Some(ExternalConfig::File {
                        path: value.clone(),
                    })
                }
                "file" => {
                    return Err(OptionError {
                        option: OPTION_CONFIG_FILE_VALUE,
                        message: format!(
                            "{value:?} must be an absolute path (of a file in the router's image)"
                        ),
                    })
                }
                "s3" => Some(ExternalConfig::S3 {
                    arn: value.clone(),
                    object: parse_s3_arn(value).map_err(|message| OptionError {
                        option: OPTION_CONFIG_FILE_VALUE,
                        message,
                    })?,
                }),
                other => {
                    return Err(OptionError {
                        option: OPTION_CONFIG_FILE_TYPE,
                        message: format!(
                            "invalid value {other:?} is specified: expected file or s3"
                        ),
                    })
                }
            }
        }
    };
    Ok(RouterOptions {
        ecs_log_metadata,
        external,
    })
}

/// The option naming the output plugin of an `awsfirelens` container, by router type.
pub fn output_plugin_key(router_type: FirelensType) -> &'static str {
    match router_type {
        FirelensType::Fluentbit => "Name",
        FirelensType::Fluentd => "@type",
    }
}

/// Whether `definition` sends its logs to the task's router.
pub fn uses_firelens(definition: &ContainerDefinition) -> bool {
    definition
        .log_configuration
        .as_ref()
        .is_some_and(|log| log.log_driver == AWSFIRELENS)
}

/// The task's router: the container with a `firelensConfiguration` (the parser allows one).
pub fn router(containers: &[Container]) -> Option<&Container> {
    containers
        .iter()
        .find(|container| container.definition.firelens_configuration.is_some())
}

/// ECS's implicit dependency: every `awsfirelens` container other than the router waits for the
/// router to START, unless it names the router in `dependsOn` already. Nothing is added when the
/// router itself depends on a container — ECS looks at its `dependsOn`; deckhand also at its
/// `links` and `volumesFrom`, which would make a cycle that never starts. Returns the router's
/// name and the indexes of the containers that get the edge.
pub fn implicit_router_dependents<'a>(
    definitions: &[&'a ContainerDefinition],
) -> Option<(&'a str, Vec<usize>)> {
    let router = definitions
        .iter()
        .find(|definition| definition.firelens_configuration.is_some())?;
    if !router.dependencies().is_empty() {
        return None;
    }
    let router_name = router.name.as_str();
    let dependents = definitions
        .iter()
        .enumerate()
        .filter(|(_, definition)| definition.name != router_name && uses_firelens(definition))
        .filter(|(_, definition)| {
            !definition
                .depends_on
                .iter()
                .any(|dependency| dependency.container_name == router_name)
        })
        .map(|(index, _)| index)
        .collect();
    Some((router_name, dependents))
}

/// Adds [`implicit_router_dependents`]' START edges to the task's containers (at acceptance).
pub fn add_router_dependencies(containers: &mut [Container]) {
    let definitions: Vec<&ContainerDefinition> = containers
        .iter()
        .map(|container| container.definition.as_ref())
        .collect();
    let Some((router_name, dependents)) = implicit_router_dependents(&definitions) else {
        return;
    };
    let router_name = router_name.to_string();
    for index in dependents {
        std::sync::Arc::make_mut(&mut containers[index].definition)
            .depends_on
            .push(Dependency {
                container_name: router_name.clone(),
                condition: DependencyCondition::Start,
            });
    }
}

/// A task's FireLens files: `<data dir>/firelens/<task id>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirelensPaths {
    pub directory: PathBuf,
}

impl FirelensPaths {
    pub fn new(data_dir: &Path, task_id: &str) -> FirelensPaths {
        FirelensPaths {
            directory: data_dir.join("firelens").join(task_id),
        }
    }

    pub fn config_directory(&self) -> PathBuf {
        self.directory.join("config")
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_directory().join(CONFIG_FILE)
    }

    pub fn external_config_file(&self) -> PathBuf {
        self.config_directory().join(EXTERNAL_CONFIG_FILE)
    }

    pub fn socket_directory(&self) -> PathBuf {
        self.directory.join("socket")
    }

    pub fn socket(&self) -> PathBuf {
        self.socket_directory().join(SOCKET_FILE)
    }
}

/// Where the router's image reads its main configuration.
pub fn config_path_in_router(router_type: FirelensType) -> &'static str {
    match router_type {
        FirelensType::Fluentbit => "/fluent-bit/etc/fluent-bit.conf",
        FirelensType::Fluentd => "/fluentd/etc/fluent.conf",
    }
}

/// Where the router sees a `config-file-type: s3` file.
pub fn external_config_path_in_router(router_type: FirelensType) -> &'static str {
    match router_type {
        FirelensType::Fluentbit => "/fluent-bit/etc/external.conf",
        FirelensType::Fluentd => "/fluentd/etc/external.conf",
    }
}

/// The router's bind mounts (ECS's order): its configuration, the socket directory, and the
/// S3 configuration file when it uses one.
pub fn router_binds(
    paths: &FirelensPaths,
    router_type: FirelensType,
    options: &RouterOptions,
) -> Vec<String> {
    let mut binds = vec![
        format!(
            "{}:{}",
            paths.config_file().display(),
            config_path_in_router(router_type)
        ),
        format!(
            "{}/:{ROUTER_SOCKET_DIRECTORY}",
            paths.socket_directory().display()
        ),
    ];
    if matches!(options.external, Some(ExternalConfig::S3 { .. })) {
        binds.push(format!(
            "{}:{}",
            paths.external_config_file().display(),
            external_config_path_in_router(router_type)
        ));
    }
    binds
}

/// ECS's tag of an `awsfirelens` container's records: `<container name>-firelens-<task id>`.
pub fn log_tag(container_name: &str, task_id: &str) -> String {
    format!("{container_name}-firelens-{task_id}")
}

/// The options of Docker's `fluentd` log driver for an `awsfirelens` container whose options
/// are `options`, as the ECS agent sets them (Docker 20.10 or newer: `fluentd-async`).
pub fn fluentd_log_options(
    paths: &FirelensPaths,
    container_name: &str,
    task_id: &str,
    options: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut driver = BTreeMap::new();
    driver.insert("tag".to_string(), log_tag(container_name, task_id));
    driver.insert(
        "fluentd-address".to_string(),
        format!("unix://{}", paths.socket().display()),
    );
    driver.insert(
        "fluentd-sub-second-precision".to_string(),
        "true".to_string(),
    );
    if let Some(limit) = options.get(LOG_DRIVER_BUFFER_LIMIT) {
        driver.insert("fluentd-buffer-limit".to_string(), limit.clone());
    }
    driver.insert("fluentd-async".to_string(), "true".to_string());
    driver
}

/// The name of the router's environment variable that carries the value of secret log option
/// `option` of the container at `index`, which the generated configuration refers to.
pub fn secret_variable(option: &str, index: usize) -> String {
    format!("{option}_{index}")
}

#[cfg(test)]
mod tests;
