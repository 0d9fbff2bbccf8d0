//! What deckhand asks Docker to create for one container of a task, and the names and ids it
//! fixes before that: task ids, Docker container names, the ECS labels, Docker volume names and
//! the volumes a container's create needs first.
//!
//! Pure functions over the task model (randomness is passed in), so the exact create request is
//! unit-tested without Docker. Names are fixed once, at acceptance, before any create call, so a
//! crash in the middle of a create is adopted later instead of duplicated.

use crate::engine::messages::{OwnedVolume, VolumeRequirement};
use crate::role_credentials::{relative_uri, CREDENTIALS_RELATIVE_URI_VARIABLE};
use crate::runtime::{
    CreateContainer, CreateVolume, DeviceMapping, HealthConfig, LogConfig, PortBinding, Ulimit,
};
use crate::task::metadata_endpoint::{metadata_environment, MetadataEndpoint};
use crate::task::{
    Container, ContainerDefinition, DevicePermission, IpcMode, NetworkMode, PidMode, Task, Tmpfs,
    Volume, VolumeScope, DEFAULT_VOLUME_DRIVER,
};
use std::collections::BTreeMap;
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
/// The swappiness ECS applies when `maxSwap` is set without `swappiness`.
const DEFAULT_SWAPPINESS: i64 = 60;
/// The variable the NVIDIA container runtime reads a container's GPUs from; the ECS agent sets
/// it to the container's GPU ids, comma-joined.
pub const NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

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

/// Adds `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (`/v2/credentials/<id>`) to the create request
/// of container `index` when its task has a task role, replacing the container's own (as the
/// ECS agent does: the endpoint is the agent's to name). Every container of the task gets it but
/// the awsvpc sandbox; the execution role's id is never given to a container.
pub fn add_credentials_environment(request: &mut CreateContainer, task: &Task, index: usize) {
    let Some(id) = task.credentials_ids.task_role.as_deref() else {
        return;
    };
    if task
        .containers
        .get(index)
        .is_none_or(|container| container.is_sandbox())
    {
        return;
    }
    request.env.retain(|entry| {
        entry.split('=').next().unwrap_or_default() != CREDENTIALS_RELATIVE_URI_VARIABLE
    });
    request.env.push(format!(
        "{CREDENTIALS_RELATIVE_URI_VARIABLE}={}",
        relative_uri(id)
    ));
}

// Docker volume names are the task model's (the API's views show them too); re-exported for
// the engine's callers.
pub use crate::task::{docker_volume_name, task_volume_name};

/// Whether some container of the task mounts `volume`.
fn mounted(task: &Task, volume: &Volume) -> bool {
    task.containers.iter().any(|container| {
        container
            .definition
            .mount_points
            .iter()
            .any(|mount| mount.source_volume == volume.name)
    })
}

/// Names of the task-scoped Docker volumes this task's containers mount (removed at cleanup;
/// shared volumes never are).
pub fn task_volume_names(task: &Task) -> Vec<String> {
    let mut names: Vec<String> = task
        .volumes
        .iter()
        .filter(|volume| volume.host_source_path.is_none() && !volume.is_shared())
        .filter(|volume| mounted(task, volume))
        .map(|volume| task_volume_name(&task.id, &volume.name))
        .collect();
    crate::sorting::sort(&mut names);
    names.dedup();
    names
}

/// The task-scoped volumes cleanup removes, each with the task it belongs to.
pub fn owned_volumes(task: &Task) -> Vec<OwnedVolume> {
    task_volume_names(task)
        .into_iter()
        .map(|name| OwnedVolume {
            name,
            task_arn: task.arn.clone(),
        })
        .collect()
}

/// The Docker volumes container `index` mounts, in mount order without repeats, each as the
/// create worker makes it ready before the container's create. A task-scoped volume carries
/// the task's ARN and cluster labels over the definition's own (so deckhand removes only what
/// it made); a shared one carries exactly the definition's labels (ECS compares them with an
/// existing volume's).
pub fn volume_requirements(
    task: &Task,
    index: usize,
    cluster: &str,
) -> Result<Vec<VolumeRequirement>, String> {
    let container = task
        .containers
        .get(index)
        .ok_or_else(|| format!("no container at index {index}"))?;
    let mut requirements: Vec<VolumeRequirement> = Vec::new();
    for mount in &container.definition.mount_points {
        let volume = task
            .volumes
            .iter()
            .find(|volume| volume.name == mount.source_volume)
            .ok_or_else(|| {
                format!(
                    "container {:?} mounts unknown volume {:?}",
                    container.name(),
                    mount.source_volume
                )
            })?;
        let Some(name) = docker_volume_name(task, volume) else {
            continue;
        };
        if requirements
            .iter()
            .any(|requirement| requirement.volume.name == name)
        {
            continue;
        }
        let configuration = volume.docker_volume_configuration.clone();
        let scope = configuration
            .as_ref()
            .map_or(VolumeScope::Task, |configuration| configuration.scope);
        let (driver, driver_opts, mut labels, autoprovision) = match configuration {
            Some(configuration) => (
                configuration.driver,
                configuration.driver_opts,
                configuration.labels,
                configuration.autoprovision,
            ),
            None => (
                DEFAULT_VOLUME_DRIVER.to_string(),
                BTreeMap::new(),
                BTreeMap::new(),
                false,
            ),
        };
        if scope == VolumeScope::Task {
            labels.insert(LABEL_TASK_ARN.to_string(), task.arn.clone());
            labels.insert(LABEL_CLUSTER.to_string(), cluster.to_string());
        }
        requirements.push(VolumeRequirement {
            task_volume: volume.name.clone(),
            volume: CreateVolume {
                name,
                driver,
                driver_opts,
                labels,
            },
            scope,
            autoprovision,
        });
    }
    Ok(requirements)
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
            None => docker_volume_name(task, volume).unwrap_or_default(),
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

    let (network_mode, port_bindings) = network_of(task, container)?;

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
    let too_large = |field: &str| format!("container {:?}: {field} is too large", definition.name);
    let linux = &definition.linux_parameters;
    // ECS's swap limit is the memory limit plus maxSwap; swappiness applies only with it, and
    // defaults to 60 then.
    let memory_swap = match (linux.max_swap_mib, definition.memory_mib) {
        (Some(swap), Some(memory)) => Some(
            mib_to_bytes(memory.saturating_add(swap))
                .map_err(|_| too_large("linuxParameters.maxSwap"))?,
        ),
        _ => None,
    };
    let memory_swappiness = memory_swap.map(|_| {
        linux.swappiness.map_or(DEFAULT_SWAPPINESS, |value| {
            i64::try_from(value).unwrap_or(100)
        })
    });

    let gpu_ids = gpus_of(container)?;
    let mut env: Vec<String> = definition
        .environment
        .iter()
        .filter(|(key, _)| gpu_ids.is_empty() || key != NVIDIA_VISIBLE_DEVICES)
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    if !gpu_ids.is_empty() {
        env.push(format!("{NVIDIA_VISIBLE_DEVICES}={}", gpu_ids.join(",")));
    }

    Ok(CreateContainer {
        name,
        image: definition.image.clone(),
        labels: container_labels(task, container, cluster),
        env,
        cmd: definition.command.clone(),
        entrypoint: definition.entry_point.clone(),
        working_dir: definition.working_directory.clone(),
        user: definition.user.clone(),
        healthcheck,
        binds,
        volumes: Vec::new(),
        volumes_from,
        links,
        port_bindings,
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
        network_mode: Some(network_mode),
        stop_timeout: definition.stop_timeout_secs,
        stop_signal: definition.stop_signal.clone(),
        hostname: definition.hostname.clone(),
        network_disabled: definition.disable_networking,
        open_stdin: definition.interactive,
        tty: definition.pseudo_terminal,
        readonly_rootfs: definition.readonly_root_filesystem,
        init: linux.init_process_enabled,
        cap_add: linux.capabilities.add.clone(),
        cap_drop: linux.capabilities.drop.clone(),
        devices: linux
            .devices
            .iter()
            .map(|device| DeviceMapping {
                path_on_host: device.host_path.clone(),
                path_in_container: device
                    .container_path
                    .clone()
                    .unwrap_or_else(|| device.host_path.clone()),
                cgroup_permissions: cgroup_permissions(&device.permissions),
            })
            .collect(),
        tmpfs: crate::sorting::map_of(
            linux
                .tmpfs
                .iter()
                .map(|mount| (mount.container_path.clone(), tmpfs_options(mount))),
        ),
        // A container that joins the sandbox's IPC namespace has the sandbox's /dev/shm.
        shm_size: linux
            .shared_memory_size_mib
            .filter(|_| task.ipc_mode != Some(IpcMode::Task))
            .map(mib_to_bytes)
            .transpose()
            .map_err(|_| too_large("linuxParameters.sharedMemorySize"))?,
        memory_swap,
        memory_swappiness,
        ulimits: definition
            .ulimits
            .iter()
            .map(|limit| Ulimit {
                name: limit.name.clone(),
                soft: limit.soft_limit,
                hard: limit.hard_limit,
            })
            .collect(),
        extra_hosts: definition
            .extra_hosts
            .iter()
            .map(|host| format!("{}:{}", host.hostname, host.ip_address))
            .collect(),
        dns: definition.dns_servers.clone(),
        dns_search: definition.dns_search_domains.clone(),
        sysctls: crate::sorting::map_of(
            definition
                .system_controls
                .iter()
                .map(|control| (control.namespace.clone(), control.value.clone())),
        ),
        security_opt: definition.docker_security_options.clone(),
        gpu_ids,
        pid_mode: pid_mode_of(task, container)?,
        ipc_mode: ipc_mode_of(task, container)?,
        config_overlay: definition
            .docker_config
            .as_ref()
            .and_then(|overlay| overlay.config.clone()),
        host_config_overlay: definition
            .docker_config
            .as_ref()
            .and_then(|overlay| overlay.host_config.clone()),
    })
}

/// `task` as its creates see it once admitted: each container given as many (made-up) GPU ids
/// as it asks for. For checking a task at submit, before it holds any.
pub fn as_if_gpus_given(task: &Task) -> Task {
    let mut given = task.clone();
    for container in &mut given.containers {
        container.gpu_ids = (0..container.definition.gpus)
            .map(|n| format!("GPU-{n}"))
            .collect();
    }
    given
}

/// The GPU ids a container is created with: the ones it was given at admission, as many as it
/// asks for. A container that was given fewer is not created (it would run without the GPUs
/// its definition asks for).
fn gpus_of(container: &Container) -> Result<Vec<String>, String> {
    let wanted = container.definition.gpus as usize;
    if container.gpu_ids.len() != wanted {
        return Err(format!(
            "container {:?} needs {wanted} GPU(s) and was given {}",
            container.definition.name,
            container.gpu_ids.len()
        ));
    }
    Ok(container.gpu_ids.clone())
}

/// A container's Docker network mode and the ports its create publishes. In an `awsvpc` task
/// the sandbox is on the bridge and publishes every container's ports, each on the same host
/// port; the other containers join its namespace and publish nothing themselves (Docker refuses
/// ports on a joined namespace).
fn network_of(task: &Task, container: &Container) -> Result<(String, Vec<PortBinding>), String> {
    if task.network_mode != NetworkMode::Awsvpc {
        return Ok((
            task.network_mode.as_str().to_string(),
            port_bindings(&container.definition),
        ));
    }
    if container.is_sandbox() {
        let bindings = task
            .containers
            .iter()
            .flat_map(|member| &member.definition.port_mappings)
            .flat_map(|mapping| {
                mapping.container_ports().map(|port| PortBinding {
                    container_port: port,
                    protocol: mapping.protocol.as_str().to_string(),
                    host_port: port,
                    host_ip: String::new(),
                })
            })
            .collect();
        return Ok((NetworkMode::Bridge.as_str().to_string(), bindings));
    }
    Ok((join_sandbox(task, container)?, Vec::new()))
}

/// `container:<the sandbox's Docker name>`: how a container of an awsvpc task joins one of the
/// sandbox's namespaces.
fn join_sandbox(task: &Task, container: &Container) -> Result<String, String> {
    task.sandbox()
        .and_then(|sandbox| sandbox.docker_name.as_deref())
        .map(|name| format!("container:{name}"))
        .ok_or_else(|| {
            format!(
                "container {:?}: the awsvpc task has no sandbox with a Docker name",
                container.name()
            )
        })
}

/// Docker's `PidMode`: the host's, or with `task` the sandbox's (which keeps its own).
fn pid_mode_of(task: &Task, container: &Container) -> Result<Option<String>, String> {
    Ok(match task.pid_mode {
        None => None,
        Some(PidMode::Host) => Some("host".to_string()),
        Some(PidMode::Task) if container.is_sandbox() => None,
        Some(PidMode::Task) => Some(join_sandbox(task, container)?),
    })
}

/// Docker's `IpcMode`: with `task` the sandbox's namespace is made shareable and joined.
fn ipc_mode_of(task: &Task, container: &Container) -> Result<Option<String>, String> {
    Ok(match task.ipc_mode {
        None => None,
        Some(IpcMode::Host) => Some("host".to_string()),
        Some(IpcMode::None) => Some("none".to_string()),
        Some(IpcMode::Task) if container.is_sandbox() => Some("shareable".to_string()),
        Some(IpcMode::Task) => Some(join_sandbox(task, container)?),
    })
}

/// One binding per published container port: a mapping's own port with its host port (0: Docker
/// picks one), or every port of a `containerPortRange`, each on a host port Docker picks from
/// its ephemeral range (docs/ENGINE.md §4).
fn port_bindings(definition: &ContainerDefinition) -> Vec<PortBinding> {
    let mut bindings = Vec::new();
    for mapping in &definition.port_mappings {
        let host_port = match mapping.container_port_range {
            Some(_) => 0,
            None => mapping.host_port.unwrap_or(0),
        };
        for container_port in mapping.container_ports() {
            bindings.push(PortBinding {
                container_port,
                protocol: mapping.protocol.as_str().to_string(),
                host_port,
                host_ip: String::new(),
            });
        }
    }
    bindings
}

/// Docker's `CgroupPermissions`: `r`, `w`, `m` in that order; none listed means all three.
fn cgroup_permissions(permissions: &[DevicePermission]) -> String {
    if permissions.is_empty() {
        return "rwm".to_string();
    }
    [
        (DevicePermission::Read, 'r'),
        (DevicePermission::Write, 'w'),
        (DevicePermission::Mknod, 'm'),
    ]
    .iter()
    .filter(|(permission, _)| permissions.contains(permission))
    .map(|(_, letter)| *letter)
    .collect()
}

/// A tmpfs mount's Docker options: the mount options as written, then `size=<MiB>m`.
fn tmpfs_options(mount: &Tmpfs) -> String {
    let mut options = mount.mount_options.clone();
    options.push(format!("size={}m", mount.size_mib));
    options.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{
        ContainerDefinition, DockerVolumeConfiguration, HealthCheck, LogConfiguration, MountPoint,
        NetworkMode, PortMapping, Protocol, TaskDefinition, Volume, VolumeFrom,
    };
    use std::collections::BTreeMap;

    fn container_definition(name: &str) -> ContainerDefinition {
        crate::engine::test_support::container_definition(name, "busybox:latest")
    }

    fn task_with(containers: Vec<ContainerDefinition>, volumes: Vec<Volume>) -> Task {
        task_in(NetworkMode::Bridge, containers, volumes)
    }

    /// Task `web:3` in `network_mode`, its containers (an awsvpc task's sandbox included) named
    /// with suffixes 0001, 0002, … in order.
    fn task_in(
        network_mode: NetworkMode,
        containers: Vec<ContainerDefinition>,
        volumes: Vec<Volume>,
    ) -> Task {
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "web".to_string(),
            revision: 3,
            network_mode,
            cpu: None,
            memory_mib: None,
            volumes,
            containers,
            pid_mode: None,
            ipc_mode: None,
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
    fn a_container_with_gpus_asks_docker_for_them_by_id_and_names_them_in_its_environment() {
        let mut trainer = container_definition("trainer");
        trainer.gpus = 2;
        trainer.environment = vec![
            ("NVIDIA_VISIBLE_DEVICES".to_string(), "all".to_string()),
            ("A".to_string(), "1".to_string()),
        ];
        let mut plain = container_definition("plain");
        plain.environment = vec![("NVIDIA_VISIBLE_DEVICES".to_string(), "none".to_string())];
        let mut task = task_with(vec![trainer, plain], Vec::new());
        task.containers[0].gpu_ids = vec!["GPU-a".to_string(), "GPU-b".to_string()];
        let request = create_request(&task, 0, "edge").expect("valid task");
        assert_eq!(request.gpu_ids, vec!["GPU-a", "GPU-b"]);
        // The given ids replace the definition's value, as the ECS agent merges them.
        assert_eq!(
            request.env,
            vec!["A=1", "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"]
        );
        // A container without GPUs keeps its own variable and asks for no device.
        let request = create_request(&task, 1, "edge").expect("valid task");
        assert!(request.gpu_ids.is_empty());
        assert_eq!(request.env, vec!["NVIDIA_VISIBLE_DEVICES=none"]);
        // Fewer ids than the definition asks for: no create (it would run without its GPUs).
        task.containers[0].gpu_ids.pop();
        assert_eq!(
            create_request(&task, 0, "edge").expect_err("too few ids"),
            "container \"trainer\" needs 2 GPU(s) and was given 1"
        );
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
    fn a_task_roles_endpoint_is_in_every_container_and_the_execution_roles_in_none() {
        let mut definition = container_definition("web");
        definition.environment = vec![(
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI".to_string(),
            "/elsewhere".to_string(),
        )];
        let mut task = task_in(
            NetworkMode::Awsvpc,
            vec![definition, container_definition("side")],
            Vec::new(),
        );
        task.credentials_ids.execution_role = Some("exec-id".into());
        for index in 0..task.containers.len() {
            let mut request = create_request(&task, index, "edge").expect("valid task");
            add_credentials_environment(&mut request, &task, index);
            assert!(
                request.env.iter().all(|entry| !entry.contains("exec-id")
                    && !entry.starts_with("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=")
                    || entry == "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/elsewhere"),
                "no task role, nothing added: {:?}",
                request.env
            );
        }
        task.credentials_ids.task_role = Some("app-id".into());
        for index in 0..task.containers.len() {
            let mut request = create_request(&task, index, "edge").expect("valid task");
            add_credentials_environment(&mut request, &task, index);
            let named: Vec<&String> = request
                .env
                .iter()
                .filter(|entry| entry.starts_with("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI="))
                .collect();
            if task.containers[index].is_sandbox() {
                assert!(named.is_empty(), "{:?}", request.env);
            } else {
                assert_eq!(
                    named,
                    ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/app-id"],
                    "the agent's replaces the container's own"
                );
            }
            assert!(request.env.iter().all(|entry| !entry.contains("exec-id")));
        }
    }

    #[test]
    fn an_awsvpc_task_publishes_its_ports_on_the_sandbox_and_its_containers_join_it() {
        let mut web = container_definition("web");
        web.port_mappings = vec![PortMapping {
            container_port: 8080,
            host_port: None,
            protocol: Protocol::Tcp,
            container_port_range: None,
        }];
        let mut sidecar = container_definition("sidecar");
        sidecar.port_mappings = vec![PortMapping {
            container_port: 9000,
            host_port: Some(9000),
            protocol: Protocol::Udp,
            container_port_range: Some(crate::task::PortRange {
                first: 9000,
                last: 9001,
            }),
        }];
        let mut task = task_in(NetworkMode::Awsvpc, vec![web, sidecar], Vec::new());
        let sandbox_name = "deckhand-web-3-internalecspause-0003";
        assert_eq!(
            task.containers[2].docker_name.as_deref(),
            Some(sandbox_name)
        );

        let sandbox = create_request(&task, 2, "edge").expect("valid task");
        assert_eq!(sandbox.network_mode.as_deref(), Some("bridge"));
        assert_eq!(sandbox.image, crate::task::sandbox::SANDBOX_IMAGE);
        assert_eq!(sandbox.entrypoint, Some(vec!["/pause".to_string()]));
        let published: Vec<(u16, u16, &str)> = sandbox
            .port_bindings
            .iter()
            .map(|binding| {
                (
                    binding.container_port,
                    binding.host_port,
                    binding.protocol.as_str(),
                )
            })
            .collect();
        assert_eq!(
            published,
            [
                (8080, 8080, "tcp"),
                (9000, 9000, "udp"),
                (9001, 9001, "udp")
            ]
        );
        assert_eq!(
            sandbox.labels.get(LABEL_CONTAINER_NAME).map(String::as_str),
            Some("~internal~ecs~pause")
        );
        for index in 0..2 {
            let member = create_request(&task, index, "edge").expect("valid task");
            assert_eq!(
                member.network_mode,
                Some(format!("container:{sandbox_name}")),
                "{index}"
            );
            assert!(member.port_bindings.is_empty(), "{index}");
        }

        assert_eq!(
            (sandbox.pid_mode.clone(), sandbox.ipc_mode.clone()),
            (None, None)
        );

        // pidMode and ipcMode task: the sandbox holds both namespaces and the others join them.
        task.pid_mode = Some(PidMode::Task);
        task.ipc_mode = Some(IpcMode::Task);
        std::sync::Arc::make_mut(&mut task.containers[0].definition)
            .linux_parameters
            .shared_memory_size_mib = Some(128);
        let sandbox = create_request(&task, 2, "edge").expect("valid task");
        assert_eq!(sandbox.pid_mode, None);
        assert_eq!(sandbox.ipc_mode.as_deref(), Some("shareable"));
        let web = create_request(&task, 0, "edge").expect("valid task");
        let joined = Some(format!("container:{sandbox_name}"));
        assert_eq!(
            (web.pid_mode.clone(), web.ipc_mode.clone()),
            (joined.clone(), joined)
        );
        assert_eq!(web.shm_size, None, "the sandbox's /dev/shm");

        // Without the sandbox's name (never so once accepted) the create says why.
        task.containers[2].docker_name = None;
        let error = create_request(&task, 0, "edge").expect_err("no sandbox name");
        assert!(error.contains("sandbox"), "{error}");
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
    fn create_request_carries_the_docker_config_overlays() {
        let mut definition = container_definition("app");
        let plain = create_request(&task_with(vec![definition.clone()], Vec::new()), 0, "edge")
            .expect("valid task");
        assert_eq!(
            (plain.config_overlay, plain.host_config_overlay),
            (None, None)
        );
        definition.docker_config = Some(crate::task::DockerConfigOverlay {
            config: Some(serde_json::json!({"User": "nobody"})),
            host_config: Some(serde_json::json!({"Privileged": true})),
        });
        let request = create_request(&task_with(vec![definition], Vec::new()), 0, "edge")
            .expect("valid task");
        assert_eq!(
            request.config_overlay,
            Some(serde_json::json!({"User": "nobody"}))
        );
        assert_eq!(
            request.host_config_overlay,
            Some(serde_json::json!({"Privileged": true}))
        );
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
                container_port_range: None,
            },
            PortMapping {
                container_port: 53,
                host_port: None,
                protocol: Protocol::Udp,
                container_port_range: None,
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
            secret_options: Vec::new(),
        });
        let volumes = vec![
            Volume::new("data"),
            Volume {
                host_source_path: Some("/srv/config".into()),
                ..Volume::new("config")
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
    fn docker_volumes_are_named_labelled_and_required_by_scope() {
        let configuration = |scope, autoprovision| DockerVolumeConfiguration {
            scope,
            autoprovision,
            driver: "local".into(),
            driver_opts: BTreeMap::from([("type".to_string(), "tmpfs".to_string())]),
            labels: BTreeMap::from([("app".to_string(), "shop".to_string())]),
        };
        let volumes = vec![
            Volume::new("plain"),
            Volume {
                docker_volume_configuration: Some(configuration(VolumeScope::Task, false)),
                ..Volume::new("scratch")
            },
            Volume {
                docker_volume_configuration: Some(configuration(VolumeScope::Shared, true)),
                ..Volume::new("db-data")
            },
            Volume {
                host_source_path: Some("/srv".into()),
                ..Volume::new("host")
            },
            Volume::new("unmounted"),
        ];
        let mut app = container_definition("app");
        for (volume, path) in [
            ("plain", "/plain"),
            ("scratch", "/scratch"),
            ("db-data", "/db"),
            ("host", "/host"),
            ("db-data", "/db-again"),
        ] {
            app.mount_points.push(MountPoint {
                source_volume: volume.into(),
                container_path: path.into(),
                read_only: false,
            });
        }
        let task = task_with(vec![app], volumes);
        let id = task.id.clone();

        let request = create_request(&task, 0, "edge").expect("valid task");
        assert_eq!(
            request.binds,
            vec![
                format!("deckhand-{id}-plain:/plain"),
                format!("deckhand-{id}-scratch:/scratch"),
                "db-data:/db".to_string(),
                "/srv:/host".to_string(),
                "db-data:/db-again".to_string(),
            ],
            "a shared volume is Docker's volume of the same name"
        );

        let task_labels = |extra: &[(&str, &str)]| {
            let mut labels = BTreeMap::from([
                (LABEL_TASK_ARN.to_string(), task.arn.clone()),
                (LABEL_CLUSTER.to_string(), "edge".to_string()),
            ]);
            for (key, value) in extra {
                labels.insert(key.to_string(), value.to_string());
            }
            labels
        };
        let requirement =
            |task_volume: &str, name: String, scope, autoprovision, volume: CreateVolume| {
                VolumeRequirement {
                    task_volume: task_volume.into(),
                    volume: CreateVolume { name, ..volume },
                    scope,
                    autoprovision,
                }
            };
        let tmpfs = BTreeMap::from([("type".to_string(), "tmpfs".to_string())]);
        assert_eq!(
            volume_requirements(&task, 0, "edge").expect("valid task"),
            vec![
                requirement(
                    "plain",
                    format!("deckhand-{id}-plain"),
                    VolumeScope::Task,
                    false,
                    CreateVolume {
                        driver: "local".into(),
                        labels: task_labels(&[]),
                        ..CreateVolume::default()
                    }
                ),
                requirement(
                    "scratch",
                    format!("deckhand-{id}-scratch"),
                    VolumeScope::Task,
                    false,
                    CreateVolume {
                        driver: "local".into(),
                        driver_opts: tmpfs.clone(),
                        labels: task_labels(&[("app", "shop")]),
                        ..CreateVolume::default()
                    }
                ),
                // Only the definition's labels: an existing shared volume is compared with them.
                requirement(
                    "db-data",
                    "db-data".into(),
                    VolumeScope::Shared,
                    true,
                    CreateVolume {
                        driver: "local".into(),
                        driver_opts: tmpfs,
                        labels: BTreeMap::from([("app".to_string(), "shop".to_string())]),
                        ..CreateVolume::default()
                    }
                ),
            ]
        );
        assert_eq!(
            task_volume_names(&task),
            vec![
                format!("deckhand-{id}-plain"),
                format!("deckhand-{id}-scratch")
            ],
            "cleanup removes the task-scoped volumes only, never a shared one"
        );
        assert_eq!(
            owned_volumes(&task)
                .iter()
                .map(|volume| volume.task_arn.as_str())
                .collect::<Vec<_>>(),
            vec![task.arn.as_str(), task.arn.as_str()]
        );
    }

    #[test]
    fn create_request_maps_the_linux_fields() {
        use crate::runtime::{DeviceMapping, Ulimit as DockerUlimit};
        use crate::task::{
            Device, DevicePermission, ExtraHost, IpcMode, KernelCapabilities, LinuxParameters,
            PidMode, PortRange, SystemControl, Tmpfs, Ulimit,
        };
        let mut app = container_definition("app");
        app.memory_mib = Some(64);
        app.ulimits = vec![Ulimit {
            name: "nofile".into(),
            soft_limit: 1024,
            hard_limit: -1,
        }];
        app.linux_parameters = LinuxParameters {
            init_process_enabled: true,
            capabilities: KernelCapabilities {
                add: vec!["NET_ADMIN".into()],
                drop: vec!["MKNOD".into(), "CHOWN".into()],
            },
            devices: vec![
                Device {
                    host_path: "/dev/null".into(),
                    container_path: Some("/dev/nothing".into()),
                    permissions: vec![DevicePermission::Write, DevicePermission::Read],
                },
                Device {
                    host_path: "/dev/zero".into(),
                    container_path: None,
                    permissions: Vec::new(),
                },
            ],
            tmpfs: vec![Tmpfs {
                container_path: "/scratch".into(),
                size_mib: 16,
                mount_options: vec!["noexec".into(), "mode=1777".into()],
            }],
            shared_memory_size_mib: Some(32),
            max_swap_mib: Some(128),
            swappiness: None,
        };
        app.readonly_root_filesystem = true;
        app.hostname = Some("edge-box".into());
        app.extra_hosts = vec![ExtraHost {
            hostname: "registry.local".into(),
            ip_address: "10.0.0.5".into(),
        }];
        app.dns_servers = vec!["10.0.0.2".into()];
        app.dns_search_domains = vec!["corp.example".into()];
        app.system_controls = vec![SystemControl {
            namespace: "net.core.somaxconn".into(),
            value: "1024".into(),
        }];
        app.docker_security_options = vec!["no-new-privileges".into()];
        app.disable_networking = true;
        app.interactive = true;
        app.pseudo_terminal = true;
        app.port_mappings = vec![
            PortMapping {
                container_port: 80,
                host_port: Some(8080),
                protocol: Protocol::Tcp,
                container_port_range: None,
            },
            PortMapping {
                container_port: 9000,
                host_port: None,
                protocol: Protocol::Udp,
                container_port_range: Some(PortRange {
                    first: 9000,
                    last: 9002,
                }),
            },
        ];
        let mut task = task_with(vec![app], Vec::new());
        task.pid_mode = Some(PidMode::Host);
        task.ipc_mode = Some(IpcMode::None);

        let request = create_request(&task, 0, "edge").expect("valid task");
        let mib = 1024 * 1024;
        assert_eq!(request.hostname.as_deref(), Some("edge-box"));
        assert!(request.network_disabled && request.open_stdin && request.tty);
        assert!(request.readonly_rootfs && request.init);
        assert_eq!(request.cap_add, vec!["NET_ADMIN".to_string()]);
        assert_eq!(request.cap_drop, vec!["MKNOD".to_string(), "CHOWN".into()]);
        assert_eq!(
            request.devices,
            vec![
                DeviceMapping {
                    path_on_host: "/dev/null".into(),
                    path_in_container: "/dev/nothing".into(),
                    cgroup_permissions: "rw".into(),
                },
                DeviceMapping {
                    path_on_host: "/dev/zero".into(),
                    path_in_container: "/dev/zero".into(),
                    cgroup_permissions: "rwm".into(),
                },
            ]
        );
        assert_eq!(
            request.tmpfs,
            BTreeMap::from([(
                "/scratch".to_string(),
                "noexec,mode=1777,size=16m".to_string()
            )])
        );
        assert_eq!(request.shm_size, Some(32 * mib));
        assert_eq!(request.memory, Some(64 * mib));
        assert_eq!(
            request.memory_swap,
            Some((64 + 128) * mib),
            "memory plus maxSwap"
        );
        assert_eq!(
            request.memory_swappiness,
            Some(60),
            "ECS's default with maxSwap"
        );
        assert_eq!(
            request.ulimits,
            vec![DockerUlimit {
                name: "nofile".into(),
                soft: 1024,
                hard: -1,
            }]
        );
        assert_eq!(
            request.extra_hosts,
            vec!["registry.local:10.0.0.5".to_string()]
        );
        assert_eq!(request.dns, vec!["10.0.0.2".to_string()]);
        assert_eq!(request.dns_search, vec!["corp.example".to_string()]);
        assert_eq!(
            request.sysctls,
            BTreeMap::from([("net.core.somaxconn".to_string(), "1024".to_string())])
        );
        assert_eq!(request.security_opt, vec!["no-new-privileges".to_string()]);
        assert_eq!(request.pid_mode.as_deref(), Some("host"));
        assert_eq!(request.ipc_mode.as_deref(), Some("none"));
        let ports: Vec<(u16, &str, u16)> = request
            .port_bindings
            .iter()
            .map(|binding| {
                (
                    binding.container_port,
                    binding.protocol.as_str(),
                    binding.host_port,
                )
            })
            .collect();
        assert_eq!(
            ports,
            vec![
                (80, "tcp", 8080),
                (9000, "udp", 0),
                (9001, "udp", 0),
                (9002, "udp", 0)
            ],
            "every port of a range is published on a host port Docker picks"
        );
    }

    /// (memory, maxSwap, swappiness) of a definition → (MemorySwap MiB, MemorySwappiness).
    type SwapCase = (
        Option<u64>,
        Option<u64>,
        Option<u64>,
        Option<i64>,
        Option<i64>,
    );

    #[test]
    fn swap_settings_follow_ecs() {
        use crate::task::LinuxParameters;
        let cases: &[SwapCase] = &[
            (Some(64), None, None, None, None),
            (Some(64), None, Some(10), None, None),
            (Some(64), Some(0), None, Some(64), Some(60)),
            (Some(64), Some(0), Some(0), Some(64), Some(0)),
            (Some(64), Some(36), Some(100), Some(100), Some(100)),
            // The parser refuses maxSwap without memory; the request leaves swap alone then.
            (None, Some(10), None, None, None),
        ];
        for &(memory, max_swap, swappiness, swap_mib, expected_swappiness) in cases {
            let mut app = container_definition("app");
            app.memory_mib = memory;
            app.linux_parameters = LinuxParameters {
                max_swap_mib: max_swap,
                swappiness,
                ..LinuxParameters::default()
            };
            let request =
                create_request(&task_with(vec![app], Vec::new()), 0, "edge").expect("valid task");
            let case =
                format!("memory {memory:?}, maxSwap {max_swap:?}, swappiness {swappiness:?}");
            assert_eq!(request.memory_swap, swap_mib.map(|mib| mib << 20), "{case}");
            assert_eq!(request.memory_swappiness, expected_swappiness, "{case}");
        }
    }

    #[test]
    fn a_definition_without_linux_fields_asks_docker_for_none() {
        let request = create_request(
            &task_with(vec![container_definition("app")], Vec::new()),
            0,
            "edge",
        )
        .expect("valid task");
        let defaults = CreateContainer::default();
        assert_eq!(
            (
                &request.hostname,
                request.init,
                &request.cap_add,
                &request.tmpfs,
                request.shm_size,
                request.memory_swap,
                &request.ulimits,
                &request.sysctls,
                &request.pid_mode,
                &request.ipc_mode,
            ),
            (
                &defaults.hostname,
                defaults.init,
                &defaults.cap_add,
                &defaults.tmpfs,
                defaults.shm_size,
                defaults.memory_swap,
                &defaults.ulimits,
                &defaults.sysctls,
                &defaults.pid_mode,
                &defaults.ipc_mode,
            )
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
