//! A container's `dockerConfig` in an ACS task: `config` and `hostConfig`, raw Docker JSON in
//! strings, each checked to be a JSON object of bounded size with nothing in it that deckhand
//! sets itself from the task (mounts, links, published ports, Docker restarts), and read for the
//! few values the model needs too: the health check (so `HEALTHY` dependencies work), the memory
//! reservation (for the host-resource ledger) and the network mode (checked against the task's).
//! `hostConfig.LogConfig`, where ECS sends a container's log configuration, becomes the
//! container's `logConfiguration`, so the engine applies it as it does a task definition's (the
//! execution role's `awslogs-credentials-endpoint`, the fallback without credentials).

use super::is_empty;
use super::MAX_DOCKER_CONFIG_BYTES;
use crate::task::DockerConfigOverlay;
use serde_json::{json, Map, Value};

/// What one `dockerConfig` gives.
#[derive(Debug, Default)]
pub(super) struct DockerConfigRead {
    pub(super) overlay: Option<DockerConfigOverlay>,
    /// A task-definition `healthCheck` object, from `config.Healthcheck`.
    pub(super) health_check: Option<Value>,
    pub(super) memory_reservation_mib: Option<u64>,
    pub(super) network_mode: Option<String>,
    /// A task-definition `logConfiguration` object, from `hostConfig.LogConfig`.
    pub(super) log_configuration: Option<Value>,
}

/// `Config` keys deckhand sets itself and an overlay may not change.
const OWNED_CONFIG_KEYS: &[(&str, &str)] = &[(
    "Image",
    "the image is the container's image; deckhand pulls and tracks it",
)];

/// `HostConfig` keys deckhand sets itself and an overlay may not change.
const OWNED_HOST_CONFIG_KEYS: &[(&str, &str)] = &[
    (
        "Binds",
        "deckhand mounts the container's mountPoints itself",
    ),
    ("VolumesFrom", "deckhand sets volumesFrom itself"),
    ("Links", "deckhand sets links itself"),
    (
        "PortBindings",
        "deckhand publishes portMappings itself (its host-port ledger must know them)",
    ),
    (
        "AutoRemove",
        "deckhand removes the containers it created itself",
    ),
];

const NANOS_PER_SECOND: u64 = 1_000_000_000;
const BYTES_PER_MIB: u64 = 1 << 20;

type Problem = (String, String);

fn problem(path: &str, message: impl Into<String>) -> Problem {
    (path.to_string(), message.into())
}

/// Reads `dockerConfig` at `path` (absent or `null`: nothing).
pub(super) fn read_docker_config(
    value: Option<&Value>,
    path: &str,
) -> Result<DockerConfigRead, Problem> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(DockerConfigRead::default());
    };
    let Some(object) = value.as_object() else {
        return Err(problem(path, "expected an object"));
    };
    for key in object.keys() {
        if !matches!(key.as_str(), "config" | "hostConfig" | "version") {
            return Err(problem(
                &format!("{path}.{key}"),
                "unknown key: expected config, hostConfig or version",
            ));
        }
    }
    let config = embedded_object(object.get("config"), &format!("{path}.config"))?;
    let mut host_config = embedded_object(object.get("hostConfig"), &format!("{path}.hostConfig"))?;
    let mut read = DockerConfigRead::default();
    if let Some(config) = &config {
        let config_path = format!("{path}.config");
        refuse_owned(config, &config_path, OWNED_CONFIG_KEYS)?;
        read.health_check = health_check(config, &config_path)?;
    }
    if let Some(host_config) = &mut host_config {
        let host_path = format!("{path}.hostConfig");
        refuse_owned(host_config, &host_path, OWNED_HOST_CONFIG_KEYS)?;
        read.log_configuration = log_configuration(host_config, &host_path)?;
        restart_policy(host_config, &host_path)?;
        read.memory_reservation_mib = memory_reservation(host_config, &host_path)?;
        read.network_mode = match host_config.get("NetworkMode") {
            None | Some(Value::Null) => None,
            Some(Value::String(mode)) if mode.is_empty() => None,
            Some(Value::String(mode)) => Some(mode.clone()),
            Some(_) => {
                return Err(problem(
                    &format!("{host_path}.NetworkMode"),
                    "expected a string",
                ))
            }
        };
    }
    let host_config = host_config.filter(|map| !map.is_empty());
    if config.is_some() || host_config.is_some() {
        read.overlay = Some(DockerConfigOverlay {
            config: config.map(Value::Object),
            host_config: host_config.map(Value::Object),
        });
    }
    Ok(read)
}

/// Takes `LogConfig` (`{"Type", "Config"}`) out of `host_config` as a task definition's
/// `logConfiguration` (`{"logDriver", "options"}`). No type (or an empty one) is Docker's
/// default driver: nothing.
fn log_configuration(
    host_config: &mut Map<String, Value>,
    path: &str,
) -> Result<Option<Value>, Problem> {
    let log_config = match host_config.remove("LogConfig") {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => value,
    };
    let driver = log_config.get("Type").unwrap_or(&Value::Null);
    let options = log_config.get("Config").unwrap_or(&Value::Null);
    let options_fit = options.is_null()
        || options
            .as_object()
            .is_some_and(|map| map.values().all(Value::is_string));
    if !log_config.is_object() || !(driver.is_null() || driver.is_string()) || !options_fit {
        return Err(problem(
            &format!("{path}.LogConfig"),
            "expected {\"Type\": a string, \"Config\": an object of strings}",
        ));
    }
    if driver.as_str().is_none_or(str::is_empty) {
        return Ok(None);
    }
    let mut lifted = Map::new();
    lifted.insert("logDriver".into(), driver.clone());
    if !options.is_null() {
        lifted.insert("options".into(), options.clone());
    }
    Ok(Some(Value::Object(lifted)))
}

/// A JSON object carried in a string (or, liberally, given as an object). An empty string or
/// `{}` asks for nothing.
fn embedded_object(
    value: Option<&Value>,
    path: &str,
) -> Result<Option<Map<String, Value>>, Problem> {
    let parsed = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => return Ok(None),
        Some(Value::String(text)) => {
            if text.len() > MAX_DOCKER_CONFIG_BYTES {
                return Err(problem(
                    path,
                    format!("{} bytes: at most {MAX_DOCKER_CONFIG_BYTES}", text.len()),
                ));
            }
            serde_json::from_str::<Value>(text)
                .map_err(|error| problem(path, format!("not valid JSON: {error}")))?
        }
        Some(other) => other.clone(),
    };
    match parsed {
        Value::Object(map) if map.is_empty() => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        _ => Err(problem(path, "expected a JSON object of Docker fields")),
    }
}

fn refuse_owned(
    object: &Map<String, Value>,
    path: &str,
    owned: &[(&str, &str)],
) -> Result<(), Problem> {
    for (key, why) in owned {
        if object.get(*key).is_some_and(|value| !is_empty(value)) {
            return Err(problem(
                &format!("{path}.{key}"),
                format!("not supported: {why}"),
            ));
        }
    }
    Ok(())
}

/// Docker restarting a container behind deckhand's back would defeat its restart policy
/// (§12): only `no` (or nothing) is taken.
fn restart_policy(host_config: &Map<String, Value>, path: &str) -> Result<(), Problem> {
    let name = host_config
        .get("RestartPolicy")
        .and_then(|policy| policy.get("Name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() || name == "no" {
        return Ok(());
    }
    Err(problem(
        &format!("{path}.RestartPolicy"),
        format!("{name:?} is not supported: deckhand restarts containers itself (restartPolicy)"),
    ))
}

fn whole_number(
    object: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<u64>, Problem> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| problem(&format!("{path}.{key}"), "expected a whole number ≥ 0")),
    }
}

/// `HostConfig.MemoryReservation` (bytes) in MiB, rounded up; `0` is none.
fn memory_reservation(
    host_config: &Map<String, Value>,
    path: &str,
) -> Result<Option<u64>, Problem> {
    Ok(whole_number(host_config, "MemoryReservation", path)?
        .filter(|bytes| *bytes > 0)
        .map(|bytes| bytes.div_ceil(BYTES_PER_MIB)))
}

/// `Config.Healthcheck` as a task definition's `healthCheck` (seconds, from Docker's
/// nanoseconds; `0` leaves ECS's default). `None` when there is no test, or the test is
/// `["NONE"]`.
fn health_check(config: &Map<String, Value>, path: &str) -> Result<Option<Value>, Problem> {
    let Some(check) = config.get("Healthcheck").filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    let check_path = format!("{path}.Healthcheck");
    let Some(check) = check.as_object() else {
        return Err(problem(&check_path, "expected an object"));
    };
    let test = match check.get("Test") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) if items.is_empty() => return Ok(None),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(problem(&format!("{check_path}.Test"), "expected an array")),
    };
    if test.first().and_then(Value::as_str) == Some("NONE") {
        return Ok(None);
    }
    let mut mapped = Map::new();
    mapped.insert("command".into(), Value::Array(test));
    for (docker_key, key) in [
        ("Interval", "interval"),
        ("Timeout", "timeout"),
        ("StartPeriod", "startPeriod"),
    ] {
        if let Some(nanos) = whole_number(check, docker_key, &check_path)? {
            let seconds = nanos / NANOS_PER_SECOND;
            if seconds > 0 {
                mapped.insert(key.into(), json!(seconds));
            }
        }
    }
    if let Some(retries) =
        whole_number(check, "Retries", &check_path)?.filter(|retries| *retries > 0)
    {
        mapped.insert("retries".into(), json!(retries));
    }
    Ok(Some(Value::Object(mapped)))
}
