//! The ECS introspection endpoint (TCP, read-only, default `127.0.0.1:51678`), answering the same
//! JSON as the ECS container agent so that tools written for ECS hosts can read a deckhand host:
//!
//! - `GET /v1/metadata` → `{"Cluster","ContainerInstanceArn","Version"}`;
//! - `GET /v1/tasks` → `{"Tasks":[…]}`;
//! - `GET /v1/tasks?taskarn=ARN` or `?dockerid=ID` (full, or a short id of ≤ 12 characters) → one
//!   task object, 404 when none matches, 400 for an ambiguous short id or for both filters;
//! - `GET /metrics` → the agent's Prometheus metrics in the text exposition format 0.0.4 (see
//!   `crate::metrics`): read from counters, the engine's task snapshot and a few files, never
//!   from Docker, so a scrape is cheap and answers while Docker is away.

use super::http::{HttpRequest, HttpResponse};
use super::local::metadata_json;
use super::views::{find_task_by_docker_id, introspection_task, LookupError};
use crate::engine::EngineHandle;
use crate::metrics::{self, exposition};
use serde_json::json;
use std::sync::Arc;

pub struct IntrospectionApi {
    engine: Arc<dyn EngineHandle>,
    /// Where `/metrics` reads the process's and the containers' files (kept across scrapes:
    /// it remembers the boot time and which cgroup layout the host has).
    metric_sources: metrics::Sources,
}

impl IntrospectionApi {
    pub fn new(engine: Arc<dyn EngineHandle>) -> IntrospectionApi {
        IntrospectionApi {
            engine,
            metric_sources: metrics::Sources::default(),
        }
    }

    pub fn handle(&self, request: &HttpRequest) -> HttpResponse {
        let segments = request.path_segments();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let known = matches!(
            segments.as_slice(),
            ["v1", "metadata"] | ["v1", "tasks"] | ["metrics"]
        );
        if known && request.method != "GET" {
            return HttpResponse::error(
                405,
                format!(
                    "method {} is not allowed on {} (the introspection endpoint is read-only)",
                    request.method, request.path
                ),
            )
            .with_header("Allow", "GET");
        }
        match segments.as_slice() {
            ["v1", "metadata"] => HttpResponse::json(
                200,
                &metadata_json(&self.engine.cluster(), self.engine.container_instance_arn()),
            ),
            ["v1", "tasks"] => self.tasks(request),
            ["metrics"] => self.metrics(),
            _ => HttpResponse::error(404, format!("no such endpoint: {}", request.path)),
        }
    }

    /// The Prometheus page over this process's metrics and the engine's task snapshot.
    fn metrics(&self) -> HttpResponse {
        let page = metrics::scrape(
            metrics::global(),
            &self.engine.tasks(),
            &self.metric_sources,
        );
        HttpResponse {
            status: 200,
            headers: vec![("Content-Type".into(), exposition::CONTENT_TYPE.into())],
            body: page.into_bytes(),
            stream: None,
        }
    }

    fn tasks(&self, request: &HttpRequest) -> HttpResponse {
        let mut task_arn: Option<String> = None;
        let mut docker_id: Option<String> = None;
        for (key, value) in request.query_pairs() {
            match key.as_str() {
                "taskarn" => task_arn = Some(value),
                "dockerid" => docker_id = Some(value),
                _ => {}
            }
        }
        let mut tasks = self.engine.tasks();
        crate::sorting::sort_by(&mut tasks, |a, b| {
            a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id))
        });
        match (task_arn, docker_id) {
            (Some(_), Some(_)) => {
                HttpResponse::error(400, "give either taskarn or dockerid, not both")
            }
            (Some(arn), None) => match tasks.iter().find(|task| task.arn == arn) {
                Some(task) => HttpResponse::json(200, &introspection_task(task)),
                None => HttpResponse::error(404, format!("no task with ARN {arn}")),
            },
            (None, Some(id)) => match find_task_by_docker_id(&tasks, &id) {
                Ok(task) => HttpResponse::json(200, &introspection_task(task)),
                Err(error @ LookupError::NotFound { .. }) => HttpResponse::error(
                    404,
                    format!("no task has a container with Docker id {id} ({error})"),
                ),
                Err(error) => HttpResponse::error(400, error.to_string()),
            },
            (None, None) => {
                let views: Vec<serde_json::Value> = tasks.iter().map(introspection_task).collect();
                HttpResponse::json(200, &json!({ "Tasks": views }))
            }
        }
    }
}
