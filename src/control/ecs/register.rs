//! The RegisterContainerInstance request deckhand sends to join a cluster as an external
//! instance, and the reading of its answer. Pure: the host's figures, versions and settings come
//! in as [`RegistrationInput`]; the body goes out as JSON in the shape of ECS's model
//! (`cluster`, `containerInstanceArn` when re-registering, an empty instance identity document
//! and signature as the ECS agent sends for an external instance, `totalResources`,
//! `versionInfo`, `attributes`, `clientToken`).
//!
//! The attributes are the capabilities deckhand really has, so ECS places on this host only the
//! tasks it can run (see [`capability_attributes`] for the list and why each is there). Custom
//! attributes (`ECS_INSTANCE_ATTRIBUTES`, a JSON object) are checked against ECS's limits here,
//! with an error naming the bad one, and sent on the first registration only, as the ECS agent
//! does (a re-registration keeps the ones ECS already has). The container instance's tags
//! (`ECS_CONTAINER_INSTANCE_TAGS`, a JSON object) are checked against ECS's rules for tags
//! ([`parse_instance_tags`]) and sent as `tags` on every registration, as the ECS agent sends
//! them.
//!
//! [`starts_over`] decides what a refused registration means for the saved identity: ECS
//! saying the saved container instance is inactive (deregistered) means registering anew.

use serde_json::{json, Map, Value};
use std::fmt;

/// `com.amazonaws.ecs.capability.` — the older prefix ECS keeps for its first capabilities.
const CAPABILITY_PREFIX: &str = "com.amazonaws.ecs.capability.";
/// `ecs.capability.` — the prefix of the newer ones.
const ATTRIBUTE_PREFIX: &str = "ecs.capability.";
/// The docker-remote-api versions ECS knows as capabilities: 1.17 up to (not including) 1.33, less
/// the ones the ECS agent leaves out (1.26, 1.27, 1.31).
const DOCKER_REMOTE_API_MINORS: [u32; 13] = [17, 18, 19, 20, 21, 22, 23, 24, 25, 28, 29, 30, 32];
/// ECS's limits on an attribute: 1–128 characters for a name and for a value.
const ATTRIBUTE_MAX_CHARS: usize = 128;
/// ECS's limit on custom attributes per container instance.
const CUSTOM_ATTRIBUTES_MAX: usize = 10;
/// ECS's limits on tags (its `Tags`, `TagKey` and `TagValue`): 50 per resource, keys of 1–128
/// characters, values of up to 256.
const TAGS_MAX: usize = 50;
const TAG_KEY_MAX_CHARS: usize = 128;
const TAG_VALUE_MAX_CHARS: usize = 256;

/// What the registration says about this host and agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrationInput {
    /// `ECS_CLUSTER`: a cluster name or ARN.
    pub cluster: String,
    /// The ARN ECS gave on an earlier registration (kept in the state directory): re-registering
    /// with it keeps the instance's identity.
    pub container_instance_arn: Option<String>,
    /// Online CPU cores.
    pub cpu_cores: u32,
    /// `MemTotal` in MiB.
    pub memory_mib: u64,
    /// `ECS_RESERVED_MEMORY` in MiB.
    pub reserved_memory_mib: u64,
    /// `ECS_RESERVED_PORTS`.
    pub reserved_tcp_ports: Vec<u16>,
    /// `ECS_RESERVED_PORTS_UDP`.
    pub reserved_udp_ports: Vec<u16>,
    /// The Docker API version deckhand negotiated with the daemon (major, minor).
    pub docker_api_version: (u32, u32),
    /// deckhand's version.
    pub agent_version: String,
    /// deckhand's build hash (may be empty).
    pub agent_hash: String,
    /// The Docker Engine's version (`/version`'s `Version`).
    pub docker_version: String,
    /// `ECS_DISABLE_PRIVILEGED`.
    pub privileged_disabled: bool,
    /// `DECKHAND_TASK_METADATA`: the listener that serves `/v2/credentials/<id>` is on.
    pub credentials_served: bool,
    /// `std::env::consts::ARCH` of the host.
    pub cpu_architecture: String,
    /// `ECS_INSTANCE_ATTRIBUTES`, checked by [`parse_instance_attributes`], in its order.
    pub custom_attributes: Vec<(String, String)>,
    /// `ECS_CONTAINER_INSTANCE_TAGS`, checked by [`parse_instance_tags`]: key, value.
    pub tags: Vec<(String, String)>,
    /// A fresh token per registration attempt, so ECS treats a retried call as the same one.
    pub client_token: String,
}

/// Why a registration cannot be built or its answer read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    /// `ECS_INSTANCE_ATTRIBUTES` is not a JSON object of strings.
    AttributesNotAnObject(String),
    /// One custom attribute breaks ECS's rules.
    BadAttribute { name: String, problem: String },
    /// More custom attributes than ECS takes.
    TooManyAttributes(usize),
    /// `ECS_CONTAINER_INSTANCE_TAGS` is not a JSON object of strings.
    TagsNotAnObject(String),
    /// One tag breaks ECS's rules.
    BadTag { key: String, problem: String },
    /// More tags than ECS takes.
    TooManyTags(usize),
    /// `ECS_RESERVED_MEMORY` is more than the host has.
    ReservedMemoryTooLarge { total_mib: u64, reserved_mib: u64 },
    /// The answer has no `containerInstance.containerInstanceArn`.
    BadResponse(String),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::AttributesNotAnObject(problem) => write!(
                formatter,
                "ECS_INSTANCE_ATTRIBUTES: expected a JSON object of strings ({problem})"
            ),
            RegisterError::BadAttribute { name, problem } => {
                write!(
                    formatter,
                    "ECS_INSTANCE_ATTRIBUTES: attribute {name:?}: {problem}"
                )
            }
            RegisterError::TooManyAttributes(count) => write!(
                formatter,
                "ECS_INSTANCE_ATTRIBUTES: {count} attributes, ECS takes at most \
                 {CUSTOM_ATTRIBUTES_MAX} per instance"
            ),
            RegisterError::TagsNotAnObject(problem) => write!(
                formatter,
                "ECS_CONTAINER_INSTANCE_TAGS: expected a JSON object of strings ({problem})"
            ),
            RegisterError::BadTag { key, problem } => {
                write!(
                    formatter,
                    "ECS_CONTAINER_INSTANCE_TAGS: tag {key:?}: {problem}"
                )
            }
            RegisterError::TooManyTags(count) => write!(
                formatter,
                "ECS_CONTAINER_INSTANCE_TAGS: {count} tags, ECS takes at most {TAGS_MAX} per \
                 container instance"
            ),
            RegisterError::ReservedMemoryTooLarge {
                total_mib,
                reserved_mib,
            } => write!(
                formatter,
                "ECS_RESERVED_MEMORY is {reserved_mib} MiB, more than the host's {total_mib} MiB"
            ),
            RegisterError::BadResponse(problem) => {
                write!(formatter, "RegisterContainerInstance answer: {problem}")
            }
        }
    }
}

impl std::error::Error for RegisterError {}

/// `ECS_INSTANCE_ATTRIBUTES` (a JSON object of string values; empty text means none) as name,
/// value pairs, each checked against ECS's rules for attributes.
pub fn parse_instance_attributes(text: &str) -> Result<Vec<(String, String)>, RegisterError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let object: Map<String, Value> = serde_json::from_str(text)
        .map_err(|error| RegisterError::AttributesNotAnObject(error.to_string()))?;
    if object.len() > CUSTOM_ATTRIBUTES_MAX {
        return Err(RegisterError::TooManyAttributes(object.len()));
    }
    let mut attributes = Vec::with_capacity(object.len());
    for (name, value) in object {
        let Value::String(value) = value else {
            return Err(RegisterError::BadAttribute {
                name,
                problem: "the value must be a string".to_string(),
            });
        };
        if let Some(problem) = attribute_problem(&name, &value) {
            return Err(RegisterError::BadAttribute { name, problem });
        }
        attributes.push((name, value));
    }
    Ok(attributes)
}

/// What is wrong with a custom attribute by ECS's rules: a name of 1–128 letters, digits, `-`,
/// `_`, `/`, `\` or `.`; a value of 1–128 of those, `@`, `:` or spaces, not starting or ending
/// with a space; and not one of the names deckhand sets itself.
fn attribute_problem(name: &str, value: &str) -> Option<String> {
    let name_chars = name.chars().count();
    if name_chars == 0 || name_chars > ATTRIBUTE_MAX_CHARS {
        return Some(format!(
            "the name must have 1 to {ATTRIBUTE_MAX_CHARS} characters"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '\\' | '.')))
    {
        return Some(format!(
            "the name may hold letters, digits, - _ / \\ and . only, not {bad:?}"
        ));
    }
    if name.starts_with(CAPABILITY_PREFIX)
        || name.starts_with(ATTRIBUTE_PREFIX)
        || name.starts_with("ecs.os-")
        || name == "ecs.cpu-architecture"
    {
        return Some("the name is one deckhand sets itself".to_string());
    }
    let value_chars = value.chars().count();
    if value_chars == 0 || value_chars > ATTRIBUTE_MAX_CHARS {
        return Some(format!(
            "the value must have 1 to {ATTRIBUTE_MAX_CHARS} characters"
        ));
    }
    if let Some(bad) = value.chars().find(|c| {
        !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '/' | '\\' | ':' | ' '))
    }) {
        return Some(format!(
            "the value may hold letters, digits, spaces and - _ . @ / \\ : only, not {bad:?}"
        ));
    }
    if value.starts_with(' ') || value.ends_with(' ') {
        return Some("the value must not start or end with a space".to_string());
    }
    None
}

/// `ECS_CONTAINER_INSTANCE_TAGS` (a JSON object of string values; empty text means none) as
/// key, value pairs, each checked against ECS's rules for tags.
pub fn parse_instance_tags(text: &str) -> Result<Vec<(String, String)>, RegisterError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let object: Map<String, Value> = serde_json::from_str(text)
        .map_err(|error| RegisterError::TagsNotAnObject(error.to_string()))?;
    if object.len() > TAGS_MAX {
        return Err(RegisterError::TooManyTags(object.len()));
    }
    let mut tags = Vec::with_capacity(object.len());
    for (key, value) in object {
        let Value::String(value) = value else {
            return Err(RegisterError::BadTag {
                key,
                problem: "the value must be a string".to_string(),
            });
        };
        if let Some(problem) = tag_problem(&key, &value) {
            return Err(RegisterError::BadTag { key, problem });
        }
        tags.push((key, value));
    }
    Ok(tags)
}

/// What is wrong with a tag by ECS's rules (its model's `TagKey` and `TagValue`): a key of
/// 1–128 and a value of up to 256 letters, digits, spaces and `_ . : / = + - @`, neither
/// starting with `aws:` in any case (AWS keeps that prefix).
fn tag_problem(key: &str, value: &str) -> Option<String> {
    let key_chars = key.chars().count();
    if key_chars == 0 || key_chars > TAG_KEY_MAX_CHARS {
        return Some(format!(
            "the key must have 1 to {TAG_KEY_MAX_CHARS} characters"
        ));
    }
    if value.chars().count() > TAG_VALUE_MAX_CHARS {
        return Some(format!(
            "the value must have at most {TAG_VALUE_MAX_CHARS} characters"
        ));
    }
    for (what, text) in [("key", key), ("value", value)] {
        if let Some(bad) = text.chars().find(|c| !tag_character(*c)) {
            return Some(format!(
                "the {what} may hold letters, digits, spaces and _ . : / = + - @ only, not {bad:?}"
            ));
        }
        let prefix: String = text.chars().take(4).collect();
        if prefix.eq_ignore_ascii_case("aws:") {
            return Some(format!(
                "the {what} must not start with aws: (AWS keeps it)"
            ));
        }
    }
    None
}

/// A character ECS takes in a tag: `[\p{L}\p{Z}\p{N}_.:/=+\-@]`.
fn tag_character(character: char) -> bool {
    character.is_alphanumeric()
        || (character.is_whitespace() && !character.is_control())
        || matches!(character, '_' | '.' | ':' | '/' | '=' | '+' | '-' | '@')
}

/// Whether a refused registration means starting over with a fresh one: ECS says the saved
/// container instance is inactive (deregistered while this host was away), so sending its ARN
/// again gets the same answer forever. Without a saved ARN, an inactive answer is ECS's own
/// trouble and waits. Pure.
pub fn starts_over(error: &super::EcsError, saved_arn: Option<&str>) -> bool {
    error.is_inactive_instance() && saved_arn.is_some()
}

/// ECS's spelling of a CPU architecture: the ECS agent reports Go's names, with `amd64` as
/// `x86_64` (the instance identity document's name), so Rust's `aarch64` is `arm64`.
pub fn ecs_cpu_architecture(rust_arch: &str) -> &str {
    match rust_arch {
        "aarch64" => "arm64",
        "x86" => "i386",
        "arm" => "arm",
        other => other,
    }
}

/// Whether ECS places tasks on a host of this CPU (Rust's name for it): x86_64 and arm64 only,
/// the two ECS Anywhere installs on. A 32-bit ARM host has no ECS agent and ECS never places a
/// task on it, so deckhand refuses to register one rather than join a cluster for nothing; the
/// error names what still works there.
pub fn check_ecs_architecture(rust_arch: &str) -> Result<(), String> {
    match rust_arch {
        "x86_64" | "aarch64" => Ok(()),
        "arm" => Err(
            "ECS_EXTERNAL=true: Amazon ECS does not support 32-bit ARM (armhf) \
             hosts, only x86_64 and arm64; deckhand runs local tasks, Compose files and tasks.d \
             on this host without it (set ECS_EXTERNAL=false)"
                .to_string(),
        ),
        other => Err(format!(
            "ECS_EXTERNAL=true: Amazon ECS does not support {other} hosts, only x86_64 and \
             arm64; deckhand runs local tasks, Compose files and tasks.d on this host without it \
             (set ECS_EXTERNAL=false)"
        )),
    }
}

/// The capabilities and platform attributes deckhand registers, each because deckhand does it:
///
/// - `com.amazonaws.ecs.capability.docker-remote-api.1.17` … `1.32` (ECS's list, less 1.26,
///   1.27 and 1.31 as the ECS agent leaves them out), those up to the negotiated API version:
///   ECS places task-definition fields by the API version they need, and deckhand passes them
///   to Docker.
/// - `com.amazonaws.ecs.capability.logging-driver.json-file`, `.syslog`, `.journald`, `.none`:
///   Docker's built-in local drivers, which deckhand hands Docker as the definition names them.
/// - `com.amazonaws.ecs.capability.logging-driver.awslogs`: deckhand runs awslogs containers
///   (shipping through Docker's driver, or with the local fallback when it cannot).
/// - `com.amazonaws.ecs.capability.privileged-container`, unless `ECS_DISABLE_PRIVILEGED`:
///   deckhand runs privileged containers (and refuses them when disabled).
/// - `com.amazonaws.ecs.capability.task-iam-role` and `.task-iam-role-network-host`: a task's
///   role credentials from ECS are served at `/v2/credentials/<id>` to every container of the
///   task (bridge and host network), through `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
/// - `ecs.capability.execution-role-awslogs`: Docker's awslogs driver ships an awslogs
///   container's logs with its task's execution-role credentials
///   (`awslogs-credentials-endpoint`).
///
///   These three only while the task metadata listener, which serves the credentials, is up
///   (`DECKHAND_TASK_METADATA` on and its port free). `DECKHAND_CREDENTIALS_ENDPOINT=false` keeps them: the endpoint
///   is still served, and the redirect of `169.254.170.2` may be the operator's (as ecs-init
///   makes it for the ECS agent, which advertises them by its own settings alone).
/// - `com.amazonaws.ecs.capability.ecr-auth` and `ecs.capability.execution-role-ecr-pull`: an
///   image in ECR is pulled with the login of `GetAuthorizationToken`, signed with the task's
///   execution role (else the host's credentials).
/// - `ecs.capability.secrets.ssm.environment-variables`, `.secrets.asm.environment-variables`:
///   a container's `secrets` come from SSM Parameter Store and Secrets Manager with the
///   execution role, where the local secret store does not hold them.
/// - `ecs.capability.secrets.ssm.bootstrap.log-driver`, `.secrets.asm.bootstrap.log-driver`:
///   a payload's `LOG_DRIVER` secrets become options of the container's log driver, fetched
///   the same way.
/// - `ecs.capability.private-registry-authentication.secretsmanager`: a pull's
///   `repositoryCredentials` (ECS's `asmAuthData`) come from Secrets Manager likewise.
/// - `ecs.capability.container-ordering`: `dependsOn` (START, COMPLETE, SUCCESS, HEALTHY).
/// - `ecs.capability.container-health-check`: Docker health checks, and HEALTHY conditions.
/// - `ecs.capability.container-restart-policy`: a container's `restartPolicy`.
/// - `ecs.capability.pid-ipc-namespace-sharing`: `pidMode`/`ipcMode` `task` and `host`.
/// - `ecs.capability.network.container-port-range`: `containerPortRange` in port mappings.
/// - `ecs.capability.external`: an ECS Anywhere instance (`ECS_EXTERNAL=true`).
/// - `ecs.os-type` = `linux`, `ecs.os-family` = `LINUX`: the ECS agent's values for Linux.
/// - `ecs.cpu-architecture`: `x86_64` or `arm64` as the ECS agent spells them, so ECS matches
///   a task definition's `runtimePlatform.cpuArchitecture`.
///
/// Left out because deckhand does not do them: `task-cpu-mem-limit` (task-level cpu and memory
/// are admitted against the host, not enforced with a task cgroup), `ecr-endpoint` (ECS's
/// ECR endpoint override is not read), `full-sync`, `efs`,
/// `firelens.*`, `execute-command`, `task-eni*`, `aws-appmesh`, `service-connect-v1`, GPUs
/// and the other logging drivers (gelf, fluentd, splunk: not checked with deckhand).
pub fn capability_attributes(input: &RegistrationInput) -> Vec<(String, Option<String>)> {
    let mut attributes: Vec<(String, Option<String>)> = Vec::new();
    let mut name_only = |name: String| attributes.push((name, None));
    for minor in DOCKER_REMOTE_API_MINORS {
        if (1, minor) <= input.docker_api_version {
            name_only(format!("{CAPABILITY_PREFIX}docker-remote-api.1.{minor}"));
        }
    }
    for driver in ["json-file", "syslog", "journald", "none", "awslogs"] {
        name_only(format!("{CAPABILITY_PREFIX}logging-driver.{driver}"));
    }
    if !input.privileged_disabled {
        name_only(format!("{CAPABILITY_PREFIX}privileged-container"));
    }
    if input.credentials_served {
        for capability in ["task-iam-role", "task-iam-role-network-host"] {
            name_only(format!("{CAPABILITY_PREFIX}{capability}"));
        }
    }
    name_only(format!("{CAPABILITY_PREFIX}ecr-auth"));
    if input.credentials_served {
        name_only(format!("{ATTRIBUTE_PREFIX}execution-role-awslogs"));
    }
    for capability in [
        "execution-role-ecr-pull",
        "secrets.ssm.environment-variables",
        "secrets.asm.environment-variables",
        "secrets.ssm.bootstrap.log-driver",
        "secrets.asm.bootstrap.log-driver",
        "private-registry-authentication.secretsmanager",
        "container-ordering",
        "container-health-check",
        "container-restart-policy",
        "pid-ipc-namespace-sharing",
        "network.container-port-range",
        "external",
    ] {
        name_only(format!("{ATTRIBUTE_PREFIX}{capability}"));
    }
    attributes.push(("ecs.os-type".to_string(), Some("linux".to_string())));
    attributes.push(("ecs.os-family".to_string(), Some("LINUX".to_string())));
    attributes.push((
        "ecs.cpu-architecture".to_string(),
        Some(ecs_cpu_architecture(&input.cpu_architecture).to_string()),
    ));
    attributes
}

fn attribute_json(name: &str, value: Option<&str>) -> Value {
    match value {
        Some(value) => json!({"name": name, "value": value}),
        None => json!({"name": name}),
    }
}

/// The ports in order, each once. A bit per port rather than a sort: the binary needs no sort
/// of `u16` for it.
fn port_set(ports: &[u16]) -> Vec<String> {
    let mut seen = vec![0u64; 1024];
    for port in ports {
        if let Some(word) = seen.get_mut(usize::from(*port / 64)) {
            *word |= 1 << (port % 64);
        }
    }
    (0..=u16::MAX)
        .filter(|port| {
            seen.get(usize::from(port / 64))
                .is_some_and(|word| word >> (port % 64) & 1 == 1)
        })
        .map(|port| port.to_string())
        .collect()
}

/// The RegisterContainerInstance body for `input`.
pub fn register_request(input: &RegistrationInput) -> Result<Value, RegisterError> {
    let memory = input
        .memory_mib
        .checked_sub(input.reserved_memory_mib)
        .ok_or(RegisterError::ReservedMemoryTooLarge {
            total_mib: input.memory_mib,
            reserved_mib: input.reserved_memory_mib,
        })?;
    let mut attributes = Vec::new();
    if input.container_instance_arn.is_none() {
        for (name, value) in &input.custom_attributes {
            attributes.push(attribute_json(name, Some(value)));
        }
    }
    for (name, value) in capability_attributes(input) {
        attributes.push(attribute_json(&name, value.as_deref()));
    }
    let mut body = json!({
        "cluster": input.cluster,
        "instanceIdentityDocument": "",
        "instanceIdentityDocumentSignature": "",
        "totalResources": [
            {"name": "CPU", "type": "INTEGER", "integerValue": u64::from(input.cpu_cores) * 1024},
            {"name": "MEMORY", "type": "INTEGER", "integerValue": memory.min(i32::MAX as u64)},
            {"name": "PORTS", "type": "STRINGSET", "stringSetValue": port_set(&input.reserved_tcp_ports)},
            {"name": "PORTS_UDP", "type": "STRINGSET", "stringSetValue": port_set(&input.reserved_udp_ports)},
        ],
        "versionInfo": {
            "agentVersion": input.agent_version,
            "agentHash": input.agent_hash,
            "dockerVersion": format!("DockerVersion: {}", input.docker_version),
        },
        "attributes": attributes,
        "clientToken": input.client_token,
    });
    if let (Some(arn), Value::Object(object)) = (&input.container_instance_arn, &mut body) {
        object.insert("containerInstanceArn".to_string(), json!(arn));
    }
    // On every registration, first or not, as the ECS agent sends them (ECS's `Tag` shape).
    if let (false, Value::Object(object)) = (input.tags.is_empty(), &mut body) {
        let tags: Vec<Value> = input
            .tags
            .iter()
            .map(|(key, value)| json!({"key": key, "value": value}))
            .collect();
        object.insert("tags".to_string(), Value::Array(tags));
    }
    Ok(body)
}

/// The container instance ARN from a RegisterContainerInstance answer.
pub fn parse_register_response(body: &[u8]) -> Result<String, RegisterError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| RegisterError::BadResponse(format!("not JSON: {error}")))?;
    match value
        .pointer("/containerInstance/containerInstanceArn")
        .and_then(Value::as_str)
    {
        Some(arn) if !arn.is_empty() => Ok(arn.to_string()),
        _ => Err(RegisterError::BadResponse(
            "no containerInstance.containerInstanceArn".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> RegistrationInput {
        RegistrationInput {
            cluster: "edge".to_string(),
            container_instance_arn: None,
            cpu_cores: 2,
            memory_mib: 3934,
            reserved_memory_mib: 256,
            reserved_tcp_ports: vec![2376, 22, 2375, 22],
            reserved_udp_ports: vec![],
            docker_api_version: (1, 47),
            agent_version: "0.1.0".to_string(),
            agent_hash: "abc123".to_string(),
            docker_version: "26.1.5".to_string(),
            privileged_disabled: false,
            credentials_served: true,
            cpu_architecture: "x86_64".to_string(),
            custom_attributes: vec![("site".to_string(), "shop-17".to_string())],
            tags: Vec::new(),
            client_token: "token-1".to_string(),
        }
    }

    fn names(body: &Value) -> Vec<String> {
        body["attributes"]
            .as_array()
            .map(|attributes| {
                attributes
                    .iter()
                    .map(|attribute| match attribute.get("value") {
                        Some(value) => format!(
                            "{}={}",
                            attribute["name"].as_str().unwrap_or(""),
                            value.as_str().unwrap_or("")
                        ),
                        None => attribute["name"].as_str().unwrap_or("").to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn first_registration_body() {
        let body = register_request(&input()).unwrap();
        let expected_attributes: Vec<String> = [
            "site=shop-17",
            "com.amazonaws.ecs.capability.docker-remote-api.1.17",
            "com.amazonaws.ecs.capability.docker-remote-api.1.18",
            "com.amazonaws.ecs.capability.docker-remote-api.1.19",
            "com.amazonaws.ecs.capability.docker-remote-api.1.20",
            "com.amazonaws.ecs.capability.docker-remote-api.1.21",
            "com.amazonaws.ecs.capability.docker-remote-api.1.22",
            "com.amazonaws.ecs.capability.docker-remote-api.1.23",
            "com.amazonaws.ecs.capability.docker-remote-api.1.24",
            "com.amazonaws.ecs.capability.docker-remote-api.1.25",
            "com.amazonaws.ecs.capability.docker-remote-api.1.28",
            "com.amazonaws.ecs.capability.docker-remote-api.1.29",
            "com.amazonaws.ecs.capability.docker-remote-api.1.30",
            "com.amazonaws.ecs.capability.docker-remote-api.1.32",
            "com.amazonaws.ecs.capability.logging-driver.json-file",
            "com.amazonaws.ecs.capability.logging-driver.syslog",
            "com.amazonaws.ecs.capability.logging-driver.journald",
            "com.amazonaws.ecs.capability.logging-driver.none",
            "com.amazonaws.ecs.capability.logging-driver.awslogs",
            "com.amazonaws.ecs.capability.privileged-container",
            "com.amazonaws.ecs.capability.task-iam-role",
            "com.amazonaws.ecs.capability.task-iam-role-network-host",
            "com.amazonaws.ecs.capability.ecr-auth",
            "ecs.capability.execution-role-awslogs",
            "ecs.capability.execution-role-ecr-pull",
            "ecs.capability.secrets.ssm.environment-variables",
            "ecs.capability.secrets.asm.environment-variables",
            "ecs.capability.secrets.ssm.bootstrap.log-driver",
            "ecs.capability.secrets.asm.bootstrap.log-driver",
            "ecs.capability.private-registry-authentication.secretsmanager",
            "ecs.capability.container-ordering",
            "ecs.capability.container-health-check",
            "ecs.capability.container-restart-policy",
            "ecs.capability.pid-ipc-namespace-sharing",
            "ecs.capability.network.container-port-range",
            "ecs.capability.external",
            "ecs.os-type=linux",
            "ecs.os-family=LINUX",
            "ecs.cpu-architecture=x86_64",
        ]
        .iter()
        .map(|name| name.to_string())
        .collect();
        assert_eq!(names(&body), expected_attributes);
        let mut rest = body.clone();
        rest.as_object_mut().unwrap().remove("attributes");
        assert_eq!(
            rest,
            json!({
                "cluster": "edge",
                "instanceIdentityDocument": "",
                "instanceIdentityDocumentSignature": "",
                "totalResources": [
                    {"name": "CPU", "type": "INTEGER", "integerValue": 2048},
                    {"name": "MEMORY", "type": "INTEGER", "integerValue": 3678},
                    {"name": "PORTS", "type": "STRINGSET", "stringSetValue": ["22", "2375", "2376"]},
                    {"name": "PORTS_UDP", "type": "STRINGSET", "stringSetValue": []}
                ],
                "versionInfo": {"agentVersion": "0.1.0", "agentHash": "abc123", "dockerVersion": "DockerVersion: 26.1.5"},
                "clientToken": "token-1"
            })
        );
    }

    const ARN: &str =
        "arn:aws:ecs:us-west-2:123456789012:container-instance/edge/0123456789abcdef0123456789abcdef";

    type Check = dyn Fn(&Value) -> bool;

    #[test]
    fn variations() {
        let cases: Vec<(&str, RegistrationInput, &Check)> = vec![
            (
                "re-registration names the ARN and sends no custom attribute",
                RegistrationInput {
                    container_instance_arn: Some(ARN.to_string()),
                    ..input()
                },
                &|body| {
                    body["containerInstanceArn"] == json!(ARN)
                        && !names(body).iter().any(|name| name.starts_with("site"))
                },
            ),
            (
                "tags go as ECS's Tag list, on a re-registration too",
                RegistrationInput {
                    container_instance_arn: Some(ARN.to_string()),
                    tags: vec![
                        ("site".to_string(), "depot 7".to_string()),
                        ("owner".to_string(), String::new()),
                    ],
                    ..input()
                },
                &|body| {
                    body["tags"]
                        == json!([{"key": "site", "value": "depot 7"}, {"key": "owner", "value": ""}])
                },
            ),
            ("no tags: no tags field", input(), &|body| {
                body.get("tags").is_none()
            }),
            (
                "no task metadata listener: no credentials capabilities",
                RegistrationInput {
                    credentials_served: false,
                    ..input()
                },
                &|body| {
                    let names = names(body);
                    !names.iter().any(|name| {
                        name.ends_with(".task-iam-role")
                            || name.ends_with(".task-iam-role-network-host")
                            || name.ends_with(".execution-role-awslogs")
                    }) && names.contains(&"ecs.capability.container-ordering".to_string())
                },
            ),
            (
                "privileged disabled",
                RegistrationInput {
                    privileged_disabled: true,
                    ..input()
                },
                &|body| {
                    !names(body)
                        .iter()
                        .any(|name| name.ends_with("privileged-container"))
                },
            ),
            (
                "arm64",
                RegistrationInput {
                    cpu_architecture: "aarch64".to_string(),
                    ..input()
                },
                &|body| names(body).contains(&"ecs.cpu-architecture=arm64".to_string()),
            ),
            (
                "an old API lists the versions up to it",
                RegistrationInput {
                    docker_api_version: (1, 24),
                    ..input()
                },
                &|body| {
                    names(body)
                        .iter()
                        .filter(|name| name.contains("docker-remote-api"))
                        .count()
                        == 8
                },
            ),
            (
                "no reserved memory",
                RegistrationInput {
                    reserved_memory_mib: 0,
                    ..input()
                },
                &|body| body["totalResources"][1]["integerValue"] == json!(3934),
            ),
        ];
        for (label, case, check) in cases {
            let body = register_request(&case).unwrap();
            assert!(check(&body), "{label}: {body}");
        }
    }

    #[test]
    fn reserved_memory_above_total_is_refused() {
        let case = RegistrationInput {
            reserved_memory_mib: 4000,
            ..input()
        };
        assert_eq!(
            register_request(&case),
            Err(RegisterError::ReservedMemoryTooLarge {
                total_mib: 3934,
                reserved_mib: 4000
            })
        );
    }

    /// The pairs parsed, or a piece of the error.
    type Expected = Result<Vec<(&'static str, &'static str)>, &'static str>;

    #[test]
    fn instance_attributes() {
        let long = "a".repeat(129);
        let cases: Vec<(String, Expected)> = vec![
            ("".to_string(), Ok(vec![])),
            (
                r#"{"site": "shop-17", "rack": "a/3:2 @top"}"#.to_string(),
                Ok(vec![("rack", "a/3:2 @top"), ("site", "shop-17")]),
            ),
            (
                "[1]".to_string(),
                Err("ECS_INSTANCE_ATTRIBUTES: expected a JSON object of strings"),
            ),
            (
                r#"{"site": 3}"#.to_string(),
                Err(r#"attribute "site": the value must be a string"#),
            ),
            (
                r#"{"": "x"}"#.to_string(),
                Err(r#"attribute "": the name must have 1 to 128 characters"#),
            ),
            (
                format!(r#"{{"{long}": "x"}}"#),
                Err("the name must have 1 to 128 characters"),
            ),
            (
                r#"{"bad name": "x"}"#.to_string(),
                Err(
                    r#"attribute "bad name": the name may hold letters, digits, - _ / \ and . only, not ' '"#,
                ),
            ),
            (
                r#"{"site": ""}"#.to_string(),
                Err(r#"attribute "site": the value must have 1 to 128 characters"#),
            ),
            (
                format!(r#"{{"site": "{long}"}}"#),
                Err("the value must have 1 to 128 characters"),
            ),
            (
                r#"{"site": " x"}"#.to_string(),
                Err(r#"attribute "site": the value must not start or end with a space"#),
            ),
            (
                r#"{"site": "x;y"}"#.to_string(),
                Err(
                    r#"the value may hold letters, digits, spaces and - _ . @ / \ : only, not ';'"#,
                ),
            ),
            (
                r#"{"ecs.capability.external": "x"}"#.to_string(),
                Err("the name is one deckhand sets itself"),
            ),
            (
                r#"{"ecs.os-type": "windows"}"#.to_string(),
                Err("the name is one deckhand sets itself"),
            ),
            (
                format!(
                    "{{{}}}",
                    (0..11)
                        .map(|n| format!(r#""k{n}": "v""#))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Err("11 attributes, ECS takes at most 10 per instance"),
            ),
        ];
        for (text, expected) in cases {
            let got = parse_instance_attributes(&text);
            match (expected, got) {
                (Ok(pairs), Ok(got)) => {
                    let pairs: Vec<(String, String)> = pairs
                        .iter()
                        .map(|(n, v)| (n.to_string(), v.to_string()))
                        .collect();
                    assert_eq!(got, pairs, "{text}");
                }
                (Err(needle), Err(error)) => {
                    assert!(
                        error.to_string().contains(needle),
                        "{text}: {error} lacks {needle}"
                    )
                }
                (expected, got) => panic!("{text}: expected {expected:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn register_response() {
        let arn = "arn:aws:ecs:us-west-2:123456789012:container-instance/edge/0123456789abcdef0123456789abcdef";
        let body = json!({"containerInstance": {"containerInstanceArn": arn, "status": "ACTIVE"}})
            .to_string();
        assert_eq!(
            parse_register_response(body.as_bytes()),
            Ok(arn.to_string())
        );
        for bad in [
            &b"{}"[..],
            b"not json",
            br#"{"containerInstance": {"containerInstanceArn": ""}}"#,
        ] {
            assert!(matches!(
                parse_register_response(bad),
                Err(RegisterError::BadResponse(_))
            ));
        }
    }

    #[test]
    fn port_sets_are_ordered_and_unique_at_both_ends_of_the_range() {
        let cases: &[(&[u16], &[&str])] = &[
            (&[], &[]),
            (&[65535, 0, 65535, 64, 63], &["0", "63", "64", "65535"]),
            (&[443, 80, 443], &["80", "443"]),
        ];
        for (ports, expected) in cases {
            assert_eq!(port_set(ports), *expected, "{ports:?}");
        }
    }

    #[test]
    fn instance_tags_follow_ecs_rules_and_a_bad_one_is_named() {
        let ok: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("{}", &[]),
            (
                r#"{"site":"depot 7","team":"edge-ops@corp/+=_.:"}"#,
                &[("site", "depot 7"), ("team", "edge-ops@corp/+=_.:")],
            ),
            (r#"{"empty":""}"#, &[("empty", "")]),
            (
                r#"{"Größe":"groß","数":"五"}"#,
                &[("Größe", "groß"), ("数", "五")],
            ),
            (r#"{"awsx":"aws"}"#, &[("awsx", "aws")]),
        ];
        for (text, expected) in ok {
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect();
            assert_eq!(parse_instance_tags(text), Ok(expected), "{text}");
        }
        let long_key = "k".repeat(129);
        let long_value = format!(r#"{{"k":"{}"}}"#, "v".repeat(257));
        let many = format!(
            "{{{}}}",
            (0..51)
                .map(|n| format!(r#""k{n}":"v""#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let bad: Vec<(String, &str)> = vec![
            ("[1]".to_string(), "expected a JSON object"),
            ("not json".to_string(), "expected a JSON object"),
            (
                r#"{"n":1}"#.to_string(),
                r#"tag "n": the value must be a string"#,
            ),
            (
                r#"{"":"v"}"#.to_string(),
                r#"tag "": the key must have 1 to 128"#,
            ),
            (
                format!(r#"{{"{long_key}":"v"}}"#),
                "the key must have 1 to 128",
            ),
            (long_value, r#"tag "k": the value must have at most 256"#),
            (
                r#"{"a*b":"v"}"#.to_string(),
                r#"tag "a*b": the key may hold"#,
            ),
            (
                r#"{"k":"tab\tstop"}"#.to_string(),
                r#"tag "k": the value may hold"#,
            ),
            (
                r#"{"AWS:team":"v"}"#.to_string(),
                "the key must not start with aws:",
            ),
            (
                r#"{"k":"aws:x"}"#.to_string(),
                "the value must not start with aws:",
            ),
            (many, "51 tags, ECS takes at most 50"),
        ];
        for (text, needle) in bad {
            let message = parse_instance_tags(&text).expect_err(&text).to_string();
            assert!(
                message.starts_with("ECS_CONTAINER_INSTANCE_TAGS: ") && message.contains(needle),
                "{text}: {message}"
            );
        }
    }

    #[test]
    fn only_an_inactive_saved_instance_starts_over() {
        use crate::control::ecs::EcsError;
        let refused = |error_type: &str| EcsError::Service {
            status: 400,
            error_type: error_type.to_string(),
            message: "m".to_string(),
        };
        let cases: &[(EcsError, Option<&str>, bool)] = &[
            (refused("InactiveInstanceException"), Some(ARN), true),
            (refused("InactiveInstanceException"), None, false),
            (refused("ClientException"), Some(ARN), false),
            (EcsError::Unreachable("down".into()), Some(ARN), false),
            (refused("InvalidParameterException"), Some(ARN), false),
        ];
        for (error, saved, expected) in cases {
            assert_eq!(starts_over(error, *saved), *expected, "{error:?} {saved:?}");
        }
    }

    #[test]
    fn ecs_places_tasks_on_x86_64_and_arm64_hosts_only() {
        let table = [
            ("x86_64", None),
            ("aarch64", None),
            ("arm", Some("does not support 32-bit ARM (armhf) hosts")),
            ("riscv64", Some("does not support riscv64 hosts")),
        ];
        for (arch, refusal) in table {
            match (check_ecs_architecture(arch), refusal) {
                (Ok(()), None) => {}
                (Err(message), Some(expected)) => {
                    assert!(message.contains(expected), "{arch}: {message}");
                    assert!(message.contains("local tasks"), "{arch}: {message}");
                }
                (result, _) => panic!("{arch}: {result:?}"),
            }
        }
    }
}
