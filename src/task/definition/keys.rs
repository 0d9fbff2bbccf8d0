//! The key tables: for each JSON object of a task definition, which keys deckhand supports,
//! which it ignores with a warning and which it refuses (see the module docs of
//! [`super`]), and the check that sorts every key of an object into one of those classes,
//! suggesting the key a typo meant.

use super::json::{join, Parser};
use serde_json::{Map, Value};

/// The three key classes of one JSON object.
pub(super) struct KeySpec {
    supported: &'static [&'static str],
    ignored: &'static [&'static str],
    unsupported: &'static [&'static str],
}

pub(super) const DESCRIBE_OUTPUT_KEYS: KeySpec = KeySpec {
    supported: &["taskDefinition"],
    ignored: &["tags"],
    unsupported: &[],
};

pub(super) const TASK_KEYS: KeySpec = KeySpec {
    supported: &[
        "family",
        "revision",
        "networkMode",
        "cpu",
        "memory",
        "volumes",
        "containerDefinitions",
        "pidMode",
        "ipcMode",
        "taskRoleArn",
        "executionRoleArn",
    ],
    ignored: &[
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
        "ephemeralStorage",
    ],
    unsupported: &["proxyConfiguration", "inferenceAccelerators"],
};

pub(super) const VOLUME_KEYS: KeySpec = KeySpec {
    supported: &["name", "host", "dockerVolumeConfiguration"],
    ignored: &[],
    unsupported: &[
        "efsVolumeConfiguration",
        "fsxWindowsFileServerVolumeConfiguration",
        "configuredAtLaunch",
    ],
};

pub(super) const DOCKER_VOLUME_CONFIGURATION_KEYS: KeySpec = KeySpec {
    supported: &["scope", "autoprovision", "driver", "driverOpts", "labels"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const HOST_KEYS: KeySpec = KeySpec {
    supported: &["sourcePath"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const CONTAINER_KEYS: KeySpec = KeySpec {
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
        "linuxParameters",
        "ulimits",
        "systemControls",
        "dnsServers",
        "dnsSearchDomains",
        "extraHosts",
        "hostname",
        "disableNetworking",
        "readonlyRootFilesystem",
        "dockerSecurityOptions",
        "interactive",
        "pseudoTerminal",
        "secrets",
        "repositoryCredentials",
        "firelensConfiguration",
        "environmentFiles",
        "resourceRequirements",
    ],
    // Image digest pinning is done by the ECS control plane at run-task time.
    ignored: &["versionConsistency"],
    unsupported: &["credentialSpecs", "gpu"],
};

pub(super) const RESOURCE_REQUIREMENT_KEYS: KeySpec = KeySpec {
    supported: &["type", "value"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const ENVIRONMENT_FILE_KEYS: KeySpec = KeySpec {
    supported: &["value", "type"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const ENVIRONMENT_KEYS: KeySpec = KeySpec {
    supported: &["name", "value"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const DEPENDS_ON_KEYS: KeySpec = KeySpec {
    supported: &["containerName", "condition"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const VOLUMES_FROM_KEYS: KeySpec = KeySpec {
    supported: &["sourceContainer", "readOnly"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const MOUNT_POINT_KEYS: KeySpec = KeySpec {
    supported: &["sourceVolume", "containerPath", "readOnly"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const PORT_MAPPING_KEYS: KeySpec = KeySpec {
    // `hostPortRange` is the agent's to choose; the parser refuses a value for it.
    supported: &[
        "containerPort",
        "hostPort",
        "protocol",
        "containerPortRange",
        "hostPortRange",
    ],
    // Service Connect names; they do not change how the container runs.
    ignored: &["name", "appProtocol"],
    unsupported: &[],
};

pub(super) const ULIMIT_KEYS: KeySpec = KeySpec {
    supported: &["name", "softLimit", "hardLimit"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const LINUX_PARAMETERS_KEYS: KeySpec = KeySpec {
    supported: &[
        "initProcessEnabled",
        "capabilities",
        "devices",
        "tmpfs",
        "sharedMemorySize",
        "maxSwap",
        "swappiness",
    ],
    ignored: &[],
    unsupported: &[],
};

pub(super) const CAPABILITIES_KEYS: KeySpec = KeySpec {
    supported: &["add", "drop"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const DEVICE_KEYS: KeySpec = KeySpec {
    supported: &["hostPath", "containerPath", "permissions"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const TMPFS_KEYS: KeySpec = KeySpec {
    supported: &["containerPath", "size", "mountOptions"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const EXTRA_HOST_KEYS: KeySpec = KeySpec {
    supported: &["hostname", "ipAddress"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const SYSTEM_CONTROL_KEYS: KeySpec = KeySpec {
    supported: &["namespace", "value"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const HEALTH_CHECK_KEYS: KeySpec = KeySpec {
    supported: &["command", "interval", "timeout", "retries", "startPeriod"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const LOG_CONFIGURATION_KEYS: KeySpec = KeySpec {
    supported: &["logDriver", "options", "secretOptions"],
    ignored: &[],
    unsupported: &[],
};

/// One of `secrets[]` or `secretOptions[]`.
pub(super) const SECRET_KEYS: KeySpec = KeySpec {
    supported: &["name", "valueFrom"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const REPOSITORY_CREDENTIALS_KEYS: KeySpec = KeySpec {
    supported: &["credentialsParameter"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const FIRELENS_CONFIGURATION_KEYS: KeySpec = KeySpec {
    supported: &["type", "options"],
    ignored: &[],
    unsupported: &[],
};

pub(super) const RESTART_POLICY_KEYS: KeySpec = KeySpec {
    supported: &["enabled", "ignoredExitCodes", "restartAttemptPeriod"],
    ignored: &[],
    unsupported: &[],
};

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

/// Ignored keys whose warning says more than "no effect": why this host does without them.
const IGNORED_BECAUSE: &[(&str, &str)] = &[(
    "ephemeralStorage",
    "ignored: a Fargate sizing promise (the task's ephemeral storage); on this host a \
     container's storage is the Docker host's disk",
)];

impl Parser {
    /// Classify every key of `object` into the classes the docs of [`super`] describe. The keys
    /// that are ignored because they are empty (`null`, `[]`, …, as a `describe` output or a
    /// CLI skeleton has them) are named together in one warning for the object.
    pub(super) fn check_keys(&mut self, path: &str, object: &Map<String, Value>, spec: &KeySpec) {
        let mut empty: Vec<&str> = Vec::new();
        for (key, value) in object {
            let key_path = join(path, key);
            if spec.supported.contains(&key.as_str()) {
                continue;
            }
            if spec.ignored.contains(&key.as_str()) {
                match IGNORED_BECAUSE.iter().find(|(ignored, _)| ignored == key) {
                    Some((_, why)) => self.warn(&key_path, why),
                    None if is_empty_value(value) => empty.push(key),
                    None => self.warn(&key_path, "ignored: it has no effect on this host"),
                }
            } else if spec.unsupported.contains(&key.as_str()) {
                if is_empty_value(value) {
                    empty.push(key);
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
        match empty.as_slice() {
            [] => {}
            [key] => self.warn(&join(path, key), "ignored: empty"),
            keys => {
                let object_path = if path.is_empty() { "$" } else { path };
                self.warn(object_path, format!("ignored, empty: {}", keys.join(", ")));
            }
        }
    }
}
