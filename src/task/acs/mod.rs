//! ECS control-plane tasks — the `tasks[]` of an ACS `PayloadMessage` — mapped onto deckhand's
//! model, so a task ECS places on this host meets the same acceptance rules as one from a file.
//!
//! The ACS task shape (the ECS agent's `ecs-agent/acs/model/api/api-2.json`, `Task` and
//! `Container`) differs from a task definition in names and forms: `arn`, `desiredStatus`,
//! `version` as a string, the environment as a map, task `cpu` in vCPUs, `volumes[].type`, and a
//! `dockerConfig` of raw Docker JSON in which the control plane sends every parameter without a
//! field of its own (ulimits, log configuration, memory reservation, health check, labels, …).
//! Rather than a second validator, the task is rewritten into the `register-task-definition`
//! shape and handed to [`crate::task::definition`]; its error paths are mapped back onto the
//! ACS names (`containers[1].environment`, `version`). `dockerConfig` is checked here (each a
//! JSON object, nothing in it that deckhand must own itself) and carried on the container as a
//! [`DockerConfigOverlay`] that the create request lays over what deckhand builds, as the ECS
//! agent does; its health check and memory reservation are also read into the model, so
//! `HEALTHY` dependencies and the host-resource ledger see them.
//!
//! Keys: those that do not change how a container runs here are ignored (a warning), as the ECS
//! agent ignores what it does not know; what deckhand cannot honour (ENIs, EFS, FireLens,
//! environment files, secrets for log drivers, …) is refused with its path. Pure, no I/O; bad
//! input is an error, never a panic, and every list has a bound.

mod container_fields;
mod credentials;
mod docker_config;
#[cfg(test)]
#[rustfmt::skip] // The tables read best one case per line.
mod tests;

use crate::task::definition::check_task_definition_document;
use crate::task::{DockerConfigOverlay, TaskDefinition, TaskStatus};
use container_fields::repository_credentials;
pub use credentials::AcsTaskCredentials;
use credentials::{read_task_credentials, CREDENTIALS_KEYS};
use docker_config::{read_docker_config, DockerConfigRead};
use serde_json::{json, Map, Value};
use std::fmt;

/// The most containers one ACS task may carry (ECS allows 10 per task definition).
pub const MAX_ACS_CONTAINERS: usize = 64;
/// The most volumes one ACS task may carry.
pub const MAX_ACS_VOLUMES: usize = 256;
/// The longest `dockerConfig.config` or `dockerConfig.hostConfig` string (ECS's limit on a whole
/// task definition is 64 KiB).
pub const MAX_DOCKER_CONFIG_BYTES: usize = 64 * 1024;
/// The longest task ARN deckhand takes (ECS ARNs are far shorter).
pub const MAX_ARN_CHARS: usize = 1600;

/// A task from ECS, mapped and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcsTask {
    pub arn: String,
    /// RUNNING or STOPPED, the only two ECS sends.
    pub desired_status: TaskStatus,
    pub family: String,
    /// The task definition's revision as ECS sends it (`"3"`).
    pub version: String,
    pub definition: TaskDefinition,
    /// Ignored keys, each `path: why`.
    pub warnings: Vec<String>,
    /// Its IAM role credentials (`Debug` shows none of their secrets).
    pub credentials: AcsTaskCredentials,
}

/// Why a task from ECS could not be mapped: the first problem, with its path in the ACS shape
/// (`containers[1].dockerConfig.hostConfig`; `$` for the task itself), and the task's ARN when
/// it had a readable one (the driver reports such a task STOPPED with this as its reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcsTaskError {
    pub arn: Option<String>,
    pub path: String,
    pub message: String,
}

impl AcsTaskError {
    /// The same error with its path under `prefix` (`tasks[0]`): `$` becomes the prefix.
    pub fn within(mut self, prefix: &str) -> AcsTaskError {
        self.path = match self.path.strip_prefix('$') {
            Some(rest) => format!("{prefix}{rest}"),
            None => format!("{prefix}.{}", self.path),
        };
        self
    }
}

impl fmt::Display for AcsTaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for AcsTaskError {}

/// Task keys that say nothing about how the containers run on this host.
const IGNORED_TASK_KEYS: &[&str] = &[
    "taskClusterArn",
    "zone",
    "taskDefinitionAccountId",
    "overrides",
    "launchType",
    "serviceName",
    "group",
    "enableFaultInjection",
    "agentConfiguration",
];

/// Task keys deckhand cannot honour: an error unless empty.
const REFUSED_TASK_KEYS: &[(&str, &str)] = &[
    (
        "elasticNetworkInterfaces",
        "deckhand attaches no elastic network interfaces",
    ),
    (
        "proxyConfiguration",
        "deckhand runs no App Mesh proxy configuration",
    ),
    (
        "attachments",
        "deckhand handles no task attachments (EBS, Service Connect)",
    ),
    (
        "associations",
        "deckhand handles no task associations (GPUs, accelerators)",
    ),
    (
        "trustedExecutionConfiguration",
        "deckhand has no trusted execution",
    ),
];

/// Container keys passed to the definition parser under the same name, as they are.
const PASSED_CONTAINER_KEYS: &[&str] = &[
    "name",
    "image",
    "command",
    "entryPoint",
    "links",
    "mountPoints",
    "portMappings",
    "volumesFrom",
    "dependsOn",
    "restartPolicy",
    "linuxParameters",
    "privileged",
];

/// Container keys that say nothing about how the container runs on this host.
const IGNORED_CONTAINER_KEYS: &[&str] = &[
    "containerArn",
    "logsAuthStrategy",
    "networkInterfaceNames",
    // ECS Exec's agent: the container runs the same without it.
    "managedAgents",
];

/// Container keys deckhand cannot honour: an error unless empty.
const REFUSED_CONTAINER_KEYS: &[(&str, &str)] = &[
    (
        "environmentFiles",
        "an ECS task's environment files are read with its execution role, which deckhand does \
         not use yet (local task definitions may have them: README, Environment files)",
    ),
    ("credentialSpecs", "deckhand has no gMSA credential specs"),
    (
        "firelensConfiguration",
        "deckhand runs no FireLens log routers",
    ),
];

/// Maps one task of a `PayloadMessage`. Paths in the error are relative to the task (`$`);
/// [`AcsTaskError::within`] puts them under `tasks[i]`.
pub fn parse_acs_task(task: &Value) -> Result<AcsTask, AcsTaskError> {
    let mut mapper = Mapper::default();
    mapper.task(task)
}

/// One container mapped: its definition document, its Docker overlay, and the network mode its
/// host config names.
type MappedContainer = (
    Map<String, Value>,
    Option<DockerConfigOverlay>,
    Option<String>,
);

#[derive(Default)]
struct Mapper {
    arn: Option<String>,
    warnings: Vec<String>,
}

/// A value that says nothing: null, false, an empty string, array or object.
pub(super) fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Number(_) => false,
    }
}

/// A positive number (ECS sends `0` for "not set").
fn is_zero(value: &Value) -> bool {
    value.as_f64() == Some(0.0)
}

fn join(path: &str, key: &str) -> String {
    if path == "$" {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Mapper {
    fn error(&self, path: &str, message: impl Into<String>) -> AcsTaskError {
        AcsTaskError {
            arn: self.arn.clone(),
            path: path.to_string(),
            message: message.into(),
        }
    }

    fn object<'a>(
        &self,
        path: &str,
        value: &'a Value,
    ) -> Result<&'a Map<String, Value>, AcsTaskError> {
        value
            .as_object()
            .ok_or_else(|| self.error(path, "expected an object"))
    }

    fn string(
        &self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Result<Option<String>, AcsTaskError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(self.error(&join(path, key), "expected a string")),
        }
    }

    /// Ignored keys become warnings, refused ones with a value errors; `known` keys are the
    /// caller's.
    fn sort_keys(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        known: &[&str],
        ignored: &[&str],
        refused: &[(&str, &str)],
    ) -> Result<(), AcsTaskError> {
        for (key, value) in object {
            if known.contains(&key.as_str()) || is_empty(value) {
                continue;
            }
            let key_path = join(path, key);
            if let Some((_, why)) = refused.iter().find(|(refused, _)| refused == key) {
                return Err(self.error(&key_path, format!("not supported: {why}")));
            }
            let why = if ignored.contains(&key.as_str()) {
                "ignored: it has no effect on this host"
            } else {
                "ignored: unknown to deckhand"
            };
            self.warnings.push(format!("{key_path}: {why}"));
        }
        Ok(())
    }

    fn task(&mut self, task: &Value) -> Result<AcsTask, AcsTaskError> {
        let object = self.object("$", task)?;
        let arn = self
            .string(object, "$", "arn")?
            .filter(|arn| !arn.trim().is_empty())
            .ok_or_else(|| self.error("arn", "required"))?;
        if arn.chars().count() > MAX_ARN_CHARS || arn.chars().any(char::is_control) {
            return Err(self.error("arn", "not a task ARN"));
        }
        self.arn = Some(arn.clone());
        let desired_status = match self.string(object, "$", "desiredStatus")?.as_deref() {
            Some("RUNNING") => TaskStatus::Running,
            Some("STOPPED") => TaskStatus::Stopped,
            Some(other) => {
                return Err(self.error(
                    "desiredStatus",
                    format!("{other:?}: expected RUNNING or STOPPED"),
                ))
            }
            None => return Err(self.error("desiredStatus", "required")),
        };
        let credentials =
            read_task_credentials(object).map_err(|(path, message)| self.error(&path, message))?;
        let family = self.string(object, "$", "family")?.unwrap_or_default();
        let version = self.string(object, "$", "version")?.unwrap_or_default();
        self.sort_keys(
            object,
            "$",
            &[
                "arn",
                "desiredStatus",
                "family",
                "version",
                "containers",
                "volumes",
                "networkMode",
                "pidMode",
                "ipcMode",
                "cpu",
                "memory",
                CREDENTIALS_KEYS[0],
                CREDENTIALS_KEYS[1],
            ],
            IGNORED_TASK_KEYS,
            REFUSED_TASK_KEYS,
        )?;

        let mut document = Map::new();
        document.insert("family".into(), json!(family));
        if !version.is_empty() {
            let revision: u32 = version
                .parse()
                .ok()
                .filter(|revision| *revision > 0)
                .ok_or_else(|| {
                    self.error(
                        "version",
                        format!("{version:?}: expected a revision number such as \"3\""),
                    )
                })?;
            document.insert("revision".into(), json!(revision));
        }
        for key in ["pidMode", "ipcMode"] {
            if let Some(mode) = self
                .string(object, "$", key)?
                .filter(|mode| !mode.is_empty())
            {
                document.insert(key.into(), json!(mode));
            }
        }
        if let Some(cpu) = object
            .get("cpu")
            .filter(|cpu| !cpu.is_null() && !is_zero(cpu))
        {
            // ECS sends the task's CPU in vCPUs (0.25); the definition takes units.
            let units = cpu
                .as_f64()
                .filter(|vcpus| vcpus.is_finite() && *vcpus > 0.0 && *vcpus <= 1e6)
                .map(|vcpus| (vcpus * 1024.0).round() as u64)
                .filter(|units| *units > 0)
                .ok_or_else(|| self.error("cpu", "expected a positive number of vCPUs"))?;
            document.insert("cpu".into(), json!(units));
        }
        if let Some(memory) = object
            .get("memory")
            .filter(|memory| !memory.is_null() && !is_zero(memory))
        {
            document.insert("memory".into(), memory.clone());
        }
        document.insert("volumes".into(), Value::Array(self.volumes(object)?));

        let containers = match object.get("containers") {
            Some(Value::Array(containers)) => containers,
            Some(Value::Null) | None => return Err(self.error("containers", "required")),
            Some(_) => return Err(self.error("containers", "expected an array")),
        };
        if containers.len() > MAX_ACS_CONTAINERS {
            return Err(self.error(
                "containers",
                format!(
                    "{} containers: at most {MAX_ACS_CONTAINERS}",
                    containers.len()
                ),
            ));
        }
        let mut overlays = Vec::with_capacity(containers.len());
        let mut container_documents = Vec::with_capacity(containers.len());
        let mut container_network_modes = Vec::new();
        for (index, container) in containers.iter().enumerate() {
            let path = format!("containers[{index}]");
            let (container_document, overlay, network_mode) = self.container(container, &path)?;
            container_documents.push(Value::Object(container_document));
            overlays.push(overlay);
            if let Some(mode) = network_mode {
                container_network_modes.push((path, mode));
            }
        }
        document.insert(
            "containerDefinitions".into(),
            Value::Array(container_documents),
        );
        let network_mode = self.network_mode(object, &container_network_modes)?;
        if let Some(mode) = network_mode {
            document.insert("networkMode".into(), json!(mode));
        }

        let parsed =
            check_task_definition_document(&Value::Object(document)).map_err(|invalid| {
                let more = invalid.errors.len().saturating_sub(1);
                match invalid.errors.into_iter().next() {
                    Some(first) => {
                        let mut message = first.message;
                        if more > 0 {
                            message.push_str(&format!(" (and {more} more)"));
                        }
                        self.error(&acs_path(&first.path), message)
                    }
                    None => self.error("$", "not a task"),
                }
            })?;
        let mut definition = parsed.definition;
        for (container, overlay) in definition.containers.iter_mut().zip(overlays) {
            container.docker_config = overlay;
        }
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(parsed.warnings.iter().map(|warning| acs_warning(warning)));
        Ok(AcsTask {
            arn,
            desired_status,
            family,
            version,
            definition,
            warnings,
            credentials,
        })
    }

    /// The task's network mode: its own `networkMode`, else the one its containers' host
    /// configs agree on (the ECS agent runs an unnamed mode as bridge with the host config laid
    /// over it). A container whose host config asks for another mode than the task's is
    /// refused: deckhand's port and namespace rules follow the task's mode. In awsvpc the ECS
    /// agent overrides the container's mode itself, and so does deckhand.
    fn network_mode(
        &self,
        object: &Map<String, Value>,
        container_modes: &[(String, String)],
    ) -> Result<Option<String>, AcsTaskError> {
        let task_mode = self
            .string(object, "$", "networkMode")?
            .filter(|mode| !mode.is_empty());
        let normal = |mode: &str| {
            if mode == "default" {
                "bridge".to_string()
            } else {
                mode.to_string()
            }
        };
        let chosen = match &task_mode {
            Some(mode) => normal(mode),
            None => match container_modes.first() {
                Some((_, mode)) => normal(mode),
                None => return Ok(None),
            },
        };
        if chosen != "awsvpc" {
            for (path, mode) in container_modes {
                if normal(mode) != chosen {
                    return Err(self.error(
                        &format!("{path}.dockerConfig.hostConfig"),
                        format!(
                            "NetworkMode {mode:?} differs from the task's network mode {chosen:?}: \
                             deckhand runs every container of a task in the task's mode"
                        ),
                    ));
                }
            }
        }
        Ok(Some(chosen))
    }

    fn volumes(&mut self, object: &Map<String, Value>) -> Result<Vec<Value>, AcsTaskError> {
        let items = match object.get("volumes") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(self.error("volumes", "expected an array")),
        };
        if items.len() > MAX_ACS_VOLUMES {
            return Err(self.error(
                "volumes",
                format!("{} volumes: at most {MAX_ACS_VOLUMES}", items.len()),
            ));
        }
        let mut volumes = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let path = format!("volumes[{index}]");
            let volume = self.object(&path, item)?;
            let mut mapped = Map::new();
            if let Some(name) = volume.get("name") {
                mapped.insert("name".into(), name.clone());
            }
            // A volume without a type is a host volume (the ECS agent's default).
            let kind = self
                .string(volume, &path, "type")?
                .unwrap_or_else(|| "host".to_string());
            let known: &[&str] = match kind.as_str() {
                "host" => {
                    // A host volume without a source path is a Docker volume of the task's own.
                    if let Some(host) = volume.get("host").filter(|host| !host.is_null()) {
                        let host_path = join(&path, "host");
                        let host = self.object(&host_path, host)?;
                        if let Some(source) = self.string(host, &host_path, "sourcePath")?.filter(|source| !source.is_empty()) {
                            mapped.insert("host".into(), json!({ "sourcePath": source }));
                        }
                    }
                    &["name", "type", "host"]
                }
                "docker" => {
                    if let Some(configuration) = volume.get("dockerVolumeConfiguration").filter(|value| !value.is_null()) {
                        mapped.insert("dockerVolumeConfiguration".into(), configuration.clone());
                    } else {
                        mapped.insert("dockerVolumeConfiguration".into(), json!({}));
                    }
                    &["name", "type", "dockerVolumeConfiguration"]
                }
                other => {
                    return Err(self.error(
                        &join(&path, "type"),
                        format!("volume type {other:?} is not supported: deckhand mounts host and docker volumes"),
                    ))
                }
            };
            self.sort_keys(volume, &path, known, &[], &[])?;
            volumes.push(Value::Object(mapped));
        }
        Ok(volumes)
    }

    /// One container: its definition document, its Docker overlay, and the network mode its
    /// host config names.
    fn container(&mut self, value: &Value, path: &str) -> Result<MappedContainer, AcsTaskError> {
        let object = self.object(path, value)?;
        let mut known: Vec<&str> = PASSED_CONTAINER_KEYS.to_vec();
        known.extend([
            "essential",
            "environment",
            "cpu",
            "memory",
            "startTimeout",
            "stopTimeout",
            "overrides",
            "secrets",
            "dockerConfig",
            "healthCheckType",
            // `asmAuthData` is read (`container_fields`); an ECR image's login comes from its
            // name, so `ecrAuthData` says nothing more.
            "registryAuthentication",
        ]);
        self.sort_keys(
            object,
            path,
            &known,
            IGNORED_CONTAINER_KEYS,
            REFUSED_CONTAINER_KEYS,
        )?;

        let mut document = Map::new();
        for key in PASSED_CONTAINER_KEYS {
            if let Some(value) = object.get(*key).filter(|value| !value.is_null()) {
                document.insert((*key).to_string(), value.clone());
            }
        }
        // The ACS shape's `essential` is a plain boolean: absent is false, as the ECS agent
        // reads it (a task definition's default is true).
        let essential = object
            .get("essential")
            .cloned()
            .filter(|value| !value.is_null());
        document.insert("essential".into(), essential.unwrap_or(Value::Bool(false)));
        // `0` is "not set" for these (the ECS agent then uses its defaults).
        for key in ["cpu", "memory", "startTimeout", "stopTimeout"] {
            if let Some(value) = object
                .get(key)
                .filter(|value| !value.is_null() && !is_zero(value))
            {
                document.insert(key.to_string(), value.clone());
            }
        }
        if let Some(environment) = object.get("environment").filter(|value| !value.is_null()) {
            let environment_path = join(path, "environment");
            let mut list = Vec::new();
            for (name, value) in self.object(&environment_path, environment)? {
                let Some(value) = value.as_str() else {
                    return Err(self.error(&join(&environment_path, name), "expected a string"));
                };
                list.push(json!({ "name": name, "value": value }));
            }
            document.insert("environment".into(), Value::Array(list));
        }
        if let Some(command) = self.command_override(object, path)? {
            document.insert("command".into(), command);
        }
        let secrets = self.secrets(object, path)?.unwrap_or_default();
        if !secrets.environment.is_empty() {
            document.insert("secrets".into(), Value::Array(secrets.environment));
        }
        if let Some(credentials) = repository_credentials(object) {
            document.insert("repositoryCredentials".into(), credentials);
        }

        let DockerConfigRead {
            overlay,
            health_check,
            memory_reservation_mib,
            network_mode,
            log_configuration,
        } = read_docker_config(object.get("dockerConfig"), &join(path, "dockerConfig"))
            .map_err(|(error_path, message)| self.error(&error_path, message))?;
        match self.string(object, path, "healthCheckType")?.as_deref() {
            None | Some("") => {}
            Some("docker" | "DOCKER") if health_check.is_none() => {
                return Err(self.error(
                    &join(path, "healthCheckType"),
                    "a docker health check needs dockerConfig.config.Healthcheck",
                ))
            }
            Some("docker" | "DOCKER") => {}
            Some(other) => {
                return Err(self.error(
                    &join(path, "healthCheckType"),
                    format!("{other:?}: expected docker"),
                ))
            }
        }
        if let Some(health_check) = health_check {
            document.insert("healthCheck".into(), health_check);
        }
        if let Some(reservation) = memory_reservation_mib {
            document.insert("memoryReservation".into(), json!(reservation));
        }
        match (log_configuration, secrets.log_driver.first()) {
            (Some(mut log_configuration), _) => {
                if let (Value::Object(log), false) =
                    (&mut log_configuration, secrets.log_driver.is_empty())
                {
                    let options = secrets.log_driver.into_iter().map(|(_, secret)| secret);
                    log.insert("secretOptions".into(), Value::Array(options.collect()));
                }
                document.insert("logConfiguration".into(), log_configuration);
            }
            (None, Some((secret_path, _))) => {
                return Err(self.error(
                    &join(secret_path, "target"),
                    "a LOG_DRIVER secret needs a log driver in dockerConfig.hostConfig.LogConfig",
                ))
            }
            (None, None) => {}
        }
        Ok((document, overlay, network_mode))
    }
}

/// A definition path (`containerDefinitions[1].environment[0].name`) as the ACS shape names it
/// (`containers[1].environment`).
fn acs_path(path: &str) -> String {
    if path == "revision" {
        return "version".to_string();
    }
    let Some(rest) = path.strip_prefix("containerDefinitions") else {
        return path.to_string();
    };
    let Some(close) = rest.find(']').filter(|_| rest.starts_with('[')) else {
        return format!("containers{rest}");
    };
    let (index, tail) = rest.split_at(close + 1);
    const RENAMED: &[(&str, &str)] = &[
        (".environment", ".environment"),
        (".healthCheck", ".dockerConfig.config.Healthcheck"),
        (
            ".memoryReservation",
            ".dockerConfig.hostConfig.MemoryReservation",
        ),
    ];
    for (definition_key, acs_key) in RENAMED {
        if let Some(after) = tail.strip_prefix(definition_key) {
            if after.is_empty() || after.starts_with('.') || after.starts_with('[') {
                return format!("containers{index}{acs_key}");
            }
        }
    }
    format!("containers{index}{tail}")
}

/// A definition warning (`path: message`) with its path in ACS names.
fn acs_warning(warning: &str) -> String {
    match warning.split_once(": ") {
        Some((path, message)) => format!("{}: {message}", acs_path(path)),
        None => warning.to_string(),
    }
}
