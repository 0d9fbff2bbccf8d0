//! JSON views of tasks, as users and existing ECS tooling read them, and the rules for finding a
//! task from what a user typed. Pure functions over `Task` snapshots: no I/O, table-tested.
//!
//! - [`task_metadata`]: the `deckhand inspect` / `GET /v1/tasks/{id}` object, in the shape of the
//!   ECS task metadata v4 response, with deckhand's own statuses (`NONE` … `STOPPED`).
//! - [`introspection_task`]: the ECS agent introspection `/v1/tasks` object, with statuses as ECS
//!   shows them (`PENDING`, `RUNNING`, `STOPPED`).
//! - [`find_task`], [`find_task_by_docker_id`]: id / unique prefix / ARN, and full or short
//!   Docker id lookups, with ambiguity reported rather than guessed.

// The metadata shows exactly the labels the engine put on the container: one function makes both.
use crate::ports::PortBinding;
use crate::role_credentials::{CredentialsState, RoleType};
use crate::task::labels::container_labels;
use crate::task::{Container, HealthStatus, Millis, NetworkMode, Task};
use serde_json::{json, Map, Value};
use std::fmt;

// The API's times are RFC 3339; the conversions live with the task model's `Millis`.
pub use crate::task::time::{millis_from_rfc3339, rfc3339_from_millis};

/// Length of a short Docker id, as `docker ps` shows it.
pub const SHORT_DOCKER_ID_LENGTH: usize = 12;

/// `RestartCount`: every view shows it only for a container whose restart policy is enabled.
pub(super) fn insert_restart_count(object: &mut Map<String, Value>, container: &Container) {
    if container
        .definition
        .restart_policy
        .as_ref()
        .is_some_and(|policy| policy.enabled)
    {
        object.insert("RestartCount".into(), json!(container.restart_count));
    }
}

pub(super) fn insert_time(object: &mut Map<String, Value>, key: &str, time: Option<Millis>) {
    if let Some(time) = time {
        object.insert(key.into(), Value::String(rfc3339_from_millis(time)));
    }
}

/// The host ports a container's own port mappings got. An `awsvpc` task's sandbox publishes
/// them for every container, so each container shows the sandbox's bindings of its own
/// mappings, and the sandbox none.
pub(super) fn shown_ports(task: &Task, container: &Container) -> Vec<PortBinding> {
    if task.network_mode != NetworkMode::Awsvpc {
        return container.ports.clone();
    }
    let (Some(sandbox), false) = (task.sandbox(), container.is_sandbox()) else {
        return Vec::new();
    };
    sandbox
        .ports
        .iter()
        .filter(|binding| {
            container.definition.port_mappings.iter().any(|mapping| {
                mapping.protocol.as_str() == binding.protocol
                    && mapping.container_ports().contains(&binding.container_port)
            })
        })
        .cloned()
        .collect()
}

fn ports_json(task: &Task, container: &Container) -> Value {
    Value::Array(
        shown_ports(task, container)
            .iter()
            .map(|port| {
                json!({
                    "ContainerPort": port.container_port,
                    "Protocol": port.protocol,
                    "HostPort": port.host_port,
                    "HostIp": port.host_ip,
                })
            })
            .collect(),
    )
}

pub fn health_name(health: HealthStatus) -> &'static str {
    match health {
        HealthStatus::Unknown => "UNKNOWN",
        HealthStatus::Healthy => "HEALTHY",
        HealthStatus::Unhealthy => "UNHEALTHY",
    }
}

/// The task id from an ARN (`…:task/<cluster>/<id>` → `<id>`).
pub fn task_id_from_arn(arn: &str) -> Option<&str> {
    let (_, resource) = arn.split_once(":task/")?;
    resource.rsplit('/').next().filter(|id| !id.is_empty())
}

/// A container's `LogDriver` and `LogOptions` as they run (task metadata v4 and `deckhand
/// inspect`): a fallback driver (awslogs on a host that cannot ship, docs/ENGINE.md §13) is
/// the `LogDriver`, with no options, and `LogDriverFallback` says what was asked and why.
/// Secret log options are never shown: their values are only in Docker's create body.
pub fn insert_log_driver(object: &mut Map<String, Value>, container: &Container) {
    match (
        &container.definition.log_configuration,
        &container.log_fallback,
    ) {
        (Some(log), Some(fallback)) => {
            object.insert("LogDriver".into(), json!(fallback.log_driver));
            object.insert(
                "LogDriverFallback".into(),
                json!({"RequestedLogDriver": log.log_driver, "Reason": fallback.reason}),
            );
        }
        (Some(log), None) => {
            object.insert("LogDriver".into(), json!(log.log_driver));
            if !log.options.is_empty() {
                object.insert("LogOptions".into(), json!(log.options));
            }
        }
        (None, _) => {}
    }
}

fn metadata_container(task: &Task, container: &Container, cluster: &str) -> Value {
    let mut object = Map::new();
    object.insert("Name".into(), json!(container.name()));
    if let Some(docker_id) = &container.docker_id {
        object.insert("DockerId".into(), json!(docker_id));
    }
    if let Some(docker_name) = &container.docker_name {
        object.insert("DockerName".into(), json!(docker_name));
    }
    object.insert("Image".into(), json!(container.definition.image));
    if let Some(image_id) = &container.image_id {
        object.insert("ImageID".into(), json!(image_id));
    }
    object.insert(
        "Labels".into(),
        json!(container_labels(task, container, cluster)),
    );
    object.insert(
        "DesiredStatus".into(),
        json!(container.desired_status.as_str()),
    );
    object.insert("KnownStatus".into(), json!(container.known_status.as_str()));
    if let Some(exit_code) = container.exit_code {
        object.insert("ExitCode".into(), json!(exit_code));
    }
    if let Some(error) = &container.applying_error {
        object.insert("Reason".into(), json!(error.reason()));
    }
    let mut limits = Map::new();
    limits.insert("CPU".into(), json!(container.definition.cpu.unwrap_or(0)));
    if let Some(memory) = container.definition.memory_mib {
        limits.insert("Memory".into(), json!(memory));
    }
    object.insert("Limits".into(), Value::Object(limits));
    if !container.gpu_ids.is_empty() {
        object.insert("GPUIDs".into(), json!(container.gpu_ids));
    }
    insert_time(&mut object, "CreatedAt", container.created_at);
    insert_time(&mut object, "StartedAt", container.started_at);
    insert_time(&mut object, "FinishedAt", container.finished_at);
    object.insert("Type".into(), json!(container.kind.ecs_type()));
    insert_health(&mut object, container);
    insert_log_driver(&mut object, container);
    object.insert("Ports".into(), ports_json(task, container));
    object.insert("Networks".into(), networks_json(task, container));
    insert_restart_count(&mut object, container);
    Value::Object(object)
}

/// The task fields the task metadata endpoint and `deckhand inspect` share: identity,
/// statuses, the task-level limits (CPU in vCPUs: the definition holds CPU units, 1024 per
/// vCPU) and the pull and stop times.
pub(super) fn metadata_task_head(task: &Task, cluster: &str) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("Cluster".into(), json!(cluster));
    object.insert("TaskARN".into(), json!(task.arn));
    object.insert("Family".into(), json!(task.family));
    object.insert("Revision".into(), json!(task.revision.to_string()));
    object.insert("DesiredStatus".into(), json!(task.desired_status.as_str()));
    object.insert("KnownStatus".into(), json!(task.known_status.as_str()));
    let mut limits = Map::new();
    if let Some(cpu) = task.cpu {
        limits.insert("CPU".into(), json!(cpu as f64 / 1024.0));
    }
    if let Some(memory) = task.memory_mib {
        limits.insert("Memory".into(), json!(memory));
    }
    if !limits.is_empty() {
        object.insert("Limits".into(), Value::Object(limits));
    }
    insert_time(&mut object, "PullStartedAt", task.pull_started_at);
    insert_time(&mut object, "PullStoppedAt", task.pull_stopped_at);
    insert_time(&mut object, "ExecutionStoppedAt", task.execution_stopped_at);
    object
}

/// A task's health as ECS sums it up (`healthStatus` of a described task), from its essential
/// containers that have a health check: `UNHEALTHY` if one is, else `UNKNOWN` if one is not
/// known yet, else `HEALTHY`. `None` when no essential container has a check.
pub fn task_health_status(task: &Task) -> Option<&'static str> {
    let checked: Vec<HealthStatus> = task
        .containers
        .iter()
        .filter(|container| container.essential() && container.definition.health_check.is_some())
        .map(|container| container.health)
        .collect();
    if checked.is_empty() {
        None
    } else if checked.contains(&HealthStatus::Unhealthy) {
        Some(health_name(HealthStatus::Unhealthy))
    } else if checked.contains(&HealthStatus::Unknown) {
        Some(health_name(HealthStatus::Unknown))
    } else {
        Some(health_name(HealthStatus::Healthy))
    }
}

/// A container's `Health` (status, since when, the check's last output), when it has a check.
pub(super) fn insert_health(object: &mut Map<String, Value>, container: &Container) {
    if container.definition.health_check.is_some() {
        let mut health = Map::new();
        health.insert("status".into(), json!(health_name(container.health)));
        insert_time(&mut health, "statusSince", container.health_since);
        if let Some(output) = &container.health_output {
            health.insert("output".into(), json!(output));
        }
        object.insert("Health".into(), Value::Object(health));
    }
}

/// The `deckhand inspect` object: the ECS task metadata v4 shape with deckhand's statuses.
/// deckhand adds `CreatedAt` (when the task was accepted), `HealthStatus` (ECS's sum of its
/// essential containers' health, when one has a check), `RestartCount` (its containers'
/// restarts), `StoppedReason`, `Source` (the `tasks.d` file a task came from), `WaitingFor`
/// (why a task waits for host resources) and a container's `GPUIDs` (the host's GPUs it was
/// given, the ECS agent's name for them).
pub fn task_metadata(task: &Task, cluster: &str) -> Value {
    let mut object = metadata_task_head(task, cluster);
    insert_time(&mut object, "CreatedAt", Some(task.created_at));
    if let Some(health) = task_health_status(task) {
        object.insert("HealthStatus".into(), json!(health));
    }
    let restarts: u64 = task
        .containers
        .iter()
        .map(|container| u64::from(container.restart_count))
        .sum();
    object.insert("RestartCount".into(), json!(restarts));
    if let Some(reason) = &task.stopped_reason {
        object.insert("StoppedReason".into(), json!(reason));
    }
    if let Some(source) = &task.source {
        object.insert("Source".into(), json!(source));
    }
    if let Some(reason) = &task.waiting_for {
        object.insert("WaitingFor".into(), json!(reason));
    }
    object.insert(
        "Containers".into(),
        Value::Array(
            task.containers
                .iter()
                .map(|container| metadata_container(task, container, cluster))
                .collect(),
        ),
    );
    Value::Object(object)
}

/// `RoleCredentials` of `deckhand inspect`: each credentials id the task holds (its model's,
/// then any other the store keeps for it, such as a refresh's new id), with its role, whether
/// credentials are there (`READY`), not yet (`PENDING`), could not be had (`FAILED`) or were
/// dropped at the task's STOPPED (`REMOVED`), their
/// role ARN and expiration, and the last failure to get them — never the credentials. `None` for a task without a role.
pub fn role_credentials_json(task: &Task, states: &[CredentialsState]) -> Option<Value> {
    let mut ids: Vec<(RoleType, &str)> = task.credentials_ids.each().collect();
    for state in states {
        if !ids.contains(&(state.role, state.credentials_id.as_str())) {
            ids.push((state.role, state.credentials_id.as_str()));
        }
    }
    if ids.is_empty() {
        return None;
    }
    let entries = ids
        .into_iter()
        .map(|(role, id)| {
            let state = states
                .iter()
                .find(|state| state.role == role && state.credentials_id == id);
            let mut object = Map::new();
            object.insert("RoleType".into(), json!(role.as_str()));
            object.insert("CredentialsId".into(), json!(id));
            let status = match state {
                Some(state) if state.ready => "READY",
                Some(CredentialsState {
                    failure: Some(_), ..
                }) => "FAILED",
                // Dropped at the task's STOPPED (the task role's, §2 step 5).
                None if task.known_status == crate::task::TaskStatus::Stopped => "REMOVED",
                _ => "PENDING",
            };
            object.insert("Status".into(), json!(status));
            if let Some(state) = state {
                if let Some(role_arn) = state.role_arn.as_ref().filter(|arn| !arn.is_empty()) {
                    object.insert("RoleArn".into(), json!(role_arn));
                }
                if let Some(expiration) = &state.expiration {
                    object.insert("Expiration".into(), json!(expiration));
                }
                if let Some(failure) = &state.failure {
                    object.insert("Failure".into(), json!(failure));
                }
            }
            Value::Object(object)
        })
        .collect();
    Some(Value::Array(entries))
}

/// `Networks` as ECS shows it: one object per Docker network the container was attached to,
/// with its IPv4 address; before Docker reported any, the task's network mode with no address.
pub fn networks_json(task: &Task, container: &Container) -> Value {
    // An awsvpc task's containers all have the sandbox's network namespace and address.
    let (networks, mode) = match (task.network_mode, task.sandbox()) {
        (NetworkMode::Awsvpc, Some(sandbox)) => (&sandbox.networks, Some("awsvpc")),
        _ => (&container.networks, None),
    };
    if networks.is_empty() {
        return json!([{ "NetworkMode": task.network_mode.as_str(), "IPv4Addresses": [] }]);
    }
    Value::Array(
        networks
            .iter()
            .map(|network| {
                let addresses: Vec<&str> = Some(network.ipv4_address.as_str())
                    .filter(|address| !address.is_empty())
                    .into_iter()
                    .collect();
                json!({ "NetworkMode": mode.unwrap_or(&network.name), "IPv4Addresses": addresses })
            })
            .collect(),
    )
}

/// `Volumes` as ECS shows them (introspection and task metadata): one object per mount point,
/// with the host path of a host volume as `Source`.
pub(super) fn volumes_json(task: &Task, container: &Container) -> Vec<Value> {
    container
        .definition
        .mount_points
        .iter()
        .map(|mount| {
            let volume = task
                .volumes
                .iter()
                .find(|volume| volume.name == mount.source_volume);
            // A bind mount's source is its host path; a Docker volume is shown by the name
            // Docker knows it under (the task's own volume, or the shared one).
            let host_path = volume.and_then(|volume| volume.host_source_path.clone());
            let docker_name = volume
                .and_then(|volume| crate::task::docker_volume_name(task, volume))
                .unwrap_or_else(|| mount.source_volume.clone());
            json!({
                "DockerName": docker_name,
                "Source": host_path.unwrap_or_else(|| docker_name.clone()),
                "Destination": mount.container_path,
            })
        })
        .collect()
}

fn introspection_container(task: &Task, container: &Container, docker_id: &str) -> Value {
    let mut object = Map::new();
    object.insert("DockerId".into(), json!(docker_id));
    object.insert(
        "DockerName".into(),
        json!(container.docker_name.clone().unwrap_or_default()),
    );
    object.insert("Name".into(), json!(container.name()));
    object.insert("Image".into(), json!(container.definition.image));
    if let Some(image_id) = &container.image_id {
        object.insert("ImageID".into(), json!(image_id));
    }
    insert_time(&mut object, "CreatedAt", container.created_at);
    insert_time(&mut object, "StartedAt", container.started_at);
    let ports = ports_json(task, container);
    if ports.as_array().is_some_and(|ports| !ports.is_empty()) {
        object.insert("Ports".into(), ports);
    }
    object.insert("Networks".into(), networks_json(task, container));
    let volumes = volumes_json(task, container);
    if !volumes.is_empty() {
        object.insert("Volumes".into(), Value::Array(volumes));
    }
    insert_restart_count(&mut object, container);
    Value::Object(object)
}

/// One task of the ECS introspection `/v1/tasks` response. `DesiredStatus` is omitted when it
/// is behind the known status (a task that stopped on its own), as ECS does; only containers
/// that exist in Docker are listed, and not an awsvpc task's sandbox (ECS's introspection leaves
/// its internal containers out too; the task metadata endpoint shows them).
pub fn introspection_task(task: &Task) -> Value {
    let mut object = Map::new();
    object.insert("Arn".into(), json!(task.arn));
    if task.desired_status >= task.known_status {
        object.insert(
            "DesiredStatus".into(),
            json!(task.desired_status.ecs_external()),
        );
    }
    object.insert(
        "KnownStatus".into(),
        json!(task.known_status.ecs_external()),
    );
    object.insert("Family".into(), json!(task.family));
    object.insert("Version".into(), json!(task.revision.to_string()));
    object.insert(
        "Containers".into(),
        Value::Array(
            task.containers
                .iter()
                .filter(|container| !container.is_sandbox())
                .filter_map(|container| {
                    let docker_id = container.docker_id.as_deref()?;
                    Some(introspection_container(task, container, docker_id))
                })
                .collect(),
        ),
    );
    Value::Object(object)
}

/// Why a lookup found no single task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    Empty,
    NotFound {
        query: String,
    },
    /// Several tasks match; their ids (or ARNs for Docker-id lookups), sorted.
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupError::Empty => f.write_str("empty task id"),
            LookupError::NotFound { query } => write!(f, "no task {query}"),
            LookupError::Ambiguous { query, candidates } => write!(
                f,
                "{query} is ambiguous: it matches {}",
                candidates.join(", ")
            ),
        }
    }
}

impl std::error::Error for LookupError {}

/// Finds a task by full id, unique id prefix, or ARN.
pub fn find_task<'a>(tasks: &'a [Task], query: &str) -> Result<&'a Task, LookupError> {
    let query = query.trim();
    if query.is_empty() {
        return Err(LookupError::Empty);
    }
    if query.starts_with("arn:") {
        return tasks
            .iter()
            .find(|task| task.arn == query)
            .ok_or_else(|| LookupError::NotFound {
                query: query.to_string(),
            });
    }
    let lower = query.to_ascii_lowercase();
    if let Some(task) = tasks.iter().find(|task| task.id == lower) {
        return Ok(task);
    }
    let matches: Vec<&Task> = tasks
        .iter()
        .filter(|task| task.id.starts_with(&lower))
        .collect();
    match matches.as_slice() {
        [] => Err(LookupError::NotFound {
            query: query.to_string(),
        }),
        [task] => Ok(task),
        many => {
            let mut candidates: Vec<String> = many.iter().map(|task| task.id.clone()).collect();
            crate::sorting::sort(&mut candidates);
            Err(LookupError::Ambiguous {
                query: query.to_string(),
                candidates,
            })
        }
    }
}

/// Finds the task owning a container by Docker id: a full id (longer than 12 characters) must
/// match exactly; a short id (12 characters or fewer) matches as a prefix and must be unique.
pub fn find_task_by_docker_id<'a>(
    tasks: &'a [Task],
    docker_id: &str,
) -> Result<&'a Task, LookupError> {
    let docker_id = docker_id.trim();
    if docker_id.is_empty() {
        return Err(LookupError::Empty);
    }
    let short = docker_id.len() <= SHORT_DOCKER_ID_LENGTH;
    let mut owners: Vec<&Task> = Vec::new();
    for task in tasks {
        let owns = task.containers.iter().any(|container| {
            container.docker_id.as_deref().is_some_and(|id| {
                if short {
                    id.starts_with(docker_id)
                } else {
                    id == docker_id
                }
            })
        });
        if owns {
            owners.push(task);
        }
    }
    // Two containers of one task cannot make a short id ambiguous between tasks, but two
    // containers anywhere can: ECS refuses a short id that names more than one container.
    let container_matches = tasks
        .iter()
        .flat_map(|task| task.containers.iter())
        .filter(|container| {
            container.docker_id.as_deref().is_some_and(|id| {
                if short {
                    id.starts_with(docker_id)
                } else {
                    id == docker_id
                }
            })
        })
        .count();
    match owners.as_slice() {
        [] => Err(LookupError::NotFound {
            query: docker_id.to_string(),
        }),
        [task] if container_matches == 1 => Ok(task),
        _ => {
            let mut candidates: Vec<String> = owners.iter().map(|task| task.arn.clone()).collect();
            crate::sorting::sort(&mut candidates);
            candidates.dedup();
            Err(LookupError::Ambiguous {
                query: docker_id.to_string(),
                candidates,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::PortBinding;
    use crate::task::{
        ContainerDefinition, ContainerError, ContainerErrorKind, ContainerStatus, HealthCheck,
        NetworkMode, TaskDefinition, TaskStatus,
    };

    fn container_definition(name: &str) -> ContainerDefinition {
        ContainerDefinition::new(name, "busybox:latest")
    }

    fn task(id: &str, containers: &[(&str, Option<&str>)]) -> Task {
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "web".into(),
            revision: 3,
            network_mode: NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: containers
                .iter()
                .map(|(name, _)| container_definition(name))
                .collect(),
            pid_mode: None,
            ipc_mode: None,
        };
        let mut task = Task::new(id.into(), "edge", definition, 1, 1_700_000_000_000);
        for (container, (_, docker_id)) in task.containers.iter_mut().zip(containers) {
            container.docker_id = docker_id.map(str::to_string);
        }
        task
    }

    #[test]
    fn networks_show_the_addresses_docker_reported_or_the_network_mode() {
        let mut task = task("a1", &[("web", Some("d1"))]);
        let before = networks_json(&task, &task.containers[0]);
        assert_eq!(
            before,
            json!([{"NetworkMode": "bridge", "IPv4Addresses": []}]),
            "nothing reported yet"
        );
        task.containers[0].networks = vec![
            crate::task::ContainerNetwork {
                name: "bridge".into(),
                ipv4_address: "172.17.0.5".into(),
            },
            crate::task::ContainerNetwork {
                name: "backend".into(),
                ipv4_address: String::new(),
            },
        ];
        let expected = json!([
            {"NetworkMode": "bridge", "IPv4Addresses": ["172.17.0.5"]},
            {"NetworkMode": "backend", "IPv4Addresses": []},
        ]);
        assert_eq!(networks_json(&task, &task.containers[0]), expected);
        let container = &introspection_task(&task)["Containers"][0];
        assert_eq!(container["Networks"], expected, "introspection");
        let container = &task_metadata(&task, "edge")["Containers"][0];
        assert_eq!(container["Networks"], expected, "task metadata");
    }

    #[test]
    fn an_awsvpc_task_shows_the_sandboxs_address_and_ports_on_its_containers() {
        let mut task = task("a2", &[("web", Some("d1")), ("sidecar", Some("d2"))]);
        task.network_mode = NetworkMode::Awsvpc;
        std::sync::Arc::make_mut(&mut task.containers[0].definition).port_mappings =
            vec![crate::task::PortMapping {
                container_port: 8080,
                host_port: None,
                protocol: crate::task::Protocol::Tcp,
                container_port_range: None,
            }];
        crate::task::sandbox::add_sandbox(&mut task.containers);
        let sandbox = &mut task.containers[2];
        sandbox.docker_id = Some("d3".into());
        sandbox.networks = vec![crate::task::ContainerNetwork {
            name: "bridge".into(),
            ipv4_address: "172.17.0.9".into(),
        }];
        sandbox.ports = vec![PortBinding {
            container_port: 8080,
            protocol: "tcp".into(),
            host_port: 8080,
            host_ip: "0.0.0.0".into(),
        }];
        let awsvpc = json!([{"NetworkMode": "awsvpc", "IPv4Addresses": ["172.17.0.9"]}]);
        let metadata = task_metadata(&task, "edge");
        let containers = metadata["Containers"].as_array().expect("containers");
        assert_eq!(
            containers.len(),
            3,
            "the task metadata lists the sandbox, as ECS does"
        );
        for container in containers {
            assert_eq!(container["Networks"], awsvpc, "{container}");
        }
        assert_eq!(containers[2]["Type"], "CNI_PAUSE");
        assert_eq!(containers[0]["Type"], "NORMAL");
        assert_eq!(containers[0]["Ports"][0]["HostPort"], 8080);
        assert_eq!(
            containers[1]["Ports"],
            json!([]),
            "the sidecar maps no port"
        );
        assert_eq!(
            containers[2]["Ports"],
            json!([]),
            "the sandbox's are its containers'"
        );

        let introspection = introspection_task(&task);
        let names: Vec<&str> = introspection["Containers"]
            .as_array()
            .expect("containers")
            .iter()
            .filter_map(|container| container["Name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["web", "sidecar"],
            "introspection leaves the sandbox out"
        );
        assert_eq!(introspection["Containers"][0]["Ports"][0]["HostPort"], 8080);
    }

    #[test]
    fn volumes_show_the_name_docker_knows_them_by_and_a_bind_mounts_host_path() {
        use crate::task::{DockerVolumeConfiguration, MountPoint, Volume, VolumeScope};
        let mut task = task("0123456789abcdef", &[("app", Some("d0cker"))]);
        let shared = DockerVolumeConfiguration {
            scope: VolumeScope::Shared,
            autoprovision: true,
            driver: "local".into(),
            driver_opts: Default::default(),
            labels: Default::default(),
        };
        task.volumes = vec![
            Volume::new("scratch"),
            Volume {
                docker_volume_configuration: Some(shared),
                ..Volume::new("db")
            },
            Volume {
                host_source_path: Some("/srv/config".into()),
                ..Volume::new("config")
            },
        ];
        std::sync::Arc::make_mut(&mut task.containers[0].definition).mount_points =
            ["scratch", "db", "config"]
                .iter()
                .map(|name| MountPoint {
                    source_volume: name.to_string(),
                    container_path: format!("/{name}"),
                    read_only: false,
                })
                .collect();
        let volumes = volumes_json(&task, &task.containers[0]);
        // (DockerName, Source, Destination)
        let expected = [
            (
                "deckhand-0123456789abcdef-scratch",
                "deckhand-0123456789abcdef-scratch",
                "/scratch",
            ),
            ("db", "db", "/db"),
            ("config", "/srv/config", "/config"),
        ];
        assert_eq!(volumes.len(), expected.len());
        for (volume, (docker_name, source, destination)) in volumes.iter().zip(expected) {
            assert_eq!(volume["DockerName"], docker_name, "{volume}");
            assert_eq!(volume["Source"], source, "{volume}");
            assert_eq!(volume["Destination"], destination, "{volume}");
        }
    }

    #[test]
    fn a_checkpoint_without_networks_still_loads() {
        let task = task("a1", &[("web", Some("d1"))]);
        let mut saved = serde_json::to_value(&task).expect("serialize");
        saved["containers"][0]
            .as_object_mut()
            .expect("container object")
            .remove("networks");
        let loaded: Task = serde_json::from_value(saved).expect("an older checkpoint loads");
        assert!(loaded.containers[0].networks.is_empty());
    }

    #[test]
    fn a_containers_reason_is_shown_in_the_named_form_also_from_an_older_checkpoint() {
        // (kind, stored message, shown Reason); the second is how an earlier version stored an
        // out-of-memory kill.
        let table = [
            (
                ContainerErrorKind::CannotPull,
                "manifest unknown",
                "CannotPullContainerError: manifest unknown",
            ),
            (
                ContainerErrorKind::OutOfMemory,
                "OutOfMemoryError: Container killed due to memory usage",
                "OutOfMemoryError: Container killed due to memory usage",
            ),
        ];
        for (kind, message, shown) in table {
            let mut task = task("a1", &[("web", Some("d1"))]);
            task.containers[0].applying_error = Some(ContainerError {
                kind,
                message: message.into(),
            });
            let view = task_metadata(&task, "edge");
            assert_eq!(view["Containers"][0]["Reason"], shown, "{kind:?}");
        }
    }

    #[test]
    fn find_task_by_id_prefix_and_arn() {
        let tasks = vec![
            task("aaaa1111000000000000000000000000", &[]),
            task("aaaa2222000000000000000000000000", &[]),
            task("bbbb0000000000000000000000000000", &[]),
        ];
        let arn = tasks[2].arn.clone();
        let table: Vec<(&str, Result<&str, &str>)> = vec![
            ("aaaa1111000000000000000000000000", Ok("aaaa1111")),
            ("aaaa1", Ok("aaaa1111")),
            ("AAAA2", Ok("aaaa2222")),
            ("b", Ok("bbbb0000")),
            (&arn, Ok("bbbb0000")),
            ("aaaa", Err("ambiguous")),
            ("c", Err("no task")),
            (
                "arn:aws:ecs:local:000000000000:task/edge/bbbb",
                Err("no task"),
            ),
            ("  ", Err("empty")),
        ];
        for (query, expected) in table {
            match (find_task(&tasks, query), expected) {
                (Ok(found), Ok(prefix)) => assert!(found.id.starts_with(prefix), "{query}"),
                (Err(error), Err(text)) => {
                    assert!(error.to_string().contains(text), "{query}: {error}")
                }
                (other, expected) => panic!("{query}: got {other:?}, expected {expected:?}"),
            }
        }
        let ambiguous = find_task(&tasks, "aaaa").unwrap_err();
        assert_eq!(
            ambiguous,
            LookupError::Ambiguous {
                query: "aaaa".into(),
                candidates: vec![
                    "aaaa1111000000000000000000000000".into(),
                    "aaaa2222000000000000000000000000".into()
                ]
            }
        );
    }

    #[test]
    fn find_task_by_full_and_short_docker_id() {
        let full_a = "abcdef0123456789aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let full_b = "abcdef0123456789bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
        let full_c = "cccccc0123456789cccccccccccccccccccccccccccccccccccccccccccccccc";
        let tasks = vec![
            task(
                "11110000000000000000000000000000",
                &[("web", Some(full_a)), ("side", None)],
            ),
            task("22220000000000000000000000000000", &[("web", Some(full_b))]),
            task("33330000000000000000000000000000", &[("web", Some(full_c))]),
        ];
        let table: Vec<(&str, Result<&str, &str>)> = vec![
            (full_a, Ok("1111")),
            (full_b, Ok("2222")),
            ("cccccc012345", Ok("3333")),
            ("ccc", Ok("3333")),
            ("abcdef012345", Err("ambiguous")),
            // A 13-character id is a full id: no prefix matching.
            ("cccccc0123456", Err("no task")),
            ("ffff", Err("no task")),
        ];
        for (query, expected) in table {
            match (find_task_by_docker_id(&tasks, query), expected) {
                (Ok(found), Ok(prefix)) => assert!(found.id.starts_with(prefix), "{query}"),
                (Err(error), Err(text)) => {
                    assert!(error.to_string().contains(text), "{query}: {error}")
                }
                (other, expected) => panic!("{query}: got {other:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn a_task_is_as_healthy_as_its_essential_checked_containers() {
        // (per container: essential, has a check, health), the task's health
        use HealthStatus::{Healthy as H, Unhealthy as U, Unknown as K};
        type Containers = &'static [(bool, bool, HealthStatus)];
        let table: &[(Containers, Option<&str>)] = &[
            (&[(true, false, K)], None),
            (&[(false, true, U)], None),
            (&[(true, true, H), (true, true, H)], Some("HEALTHY")),
            (&[(true, true, H), (true, true, K)], Some("UNKNOWN")),
            (&[(true, true, K), (true, true, U)], Some("UNHEALTHY")),
            (&[(true, true, H), (false, true, U)], Some("HEALTHY")),
            (&[(true, true, H), (true, false, U)], Some("HEALTHY")),
        ];
        for (containers, expected) in table {
            let names: Vec<String> = (0..containers.len()).map(|n| format!("c{n}")).collect();
            let listed: Vec<(&str, Option<&str>)> =
                names.iter().map(|name| (name.as_str(), None)).collect();
            let mut task = task("22220000000000000000000000000000", &listed);
            for (container, (essential, checked, health)) in
                task.containers.iter_mut().zip(containers.iter())
            {
                let definition = std::sync::Arc::make_mut(&mut container.definition);
                definition.essential = *essential;
                if *checked {
                    definition.health_check = Some(HealthCheck {
                        command: vec!["CMD".into(), "true".into()],
                        interval_secs: 30,
                        timeout_secs: 5,
                        retries: 3,
                        start_period_secs: 0,
                    });
                }
                container.health = *health;
                container.restart_count = 2;
            }
            assert_eq!(task_health_status(&task), *expected, "{containers:?}");
            let view = task_metadata(&task, "edge");
            assert_eq!(view.get("HealthStatus").and_then(Value::as_str), *expected);
            assert_eq!(view["RestartCount"], 2 * containers.len() as u64);
        }
    }

    #[test]
    fn metadata_view_has_the_v4_fields_and_the_ecs_labels() {
        let mut task = task(
            "11110000000000000000000000000000",
            &[("web", Some("d0cker"))],
        );
        task.known_status = TaskStatus::Running;
        task.pull_started_at = Some(1_700_000_000_000);
        let container = &mut task.containers[0];
        container.known_status = ContainerStatus::Running;
        container.desired_status = ContainerStatus::Running;
        container.docker_name = Some("deckhand-web-3-web-ab12".into());
        container.started_at = Some(1_700_000_001_000);
        container.exit_code = None;
        std::sync::Arc::make_mut(&mut container.definition)
            .docker_labels
            .insert("team".into(), "edge".into());
        std::sync::Arc::make_mut(&mut container.definition)
            .docker_labels
            .insert("com.amazonaws.ecs.cluster".into(), "spoofed".into());
        std::sync::Arc::make_mut(&mut container.definition).health_check = Some(HealthCheck {
            command: vec!["CMD".into(), "true".into()],
            interval_secs: 30,
            timeout_secs: 5,
            retries: 3,
            start_period_secs: 0,
        });
        container.health = HealthStatus::Healthy;
        container.ports.push(PortBinding {
            container_port: 8080,
            protocol: "tcp".into(),
            host_port: 18080,
            host_ip: "0.0.0.0".into(),
        });
        let view = task_metadata(&task, "edge");
        assert_eq!(view["TaskARN"], task.arn);
        assert_eq!(view["Family"], "web");
        assert_eq!(view["Revision"], "3");
        assert_eq!(view["KnownStatus"], "RUNNING");
        assert_eq!(view["DesiredStatus"], "RUNNING");
        assert_eq!(view["PullStartedAt"], "2023-11-14T22:13:20.000Z");
        assert!(view.get("ExecutionStoppedAt").is_none());
        assert!(
            view.get("WaitingFor").is_none(),
            "only a waiting task has one"
        );
        let mut waiting = task.clone();
        waiting.waiting_for = Some("memory: needs 512 MiB, 300 MiB free".into());
        assert_eq!(
            task_metadata(&waiting, "edge")["WaitingFor"],
            "memory: needs 512 MiB, 300 MiB free"
        );
        let container = &view["Containers"][0];
        assert!(
            container.get("GPUIDs").is_none(),
            "only a container with GPUs has them"
        );
        let mut with_gpus = task.clone();
        with_gpus.containers[0].gpu_ids = vec!["GPU-a".into(), "GPU-b".into()];
        assert_eq!(
            task_metadata(&with_gpus, "edge")["Containers"][0]["GPUIDs"],
            json!(["GPU-a", "GPU-b"])
        );
        assert_eq!(container["Name"], "web");
        assert_eq!(container["DockerId"], "d0cker");
        assert_eq!(container["DockerName"], "deckhand-web-3-web-ab12");
        assert_eq!(container["KnownStatus"], "RUNNING");
        assert_eq!(container["StartedAt"], "2023-11-14T22:13:21.000Z");
        assert_eq!(container["Health"]["status"], "HEALTHY");
        assert_eq!(container["Ports"][0]["HostPort"], 18080);
        let labels = &container["Labels"];
        assert_eq!(labels["team"], "edge");
        assert_eq!(
            labels["com.amazonaws.ecs.cluster"], "edge",
            "ECS labels win"
        );
        assert_eq!(labels["com.amazonaws.ecs.task-arn"], task.arn);
        assert_eq!(labels["com.amazonaws.ecs.container-name"], "web");
        assert_eq!(labels["com.amazonaws.ecs.task-definition-family"], "web");
        assert_eq!(labels["com.amazonaws.ecs.task-definition-version"], "3");
        assert!(container.get("ExitCode").is_none());
    }

    #[test]
    fn introspection_statuses_and_desired_behind_known() {
        let table = [
            // (desired, known, shown desired, shown known)
            (
                TaskStatus::Running,
                TaskStatus::None,
                Some("RUNNING"),
                "PENDING",
            ),
            (
                TaskStatus::Running,
                TaskStatus::Created,
                Some("RUNNING"),
                "PENDING",
            ),
            (
                TaskStatus::Running,
                TaskStatus::Running,
                Some("RUNNING"),
                "RUNNING",
            ),
            (
                TaskStatus::Stopped,
                TaskStatus::Running,
                Some("STOPPED"),
                "RUNNING",
            ),
            (TaskStatus::Running, TaskStatus::Stopped, None, "STOPPED"),
            (
                TaskStatus::Stopped,
                TaskStatus::Stopped,
                Some("STOPPED"),
                "STOPPED",
            ),
        ];
        for (desired, known, shown_desired, shown_known) in table {
            let mut task = task(
                "11110000000000000000000000000000",
                &[("web", Some("abc")), ("late", None)],
            );
            task.desired_status = desired;
            task.known_status = known;
            let view = introspection_task(&task);
            assert_eq!(
                view.get("DesiredStatus").and_then(Value::as_str),
                shown_desired,
                "{desired}/{known}"
            );
            assert_eq!(view["KnownStatus"], shown_known);
            assert_eq!(view["Version"], "3");
            // Only containers that exist in Docker are listed.
            assert_eq!(view["Containers"].as_array().map(Vec::len), Some(1));
            assert_eq!(view["Containers"][0]["DockerId"], "abc");
        }
    }

    #[test]
    fn task_id_from_arn_takes_the_last_segment() {
        assert_eq!(
            task_id_from_arn("arn:aws:ecs:local:000000000000:task/edge/abc"),
            Some("abc")
        );
        assert_eq!(task_id_from_arn("abc"), None);
    }

    #[test]
    fn role_credentials_show_each_ids_state_and_never_the_credentials() {
        use crate::role_credentials::{CredentialsState, RoleType};
        let mut task = task("0123", &[("web", None)]);
        assert_eq!(role_credentials_json(&task, &[]), None, "no role, no entry");
        task.credentials_ids.task_role = Some("app".into());
        task.credentials_ids.execution_role = Some("exec".into());
        let state = |role, id: &str, ready, failure: Option<&str>| CredentialsState {
            role,
            credentials_id: id.into(),
            ready,
            role_arn: ready.then(|| format!("arn:aws:iam::1:role/{id}")),
            expiration: ready.then(|| "2026-12-07T06:00:00Z".to_string()),
            failure: failure.map(str::to_string),
        };
        // (states, shown (id, status, has a failure))
        let table = [
            (
                vec![],
                vec![("app", "PENDING", false), ("exec", "PENDING", false)],
            ),
            (
                vec![state(RoleType::TaskApplication, "app", true, None)],
                vec![("app", "READY", false), ("exec", "PENDING", false)],
            ),
            (
                vec![state(
                    RoleType::TaskExecution,
                    "exec",
                    false,
                    Some("AccessDenied"),
                )],
                vec![("app", "PENDING", false), ("exec", "FAILED", true)],
            ),
            (
                vec![
                    state(
                        RoleType::TaskApplication,
                        "app",
                        true,
                        Some("refresh failed"),
                    ),
                    state(RoleType::TaskApplication, "app2", true, None),
                ],
                vec![
                    ("app", "READY", true),
                    ("exec", "PENDING", false),
                    ("app2", "READY", false),
                ],
            ),
        ];
        for (states, shown) in table {
            let view = role_credentials_json(&task, &states).expect("entries");
            let seen: Vec<(&str, &str, bool)> = view
                .as_array()
                .expect("an array")
                .iter()
                .map(|entry| {
                    (
                        entry["CredentialsId"].as_str().unwrap_or_default(),
                        entry["Status"].as_str().unwrap_or_default(),
                        entry.get("Failure").is_some(),
                    )
                })
                .collect();
            assert_eq!(seen, shown, "{view}");
        }
        // STOPPED: the task role's dropped id is REMOVED; the execution role's is still kept.
        task.known_status = crate::task::TaskStatus::Stopped;
        let states = [state(RoleType::TaskExecution, "exec", true, None)];
        let view = role_credentials_json(&task, &states).expect("entries");
        assert_eq!(view[0]["Status"], "REMOVED", "{view}");
        assert_eq!(view[1]["Status"], "READY", "{view}");
    }
}
