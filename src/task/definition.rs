//! Parsing and validating Amazon ECS task-definition JSON into the [`TaskDefinition`] model.
//!
//! Accepts what users already have: the `register-task-definition --cli-input-json` shape and the
//! output of `describe-task-definition` (`{"taskDefinition": {...}}`). The JSON is walked by hand
//! (not derived) so that every problem is reported at once, each with its JSON path, and so that
//! each key falls in exactly one of three classes:
//! - supported: parsed into the model;
//! - ignored: AWS-only keys that do not change how a container runs on this host (a warning);
//! - unsupported: keys that would change how a container runs but deckhand cannot honour yet. These
//!   are errors, because running a container differently from what was asked is worse than
//!   refusing it. An unsupported key whose value is empty (`null`, `false`, `""`, `[]`, `{}`) asks
//!   for nothing and is only a warning, so CLI skeletons load.
//!
//! Anything else is an unknown key (usually a typo) and an error naming its path.
//! Kept apart from the model so that other input formats can map onto the same types.

use crate::task::{
    ContainerDefinition, Dependency, DependencyCondition, HealthCheck, LogConfiguration,
    MountPoint, NetworkMode, PortMapping, Protocol, RestartPolicy, TaskDefinition, Volume,
    VolumeFrom,
};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// A parsed, validated definition plus the warnings (ignored keys) met on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDefinition {
    pub definition: TaskDefinition,
    pub warnings: Vec<String>,
}

/// One problem in a task definition, with the JSON path it was found at (`$` for the document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for ValidationError {}

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

/// The three key classes of one JSON object.
struct KeySpec {
    supported: &'static [&'static str],
    ignored: &'static [&'static str],
    unsupported: &'static [&'static str],
}

const DESCRIBE_OUTPUT_KEYS: KeySpec = KeySpec {
    supported: &["taskDefinition"],
    ignored: &["tags"],
    unsupported: &[],
};

const TASK_KEYS: KeySpec = KeySpec {
    supported: &[
        "family",
        "revision",
        "networkMode",
        "cpu",
        "memory",
        "volumes",
        "containerDefinitions",
    ],
    ignored: &[
        "executionRoleArn",
        "taskRoleArn",
        "requiresCompatibilities",
        "tags",
        "placementConstraints",
        "runtimePlatform",
        "taskDefinitionArn",
        "status",
        "registeredAt",
        "registeredBy",
        "deregisteredAt",
        "compatibilities",
        "requiresAttributes",
        "enableFaultInjection",
    ],
    unsupported: &[
        "pidMode",
        "ipcMode",
        "proxyConfiguration",
        "ephemeralStorage",
        "inferenceAccelerators",
    ],
};

const VOLUME_KEYS: KeySpec = KeySpec {
    supported: &["name", "host"],
    ignored: &[],
    unsupported: &[
        "dockerVolumeConfiguration",
        "efsVolumeConfiguration",
        "fsxWindowsFileServerVolumeConfiguration",
        "configuredAtLaunch",
    ],
};

const HOST_KEYS: KeySpec = KeySpec {
    supported: &["sourcePath"],
    ignored: &[],
    unsupported: &[],
};

const CONTAINER_KEYS: KeySpec = KeySpec {
    supported: &[
        "name",
        "image",
        "essential",
        "command",
        "entryPoint",
        "environment",
        "dependsOn",
        "links",
        "volumesFrom",
        "mountPoints",
        "portMappings",
        "healthCheck",
        "stopTimeout",
        "startTimeout",
        "memory",
        "memoryReservation",
        "cpu",
        "privileged",
        "user",
        "workingDirectory",
        "dockerLabels",
        "logConfiguration",
        "restartPolicy",
    ],
    // Image digest pinning is done by the ECS control plane at run-task time.
    ignored: &["versionConsistency"],
    unsupported: &[
        "repositoryCredentials",
        "secrets",
        "environmentFiles",
        "firelensConfiguration",
        "linuxParameters",
        "ulimits",
        "systemControls",
        "resourceRequirements",
        "dnsServers",
        "dnsSearchDomains",
        "extraHosts",
        "hostname",
        "disableNetworking",
        "readonlyRootFilesystem",
        "dockerSecurityOptions",
        "interactive",
        "pseudoTerminal",
        "credentialSpecs",
        "gpu",
    ],
};

const ENVIRONMENT_KEYS: KeySpec = KeySpec {
    supported: &["name", "value"],
    ignored: &[],
    unsupported: &[],
};

const DEPENDS_ON_KEYS: KeySpec = KeySpec {
    supported: &["containerName", "condition"],
    ignored: &[],
    unsupported: &[],
};

const VOLUMES_FROM_KEYS: KeySpec = KeySpec {
    supported: &["sourceContainer", "readOnly"],
    ignored: &[],
    unsupported: &[],
};

const MOUNT_POINT_KEYS: KeySpec = KeySpec {
    supported: &["sourceVolume", "containerPath", "readOnly"],
    ignored: &[],
    unsupported: &[],
};

const PORT_MAPPING_KEYS: KeySpec = KeySpec {
    supported: &["containerPort", "hostPort", "protocol"],
    // Service Connect names; they do not change how the container runs.
    ignored: &["name", "appProtocol"],
    unsupported: &["containerPortRange", "hostPortRange"],
};

const HEALTH_CHECK_KEYS: KeySpec = KeySpec {
    supported: &["command", "interval", "timeout", "retries", "startPeriod"],
    ignored: &[],
    unsupported: &[],
};

const LOG_CONFIGURATION_KEYS: KeySpec = KeySpec {
    supported: &["logDriver", "options"],
    ignored: &[],
    unsupported: &["secretOptions"],
};

const RESTART_POLICY_KEYS: KeySpec = KeySpec {
    supported: &["enabled", "ignoredExitCodes", "restartAttemptPeriod"],
    ignored: &[],
    unsupported: &[],
};

/// Parse and validate a task definition, reporting every error at once.
pub fn parse_task_definition(json: &[u8]) -> Result<ParsedDefinition, Vec<ValidationError>> {
    let document: Value = match serde_json::from_slice(json) {
        Ok(document) => document,
        Err(error) => {
            return Err(vec![ValidationError {
                path: "$".to_string(),
                message: format!("not valid JSON: {error}"),
            }])
        }
    };
    let mut parser = Parser::default();
    let definition = parser.document(&document);
    if parser.errors.is_empty() {
        if let Some(definition) = definition {
            return Ok(ParsedDefinition {
                definition,
                warnings: parser.warnings,
            });
        }
    }
    if parser.errors.is_empty() {
        parser.error("$", "no task definition found");
    }
    Err(parser.errors)
}

/// Containers in a valid start order (dependencies first), by name.
///
/// Among containers whose dependencies are all placed, definition order decides, so the result
/// is stable. Edges to unknown containers are ignored; containers caught in a cycle (which
/// validation rejects) come last, in definition order.
pub fn start_order(definition: &TaskDefinition) -> Vec<String> {
    let (order, leftovers) = topological_order(&definition.containers);
    order
        .into_iter()
        .chain(leftovers)
        .map(|index| definition.containers[index].name.clone())
        .collect()
}

/// Containers in a valid shutdown order (dependents first), by name: the reverse of
/// [`start_order`]. The engine enforces it per container through §4's shutdown-order rule; this
/// is the same order as a list, for display and for stopping without the engine.
pub fn shutdown_order(definition: &TaskDefinition) -> Vec<String> {
    let mut order = start_order(definition);
    order.reverse();
    order
}

/// Kahn's algorithm over every dependency edge, picking the earliest ready container each round.
/// Returns (ordered indexes, indexes left over because of cycles).
fn topological_order(containers: &[ContainerDefinition]) -> (Vec<usize>, Vec<usize>) {
    let index_of: HashMap<&str, usize> = containers
        .iter()
        .enumerate()
        .map(|(index, container)| (container.name.as_str(), index))
        .collect();
    let edges: Vec<Vec<usize>> = containers
        .iter()
        .map(|container| {
            container
                .dependencies()
                .iter()
                .filter_map(|edge| index_of.get(edge.container_name.as_str()).copied())
                .collect()
        })
        .collect();
    let mut placed = vec![false; containers.len()];
    let mut order = Vec::with_capacity(containers.len());
    loop {
        let ready = (0..containers.len())
            .find(|&index| !placed[index] && edges[index].iter().all(|&dep| placed[dep]));
        match ready {
            Some(index) => {
                placed[index] = true;
                order.push(index);
            }
            None => break,
        }
    }
    let leftovers = (0..containers.len()).filter(|&i| !placed[i]).collect();
    (order, leftovers)
}

/// The JSON type of a value, for error messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn is_empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Number(_) => false,
    }
}

/// `path.key`; a key that is empty or holds characters other than letters, digits, `_`, `-` and
/// `.` is quoted (`path["my key"]`) so the path stays unambiguous and never empty.
fn join(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (true, false) => format!("${}", indexed_key(key)),
        (false, false) => format!("{path}{}", indexed_key(key)),
    }
}

fn indexed_key(key: &str) -> String {
    format!("[{}]", Value::String(key.to_string()))
}

fn indexed(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// Edit distance, to suggest the key a typo meant.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

fn suggestion(key: &str, spec: &KeySpec) -> Option<&'static str> {
    // No key deckhand knows is this long; skip the quadratic distance for huge garbage keys.
    if key.len() > 64 {
        return None;
    }
    spec.supported
        .iter()
        .chain(spec.ignored)
        .chain(spec.unsupported)
        .copied()
        .map(|candidate| {
            let distance = if candidate.eq_ignore_ascii_case(key) {
                0
            } else {
                edit_distance(&key.to_ascii_lowercase(), &candidate.to_ascii_lowercase())
            };
            (distance, candidate)
        })
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Collects errors and warnings while walking the document.
#[derive(Default)]
struct Parser {
    errors: Vec<ValidationError>,
    warnings: Vec<String>,
}

/// Where a container's fields sit in the document, for cross-container errors.
struct ContainerPaths {
    base: String,
}

impl ContainerPaths {
    fn at(&self, key: &str) -> String {
        join(&self.base, key)
    }
}

impl Parser {
    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(ValidationError {
            path: path.to_string(),
            message: message.into(),
        });
    }

    fn warn(&mut self, path: &str, message: impl fmt::Display) {
        self.warnings.push(format!("{path}: {message}"));
    }

    /// Classify every key of `object` (§ module docs).
    fn check_keys(&mut self, path: &str, object: &Map<String, Value>, spec: &KeySpec) {
        for (key, value) in object {
            let key_path = join(path, key);
            if spec.supported.contains(&key.as_str()) {
                continue;
            }
            if spec.ignored.contains(&key.as_str()) {
                self.warn(&key_path, "ignored: it has no effect on this host");
            } else if spec.unsupported.contains(&key.as_str()) {
                if is_empty_value(value) {
                    self.warn(&key_path, "ignored: empty");
                } else {
                    self.error(
                        &key_path,
                        "not supported by deckhand yet; refusing to run the container \
                         differently from what was asked",
                    );
                }
            } else {
                match suggestion(key, spec) {
                    Some(meant) => {
                        self.error(&key_path, format!("unknown key (did you mean {meant:?}?)"))
                    }
                    None => self.error(&key_path, "unknown key"),
                }
            }
        }
    }

    /// The value at `key`, treating `null` as absent.
    fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
        object.get(key).filter(|value| !value.is_null())
    }

    fn object<'a>(&mut self, path: &str, value: &'a Value) -> Option<&'a Map<String, Value>> {
        match value {
            Value::Object(map) => Some(map),
            other => {
                self.error(
                    path,
                    format!("expected an object, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn array<'a>(&mut self, path: &str, value: &'a Value) -> Option<&'a Vec<Value>> {
        match value {
            Value::Array(items) => Some(items),
            other => {
                self.error(
                    path,
                    format!("expected an array, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn string(&mut self, object: &Map<String, Value>, path: &str, key: &str) -> Option<String> {
        let value = Self::field(object, key)?;
        match value {
            Value::String(text) => Some(text.clone()),
            other => {
                self.error(
                    &join(path, key),
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn required_string(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<String> {
        if Self::field(object, key).is_none() {
            self.error(&join(path, key), "required");
            return None;
        }
        self.string(object, path, key)
    }

    fn bool(&mut self, object: &Map<String, Value>, path: &str, key: &str) -> Option<bool> {
        let value = Self::field(object, key)?;
        match value {
            Value::Bool(flag) => Some(*flag),
            other => {
                self.error(
                    &join(path, key),
                    format!("expected true or false, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A whole number in `min..=max`.
    fn integer(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        let value = Self::field(object, key)?;
        let key_path = join(path, key);
        match value.as_u64() {
            Some(number) if (min..=max).contains(&number) => Some(number),
            Some(number) => {
                self.error(&key_path, format!("{number} is out of range {min}–{max}"));
                None
            }
            None => {
                let found = match value {
                    Value::Number(number) => format!("{number}"),
                    other => type_name(other).to_string(),
                };
                self.error(
                    &key_path,
                    format!("expected a whole number in {min}–{max}, found {found}"),
                );
                None
            }
        }
    }

    fn string_list(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        let value = Self::field(object, key)?;
        let key_path = join(path, key);
        let items = self.array(&key_path, value)?;
        let mut strings = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match item {
                Value::String(text) => strings.push(text.clone()),
                other => self.error(
                    &indexed(&key_path, index),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        Some(strings)
    }

    fn string_map(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        let Some(value) = Self::field(object, key) else {
            return map;
        };
        let key_path = join(path, key);
        let Some(entries) = self.object(&key_path, value) else {
            return map;
        };
        for (name, entry) in entries {
            match entry {
                Value::String(text) => {
                    map.insert(name.clone(), text.clone());
                }
                other => self.error(
                    &join(&key_path, name),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        map
    }

    /// Each object of the array at `key`, with its path; non-objects are reported.
    fn objects<'a>(
        &mut self,
        object: &'a Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Vec<(String, &'a Map<String, Value>)> {
        let Some(value) = Self::field(object, key) else {
            return Vec::new();
        };
        let key_path = join(path, key);
        let Some(items) = self.array(&key_path, value) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let item_path = indexed(&key_path, index);
            if let Some(map) = self.object(&item_path, item) {
                out.push((item_path, map));
            }
        }
        out
    }

    /// The whole document: either shape.
    fn document(&mut self, document: &Value) -> Option<TaskDefinition> {
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
        Some(TaskDefinition {
            family,
            revision,
            network_mode,
            cpu,
            memory_mib,
            volumes,
            containers,
        })
    }

    /// Family and volume names: 1–255 letters, digits, hyphens and underscores (ECS's rule).
    fn check_identifier(&mut self, path: &str, value: &str, what: &str) {
        if value.is_empty() {
            self.error(path, format!("{what} must not be empty"));
        } else if value.len() > 255 {
            self.error(path, format!("{what} is longer than 255 characters"));
        } else if !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            self.error(
                path,
                format!(
                    "{what} {value:?} may contain only letters, digits, hyphens and underscores"
                ),
            );
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
            "awsvpc" => {
                self.error(
                    &join(path, "networkMode"),
                    "awsvpc is not supported: deckhand supports only bridge, host and none",
                );
                NetworkMode::Bridge
            }
            other => {
                self.error(
                    &join(path, "networkMode"),
                    format!("unknown network mode {other:?}: expected bridge, host or none"),
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
            volumes.push(Volume {
                name,
                host_source_path,
            });
        }
        volumes
    }

    fn container(&mut self, object: &Map<String, Value>, path: &str) -> ContainerDefinition {
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
            check_image_reference(&image)
                .unwrap_or_else(|message| self.error(&join(path, "image"), message));
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
        }
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
            if Self::field(map, "containerPort").is_none() {
                self.error(&join(&item_path, "containerPort"), "required");
            }
            let host_port = self.integer(map, &item_path, "hostPort", 0, 65535);
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
            if let Some(container_port) = container_port {
                mappings.push(PortMapping {
                    container_port: container_port as u16,
                    host_port: host_port.map(|port| port as u16),
                    protocol,
                });
            }
        }
        mappings
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
        Some(LogConfiguration {
            log_driver,
            options,
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

    /// Checks that look across containers: names, references, ports, cycles, essential.
    fn cross_checks(
        &mut self,
        containers_path: &str,
        containers: &[ContainerDefinition],
        paths: &[ContainerPaths],
        volumes: &[Volume],
        network_mode: NetworkMode,
    ) {
        let mut first_with_name: HashMap<&str, usize> = HashMap::new();
        for (index, container) in containers.iter().enumerate() {
            if container.name.is_empty() {
                continue;
            }
            if let Some(&first) = first_with_name.get(container.name.as_str()) {
                self.error(
                    &paths[index].at("name"),
                    format!(
                        "duplicate container name {:?} (also {})",
                        container.name, paths[first].base
                    ),
                );
            } else {
                first_with_name.insert(&container.name, index);
            }
        }
        let by_name = |name: &str| containers.iter().find(|container| container.name == name);

        if !containers.is_empty() && !containers.iter().any(|container| container.essential) {
            self.error(containers_path, "at least one container must be essential");
        }

        let mut host_ports: HashMap<(u16, &str), String> = HashMap::new();
        for (index, container) in containers.iter().enumerate() {
            let at = &paths[index];
            for (edge_index, edge) in container.depends_on.iter().enumerate() {
                let edge_path = indexed(&at.at("dependsOn"), edge_index);
                match by_name(&edge.container_name) {
                    None => self.error(
                        &join(&edge_path, "containerName"),
                        format!("no container named {:?}", edge.container_name),
                    ),
                    Some(target) => {
                        let checked = target.health_check.as_ref().is_some_and(|check| {
                            check.command.first().map(String::as_str) != Some("NONE")
                        });
                        if edge.condition == DependencyCondition::Healthy && !checked {
                            self.error(
                                &join(&edge_path, "condition"),
                                format!(
                                    "HEALTHY needs container {:?} to have a healthCheck",
                                    edge.container_name
                                ),
                            );
                        }
                    }
                }
            }
            for (link_index, link) in container.links.iter().enumerate() {
                let link_path = indexed(&at.at("links"), link_index);
                let parts: Vec<&str> = link.split(':').collect();
                if parts.len() > 2 {
                    self.error(
                        &link_path,
                        format!("{link:?} has more than one ':' (expected name[:alias])"),
                    );
                    continue;
                }
                if parts.iter().any(|part| part.is_empty()) {
                    self.error(
                        &link_path,
                        format!("{link:?} is not of the form name[:alias]"),
                    );
                    continue;
                }
                if by_name(parts[0]).is_none() {
                    self.error(&link_path, format!("no container named {:?}", parts[0]));
                }
                if let Some(alias) = parts.get(1) {
                    if !alias
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    {
                        self.error(
                            &link_path,
                            format!("alias {alias:?} is not a valid host name"),
                        );
                    }
                }
            }
            if !container.links.is_empty() && network_mode != NetworkMode::Bridge {
                self.error(
                    &at.at("links"),
                    format!(
                        "links need networkMode bridge (this task uses {})",
                        network_mode.as_str()
                    ),
                );
            }
            for (source_index, source) in container.volumes_from.iter().enumerate() {
                if by_name(&source.source_container).is_none() {
                    self.error(
                        &join(
                            &indexed(&at.at("volumesFrom"), source_index),
                            "sourceContainer",
                        ),
                        format!("no container named {:?}", source.source_container),
                    );
                }
            }
            for (mount_index, mount) in container.mount_points.iter().enumerate() {
                if !volumes
                    .iter()
                    .any(|volume| volume.name == mount.source_volume)
                {
                    self.error(
                        &join(&indexed(&at.at("mountPoints"), mount_index), "sourceVolume"),
                        format!("no volume named {:?} in volumes", mount.source_volume),
                    );
                }
            }
            for (port_index, mapping) in container.port_mappings.iter().enumerate() {
                let mapping_path = indexed(&at.at("portMappings"), port_index);
                let host_port = match network_mode {
                    NetworkMode::None => {
                        self.error(
                            &mapping_path,
                            "port mappings need networkMode bridge or host (this task uses none)",
                        );
                        continue;
                    }
                    NetworkMode::Host => {
                        if let Some(host_port) = mapping.host_port.filter(|port| *port != 0) {
                            if host_port != mapping.container_port {
                                self.error(
                                    &join(&mapping_path, "hostPort"),
                                    format!(
                                        "with networkMode host, hostPort ({host_port}) must equal containerPort ({})",
                                        mapping.container_port
                                    ),
                                );
                            }
                        }
                        mapping.container_port
                    }
                    NetworkMode::Bridge => match mapping.host_port {
                        // Docker picks an ephemeral port: no clash possible.
                        None | Some(0) => continue,
                        Some(port) => port,
                    },
                };
                let key = (host_port, mapping.protocol.as_str());
                if let Some(first) = host_ports.get(&key) {
                    self.error(
                        &mapping_path,
                        format!(
                            "host port {host_port}/{} is already used by {first}",
                            mapping.protocol.as_str()
                        ),
                    );
                } else {
                    host_ports.insert(key, mapping_path);
                }
            }
        }

        self.check_cycles(containers, paths);
    }

    /// Reports each dependency cycle once, naming its containers in order.
    fn check_cycles(&mut self, containers: &[ContainerDefinition], paths: &[ContainerPaths]) {
        let (_order, leftovers) = topological_order(containers);
        if leftovers.is_empty() {
            return;
        }
        let leftover: BTreeSet<usize> = leftovers.iter().copied().collect();
        let index_of: HashMap<&str, usize> = containers
            .iter()
            .enumerate()
            .rev() // the first of duplicate names wins
            .map(|(index, container)| (container.name.as_str(), index))
            .collect();
        let next_in_cycle = |index: usize| -> Option<usize> {
            containers[index]
                .dependencies()
                .iter()
                .filter_map(|edge| index_of.get(edge.container_name.as_str()).copied())
                .find(|dep| leftover.contains(dep))
        };
        let mut reported: BTreeSet<usize> = BTreeSet::new();
        for &start in &leftovers {
            let mut walk = vec![start];
            let mut current = start;
            let cycle = loop {
                let Some(next) = next_in_cycle(current) else {
                    break None;
                };
                if let Some(position) = walk.iter().position(|&seen| seen == next) {
                    break Some(walk[position..].to_vec());
                }
                walk.push(next);
                current = next;
            };
            let Some(cycle) = cycle else { continue };
            if cycle.iter().any(|index| reported.contains(index)) {
                continue;
            }
            reported.extend(cycle.iter().copied());
            let mut names: Vec<&str> = cycle.iter().map(|&i| containers[i].name.as_str()).collect();
            names.push(&containers[cycle[0]].name);
            let at = cycle.iter().min().copied().unwrap_or(cycle[0]);
            self.error(
                &paths[at].base,
                format!(
                    "dependency cycle: {} (through dependsOn, links and volumesFrom)",
                    names
                        .iter()
                        .map(|name| format!("{name:?}"))
                        .collect::<Vec<_>>()
                        .join(" -> ")
                ),
            );
        }
    }
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

/// Container names: 1–255 characters, a letter or digit first, then letters, digits, `_`, `.`
/// and `-` (what Docker and link aliases accept).
pub fn check_container_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("container name must not be empty".to_string());
    }
    if name.len() > 255 {
        return Err("container name is longer than 255 characters".to_string());
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid container name (a letter or digit, then letters, digits, '_', '.' or '-')"
        ))
    }
}

/// A Docker image reference: `[host[:port]/]path[:tag][@algorithm:hex]`.
pub fn check_image_reference(reference: &str) -> Result<(), String> {
    let invalid = |why: &str| {
        Err(format!(
            "{reference:?} is not a valid image reference: {why}"
        ))
    };
    if reference.is_empty() {
        return Err("image must not be empty".to_string());
    }
    if reference.len() > 4096 {
        return invalid("too long");
    }
    let (name_and_tag, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    if let Some(digest) = digest {
        let Some((algorithm, hex)) = digest.split_once(':') else {
            return invalid("a digest is algorithm:hex");
        };
        let algorithm_ok = !algorithm.is_empty()
            && algorithm.split(['+', '.', '_', '-']).all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            });
        if !algorithm_ok || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return invalid("a digest is algorithm:hex with at least 32 hex digits");
        }
    }
    let last_slash = name_and_tag.rfind('/');
    let (name, tag) = match name_and_tag.rfind(':') {
        Some(colon) if last_slash.map_or(true, |slash| colon > slash) => {
            (&name_and_tag[..colon], Some(&name_and_tag[colon + 1..]))
        }
        _ => (name_and_tag, None),
    };
    if let Some(tag) = tag {
        let mut chars = tag.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !first_ok || !rest_ok || tag.len() > 128 {
            return invalid(
                "a tag is 1–128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
            );
        }
    }
    if name.is_empty() {
        return invalid("the repository name is empty");
    }
    if name.len() > 255 {
        return invalid("the repository name is longer than 255 characters");
    }
    let mut components: Vec<&str> = name.split('/').collect();
    let first = components[0];
    let has_domain = components.len() > 1
        && (first.contains('.')
            || first.contains(':')
            || first == "localhost"
            || first.chars().any(|c| c.is_ascii_uppercase()));
    if has_domain {
        let (host, port) = match first.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (first, None),
        };
        let host_ok = !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        let port_ok = port.map_or(true, |port| {
            !port.is_empty() && port.len() <= 5 && port.chars().all(|c| c.is_ascii_digit())
        });
        if !host_ok || !port_ok {
            return invalid("the registry is not a valid host[:port]");
        }
        components.remove(0);
    }
    for component in components {
        if !path_component_ok(component) {
            if component.chars().any(|c| c.is_ascii_uppercase()) {
                return invalid("repository names must be lowercase");
            }
            return invalid("each path component is lowercase letters and digits, separated by '.', '_', '__' or dashes");
        }
    }
    Ok(())
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn path_component_ok(component: &str) -> bool {
    let bytes = component.as_bytes();
    if bytes.is_empty() {
        return false;
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut index = 0;
    while index < bytes.len() {
        if alnum(bytes[index]) {
            index += 1;
            continue;
        }
        let start = index;
        while index < bytes.len() && !alnum(bytes[index]) {
            index += 1;
        }
        let separator = &component[start..index];
        let ok = separator == "."
            || separator == "_"
            || separator == "__"
            || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
#[path = "definition_tests.rs"]
#[rustfmt::skip] // The tables read best one case per line.
mod tests;
