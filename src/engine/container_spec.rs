//! What deckhand asks Docker to create for one container of a task, and the names and ids it
//! fixes before that: task ids, Docker container names, the ECS labels, per-task volume names.
//!
//! Pure functions over the task model (randomness is passed in), so the exact create request is
//! unit-tested without Docker. Names are fixed once, at acceptance, before any create call, so a
//! crash in the middle of a create is adopted later instead of duplicated.

use crate::runtime::{CreateContainer, HealthConfig, LogConfig, PortBinding};
use crate::task::metadata_endpoint::{metadata_environment, MetadataEndpoint};
use crate::task::Task;
use std::io::Read;
use std::time::Duration;

// The ECS labels and how a container gets them are the task model's (the API's views show them
// too); re-exported for the engine's callers.
pub use crate::task::labels::{
    container_labels, LABEL_CLUSTER, LABEL_CONTAINER_NAME, LABEL_TASK_ARN,
    LABEL_TASK_DEFINITION_FAMILY, LABEL_TASK_DEFINITION_VERSION,
};

/// Docker's CPU-shares floor; smaller values (including 0 CPU units) are raised to it.
const MINIMUM_CPU_SHARES: i64 = 2;
const BYTES_PER_MIB: i64 = 1024 * 1024;

/// `bytes` random bytes from `/dev/urandom`, as lowercase hex.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(buffer.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// A new task id: 32 lowercase hex characters.
pub fn new_task_id() -> std::io::Result<String> {
    random_hex(16)
}

/// `deckhand-<family>-<revision>-<container name without chars outside [A-Za-z0-9-]>-<suffix>`.
pub fn docker_container_name(
    family: &str,
    revision: u32,
    container_name: &str,
    random_suffix: &str,
) -> String {
    let kept: String = container_name
        .chars()
        .filter(|character| character.is_ascii_alphanumeric() || *character == '-')
        .collect();
    format!("deckhand-{family}-{revision}-{kept}-{random_suffix}")
}

/// Fixes the Docker name of every container that has none yet; `random_suffix` is called once
/// per container.
pub fn assign_docker_names(task: &mut Task, mut random_suffix: impl FnMut() -> String) {
    let family = task.family.clone();
    let revision = task.revision;
    for container in &mut task.containers {
        if container.docker_name.is_none() {
            container.docker_name = Some(docker_container_name(
                &family,
                revision,
                container.name(),
                &random_suffix(),
            ));
        }
    }
}

/// Fixes the task metadata token (§14) of every container that has none yet; `random_token` is
/// called once per such container.
pub fn assign_metadata_tokens(task: &mut Task, mut random_token: impl FnMut() -> String) {
    for container in &mut task.containers {
        if container.metadata_token.is_none() {
            container.metadata_token = Some(random_token());
        }
    }
}

/// Adds the task metadata endpoint's variables (§14) of container `index` to its create request,
/// replacing any the container's own `environment` sets (as ECS does: the endpoint is the
/// agent's to name). Nothing is added without an endpoint, for a container without a token (one
/// accepted before tokens existed) or for a network mode that cannot reach the endpoint.
pub fn add_metadata_environment(
    request: &mut CreateContainer,
    task: &Task,
    index: usize,
    endpoint: Option<&MetadataEndpoint>,
) {
    let Some(endpoint) = endpoint else { return };
    let Some(token) = task
        .containers
        .get(index)
        .and_then(|container| container.metadata_token.as_deref())
    else {
        return;
    };
    let variables = metadata_environment(endpoint, task.network_mode, token);
    if variables.is_empty() {
        return;
    }
    request.env.retain(|entry| {
        let name = entry.split('=').next().unwrap_or_default();
        !variables.iter().any(|(variable, _)| variable == name)
    });
    request.env.extend(
        variables
            .into_iter()
            .map(|(name, value)| format!("{name}={value}")),
    );
}

/// The Docker volume that backs a task volume without a host path: one per task, so the
/// task's containers share it and no other task sees it.
pub fn task_volume_name(task_id: &str, volume_name: &str) -> String {
    let kept: String = volume_name
        .chars()
        .filter(|character| character.is_ascii_alphanumeric() || "-_.".contains(*character))
        .collect();
    format!("deckhand-{task_id}-{kept}")
}

/// Names of the per-task Docker volumes this task's containers mount (removed at cleanup).
pub fn task_volume_names(task: &Task) -> Vec<String> {
    let mut names: Vec<String> = task
        .volumes
        .iter()
        .filter(|volume| volume.host_source_path.is_none())
        .filter(|volume| {
            task.containers.iter().any(|container| {
                container
                    .definition
                    .mount_points
                    .iter()
                    .any(|mount| mount.source_volume == volume.name)
            })
        })
        .map(|volume| task_volume_name(&task.id, &volume.name))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn docker_name_of(task: &Task, container_name: &str) -> Result<String, String> {
    task.container(container_name)
        .and_then(|container| container.docker_name.clone())
        .ok_or_else(|| {
            format!("container {container_name:?} is not in the task or has no Docker name yet")
        })
}

/// The create request for container `index` of `task`. Fails, naming the problem, when the
/// task refers to something it does not hold (the definition parser rejects such tasks first).
pub fn create_request(task: &Task, index: usize, cluster: &str) -> Result<CreateContainer, String> {
    let container = task
        .containers
        .get(index)
        .ok_or_else(|| format!("no container at index {index}"))?;
    let definition = &container.definition;
    let name = container
        .docker_name
        .clone()
        .ok_or_else(|| format!("container {:?} has no Docker name", definition.name))?;

    let mut binds = Vec::new();
    for mount in &definition.mount_points {
        let volume = task
            .volumes
            .iter()
            .find(|volume| volume.name == mount.source_volume)
            .ok_or_else(|| {
                format!(
                    "container {:?} mounts unknown volume {:?}",
                    definition.name, mount.source_volume
                )
            })?;
        let source = match &volume.host_source_path {
            Some(host_path) => host_path.clone(),
            None => task_volume_name(&task.id, &volume.name),
        };
        let suffix = if mount.read_only { ":ro" } else { "" };
        binds.push(format!("{source}:{}{suffix}", mount.container_path));
    }

    let mut volumes_from = Vec::new();
    for source in &definition.volumes_from {
        let docker_name = docker_name_of(task, &source.source_container)?;
        let suffix = if source.read_only { ":ro" } else { "" };
        volumes_from.push(format!("{docker_name}{suffix}"));
    }

    let mut links = Vec::new();
    for link in &definition.links {
        let mut parts = link.splitn(2, ':');
        let target = parts.next().unwrap_or_default();
        let alias = parts.next().unwrap_or(target);
        links.push(format!("{}:{alias}", docker_name_of(task, target)?));
    }

    let healthcheck = definition.health_check.as_ref().map(|check| HealthConfig {
        test: check.command.clone(),
        interval: Duration::from_secs(u64::from(check.interval_secs)),
        timeout: Duration::from_secs(u64::from(check.timeout_secs)),
        retries: check.retries,
        start_period: Duration::from_secs(u64::from(check.start_period_secs)),
    });

    let mib_to_bytes = |mib: u64| i64::try_from(mib).map(|mib| mib.saturating_mul(BYTES_PER_MIB));

    Ok(CreateContainer {
        name,
        image: definition.image.clone(),
        labels: container_labels(task, container, cluster),
        env: definition
            .environment
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect(),
        cmd: definition.command.clone(),
        entrypoint: definition.entry_point.clone(),
        working_dir: definition.working_directory.clone(),
        user: definition.user.clone(),
        healthcheck,
        binds,
        volumes: Vec::new(),
        volumes_from,
        links,
        port_bindings: definition
            .port_mappings
            .iter()
            .map(|mapping| PortBinding {
                container_port: mapping.container_port,
                protocol: mapping.protocol.as_str().to_string(),
                host_port: mapping.host_port.unwrap_or(0),
                host_ip: String::new(),
            })
            .collect(),
        memory: definition
            .memory_mib
            .map(mib_to_bytes)
            .transpose()
            .map_err(|_| format!("container {:?}: memory is too large", definition.name))?,
        memory_reservation: definition
            .memory_reservation_mib
            .map(mib_to_bytes)
            .transpose()
            .map_err(|_| {
                format!(
                    "container {:?}: memoryReservation is too large",
                    definition.name
                )
            })?,
        cpu_shares: definition.cpu.map(|units| {
            i64::try_from(units)
                .unwrap_or(i64::MAX)
                .max(MINIMUM_CPU_SHARES)
        }),
        privileged: definition.privileged,
        log_config: definition.log_configuration.as_ref().map(|log| LogConfig {
            driver: log.log_driver.clone(),
            options: log.options.clone(),
        }),
        network_mode: Some(task.network_mode.as_str().to_string()),
        stop_timeout: definition.stop_timeout_secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{
        ContainerDefinition, HealthCheck, LogConfiguration, MountPoint, NetworkMode, PortMapping,
        Protocol, TaskDefinition, Volume, VolumeFrom,
    };
    use std::collections::BTreeMap;

    fn container_definition(name: &str) -> ContainerDefinition {
        crate::engine::test_support::container_definition(name, "busybox:latest")
    }

    fn task_with(containers: Vec<ContainerDefinition>, volumes: Vec<Volume>) -> Task {
        let definition = TaskDefinition {
            family: "web".to_string(),
            revision: 3,
            network_mode: NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes,
            containers,
        };
        let mut task = Task::new(
            "0123456789abcdef0123456789abcdef".into(),
            "edge",
            definition,
            1,
            0,
        );
        let mut counter = 0;
        assign_docker_names(&mut task, || {
            counter += 1;
            format!("{counter:04x}")
        });
        task
    }

    #[test]
    fn the_metadata_variables_replace_the_containers_own() {
        let mut definition = container_definition("web");
        definition.environment = vec![
            ("A".to_string(), "1".to_string()),
            (
                "ECS_CONTAINER_METADATA_URI_V4".to_string(),
                "http://elsewhere".to_string(),
            ),
        ];
        let mut task = task_with(vec![definition], Vec::new());
        assign_metadata_tokens(&mut task, || "t0k3n".to_string());
        let endpoint = MetadataEndpoint {
            bridge_address: Some(std::net::Ipv4Addr::new(172, 17, 0, 1)),
            loopback: true,
            port: 51679,
        };
        let mut request = create_request(&task, 0, "edge").expect("valid task");
        add_metadata_environment(&mut request, &task, 0, Some(&endpoint));
        assert_eq!(
            request.env,
            vec![
                "A=1".to_string(),
                "ECS_CONTAINER_METADATA_URI_V4=http://172.17.0.1:51679/v4/t0k3n".to_string(),
                "ECS_CONTAINER_METADATA_URI=http://172.17.0.1:51679/v3/t0k3n".to_string(),
            ]
        );

        // Turned off, or a container saved before tokens existed: its own environment only.
        let mut off = create_request(&task, 0, "edge").expect("valid task");
        add_metadata_environment(&mut off, &task, 0, None);
        assert_eq!(off.env.len(), 2);
        task.containers[0].metadata_token = None;
        let mut old = create_request(&task, 0, "edge").expect("valid task");
        add_metadata_environment(&mut old, &task, 0, Some(&endpoint));
        assert_eq!(old.env.len(), 2);
    }

    #[test]
    fn metadata_tokens_are_fixed_once() {
        let mut task = task_with(vec![container_definition("web")], Vec::new());
        assign_metadata_tokens(&mut task, || "first".to_string());
        assign_metadata_tokens(&mut task, || "second".to_string());
        assert_eq!(task.containers[0].metadata_token.as_deref(), Some("first"));
    }

    #[test]
    fn docker_names_drop_characters_outside_the_allowed_set() {
        let table = [
            ("app", "deckhand-web-3-app-ab12"),
            ("my_app.v2", "deckhand-web-3-myappv2-ab12"),
            ("front-end", "deckhand-web-3-front-end-ab12"),
            ("ünï", "deckhand-web-3-n-ab12"),
        ];
        for (name, expected) in table {
            assert_eq!(
                docker_container_name("web", 3, name, "ab12"),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn task_ids_are_32_lowercase_hex() {
        let first = new_task_id().expect("/dev/urandom is readable");
        let second = new_task_id().expect("/dev/urandom is readable");
        assert_eq!(first.len(), 32);
        assert!(first
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)));
        assert_ne!(first, second);
    }

    #[test]
    fn assigning_names_keeps_names_already_fixed() {
        let mut task = task_with(vec![container_definition("app")], Vec::new());
        let before = task.containers[0].docker_name.clone();
        assign_docker_names(&mut task, || "ffff".to_string());
        assert_eq!(task.containers[0].docker_name, before);
        assert_eq!(before.as_deref(), Some("deckhand-web-3-app-0001"));
    }

    #[test]
    fn ecs_labels_override_user_labels() {
        let mut definition = container_definition("app");
        definition
            .docker_labels
            .insert(LABEL_CLUSTER.to_string(), "spoofed".to_string());
        definition
            .docker_labels
            .insert("team".to_string(), "edge".to_string());
        let task = task_with(vec![definition], Vec::new());
        let request = create_request(&task, 0, "edge-cluster").expect("valid task");
        assert_eq!(request.labels[LABEL_CLUSTER], "edge-cluster");
        assert_eq!(request.labels[LABEL_TASK_ARN], task.arn);
        assert_eq!(request.labels[LABEL_CONTAINER_NAME], "app");
        assert_eq!(request.labels[LABEL_TASK_DEFINITION_FAMILY], "web");
        assert_eq!(request.labels[LABEL_TASK_DEFINITION_VERSION], "3");
        assert_eq!(request.labels["team"], "edge");
        assert_eq!(request.labels.len(), 6);
    }

    #[test]
    fn create_request_maps_every_field() {
        let mut database = container_definition("db");
        database.mount_points = vec![
            MountPoint {
                source_volume: "data".into(),
                container_path: "/var/lib/db".into(),
                read_only: false,
            },
            MountPoint {
                source_volume: "config".into(),
                container_path: "/etc/db".into(),
                read_only: true,
            },
        ];
        let mut app = container_definition("app");
        app.links = vec!["db:database".into(), "db".into()];
        app.volumes_from = vec![VolumeFrom {
            source_container: "db".into(),
            read_only: true,
        }];
        app.environment = vec![
            ("MODE".into(), "edge".into()),
            ("EMPTY".into(), String::new()),
        ];
        app.command = Some(vec!["serve".into(), "--port=80".into()]);
        app.entry_point = Some(vec!["/bin/app".into()]);
        app.port_mappings = vec![
            PortMapping {
                container_port: 80,
                host_port: Some(8080),
                protocol: Protocol::Tcp,
            },
            PortMapping {
                container_port: 53,
                host_port: None,
                protocol: Protocol::Udp,
            },
        ];
        app.memory_mib = Some(128);
        app.memory_reservation_mib = Some(64);
        app.cpu = Some(0);
        app.stop_timeout_secs = Some(5);
        app.health_check = Some(HealthCheck {
            command: vec!["CMD-SHELL".into(), "true".into()],
            interval_secs: 2,
            timeout_secs: 1,
            retries: 3,
            start_period_secs: 0,
        });
        app.log_configuration = Some(LogConfiguration {
            log_driver: "json-file".into(),
            options: BTreeMap::from([("max-size".to_string(), "1m".to_string())]),
        });
        let volumes = vec![
            Volume {
                name: "data".into(),
                host_source_path: None,
            },
            Volume {
                name: "config".into(),
                host_source_path: Some("/srv/config".into()),
            },
        ];
        let task = task_with(vec![database, app], volumes);

        let database_request = create_request(&task, 0, "edge").expect("valid task");
        assert_eq!(
            database_request.binds,
            vec![
                format!("deckhand-{}-data:/var/lib/db", task.id),
                "/srv/config:/etc/db:ro".to_string()
            ]
        );
        assert_eq!(
            task_volume_names(&task),
            vec![format!("deckhand-{}-data", task.id)]
        );

        let app_request = create_request(&task, 1, "edge").expect("valid task");
        assert_eq!(app_request.name, "deckhand-web-3-app-0002");
        assert_eq!(
            app_request.links,
            vec![
                "deckhand-web-3-db-0001:database".to_string(),
                "deckhand-web-3-db-0001:db".to_string()
            ]
        );
        assert_eq!(
            app_request.volumes_from,
            vec!["deckhand-web-3-db-0001:ro".to_string()]
        );
        assert_eq!(
            app_request.env,
            vec!["MODE=edge".to_string(), "EMPTY=".to_string()]
        );
        assert_eq!(
            app_request.cmd,
            Some(vec!["serve".to_string(), "--port=80".to_string()])
        );
        assert_eq!(app_request.entrypoint, Some(vec!["/bin/app".to_string()]));
        assert_eq!(app_request.port_bindings.len(), 2);
        assert_eq!(app_request.port_bindings[0].host_port, 8080);
        assert_eq!(app_request.port_bindings[1].host_port, 0);
        assert_eq!(app_request.port_bindings[1].protocol, "udp");
        assert_eq!(app_request.memory, Some(128 * 1024 * 1024));
        assert_eq!(app_request.memory_reservation, Some(64 * 1024 * 1024));
        assert_eq!(
            app_request.cpu_shares,
            Some(2),
            "0 CPU units is raised to Docker's floor"
        );
        assert_eq!(app_request.stop_timeout, Some(5));
        assert_eq!(app_request.network_mode.as_deref(), Some("bridge"));
        let health = app_request.healthcheck.expect("health check passed on");
        assert_eq!(health.interval, Duration::from_secs(2));
        assert_eq!(health.retries, 3);
        assert_eq!(
            app_request.log_config.expect("log config").driver,
            "json-file"
        );
    }

    #[test]
    fn unknown_volume_is_a_named_error() {
        let mut app = container_definition("app");
        app.mount_points = vec![MountPoint {
            source_volume: "missing".into(),
            container_path: "/x".into(),
            read_only: false,
        }];
        let task = task_with(vec![app], Vec::new());
        let error = create_request(&task, 0, "edge").expect_err("unknown volume");
        assert!(error.contains("missing"), "{error}");
    }
}
