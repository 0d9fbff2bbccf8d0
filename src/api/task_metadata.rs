//! The task metadata endpoint (docs/ENGINE.md §14): what a container reads at the URI in its
//! `ECS_CONTAINER_METADATA_URI_V4` (or, for v3 clients, `ECS_CONTAINER_METADATA_URI`), in the
//! shapes the ECS agent answers there, so AWS SDKs, log routers and monitoring agents built for
//! ECS work unchanged:
//!
//! - `GET /v4/<token>` → the container's own metadata; `GET /v4/<token>/task` → its task with
//!   every container;
//! - `GET /v4/<token>/stats` → Docker's stats object for the container; `GET
//!   /v4/<token>/task/stats` → Docker id → stats object (`null` for a container Docker gave none)
//!   for every container of the task that Docker knows;
//! - the same under `/v3/<token>` in the v3 shapes (v4 less `LaunchType`,
//!   `FaultInjectionEnabled`, `LogDriver`, `LogOptions`, `RestartCount` and the ports' `HostIp`).
//!
//! The same server answers `GET /v2/credentials/<id>` (and `/v1/credentials?id=`) with a task
//! role's credentials from the [`CredentialsStore`] ([`super::credentials`]).
//!
//! A token no container has → 404; any method but GET → 405 (the endpoint is read-only). The
//! views are pure functions over a task snapshot; the handler reads the engine only through
//! [`EngineHandle`], which may be attached after the listener is up (until then: 503).

use super::credentials::{credentials_answer, credentials_request};
use super::http::{HttpRequest, HttpResponse};
use super::views::{
    insert_health, insert_log_driver, insert_restart_count, insert_time, metadata_task_head,
    networks_json, shown_ports, volumes_json,
};
use crate::engine::EngineHandle;
use crate::role_credentials::CredentialsStore;
use crate::task::labels::container_labels;
use crate::task::metadata_endpoint::{METADATA_V3_PREFIX, METADATA_V4_PREFIX};
use crate::task::{Container, Task};
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};

/// Worker threads per listener, at most: a stats answer takes Docker about a second, so a few requests
/// may be in flight at once.
pub const TASK_METADATA_WORKER_THREADS: usize = 4;
/// ECS shows a container's CPU limit as at least the two shares Docker gets for less.
const MINIMUM_CONTAINER_CPU: u64 = 2;
/// What `LaunchType` says: a host ECS does not manage, like an ECS Anywhere instance.
const LAUNCH_TYPE: &str = "EXTERNAL";

/// Which shape an answer takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataVersion {
    V3,
    V4,
}

impl MetadataVersion {
    fn from_prefix(prefix: &str) -> Option<MetadataVersion> {
        match prefix {
            METADATA_V4_PREFIX => Some(MetadataVersion::V4),
            METADATA_V3_PREFIX => Some(MetadataVersion::V3),
            _ => None,
        }
    }
}

/// The container object of the task metadata endpoint.
pub fn metadata_container(
    task: &Task,
    container: &Container,
    cluster: &str,
    version: MetadataVersion,
) -> Value {
    let v4 = version == MetadataVersion::V4;
    let mut object = Map::new();
    object.insert(
        "DockerId".into(),
        json!(container.docker_id.clone().unwrap_or_default()),
    );
    object.insert("Name".into(), json!(container.name()));
    object.insert(
        "DockerName".into(),
        json!(container.docker_name.clone().unwrap_or_default()),
    );
    object.insert("Image".into(), json!(container.definition.image));
    object.insert(
        "ImageID".into(),
        json!(container.image_id.clone().unwrap_or_default()),
    );
    let shown = shown_ports(task, container);
    if !shown.is_empty() {
        let ports: Vec<Value> = shown
            .iter()
            .map(|port| {
                let mut object = Map::new();
                object.insert("ContainerPort".into(), json!(port.container_port));
                object.insert("Protocol".into(), json!(port.protocol));
                object.insert("HostPort".into(), json!(port.host_port));
                if v4 {
                    object.insert("HostIp".into(), json!(port.host_ip));
                }
                Value::Object(object)
            })
            .collect();
        object.insert("Ports".into(), Value::Array(ports));
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
    let cpu = container
        .definition
        .cpu
        .unwrap_or(0)
        .max(MINIMUM_CONTAINER_CPU);
    object.insert(
        "Limits".into(),
        json!({
            "CPU": cpu as f64,
            "Memory": container.definition.memory_mib.unwrap_or(0),
        }),
    );
    insert_time(&mut object, "CreatedAt", container.created_at);
    insert_time(&mut object, "StartedAt", container.started_at);
    insert_time(&mut object, "FinishedAt", container.finished_at);
    object.insert("Type".into(), json!(container.kind.ecs_type()));
    object.insert("Networks".into(), networks_json(task, container));
    insert_health(&mut object, container);
    let volumes = volumes_json(task, container);
    if !volumes.is_empty() {
        object.insert("Volumes".into(), Value::Array(volumes));
    }
    if v4 {
        insert_log_driver(&mut object, container);
        insert_restart_count(&mut object, container);
    }
    Value::Object(object)
}

/// The task object of the task metadata endpoint, with every container of the task.
pub fn metadata_task(task: &Task, cluster: &str, version: MetadataVersion) -> Value {
    let mut object = metadata_task_head(task, cluster);
    object.insert(
        "Containers".into(),
        Value::Array(
            task.containers
                .iter()
                .map(|container| metadata_container(task, container, cluster, version))
                .collect(),
        ),
    );
    if version == MetadataVersion::V4 {
        object.insert("LaunchType".into(), json!(LAUNCH_TYPE));
        object.insert("FaultInjectionEnabled".into(), json!(false));
    }
    Value::Object(object)
}

/// What a request asks for, once its path is understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataRoute<'a> {
    Container {
        version: MetadataVersion,
        token: &'a str,
    },
    Task {
        version: MetadataVersion,
        token: &'a str,
    },
    ContainerStats {
        token: &'a str,
    },
    TaskStats {
        token: &'a str,
    },
}

/// The route of a path's segments, `None` for a path the endpoint does not serve.
pub fn metadata_route<'a>(segments: &[&'a str]) -> Option<MetadataRoute<'a>> {
    let (prefix, token, rest) = match segments {
        [prefix, token, rest @ ..] => (*prefix, *token, rest),
        _ => return None,
    };
    let version = MetadataVersion::from_prefix(prefix)?;
    if token.is_empty() {
        return None;
    }
    match rest {
        [] => Some(MetadataRoute::Container { version, token }),
        ["task"] => Some(MetadataRoute::Task { version, token }),
        ["stats"] => Some(MetadataRoute::ContainerStats { token }),
        ["task", "stats"] => Some(MetadataRoute::TaskStats { token }),
        _ => None,
    }
}

/// The endpoint's request handler.
pub struct TaskMetadataApi {
    engine: OnceLock<Arc<dyn EngineHandle>>,
    credentials: CredentialsStore,
}

impl Default for TaskMetadataApi {
    fn default() -> TaskMetadataApi {
        TaskMetadataApi::new()
    }
}

impl TaskMetadataApi {
    /// A handler with no engine yet: it answers 503 until [`TaskMetadataApi::attach`].
    pub fn new() -> TaskMetadataApi {
        TaskMetadataApi::with_credentials(CredentialsStore::new())
    }

    /// [`TaskMetadataApi::new`] serving role credentials from `credentials`.
    pub fn with_credentials(credentials: CredentialsStore) -> TaskMetadataApi {
        TaskMetadataApi {
            engine: OnceLock::new(),
            credentials,
        }
    }

    /// Serves from `engine` from now on (a second call changes nothing).
    pub fn attach(&self, engine: Arc<dyn EngineHandle>) {
        let _ = self.engine.set(engine);
    }

    pub fn handle(&self, request: &HttpRequest) -> HttpResponse {
        if let Some((version, id)) = credentials_request(request) {
            if request.method != "GET" {
                return HttpResponse::error(
                    405,
                    format!(
                        "method {} is not allowed (the credentials endpoint is read-only)",
                        request.method
                    ),
                )
                .with_header("Allow", "GET");
            }
            // Until the engine is attached it may not have restored its tasks' ids yet.
            let starting = self.engine.get().is_none();
            return credentials_answer(&self.credentials, version, &id, starting);
        }
        let segments = request.path_segments();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let Some(route) = metadata_route(&segments) else {
            return HttpResponse::error(404, "no such endpoint");
        };
        if request.method != "GET" {
            return HttpResponse::error(
                405,
                format!(
                    "method {} is not allowed (the task metadata endpoint is read-only)",
                    request.method
                ),
            )
            .with_header("Allow", "GET");
        }
        let Some(engine) = self.engine.get() else {
            return HttpResponse::error(503, "the agent is starting; try again shortly");
        };
        let token = match route {
            MetadataRoute::Container { token, .. }
            | MetadataRoute::Task { token, .. }
            | MetadataRoute::ContainerStats { token }
            | MetadataRoute::TaskStats { token } => token,
        };
        // The token is the secret: the answer never repeats it, nor says which part was wrong.
        let Some((task, container_name)) = engine.task_by_metadata_token(token) else {
            return HttpResponse::error(404, "no container has this metadata endpoint");
        };
        let Some(container) = task.container(&container_name) else {
            return HttpResponse::error(404, "no container has this metadata endpoint");
        };
        let cluster = engine.cluster();
        match route {
            MetadataRoute::Container { version, .. } => HttpResponse::json(
                200,
                &metadata_container(&task, container, &cluster, version),
            ),
            MetadataRoute::Task { version, .. } => {
                HttpResponse::json(200, &metadata_task(&task, &cluster, version))
            }
            MetadataRoute::ContainerStats { .. } => match &container.docker_id {
                Some(docker_id) => match engine.container_stats(docker_id) {
                    Ok(stats) => HttpResponse::json(200, &stats),
                    Err(error) => HttpResponse::error(
                        500,
                        format!("cannot read the stats of container {docker_id}: {error}"),
                    ),
                },
                None => HttpResponse::error(404, "the container has not been created yet"),
            },
            MetadataRoute::TaskStats { .. } => {
                HttpResponse::json(200, &task_stats(engine.as_ref(), &task))
            }
        }
    }
}

/// Docker id → stats of every container of `task` that Docker knows, read at once (Docker takes
/// about a second per sample); a container whose stats cannot be read maps to `null`, as ECS
/// shows a container it has no stats for.
fn task_stats(engine: &dyn EngineHandle, task: &Task) -> Value {
    let docker_ids: Vec<&str> = task
        .containers
        .iter()
        .filter_map(|container| container.docker_id.as_deref())
        .collect();
    let samples: Vec<(String, Value)> = std::thread::scope(|scope| {
        let readers: Vec<_> = docker_ids
            .iter()
            .map(|docker_id| {
                let docker_id = *docker_id;
                let reader = std::thread::Builder::new()
                    .name("task-metadata-stats".into())
                    .spawn_scoped(scope, move || engine.container_stats(docker_id).ok());
                (docker_id, reader)
            })
            .collect();
        readers
            .into_iter()
            .map(|(docker_id, reader)| {
                let stats = match reader {
                    Ok(reader) => reader.join().ok().flatten(),
                    // No thread to spare: read it here instead.
                    Err(_) => engine.container_stats(docker_id).ok(),
                };
                (docker_id.to_string(), stats.unwrap_or(Value::Null))
            })
            .collect()
    });
    Value::Object(crate::sorting::json_object_of(samples))
}

#[cfg(test)]
mod tests;
