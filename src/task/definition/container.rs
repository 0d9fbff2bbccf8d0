//! One container definition: every supported container key parsed into a
//! [`ContainerDefinition`], with the value rules that need only that container (ranges, absolute
//! paths, health-check commands, restart policies, labels deckhand owns). Rules that look across
//! containers are in [`super::checks`].

use super::json::{indexed, join, Parser};
use super::keys::{
    CONTAINER_KEYS, DEPENDS_ON_KEYS, ENVIRONMENT_FILE_KEYS, ENVIRONMENT_KEYS, HEALTH_CHECK_KEYS,
    LOG_CONFIGURATION_KEYS, MOUNT_POINT_KEYS, PORT_MAPPING_KEYS, REPOSITORY_CREDENTIALS_KEYS,
    RESTART_POLICY_KEYS, SECRET_KEYS, VOLUMES_FROM_KEYS,
};
use super::names::{
    check_container_name, check_image_reference, placeholder_message, template_placeholder,
};
use crate::task::environment_files::{parse_s3_arn, MAX_ENVIRONMENT_FILES};
use crate::task::{
    ContainerDefinition, Dependency, DependencyCondition, HealthCheck, LogConfiguration,
    MountPoint, PortMapping, PortRange, Protocol, RestartPolicy, SecretReference, VolumeFrom,
};
use serde_json::{Map, Value};

/// The health-check ranges and defaults ECS applies (seconds, except retries).
pub const HEALTH_INTERVAL_RANGE: (u64, u64) = (5, 300);
pub const HEALTH_TIMEOUT_RANGE: (u64, u64) = (2, 60);
pub const HEALTH_RETRIES_RANGE: (u64, u64) = (1, 10);
pub const HEALTH_START_PERIOD_RANGE: (u64, u64) = (0, 300);
pub const HEALTH_DEFAULTS: HealthCheckDefaults = HealthCheckDefaults {
    interval_secs: 30,
    timeout_secs: 5,
    retries: 3,
    start_period_secs: 0,
};
/// `restartAttemptPeriod` range and default (seconds), and the most ignored exit codes.
pub const RESTART_ATTEMPT_PERIOD_RANGE: (u64, u64) = (60, 1800);
pub const RESTART_ATTEMPT_PERIOD_DEFAULT: u64 = 300;
pub const RESTART_MAX_IGNORED_EXIT_CODES: usize = 50;
/// Docker refuses a memory limit below 6 MiB.
pub const CONTAINER_MEMORY_MIN_MIB: u64 = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheckDefaults {
    pub interval_secs: u32,
    pub timeout_secs: u32,
    pub retries: u32,
    pub start_period_secs: u32,
}

/// Labels deckhand stamps on every container; a user label with the same key is overridden.
const OWNED_LABELS: [&str; 5] = [
    "com.amazonaws.ecs.task-arn",
    "com.amazonaws.ecs.container-name",
    "com.amazonaws.ecs.task-definition-family",
    "com.amazonaws.ecs.task-definition-version",
    "com.amazonaws.ecs.cluster",
];

impl Parser {
    pub(super) fn container(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> ContainerDefinition {
        self.check_keys(path, object, &CONTAINER_KEYS);
        let name = self
            .required_string(object, path, "name")
            .unwrap_or_default();
        if Self::field(object, "name").is_some_and(Value::is_string) {
            check_container_name(&name)
                .unwrap_or_else(|message| self.error(&join(path, "name"), message));
        }
        let image = self
            .required_string(object, path, "image")
            .unwrap_or_default();
        if Self::field(object, "image").is_some_and(Value::is_string) {
            match template_placeholder(&image) {
                Some(placeholder) => self.error(
                    &join(path, "image"),
                    placeholder_message(&placeholder, "the image to run"),
                ),
                None => check_image_reference(&image)
                    .unwrap_or_else(|message| self.error(&join(path, "image"), message)),
            }
        }
        let essential = self.bool(object, path, "essential").unwrap_or(true);
        let command = self.string_list(object, path, "command");
        let entry_point = self.string_list(object, path, "entryPoint");
        let environment = self.environment(object, path);
        let depends_on = self.depends_on(object, path);
        let links = self.string_list(object, path, "links").unwrap_or_default();
        let volumes_from = self.volumes_from(object, path);
        let mount_points = self.mount_points(object, path);
        let port_mappings = self.port_mappings(object, path);
        let health_check = self.health_check(object, path);
        let stop_timeout_secs = self.integer(object, path, "stopTimeout", 0, u64::from(u32::MAX));
        let start_timeout_secs = self.integer(object, path, "startTimeout", 0, u64::from(u32::MAX));
        // Bytes must fit an i64 for Docker.
        let memory_limit = (i64::MAX as u64) >> 20;
        let memory_mib = self.integer(
            object,
            path,
            "memory",
            CONTAINER_MEMORY_MIN_MIB,
            memory_limit,
        );
        let memory_reservation_mib =
            self.integer(object, path, "memoryReservation", 1, memory_limit);
        if let (Some(limit), Some(reservation)) = (memory_mib, memory_reservation_mib) {
            if reservation > limit {
                self.error(
                    &join(path, "memoryReservation"),
                    format!("{reservation} MiB is more than the memory limit of {limit} MiB"),
                );
            }
        }
        let cpu = self.integer(object, path, "cpu", 0, i64::MAX as u64);
        let privileged = self.bool(object, path, "privileged").unwrap_or(false);
        let user = self.string(object, path, "user");
        let working_directory = self.string(object, path, "workingDirectory");
        if let Some(directory) = &working_directory {
            if !directory.starts_with('/') {
                self.error(
                    &join(path, "workingDirectory"),
                    format!("{directory:?} must be an absolute path"),
                );
            }
        }
        let docker_labels = self.string_map(object, path, "dockerLabels");
        for key in OWNED_LABELS {
            if docker_labels.contains_key(key) {
                self.warn(
                    &join(&join(path, "dockerLabels"), key),
                    "overridden: deckhand sets this label itself",
                );
            }
        }
        let log_configuration = self.log_configuration(object, path);
        let restart_policy = self.restart_policy(object, path);
        let ulimits = self.ulimits(object, path);
        let linux_parameters = self.linux_parameters(object, path, memory_mib);
        let readonly_root_filesystem = self
            .bool(object, path, "readonlyRootFilesystem")
            .unwrap_or(false);
        let hostname = self.hostname(object, path);
        let extra_hosts = self.extra_hosts(object, path);
        let dns_servers = self.dns_servers(object, path);
        let dns_search_domains = self.dns_search_domains(object, path);
        let system_controls = self.system_controls(object, path);
        let docker_security_options = self.docker_security_options(object, path);
        let disable_networking = self
            .bool(object, path, "disableNetworking")
            .unwrap_or(false);
        let interactive = self.bool(object, path, "interactive").unwrap_or(false);
        let pseudo_terminal = self.bool(object, path, "pseudoTerminal").unwrap_or(false);
        let secrets = self.secret_references(object, path, "secrets", true);
        let repository_credentials = self.repository_credentials(object, path);
        let firelens_configuration = self.firelens_configuration(object, path);
        let environment_files = self.environment_files(object, path);
        let gpus = self.resource_requirements(object, path);
        ContainerDefinition {
            name,
            image,
            essential,
            command,
            entry_point,
            environment,
            depends_on,
            links,
            volumes_from,
            mount_points,
            port_mappings,
            health_check,
            stop_timeout_secs,
            start_timeout_secs,
            memory_mib,
            memory_reservation_mib,
            cpu,
            privileged,
            user,
            working_directory,
            docker_labels,
            log_configuration,
            restart_policy,
            ulimits,
            linux_parameters,
            readonly_root_filesystem,
            hostname,
            extra_hosts,
            dns_servers,
            dns_search_domains,
            system_controls,
            docker_security_options,
            disable_networking,
            interactive,
            pseudo_terminal,
            secrets,
            repository_credentials,
            docker_config: None,
            firelens_configuration,
            stop_signal: None,
            environment_files,
            gpus,
        }
    }

    /// `secrets[]` (environment variables: `names_are_variables`) or a log configuration's
    /// `secretOptions[]`: each a `name` and the `valueFrom` the secret store holds its value
    /// under. Only the reference is read here; whether the store holds it is checked at submit.
    pub(super) fn secret_references(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        names_are_variables: bool,
    ) -> Vec<SecretReference> {
        let mut references: Vec<SecretReference> = Vec::new();
        for (item_path, map) in self.objects(object, path, key) {
            self.check_keys(&item_path, map, &SECRET_KEYS);
            let name = self.required_string(map, &item_path, "name");
            let value_from = self.required_string(map, &item_path, "valueFrom");
            if let Some(name) = &name {
                let invalid = name.is_empty()
                    || name.contains('\0')
                    || (names_are_variables && name.contains('='));
                if invalid {
                    let what = if names_are_variables {
                        "environment variable"
                    } else {
                        "log option"
                    };
                    self.error(
                        &join(&item_path, "name"),
                        format!("{name:?} is not a valid {what} name"),
                    );
                } else if references.iter().any(|reference| &reference.name == name) {
                    self.error(
                        &join(&item_path, "name"),
                        format!("{name:?} is given twice in {key}"),
                    );
                }
            }
            if value_from
                .as_deref()
                .is_some_and(|value| value.trim().is_empty())
            {
                self.error(&join(&item_path, "valueFrom"), "must not be empty");
            }
            if let (Some(name), Some(value_from)) = (name, value_from) {
                references.push(SecretReference { name, value_from });
            }
        }
        references
    }

    /// `environmentFiles[]`: each `{"value": S3 object ARN, "type": "s3"}` (ECS's only type),
    /// at most [`MAX_ENVIRONMENT_FILES`]. The files are read at create, not here.
    fn environment_files(&mut self, object: &Map<String, Value>, path: &str) -> Vec<String> {
        let mut arns = Vec::new();
        let items = self.objects(object, path, "environmentFiles");
        if items.len() > MAX_ENVIRONMENT_FILES {
            self.error(
                &join(path, "environmentFiles"),
                format!(
                    "{} files; ECS takes at most {MAX_ENVIRONMENT_FILES}",
                    items.len()
                ),
            );
        }
        for (item_path, map) in items {
            self.check_keys(&item_path, map, &ENVIRONMENT_FILE_KEYS);
            let kind = self.required_string(map, &item_path, "type");
            let value = self.required_string(map, &item_path, "value");
            if kind.as_deref().is_some_and(|kind| kind != "s3") {
                self.error(
                    &join(&item_path, "type"),
                    format!(
                        "{:?} is not a type ECS takes (s3)",
                        kind.unwrap_or_default()
                    ),
                );
                continue;
            }
            let Some(value) = value else { continue };
            match parse_s3_arn(&value) {
                Err(message) => self.error(&join(&item_path, "value"), message),
                Ok(object) => {
                    if !object.key.ends_with(".env") {
                        self.warn(
                            &join(&item_path, "value"),
                            "ECS expects an environment file's name to end in .env",
                        );
                    }
                    if arns.contains(&value) {
                        self.warn(&join(&item_path, "value"), "given twice; read once");
                    } else {
                        arns.push(value);
                    }
                }
            }
        }
        arns
    }

    /// `repositoryCredentials`: `credentialsParameter`, the secret-store reference of the
    /// registry credentials (`{"username","password"}`) for this container's pull.
    fn repository_credentials(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Option<String> {
        let value = Self::field(object, "repositoryCredentials")?;
        let credentials_path = join(path, "repositoryCredentials");
        let map = self.object(&credentials_path, value)?;
        self.check_keys(&credentials_path, map, &REPOSITORY_CREDENTIALS_KEYS);
        let parameter = self.required_string(map, &credentials_path, "credentialsParameter")?;
        if parameter.trim().is_empty() {
            self.error(
                &join(&credentials_path, "credentialsParameter"),
                "must not be empty",
            );
            return None;
        }
        Some(parameter)
    }

    fn environment(&mut self, object: &Map<String, Value>, path: &str) -> Vec<(String, String)> {
        let mut environment = Vec::new();
        for (item_path, map) in self.objects(object, path, "environment") {
            self.check_keys(&item_path, map, &ENVIRONMENT_KEYS);
            let Some(name) = self.required_string(map, &item_path, "name") else {
                continue;
            };
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                self.error(
                    &join(&item_path, "name"),
                    format!("{name:?} is not a valid environment variable name"),
                );
            }
            let value = self.string(map, &item_path, "value").unwrap_or_default();
            environment.push((name, value));
        }
        environment
    }

    fn depends_on(&mut self, object: &Map<String, Value>, path: &str) -> Vec<Dependency> {
        let mut edges = Vec::new();
        for (item_path, map) in self.objects(object, path, "dependsOn") {
            self.check_keys(&item_path, map, &DEPENDS_ON_KEYS);
            let container_name = self.required_string(map, &item_path, "containerName");
            let condition = match self
                .required_string(map, &item_path, "condition")
                .as_deref()
            {
                Some("START") => Some(DependencyCondition::Start),
                Some("COMPLETE") => Some(DependencyCondition::Complete),
                Some("SUCCESS") => Some(DependencyCondition::Success),
                Some("HEALTHY") => Some(DependencyCondition::Healthy),
                Some(other) => {
                    self.error(
                        &join(&item_path, "condition"),
                        format!("unknown condition {other:?}: expected START, COMPLETE, SUCCESS or HEALTHY"),
                    );
                    None
                }
                None => None,
            };
            if let (Some(container_name), Some(condition)) = (container_name, condition) {
                edges.push(Dependency {
                    container_name,
                    condition,
                });
            }
        }
        edges
    }

    fn volumes_from(&mut self, object: &Map<String, Value>, path: &str) -> Vec<VolumeFrom> {
        let mut sources = Vec::new();
        for (item_path, map) in self.objects(object, path, "volumesFrom") {
            self.check_keys(&item_path, map, &VOLUMES_FROM_KEYS);
            let source = self.required_string(map, &item_path, "sourceContainer");
            let read_only = self.bool(map, &item_path, "readOnly").unwrap_or(false);
            if let Some(source_container) = source {
                sources.push(VolumeFrom {
                    source_container,
                    read_only,
                });
            }
        }
        sources
    }

    fn mount_points(&mut self, object: &Map<String, Value>, path: &str) -> Vec<MountPoint> {
        let mut mounts = Vec::new();
        for (item_path, map) in self.objects(object, path, "mountPoints") {
            self.check_keys(&item_path, map, &MOUNT_POINT_KEYS);
            let source_volume = self.required_string(map, &item_path, "sourceVolume");
            let container_path = self.required_string(map, &item_path, "containerPath");
            let read_only = self.bool(map, &item_path, "readOnly").unwrap_or(false);
            if let Some(target) = &container_path {
                if !target.starts_with('/') {
                    self.error(
                        &join(&item_path, "containerPath"),
                        format!("{target:?} must be an absolute path"),
                    );
                }
            }
            if let (Some(source_volume), Some(container_path)) = (source_volume, container_path) {
                mounts.push(MountPoint {
                    source_volume,
                    container_path,
                    read_only,
                });
            }
        }
        mounts
    }

    fn port_mappings(&mut self, object: &Map<String, Value>, path: &str) -> Vec<PortMapping> {
        let mut mappings = Vec::new();
        for (item_path, map) in self.objects(object, path, "portMappings") {
            self.check_keys(&item_path, map, &PORT_MAPPING_KEYS);
            let container_port = self.integer(map, &item_path, "containerPort", 1, 65535);
            let range = self.container_port_range(map, &item_path);
            let has_port = Self::field(map, "containerPort").is_some();
            let has_range = Self::field(map, "containerPortRange").is_some();
            match (has_port, has_range) {
                (false, false) => self.error(&join(&item_path, "containerPort"), "required"),
                (true, true) => self.error(
                    &join(&item_path, "containerPortRange"),
                    "give either containerPort or containerPortRange, not both",
                ),
                _ => {}
            }
            let host_port = self.integer(map, &item_path, "hostPort", 0, 65535);
            if has_range && !has_port && host_port.is_some_and(|port| port != 0) {
                self.error(
                    &join(&item_path, "hostPort"),
                    "not allowed with containerPortRange: the host ports of a range are chosen \
                     when the container is created",
                );
            }
            if let Some(value) = Self::field(map, "hostPortRange") {
                if !matches!(value, Value::String(text) if text.is_empty()) {
                    self.error(
                        &join(&item_path, "hostPortRange"),
                        "set by the agent, not by the task definition (give containerPortRange)",
                    );
                }
            }
            let protocol = match self.string(map, &item_path, "protocol") {
                None => Protocol::Tcp,
                Some(text) if text.eq_ignore_ascii_case("tcp") => Protocol::Tcp,
                Some(text) if text.eq_ignore_ascii_case("udp") => Protocol::Udp,
                Some(other) => {
                    self.error(
                        &join(&item_path, "protocol"),
                        format!("unknown protocol {other:?}: expected tcp or udp"),
                    );
                    Protocol::Tcp
                }
            };
            match (container_port, range) {
                (Some(container_port), None) if !has_range => mappings.push(PortMapping {
                    container_port: container_port as u16,
                    host_port: host_port.map(|port| port as u16),
                    protocol,
                    container_port_range: None,
                }),
                (None, Some(range)) if !has_port => mappings.push(PortMapping {
                    container_port: range.first,
                    host_port: None,
                    protocol,
                    container_port_range: Some(range),
                }),
                _ => {}
            }
        }
        mappings
    }

    /// `containerPortRange`: `"first-last"`, 1–65535, first below last.
    fn container_port_range(&mut self, map: &Map<String, Value>, path: &str) -> Option<PortRange> {
        let text = self.string(map, path, "containerPortRange")?;
        let range_path = join(path, "containerPortRange");
        let parsed = text.split_once('-').and_then(|(first, last)| {
            let port = |part: &str| part.trim().parse::<u16>().ok().filter(|port| *port != 0);
            Some((port(first)?, port(last)?))
        });
        match parsed {
            Some((first, last)) if first < last => Some(PortRange { first, last }),
            Some((first, last)) => {
                self.error(
                    &range_path,
                    format!("the first port ({first}) must be below the last port ({last})"),
                );
                None
            }
            None => {
                self.error(
                    &range_path,
                    format!("{text:?} is not a port range such as \"9000-9099\" (ports 1–65535)"),
                );
                None
            }
        }
    }

    fn health_check(&mut self, object: &Map<String, Value>, path: &str) -> Option<HealthCheck> {
        let value = Self::field(object, "healthCheck")?;
        let check_path = join(path, "healthCheck");
        let map = self.object(&check_path, value)?;
        self.check_keys(&check_path, map, &HEALTH_CHECK_KEYS);
        let command = self.string_list(map, &check_path, "command");
        match &command {
            None if Self::field(map, "command").is_none() => {
                self.error(&join(&check_path, "command"), "required")
            }
            None => {}
            Some(command) => match command.first().map(String::as_str) {
                Some("NONE") => {}
                Some("CMD") | Some("CMD-SHELL") if command.len() >= 2 => {}
                Some("CMD") | Some("CMD-SHELL") => self.error(
                    &join(&check_path, "command"),
                    format!("{:?} needs the command to run after it", command[0]),
                ),
                _ => self.error(
                    &join(&check_path, "command"),
                    "must start with \"CMD\", \"CMD-SHELL\" or \"NONE\"",
                ),
            },
        }
        let (low, high) = HEALTH_INTERVAL_RANGE;
        let interval = self.integer(map, &check_path, "interval", low, high);
        let (low, high) = HEALTH_TIMEOUT_RANGE;
        let timeout = self.integer(map, &check_path, "timeout", low, high);
        let (low, high) = HEALTH_RETRIES_RANGE;
        let retries = self.integer(map, &check_path, "retries", low, high);
        let (low, high) = HEALTH_START_PERIOD_RANGE;
        let start_period = self.integer(map, &check_path, "startPeriod", low, high);
        // The ranges above keep every value well inside u32.
        Some(HealthCheck {
            command: command.unwrap_or_default(),
            interval_secs: interval.map_or(HEALTH_DEFAULTS.interval_secs, |v| v as u32),
            timeout_secs: timeout.map_or(HEALTH_DEFAULTS.timeout_secs, |v| v as u32),
            retries: retries.map_or(HEALTH_DEFAULTS.retries, |v| v as u32),
            start_period_secs: start_period.map_or(HEALTH_DEFAULTS.start_period_secs, |v| v as u32),
        })
    }

    fn log_configuration(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Option<LogConfiguration> {
        let value = Self::field(object, "logConfiguration")?;
        let config_path = join(path, "logConfiguration");
        let map = self.object(&config_path, value)?;
        self.check_keys(&config_path, map, &LOG_CONFIGURATION_KEYS);
        let log_driver = self.required_string(map, &config_path, "logDriver")?;
        if log_driver.is_empty() {
            self.error(&join(&config_path, "logDriver"), "must not be empty");
        }
        let options = self.string_map(map, &config_path, "options");
        let secret_options = self.secret_references(map, &config_path, "secretOptions", false);
        for option in &secret_options {
            if options.contains_key(&option.name) {
                self.error(
                    &join(&config_path, "secretOptions"),
                    format!(
                        "{:?} is both an option and a secret option; give it once",
                        option.name
                    ),
                );
            }
        }
        Some(LogConfiguration {
            log_driver,
            options,
            secret_options,
        })
    }

    fn restart_policy(&mut self, object: &Map<String, Value>, path: &str) -> Option<RestartPolicy> {
        let value = Self::field(object, "restartPolicy")?;
        let policy_path = join(path, "restartPolicy");
        let map = self.object(&policy_path, value)?;
        self.check_keys(&policy_path, map, &RESTART_POLICY_KEYS);
        if Self::field(map, "enabled").is_none() {
            self.error(&join(&policy_path, "enabled"), "required");
        }
        let enabled = self.bool(map, &policy_path, "enabled").unwrap_or(false);
        let mut ignored_exit_codes = Vec::new();
        if let Some(value) = Self::field(map, "ignoredExitCodes") {
            let codes_path = join(&policy_path, "ignoredExitCodes");
            if let Some(items) = self.array(&codes_path, value) {
                if items.len() > RESTART_MAX_IGNORED_EXIT_CODES {
                    self.error(
                        &codes_path,
                        format!(
                            "{} exit codes given, at most {RESTART_MAX_IGNORED_EXIT_CODES} are allowed",
                            items.len()
                        ),
                    );
                }
                for (index, item) in items.iter().enumerate() {
                    match item.as_i64() {
                        Some(code) => ignored_exit_codes.push(code),
                        None => self.error(
                            &indexed(&codes_path, index),
                            format!("expected a whole number, found {item}"),
                        ),
                    }
                }
            }
        }
        let (low, high) = RESTART_ATTEMPT_PERIOD_RANGE;
        let restart_attempt_period_secs = self
            .integer(map, &policy_path, "restartAttemptPeriod", low, high)
            .unwrap_or(RESTART_ATTEMPT_PERIOD_DEFAULT);
        Some(RestartPolicy {
            enabled,
            ignored_exit_codes,
            restart_attempt_period_secs,
        })
    }
}
