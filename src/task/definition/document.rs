//! The document and the task level: the two accepted shapes (`register-task-definition` input
//! and `describe-task-definition` output), then family, revision, network mode, task sizes and
//! volumes. Each container is handed to [`super::container`], and the containers together to
//! [`super::checks`].

use super::json::{indexed, join, ContainerPaths, Parser};
use super::keys::{
    DESCRIBE_OUTPUT_KEYS, DOCKER_VOLUME_CONFIGURATION_KEYS, HOST_KEYS, TASK_KEYS, VOLUME_KEYS,
};
use crate::task::{
    DockerVolumeConfiguration, IpcMode, NetworkMode, PidMode, TaskDefinition, TaskRoleArns, Volume,
    VolumeScope, DEFAULT_VOLUME_DRIVER,
};

/// Why `task` needs awsvpc for `pidMode` and `ipcMode` (docs/ENGINE.md §4).
const TASK_NAMESPACE_NEEDS_AWSVPC: &str = "task needs networkMode awsvpc: deckhand shares a \
    task's namespace through the sandbox container it adds to awsvpc tasks; use awsvpc, or host, \
    or leave the key out for a namespace per container";
use serde_json::{Map, Value};

impl Parser {
    /// The whole document: either shape.
    pub(super) fn document(&mut self, document: &Value) -> Option<TaskDefinition> {
        let root = self.object("$", document)?;
        if root.contains_key("taskDefinition") && !root.contains_key("containerDefinitions") {
            self.check_keys("", root, &DESCRIBE_OUTPUT_KEYS);
            let inner = self.object("taskDefinition", &root["taskDefinition"])?;
            return self.task(inner, "taskDefinition");
        }
        self.task(root, "")
    }

    fn task(&mut self, object: &Map<String, Value>, path: &str) -> Option<TaskDefinition> {
        self.check_keys(path, object, &TASK_KEYS);
        let family = self
            .required_string(object, path, "family")
            .unwrap_or_default();
        if Self::field(object, "family").is_some_and(Value::is_string) {
            self.check_identifier(&join(path, "family"), &family, "family");
        }
        let revision = self
            .integer(object, path, "revision", 1, u64::from(u32::MAX))
            .map_or(0, |revision| revision as u32);
        let network_mode = self.network_mode(object, path);
        let cpu = self.task_size(object, path, "cpu", "vCPU", 1024);
        let memory_mib = self.task_size(object, path, "memory", "GB", 1024);
        let volumes = self.volumes(object, path);
        let pid_mode = self.pid_mode(object, path, network_mode);
        let ipc_mode = self.ipc_mode(object, path, network_mode);
        let roles = TaskRoleArns {
            task_role: self.role_arn(object, path, "taskRoleArn"),
            execution_role: self.role_arn(object, path, "executionRoleArn"),
        };

        let containers_path = join(path, "containerDefinitions");
        let mut containers = Vec::new();
        let mut container_paths = Vec::new();
        match Self::field(object, "containerDefinitions") {
            None => self.error(&containers_path, "required"),
            Some(value) => {
                if let Some(items) = self.array(&containers_path, value) {
                    if items.is_empty() {
                        self.error(&containers_path, "at least one container is required");
                    }
                    for (index, item) in items.iter().enumerate() {
                        let item_path = indexed(&containers_path, index);
                        if let Some(map) = self.object(&item_path, item) {
                            containers.push(self.container(map, &item_path));
                            container_paths.push(ContainerPaths { base: item_path });
                        }
                    }
                }
            }
        }
        self.cross_checks(
            &containers_path,
            &containers,
            &container_paths,
            &volumes,
            network_mode,
        );
        self.namespace_checks(&containers, &container_paths, network_mode, ipc_mode);
        self.firelens_checks(&containers, &container_paths);
        Some(TaskDefinition {
            family,
            revision,
            network_mode,
            cpu,
            memory_mib,
            volumes,
            containers,
            pid_mode,
            ipc_mode,
            roles,
        })
    }

    /// `taskRoleArn` or `executionRoleArn`: an IAM role's ARN; `null` or `""` is none.
    fn role_arn(&mut self, object: &Map<String, Value>, path: &str, key: &str) -> Option<String> {
        if Self::field(object, key).is_some_and(|value| value.is_null()) {
            return None;
        }
        let arn = self.string(object, path, key)?;
        if arn.is_empty() {
            return None;
        }
        let valid = arn.starts_with("arn:")
            && arn.contains(":role/")
            && arn.len() <= 2048
            && !arn.contains(char::is_whitespace);
        if !valid {
            self.error(
                &join(path, key),
                "expected an IAM role ARN (arn:aws:iam::<account>:role/<name>)",
            );
            return None;
        }
        Some(arn)
    }

    /// A task-level namespace mode as written; `""` asks for nothing (a warning, as for the keys
    /// deckhand refuses, so CLI skeletons load).
    fn namespace_mode(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<String> {
        let mode = self.string(object, path, key)?;
        if mode.is_empty() {
            self.warn(&join(path, key), "ignored: empty");
            return None;
        }
        Some(mode)
    }

    fn pid_mode(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        network_mode: NetworkMode,
    ) -> Option<PidMode> {
        let mode = self.namespace_mode(object, path, "pidMode")?;
        match mode.as_str() {
            "host" => Some(PidMode::Host),
            "task" if network_mode == NetworkMode::Awsvpc => Some(PidMode::Task),
            "task" => {
                self.error(&join(path, "pidMode"), TASK_NAMESPACE_NEEDS_AWSVPC);
                None
            }
            other => {
                self.error(
                    &join(path, "pidMode"),
                    format!("unknown pid mode {other:?}: expected host or task"),
                );
                None
            }
        }
    }

    fn ipc_mode(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        network_mode: NetworkMode,
    ) -> Option<IpcMode> {
        let mode = self.namespace_mode(object, path, "ipcMode")?;
        match mode.as_str() {
            "host" => Some(IpcMode::Host),
            "none" => Some(IpcMode::None),
            "task" if network_mode == NetworkMode::Awsvpc => Some(IpcMode::Task),
            "task" => {
                self.error(&join(path, "ipcMode"), TASK_NAMESPACE_NEEDS_AWSVPC);
                None
            }
            other => {
                self.error(
                    &join(path, "ipcMode"),
                    format!("unknown ipc mode {other:?}: expected host, task or none"),
                );
                None
            }
        }
    }

    fn network_mode(&mut self, object: &Map<String, Value>, path: &str) -> NetworkMode {
        let Some(mode) = self.string(object, path, "networkMode") else {
            return NetworkMode::Bridge;
        };
        match mode.as_str() {
            "bridge" => NetworkMode::Bridge,
            "host" => NetworkMode::Host,
            "none" => NetworkMode::None,
            "awsvpc" => NetworkMode::Awsvpc,
            other => {
                self.error(
                    &join(path, "networkMode"),
                    format!(
                        "unknown network mode {other:?}: expected bridge, host, awsvpc or none"
                    ),
                );
                NetworkMode::Bridge
            }
        }
    }

    /// Task `cpu` (units, or "N vCPU") and `memory` (MiB, or "N GB"): a number or a string.
    fn task_size(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        unit: &str,
        per_unit: u64,
    ) -> Option<u64> {
        let value = Self::field(object, key)?;
        let key_path = join(path, key);
        let expected =
            format!("expected a whole number or a string such as \"1024\" or \"1 {unit}\"");
        let parsed = match value {
            Value::Number(number) => number.as_u64(),
            Value::String(text) => parse_size(text, unit, per_unit),
            _ => None,
        };
        match parsed {
            Some(size) if size > 0 => Some(size),
            _ => {
                self.error(&key_path, format!("{expected}, found {value}"));
                None
            }
        }
    }

    fn volumes(&mut self, object: &Map<String, Value>, path: &str) -> Vec<Volume> {
        let mut volumes: Vec<Volume> = Vec::new();
        for (volume_path, map) in self.objects(object, path, "volumes") {
            self.check_keys(&volume_path, map, &VOLUME_KEYS);
            let Some(name) = self.required_string(map, &volume_path, "name") else {
                continue;
            };
            self.check_identifier(&join(&volume_path, "name"), &name, "volume name");
            if volumes.iter().any(|volume| volume.name == name) {
                self.error(
                    &join(&volume_path, "name"),
                    format!("duplicate volume name {name:?}"),
                );
            }
            let mut host_source_path = None;
            if let Some(host) = Self::field(map, "host") {
                let host_path = join(&volume_path, "host");
                if let Some(host) = self.object(&host_path, host) {
                    self.check_keys(&host_path, host, &HOST_KEYS);
                    host_source_path = self.string(host, &host_path, "sourcePath");
                    if let Some(source) = &host_source_path {
                        if !source.starts_with('/') {
                            self.error(
                                &join(&host_path, "sourcePath"),
                                format!("{source:?} must be an absolute path"),
                            );
                        }
                    }
                }
            }
            let docker_volume_configuration = match Self::field(map, "dockerVolumeConfiguration") {
                None => None,
                Some(value) => {
                    let configuration_path = join(&volume_path, "dockerVolumeConfiguration");
                    if Self::field(map, "host").is_some() {
                        self.error(
                            &configuration_path,
                            "a volume is either a host path (host) or a Docker volume \
                             (dockerVolumeConfiguration), not both",
                        );
                    }
                    self.docker_volume_configuration(&configuration_path, value, &name)
                }
            };
            volumes.push(Volume {
                name,
                host_source_path,
                docker_volume_configuration,
            });
        }
        volumes
    }

    /// ECS's `dockerVolumeConfiguration`: `scope` task (the default) or shared, `autoprovision`
    /// only with shared (the ECS agent refuses a task-scoped volume that asks for it), `driver`
    /// (default `local`), `driverOpts` and `labels` as string maps. A shared volume's Docker
    /// name is the volume's own name, so it must be one Docker accepts.
    fn docker_volume_configuration(
        &mut self,
        path: &str,
        value: &Value,
        volume_name: &str,
    ) -> Option<DockerVolumeConfiguration> {
        let map = self.object(path, value)?;
        self.check_keys(path, map, &DOCKER_VOLUME_CONFIGURATION_KEYS);
        let scope = match self.string(map, path, "scope").as_deref() {
            None | Some("task") => VolumeScope::Task,
            Some("shared") => VolumeScope::Shared,
            Some(other) => {
                self.error(
                    &join(path, "scope"),
                    format!("unknown scope {other:?}: expected task or shared"),
                );
                VolumeScope::Task
            }
        };
        let autoprovision = self.bool(map, path, "autoprovision").unwrap_or(false);
        if autoprovision && scope == VolumeScope::Task {
            self.error(
                &join(path, "autoprovision"),
                "a task-scoped volume cannot be autoprovisioned (autoprovision is only for \
                 scope \"shared\")",
            );
        }
        let driver = match self.string(map, path, "driver") {
            None => DEFAULT_VOLUME_DRIVER.to_string(),
            Some(driver) if driver.trim().is_empty() => {
                self.error(&join(path, "driver"), "must not be empty");
                DEFAULT_VOLUME_DRIVER.to_string()
            }
            Some(driver) => driver,
        };
        let driver_opts = self.string_map(map, path, "driverOpts");
        let labels = self.string_map(map, path, "labels");
        if scope == VolumeScope::Shared && !is_docker_volume_name(volume_name) {
            self.error(
                &join(path, "scope"),
                format!(
                    "a shared volume is named {volume_name:?} in Docker, and Docker volume \
                     names need at least two characters, a letter or digit first"
                ),
            );
        }
        Some(DockerVolumeConfiguration {
            scope,
            autoprovision,
            driver,
            driver_opts,
            labels,
        })
    }
}

/// Docker's rule for volume names: `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
fn is_docker_volume_name(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphanumeric())
        && name.len() >= 2
        && characters.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// "1024", "0.5 vCPU", "2 GB", "2GB" → units. `None` when not a positive size.
fn parse_size(text: &str, unit: &str, per_unit: u64) -> Option<u64> {
    let trimmed = text.trim();
    if let Ok(plain) = trimmed.parse::<u64>() {
        return Some(plain);
    }
    let lower = trimmed.to_ascii_lowercase();
    let number = lower.strip_suffix(&unit.to_ascii_lowercase())?.trim();
    let value: f64 = number.parse().ok()?;
    if !value.is_finite() || value <= 0.0 {
        return None;
    }
    let units = value * per_unit as f64;
    // Reject sizes that do not come to a whole number of units, or overflow.
    if units.fract() != 0.0 || units > (1u64 << 40) as f64 {
        return None;
    }
    Some(units as u64)
}
