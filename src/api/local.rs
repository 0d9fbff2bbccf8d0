//! The local API's routes (HTTP/1.1 + JSON on the Unix socket; the `deckhand` CLI is its client):
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/tasks[?stopSignal=CONTAINER:SIGNAL…]` (body: task definition) | 201 `{"TaskARN","id"[,"warnings"]}` |
//! | `GET /v1/tasks` | 200 `{"Tasks":[<inspect object>…]}` |
//! | `GET /v1/tasks/{task}` | 200 the inspect object (`{task}`: id, unique prefix, or URL-encoded ARN) |
//! | `POST /v1/tasks/{task}/stop` | 202 `{"TaskARN","id","DesiredStatus":"STOPPED"}` |
//! | `GET /v1/tasks/{task}/logs?container=&follow=&tail=&since=&timestamps=` | 200 the containers' output, streamed (see below) |
//! | `GET /v1/events?since=N&wait=SECONDS` | 200 `{"events":[…]}` (long poll, wait ≤ 60 s) |
//! | `GET /v1/metadata` | 200 `{"Cluster","ContainerInstanceArn","Version"}` |
//! | `GET /v1/stats` | 200 the host's, the agent's and every task's resource use (`super::stats`) |
//!
//! Errors are `{"error": "..."}`: 400 bad JSON or definition (every validation error listed, also
//! as `"errors"`), 404 unknown task or route, 405 wrong method (with `Allow`), 413 body over 1 MiB
//! (refused by the server before reading it), 503 the engine cannot accept commands now.
//! A handler only reads the engine's snapshot or calls one engine command, so a bad request can
//! never disturb a running task.
//!
//! Logs: the body is chunked and written as Docker's lines arrive, in Docker's multiplexed
//! framing (`application/vnd.docker.multiplexed-stream`: stream byte 1 stdout or 2 stderr, three
//! zero bytes, big-endian length, payload), one whole line per frame. Without `container`, every
//! container's lines, each prefixed `NAME | `. `follow=1` keeps the stream open until every
//! container has stopped or the client goes away. A log stream holds one of the 8 workers for as
//! long as it lasts, so log streams and event long polls share one budget,
//! [`MAX_WAITING_EVENT_READERS`] (all but two workers): past it, 503.

use super::http::{HttpRequest, HttpResponse, ResponseStream, StreamEvent};
use super::log_stream::{
    encode_frames, prefixed_line, FrameDecoder, LineSplitter, OutputStream,
    MULTIPLEXED_CONTENT_TYPE,
};
use super::logs_query::parse_logs_query;
pub use super::logs_query::{docker_since, LogsQuery};
use super::stats::{stats_view, StatsSources};
use super::views::{find_task, role_credentials_json, task_metadata, LookupError};
use crate::engine::{EngineError, EngineHandle};
use crate::role_credentials::CredentialsStore;
use crate::task::definition_model::parse_stop_signal;
use crate::task::{check_task_definition, Task, TaskDefinition};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use serde_json::json;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest an event long poll waits.
pub const MAX_EVENT_WAIT: Duration = Duration::from_secs(60);
/// At most this many requests wait in event long polls or send container logs at once (one
/// budget for both), so that the fixed worker pool always has threads left for other requests.
pub const MAX_WAITING_EVENT_READERS: usize = super::server::WORKER_THREADS - 2;
/// Lines waiting between a container's log reader and the response; a full queue makes the
/// reader wait (Docker keeps the rest), so a slow client costs bounded memory.
const LOG_QUEUE_LINES: usize = 256;
/// One chunk of a log response gathers the lines already waiting, up to this size.
const LOG_CHUNK_BYTES: usize = 64 * 1024;
/// A long poll wakes at least this often to notice that the agent is shutting down.
const SHUTDOWN_CHECK: Duration = Duration::from_secs(1);

/// `{"Cluster","ContainerInstanceArn","Version"}`, shared with the introspection endpoint.
pub fn metadata_json(cluster: &str, container_instance_arn: Option<String>) -> serde_json::Value {
    json!({
        "Cluster": cluster,
        "ContainerInstanceArn": container_instance_arn,
        "Version": format!("deckhand v{}", crate::VERSION),
    })
}

/// Maps an engine refusal onto a status and message.
pub fn engine_error_response(error: &EngineError) -> HttpResponse {
    let status = match error {
        EngineError::NotFound { .. } => 404,
        EngineError::Rejected { .. } => 400,
        EngineError::Conflict { .. } => 409,
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
    /// Requests holding a worker for long: event long polls and log streams.
    waiting_event_readers: Arc<AtomicUsize>,
    stats_sources: StatsSources,
    /// Where `inspect` reads the state of a task's role credentials (never the credentials).
    role_credentials: CredentialsStore,
}

/// Releases a long-poll or log-stream slot when the request (or the stream) ends, however it
/// ends.
struct WaitingSlot(Arc<AtomicUsize>);

impl WaitingSlot {
    /// A slot, or `None` when every one is taken.
    fn take(counter: &Arc<AtomicUsize>) -> Option<WaitingSlot> {
        let waiting = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let slot = WaitingSlot(counter.clone());
        (waiting <= MAX_WAITING_EVENT_READERS).then_some(slot)
    }
}

impl Drop for WaitingSlot {
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
            waiting_event_readers: Arc::new(AtomicUsize::new(0)),
            stats_sources: StatsSources::default(),
            role_credentials: CredentialsStore::new(),
        }
    }

    /// Shows the state of tasks' role credentials from `store` in `inspect`.
    pub fn with_role_credentials(mut self, store: CredentialsStore) -> LocalApi {
        self.role_credentials = store;
        self
    }

    /// The `inspect` object of `task`, with its role credentials' state.
    fn task_view(&self, task: &Task, cluster: &str) -> serde_json::Value {
        let mut view = task_metadata(task, cluster);
        let states = self.role_credentials.states(&task.arn);
        if let (Some(object), Some(credentials)) =
            (view.as_object_mut(), role_credentials_json(task, &states))
        {
            object.insert("RoleCredentials".into(), credentials);
        }
        view
    }

    pub fn handle(&self, request: &HttpRequest) -> HttpResponse {
        let segments = request.path_segments();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let method = request.method.as_str();
        match segments.as_slice() {
            ["v1", "metadata"] => match method {
                "GET" => HttpResponse::json(
                    200,
                    &metadata_json(&self.engine.cluster(), self.engine.container_instance_arn()),
                ),
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
            ["v1", "tasks", task, "logs"] => match method {
                "GET" => self.logs(request, task),
                _ => method_not_allowed(request, "GET"),
            },
            ["v1", "events"] => match method {
                "GET" => self.events(request),
                _ => method_not_allowed(request, "GET"),
            },
            ["v1", "stats"] => match method {
                "GET" => {
                    let now = crate::clock::now_millis();
                    HttpResponse::json(
                        200,
                        &stats_view(&self.engine.tasks(), &self.stats_sources, now),
                    )
                }
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
        crate::sorting::sort_by(&mut tasks, |a, b| {
            a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id))
        });
        let views: Vec<serde_json::Value> = tasks
            .iter()
            .map(|task| self.task_view(task, &cluster))
            .collect();
        HttpResponse::json(200, &json!({ "Tasks": views }))
    }

    fn inspect(&self, query: &str) -> HttpResponse {
        let tasks = self.engine.tasks();
        match find_task(&tasks, query) {
            Ok(task) => HttpResponse::json(200, &self.task_view(task, &self.engine.cluster())),
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
        let mut parsed = match check_task_definition(&request.body) {
            Ok(parsed) => parsed,
            Err(invalid) => {
                let messages: Vec<String> =
                    invalid.errors.iter().map(ToString::to_string).collect();
                let mut body = json!({
                    "error": format!("invalid task definition: {}", messages.join("; ")),
                    "errors": messages,
                });
                if !invalid.warnings.is_empty() {
                    body["warnings"] = json!(invalid.warnings);
                }
                return HttpResponse::json(400, &body);
            }
        };
        if let Err(message) = apply_stop_signals(&mut parsed.definition, &request.query_pairs()) {
            return HttpResponse::error(400, &message);
        }
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
                parsed.warnings.extend(task.ignored_role_warnings());
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
            let Some(_slot) = WaitingSlot::take(&self.waiting_event_readers) else {
                return HttpResponse::error(
                    503,
                    format!(
                        "too many clients are waiting for events or logs (at most {MAX_WAITING_EVENT_READERS}); try again later"
                    ),
                );
            };
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

/// A submit's `stopSignal=CONTAINER:SIGNAL` query parameters (one per container): the stop
/// signal a Compose `stop_signal` asks for, which the task-definition JSON in the body cannot
/// carry (`deckhand submit` of a Compose file sends them). Any other parameter, an unknown
/// container or a signal Docker would not take is refused, naming it.
pub fn apply_stop_signals(
    definition: &mut TaskDefinition,
    pairs: &[(String, String)],
) -> Result<(), String> {
    for (key, value) in pairs {
        if key != "stopSignal" {
            return Err(format!(
                "unknown query parameter {key:?} (expected stopSignal=CONTAINER:SIGNAL)"
            ));
        }
        let Some((name, signal)) = value.split_once(':') else {
            return Err(format!(
                "stopSignal={value:?} is not CONTAINER:SIGNAL (for example web:SIGQUIT)"
            ));
        };
        let signal = parse_stop_signal(signal).map_err(|reason| format!("stopSignal: {reason}"))?;
        let Some(container) = definition
            .containers
            .iter_mut()
            .find(|container| container.name == name)
        else {
            return Err(format!(
                "stopSignal names container {name:?}, which the task definition does not have"
            ));
        };
        container.stop_signal = Some(signal);
    }
    Ok(())
}

/// What a container's log reader sends to the response.
enum LogMessage {
    Line {
        reader: usize,
        stream: OutputStream,
        line: Vec<u8>,
    },
    /// The reader is done; `error` says why, when the log did not simply end.
    Ended {
        reader: usize,
        error: Option<String>,
    },
}

/// Reads one container's log until it ends, sending whole lines. Ends early when the response
/// is gone (the send fails).
fn read_container_log(
    reader_index: usize,
    mut log: Box<dyn Read + Send>,
    tty: bool,
    sender: Sender<LogMessage>,
) {
    let mut decoder = FrameDecoder::new(tty);
    let mut splitter = LineSplitter::new();
    let mut buffer = vec![0u8; 32 * 1024];
    let mut pieces = Vec::new();
    let mut lines = Vec::new();
    let send_lines = |lines: &mut Vec<(OutputStream, Vec<u8>)>| {
        lines.drain(..).all(|(stream, line)| {
            sender
                .send(LogMessage::Line {
                    reader: reader_index,
                    stream,
                    line,
                })
                .is_ok()
        })
    };
    let error = loop {
        match log.read(&mut buffer) {
            Ok(0) => break decoder.finish().err().map(|error| error.to_string()),
            Ok(count) => {
                if let Err(error) = decoder.push(&buffer[..count], &mut pieces) {
                    break Some(error.to_string());
                }
                for (stream, piece) in pieces.drain(..) {
                    splitter.push(stream, &piece, &mut lines);
                }
                if !send_lines(&mut lines) {
                    return;
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => break Some(error.to_string()),
        }
    };
    splitter.finish(&mut lines);
    if send_lines(&mut lines) {
        let _ = sender.send(LogMessage::Ended {
            reader: reader_index,
            error,
        });
    }
}

/// One container whose log is being read.
struct ContainerLogReader {
    name: String,
    close: Box<dyn Fn() + Send + Sync>,
    thread: Option<JoinHandle<()>>,
}

/// The body of a logs response: the lines of one reader thread per container, interleaved as
/// they arrive, framed. Dropping it closes every log and joins the readers.
struct LogResponse {
    receiver: Option<Receiver<LogMessage>>,
    readers: Vec<ContainerLogReader>,
    open_readers: usize,
    /// The width names are padded to; `None`: lines are sent as they are (one container asked
    /// for by name).
    prefix_width: Option<usize>,
    _slot: WaitingSlot,
}

impl LogResponse {
    fn frame(&self, reader: usize, stream: OutputStream, line: &[u8]) -> Vec<u8> {
        match (self.prefix_width, self.readers.get(reader)) {
            (Some(width), Some(container)) => {
                encode_frames(stream, &prefixed_line(&container.name, width, line))
            }
            _ => encode_frames(stream, line),
        }
    }

    /// Adds `message` to `chunk`.
    fn take(&mut self, message: LogMessage, chunk: &mut Vec<u8>) {
        match message {
            LogMessage::Line {
                reader,
                stream,
                line,
            } => chunk.extend(self.frame(reader, stream, &line)),
            LogMessage::Ended { reader, error } => {
                self.open_readers = self.open_readers.saturating_sub(1);
                if let Some(error) = error {
                    let name = self
                        .readers
                        .get(reader)
                        .map_or("?", |container| container.name.as_str());
                    let text = format!("deckhand: the log of container {name} ended: {error}\n");
                    chunk.extend(self.frame(reader, OutputStream::Stderr, text.as_bytes()));
                }
            }
        }
    }
}

impl ResponseStream for LogResponse {
    fn next_event(&mut self, wait: Duration) -> StreamEvent {
        if self.open_readers == 0 {
            return StreamEvent::End;
        }
        let Some(receiver) = self.receiver.clone() else {
            return StreamEvent::End;
        };
        let mut chunk = Vec::new();
        match receiver.recv_timeout(wait) {
            Ok(message) => self.take(message, &mut chunk),
            Err(RecvTimeoutError::Timeout) => return StreamEvent::Idle,
            Err(RecvTimeoutError::Disconnected) => return StreamEvent::End,
        }
        while chunk.len() < LOG_CHUNK_BYTES {
            match receiver.try_recv() {
                Ok(message) => self.take(message, &mut chunk),
                Err(_) => break,
            }
        }
        if chunk.is_empty() {
            // Only a reader that ended cleanly: nothing to send yet.
            StreamEvent::Idle
        } else {
            StreamEvent::Data(chunk)
        }
    }
}

impl Drop for LogResponse {
    fn drop(&mut self) {
        // The receiver first, so that a reader blocked on a full queue wakes; then the logs,
        // so that a reader blocked on Docker wakes.
        self.receiver = None;
        for reader in &self.readers {
            (reader.close)();
        }
        for reader in &mut self.readers {
            if let Some(thread) = reader.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

impl LocalApi {
    fn logs(&self, request: &HttpRequest, query: &str) -> HttpResponse {
        let logs_query = match parse_logs_query(&request.query_pairs(), crate::clock::now_millis())
        {
            Ok(logs_query) => logs_query,
            Err(message) => return HttpResponse::error(400, message),
        };
        let tasks = self.engine.tasks();
        let task = match find_task(&tasks, query) {
            Ok(task) => task,
            Err(error) => return lookup_error_response(&error),
        };
        let names: Vec<&str> = task.containers.iter().map(|c| c.name()).collect();
        let chosen: Vec<_> = match &logs_query.container {
            Some(name) => match task.containers.iter().find(|c| c.name() == name) {
                Some(container) => vec![container],
                None => {
                    return HttpResponse::json(
                        404,
                        &json!({
                            "error": format!(
                                "task {} has no container {name:?}; its containers: {}",
                                task.id,
                                names.join(", ")
                            ),
                            "containers": names,
                        }),
                    )
                }
            },
            // Every container's output but the awsvpc sandbox's (it prints nothing).
            None => task
                .containers
                .iter()
                .filter(|container| !container.is_sandbox())
                .collect(),
        };
        let created: Vec<(String, String, bool)> = chosen
            .iter()
            .filter_map(|container| {
                let docker_id = container.docker_id.clone()?;
                Some((
                    container.name().to_string(),
                    docker_id,
                    container.definition.pseudo_terminal,
                ))
            })
            .collect();
        if created.is_empty() {
            let message = match &logs_query.container {
                Some(name) => format!(
                    "container {name} of task {} has not been created (or was removed): it has no logs",
                    task.id
                ),
                None => format!(
                    "no container of task {} has been created (or they were removed): there are no logs",
                    task.id
                ),
            };
            return HttpResponse::error(409, message);
        }
        let Some(slot) = WaitingSlot::take(&self.waiting_event_readers) else {
            return HttpResponse::error(
                503,
                format!(
                    "too many clients are waiting for events or logs (at most {MAX_WAITING_EVENT_READERS}); try again later"
                ),
            );
        };
        let mut opened = Vec::new();
        for (name, docker_id, tty) in &created {
            match self.engine.container_logs(docker_id, &logs_query.options) {
                Ok(stream) => opened.push((name.clone(), stream, *tty)),
                Err(error) => {
                    for (_, stream, _) in &opened {
                        (stream.close)();
                    }
                    let mut response = engine_error_response(&error);
                    if let EngineError::Unavailable { reason } = &error {
                        response = HttpResponse::error(
                            response.status,
                            format!("cannot read the log of container {name}: {reason}"),
                        );
                    }
                    return response;
                }
            }
        }
        let (sender, receiver) = bounded(LOG_QUEUE_LINES);
        let prefix_width = match logs_query.container {
            Some(_) => None,
            None => opened.iter().map(|(name, _, _)| name.chars().count()).max(),
        };
        let mut readers = Vec::with_capacity(opened.len());
        for (index, (name, stream, tty)) in opened.into_iter().enumerate() {
            let sender = sender.clone();
            let log = stream.reader;
            let thread = std::thread::Builder::new()
                .name(format!("logs-{}", crate::text::truncate_chars(&name, 10)))
                .spawn(move || read_container_log(index, log, tty, sender));
            let thread = match thread {
                Ok(thread) => Some(thread),
                Err(error) => {
                    log::warn!("cannot start a log reader thread for {name}: {error}");
                    (stream.close)();
                    None
                }
            };
            readers.push(ContainerLogReader {
                name,
                close: stream.close,
                thread,
            });
        }
        let open_readers = readers.iter().filter(|r| r.thread.is_some()).count();
        drop(sender);
        HttpResponse::streaming(
            MULTIPLEXED_CONTENT_TYPE,
            Box::new(LogResponse {
                receiver: Some(receiver),
                readers,
                open_readers,
                prefix_width,
                _slot: slot,
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn pairs(query: &str) -> Vec<(String, String)> {
        crate::api::http::parse_query(query)
    }

    #[test]
    fn a_submits_stop_signals_go_to_the_named_containers_or_are_refused() {
        let definition = crate::task::parse_task_definition(
            br#"{"family":"f","containerDefinitions":[{"name":"web","image":"a","memory":8},{"name":"db","image":"b","memory":8}]}"#,
        )
        .expect("valid")
        .definition;
        let mut ok = definition.clone();
        apply_stop_signals(
            &mut ok,
            &pairs("stopSignal=web%3Aquit&stopSignal=db:SIGRTMIN%2B3"),
        )
        .expect("applied");
        assert_eq!(ok.containers[0].stop_signal.as_deref(), Some("SIGQUIT"));
        assert_eq!(ok.containers[1].stop_signal.as_deref(), Some("SIGRTMIN+3"));
        for (query, expected) in [
            ("stopSignal=cache:SIGQUIT", "container \"cache\""),
            ("stopSignal=web:SIGNOPE", "not a Linux signal"),
            ("stopSignal=web", "not CONTAINER:SIGNAL"),
            ("signal=web:SIGQUIT", "unknown query parameter \"signal\""),
        ] {
            let mut refused = definition.clone();
            match apply_stop_signals(&mut refused, &pairs(query)) {
                Err(message) => assert!(message.contains(expected), "{query}: {message}"),
                Ok(()) => panic!("{query} was accepted"),
            }
        }
    }

    fn frame(stream: u8, payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![stream, 0, 0, 0];
        bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    /// A response over canned logs; `(name, bytes, tty)` per container.
    fn response(containers: Vec<(&str, Vec<u8>, bool)>, prefix: bool) -> LogResponse {
        let (sender, receiver) = bounded(LOG_QUEUE_LINES);
        let width = containers.iter().map(|(name, _, _)| name.len()).max();
        let readers: Vec<ContainerLogReader> = containers
            .into_iter()
            .enumerate()
            .map(|(index, (name, bytes, tty))| {
                let sender = sender.clone();
                let log: Box<dyn Read + Send> = Box::new(Cursor::new(bytes));
                ContainerLogReader {
                    name: name.to_string(),
                    close: Box::new(|| {}),
                    thread: Some(std::thread::spawn(move || {
                        read_container_log(index, log, tty, sender)
                    })),
                }
            })
            .collect();
        LogResponse {
            receiver: Some(receiver),
            open_readers: readers.len(),
            readers,
            prefix_width: if prefix { width } else { None },
            _slot: WaitingSlot(Arc::new(AtomicUsize::new(1))),
        }
    }

    /// Everything the response sends, decoded: (stdout, stderr).
    fn drain(mut response: LogResponse) -> (String, String) {
        let mut body = Vec::new();
        loop {
            match response.next_event(Duration::from_secs(10)) {
                StreamEvent::Data(data) => body.extend(data),
                StreamEvent::Idle => {}
                StreamEvent::End => break,
            }
        }
        let mut decoder = FrameDecoder::new(false);
        let mut pieces = Vec::new();
        decoder.push(&body, &mut pieces).expect("our own framing");
        assert_eq!(decoder.finish(), Ok(()));
        let mut stdout = String::new();
        let mut stderr = String::new();
        for (stream, piece) in pieces {
            let text = String::from_utf8_lossy(&piece).into_owned();
            match stream {
                OutputStream::Stdout => stdout.push_str(&text),
                OutputStream::Stderr => stderr.push_str(&text),
            }
        }
        (stdout, stderr)
    }

    #[test]
    fn every_container_line_is_prefixed_and_kept_on_its_stream() {
        let mut web = frame(1, b"web says hi\nand ");
        web.extend(frame(2, b"web fails\n"));
        web.extend(frame(1, b"more\n"));
        let tty = b"tty line\r\n".to_vec();
        let (stdout, stderr) = drain(response(
            vec![("web", web, false), ("console", tty, true)],
            true,
        ));
        let mut stdout_lines: Vec<&str> = stdout.lines().collect();
        stdout_lines.sort();
        assert_eq!(
            stdout_lines,
            vec![
                "console | tty line",
                "web     | and more",
                "web     | web says hi"
            ]
        );
        assert_eq!(stderr, "web     | web fails\n");
    }

    #[test]
    fn one_container_by_name_is_sent_as_it_is_and_a_broken_log_is_said() {
        let mut web = frame(1, b"exact bytes, no newline");
        web.extend(b"\x01\x00\x00");
        let (stdout, stderr) = drain(response(vec![("web", web, false)], false));
        assert_eq!(stdout, "exact bytes, no newline");
        assert!(
            stderr.starts_with("deckhand: the log of container web ended: ")
                && stderr.contains("ended inside a frame"),
            "{stderr}"
        );
    }

    #[test]
    fn dropping_the_response_closes_the_logs_and_ends_the_readers() {
        // A log that never ends until it is closed: the reader blocks in read().
        let (mut writer, reader) = std::os::unix::net::UnixStream::pair().expect("pair");
        std::io::Write::write_all(&mut writer, &frame(1, b"first\n")).expect("write");
        let closer = reader.try_clone().expect("clone");
        let (sender, receiver) = bounded(LOG_QUEUE_LINES);
        let thread =
            std::thread::spawn(move || read_container_log(0, Box::new(reader), false, sender));
        let counter = Arc::new(AtomicUsize::new(1));
        let mut response = LogResponse {
            receiver: Some(receiver),
            readers: vec![ContainerLogReader {
                name: "web".into(),
                close: Box::new(move || {
                    let _ = closer.shutdown(std::net::Shutdown::Both);
                }),
                thread: Some(thread),
            }],
            open_readers: 1,
            prefix_width: None,
            _slot: WaitingSlot(counter.clone()),
        };
        assert_eq!(
            response.next_event(Duration::from_secs(10)),
            StreamEvent::Data(frame(1, b"first\n"))
        );
        assert_eq!(
            response.next_event(Duration::from_millis(50)),
            StreamEvent::Idle
        );
        // The drop joins the reader: this returns only if closing woke it.
        drop(response);
        assert_eq!(counter.load(Ordering::SeqCst), 0, "the slot is released");
        drop(writer);
    }
}
