//! The local API's routes (HTTP/1.1 + JSON on the Unix socket; the `deckhand` CLI is its client):
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/tasks` (body: task definition) | 201 `{"TaskARN","id"[,"warnings"]}` |
//! | `GET /v1/tasks` | 200 `{"Tasks":[<inspect object>…]}` |
//! | `GET /v1/tasks/{task}` | 200 the inspect object (`{task}`: id, unique prefix, or URL-encoded ARN) |
//! | `POST /v1/tasks/{task}/stop` | 202 `{"TaskARN","id","DesiredStatus":"STOPPED"}` |
//! | `GET /v1/events?since=N&wait=SECONDS` | 200 `{"events":[…]}` (long poll, wait ≤ 60 s) |
//! | `GET /v1/metadata` | 200 `{"Cluster","ContainerInstanceArn","Version"}` |
//!
//! Errors are `{"error": "..."}`: 400 bad JSON or definition (every validation error listed, also
//! as `"errors"`), 404 unknown task or route, 405 wrong method (with `Allow`), 413 body over 1 MiB
//! (refused by the server before reading it), 503 the engine cannot accept commands now.
//! A handler only reads the engine's snapshot or calls one engine command, so a bad request can
//! never disturb a running task.

use super::http::{HttpRequest, HttpResponse};
use super::views::{find_task, task_metadata, LookupError};
use crate::engine::{EngineError, EngineHandle};
use crate::task::parse_task_definition;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest an event long poll waits.
pub const MAX_EVENT_WAIT: Duration = Duration::from_secs(60);
/// At most this many requests wait in event long polls at once, so that the fixed worker pool
/// always has threads left for other requests.
pub const MAX_WAITING_EVENT_READERS: usize = super::server::WORKER_THREADS - 2;
/// A long poll wakes at least this often to notice that the agent is shutting down.
const SHUTDOWN_CHECK: Duration = Duration::from_secs(1);

/// `{"Cluster","ContainerInstanceArn","Version"}`, shared with the introspection endpoint.
pub fn metadata_json(cluster: &str) -> serde_json::Value {
    json!({
        "Cluster": cluster,
        "ContainerInstanceArn": serde_json::Value::Null,
        "Version": format!("deckhand v{}", crate::VERSION),
    })
}

/// Maps an engine refusal onto a status and message.
pub fn engine_error_response(error: &EngineError) -> HttpResponse {
    let status = match error {
        EngineError::NotFound { .. } => 404,
        EngineError::Rejected { .. } => 400,
        EngineError::Unavailable { .. } | EngineError::ShuttingDown => 503,
    };
    HttpResponse::error(status, error.to_string())
}

pub fn lookup_error_response(error: &LookupError) -> HttpResponse {
    let status = match error {
        LookupError::NotFound { .. } => 404,
        LookupError::Empty | LookupError::Ambiguous { .. } => 400,
    };
    let mut response = HttpResponse::error(status, error.to_string());
    if let LookupError::Ambiguous { candidates, .. } = error {
        response = HttpResponse::json(
            status,
            &json!({ "error": error.to_string(), "candidates": candidates }),
        );
    }
    response
}

fn method_not_allowed(request: &HttpRequest, allowed: &str) -> HttpResponse {
    HttpResponse::error(
        405,
        format!(
            "method {} is not allowed on {} (allowed: {allowed})",
            request.method, request.path
        ),
    )
    .with_header("Allow", allowed)
}

/// The local API: routes requests onto an [`EngineHandle`].
pub struct LocalApi {
    engine: Arc<dyn EngineHandle>,
    stopping: Arc<AtomicBool>,
    waiting_event_readers: AtomicUsize,
}

/// Releases a long-poll slot when the request ends, however it ends.
struct WaitingSlot<'a>(&'a AtomicUsize);

impl Drop for WaitingSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LocalApi {
    /// `stopping` is set by the agent at shutdown; long polls then answer at once.
    pub fn new(engine: Arc<dyn EngineHandle>, stopping: Arc<AtomicBool>) -> LocalApi {
        LocalApi {
            engine,
            stopping,
            waiting_event_readers: AtomicUsize::new(0),
        }
    }

    pub fn handle(&self, request: &HttpRequest) -> HttpResponse {
        let segments = request.path_segments();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let method = request.method.as_str();
        match segments.as_slice() {
            ["v1", "metadata"] => match method {
                "GET" => HttpResponse::json(200, &metadata_json(&self.engine.cluster())),
                _ => method_not_allowed(request, "GET"),
            },
            ["v1", "tasks"] => match method {
                "GET" => self.list_tasks(),
                "POST" => self.submit(request),
                _ => method_not_allowed(request, "GET, POST"),
            },
            ["v1", "tasks", task] => match method {
                "GET" => self.inspect(task),
                _ => method_not_allowed(request, "GET"),
            },
            ["v1", "tasks", task, "stop"] => match method {
                "POST" => self.stop(task),
                _ => method_not_allowed(request, "POST"),
            },
            ["v1", "events"] => match method {
                "GET" => self.events(request),
                _ => method_not_allowed(request, "GET"),
            },
            _ => HttpResponse::error(
                404,
                format!("no such endpoint: {} {}", request.method, request.path),
            ),
        }
    }

    fn list_tasks(&self) -> HttpResponse {
        let cluster = self.engine.cluster();
        let mut tasks = self.engine.tasks();
        tasks.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        let views: Vec<serde_json::Value> = tasks
            .iter()
            .map(|task| task_metadata(task, &cluster))
            .collect();
        HttpResponse::json(200, &json!({ "Tasks": views }))
    }

    fn inspect(&self, query: &str) -> HttpResponse {
        let tasks = self.engine.tasks();
        match find_task(&tasks, query) {
            Ok(task) => HttpResponse::json(200, &task_metadata(task, &self.engine.cluster())),
            Err(error) => lookup_error_response(&error),
        }
    }

    fn submit(&self, request: &HttpRequest) -> HttpResponse {
        if request.body.iter().all(u8::is_ascii_whitespace) {
            return HttpResponse::error(
                400,
                "the request body is empty: send an ECS task definition (JSON)",
            );
        }
        let parsed = match parse_task_definition(&request.body) {
            Ok(parsed) => parsed,
            Err(errors) => {
                let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
                return HttpResponse::json(
                    400,
                    &json!({
                        "error": format!("invalid task definition: {}", messages.join("; ")),
                        "errors": messages,
                    }),
                );
            }
        };
        for warning in &parsed.warnings {
            log::info!("task definition {}: {warning}", parsed.definition.family);
        }
        match self.engine.submit(parsed.definition) {
            Ok(task) => {
                log::info!(
                    "task {} ({}) accepted through the API",
                    task.id,
                    task.family
                );
                let mut body = json!({ "TaskARN": task.arn, "id": task.id });
                if !parsed.warnings.is_empty() {
                    body["warnings"] = json!(parsed.warnings);
                }
                HttpResponse::json(201, &body)
                    .with_header("Location", &format!("/v1/tasks/{}", task.id))
            }
            Err(error) => engine_error_response(&error),
        }
    }

    fn stop(&self, query: &str) -> HttpResponse {
        let tasks = self.engine.tasks();
        let task = match find_task(&tasks, query) {
            Ok(task) => task,
            Err(error) => return lookup_error_response(&error),
        };
        match self.engine.stop(&task.id) {
            Ok(()) => {
                log::info!("task {} asked to stop through the API", task.id);
                HttpResponse::json(
                    202,
                    &json!({ "TaskARN": task.arn, "id": task.id, "DesiredStatus": "STOPPED" }),
                )
            }
            Err(error) => engine_error_response(&error),
        }
    }

    fn events(&self, request: &HttpRequest) -> HttpResponse {
        let mut since = 0u64;
        let mut wait = Duration::ZERO;
        for (key, value) in request.query_pairs() {
            match key.as_str() {
                "since" => match value.parse::<u64>() {
                    Ok(number) => since = number,
                    Err(_) => {
                        return HttpResponse::error(
                            400,
                            format!("since must be an event number (0 or more), not {value:?}"),
                        )
                    }
                },
                "wait" => match value.parse::<f64>() {
                    Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
                        wait = Duration::from_secs_f64(seconds.min(MAX_EVENT_WAIT.as_secs_f64()))
                    }
                    _ => {
                        return HttpResponse::error(
                            400,
                            format!("wait must be a number of seconds (0 to 60), not {value:?}"),
                        )
                    }
                },
                other => {
                    return HttpResponse::error(
                        400,
                        format!("unknown query parameter {other:?} (expected since, wait)"),
                    )
                }
            }
        }
        let events = if wait.is_zero() {
            self.engine.events_since(since, Duration::ZERO)
        } else {
            let waiting = self.waiting_event_readers.fetch_add(1, Ordering::SeqCst) + 1;
            let _slot = WaitingSlot(&self.waiting_event_readers);
            if waiting > MAX_WAITING_EVENT_READERS {
                return HttpResponse::error(
                    503,
                    format!(
                        "too many clients are waiting for events (at most {MAX_WAITING_EVENT_READERS}); try again later"
                    ),
                );
            }
            self.wait_for_events(since, wait)
        };
        HttpResponse::json(200, &json!({ "events": events }))
    }

    /// Waits for events in slices, so that a shutdown ends the wait within a second.
    fn wait_for_events(&self, since: u64, wait: Duration) -> Vec<crate::report::Event> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let events = self.engine.events_since(since, left.min(SHUTDOWN_CHECK));
            if !events.is_empty()
                || Instant::now() >= deadline
                || self.stopping.load(Ordering::SeqCst)
            {
                return events;
            }
        }
    }
}
