//! The client commands — `submit`, `stop`, `ps`, `inspect`, `events`, `logs` — and how a failure maps
//! onto an exit code: 1 runtime failure (agent unreachable, agent error), 2 usage or invalid input
//! (including an unknown or ambiguous task), 78 configuration error.
//!
//! The rendering (the `ps` table, an event line) is pure and unit-tested; the commands only
//! move bytes between the user and the local API.

use super::client::{ApiClient, ApiResponse, ClientError, StreamAnswer};
use super::validate::parse_input;
use crate::api::http::{percent_encode, MAX_REQUEST_BODY_BYTES};
use crate::api::log_stream::{FrameDecoder, OutputStream};
use crate::api::views::task_id_from_arn;
use crate::config::{Config, Scope};
use crate::report::Event;
use crate::task::time::{millis_from_rfc3339, rfc3339_from_millis};
use crate::task::{Millis, TaskDefinition};
use serde::Serialize;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Exit code of a runtime failure.
pub const EXIT_RUNTIME: u8 = 1;
/// Exit code of a usage error or invalid input.
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a configuration error (EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;

/// Plain requests get this long to be answered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one events long poll asks the agent to wait.
const FOLLOW_WAIT_SECONDS: u64 = 30;

/// Why a command failed; [`CliFailure::exit_code`] is what the process exits with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliFailure {
    /// Exit 1: the agent is unreachable, answered an error of its own, or output failed.
    Runtime(String),
    /// Exit 2: the command line or the input is wrong.
    Invalid(Vec<String>),
    /// Exit 2: the task definition is invalid; one `error: path: message` line per error,
    /// printed as they are (the same lines as `deckhand validate`).
    InvalidDefinition(Vec<String>),
    /// Exit 78: the configuration cannot be loaded.
    Config(String),
}

impl CliFailure {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliFailure::Runtime(_) => EXIT_RUNTIME,
            CliFailure::Invalid(_) | CliFailure::InvalidDefinition(_) => EXIT_USAGE,
            CliFailure::Config(_) => EXIT_CONFIG,
        }
    }

    /// The lines to print on stderr.
    pub fn messages(&self) -> Vec<String> {
        match self {
            CliFailure::Runtime(message) | CliFailure::Config(message) => vec![message.clone()],
            CliFailure::Invalid(messages) | CliFailure::InvalidDefinition(messages) => {
                messages.clone()
            }
        }
    }

    /// Whether the messages are printed without the `deckhand: ` prefix.
    pub fn is_bare(&self) -> bool {
        matches!(self, CliFailure::InvalidDefinition(_))
    }

    fn invalid(message: impl Into<String>) -> CliFailure {
        CliFailure::Invalid(vec![message.into()])
    }
}

impl From<ClientError> for CliFailure {
    fn from(error: ClientError) -> CliFailure {
        CliFailure::Runtime(error.to_string())
    }
}

/// An error answer → failure: the agent refusing the user's input is exit 2, anything else 1.
pub(super) fn answer_failure(response: &ApiResponse) -> CliFailure {
    let mut messages = vec![response.error_message()];
    if let Some(errors) = response.body.get("errors").and_then(Value::as_array) {
        // The summary line already joins them; list each one on its own line instead.
        messages = errors
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
    }
    if (400..500).contains(&response.status) {
        CliFailure::Invalid(messages)
    } else {
        CliFailure::Runtime(messages.join("\n"))
    }
}

/// The system agent's API socket, where a non-root CLI looks after its own agent's.
pub const SYSTEM_API_SOCKET: &str = "/run/deckhand/api.sock";

/// The sockets the CLI tries, in order. `--socket` or a socket chosen in the environment or the
/// configuration file is the only one. Otherwise root uses the system socket, and another user
/// first their own agent's socket, then the system agent's (which members of group `deckhand`
/// may use). Pure.
pub fn socket_candidates(
    flag: Option<&Path>,
    configured: &Path,
    configured_explicitly: bool,
    scope: Scope,
) -> Vec<PathBuf> {
    if let Some(path) = flag {
        return vec![path.to_path_buf()];
    }
    let system = Path::new(SYSTEM_API_SOCKET);
    if configured_explicitly || scope == Scope::System || configured == system {
        return vec![configured.to_path_buf()];
    }
    vec![configured.to_path_buf(), system.to_path_buf()]
}

/// The first candidate where an agent answers a connection (`probe`). With one candidate it is
/// returned as it is, so the request reports what went wrong; with several and no answer, the
/// error names each socket and why it failed.
pub fn pick_socket(
    candidates: &[PathBuf],
    probe: impl Fn(&Path) -> std::io::Result<()>,
) -> Result<PathBuf, CliFailure> {
    if let [only] = candidates {
        return Ok(only.clone());
    }
    let mut failures = Vec::new();
    for candidate in candidates {
        match probe(candidate) {
            Ok(()) => return Ok(candidate.clone()),
            Err(error) => failures.push(format!("{} ({error})", candidate.display())),
        }
    }
    Err(CliFailure::Runtime(format!(
        "cannot reach a deckhand agent; tried {}\n\
         `deckhand run` must be running: as this user (its socket is the first one), or as the \
         system service (the second; members of group deckhand may use it). Choose a socket \
         with --socket PATH or DECKHAND_API_SOCKET.",
        failures.join(" and ")
    )))
}

/// The API socket: `--socket`, else `DECKHAND_API_SOCKET` or the configuration's default (root:
/// `/run/deckhand/api.sock`; others: their own agent's, `$XDG_RUNTIME_DIR/deckhand/api.sock`,
/// and if no agent answers there, the system agent's).
pub fn resolve_socket(flag: Option<&Path>) -> Result<PathBuf, CliFailure> {
    if let Some(path) = flag {
        return Ok(path.to_path_buf());
    }
    let scope = Scope::of_current_process();
    let environment = |key: &str| std::env::var(key).ok();
    let config = Config::load_for_scope(None, &environment, scope)
        .map_err(|error| CliFailure::Config(format!("configuration error: {error}")))?;
    // Chosen explicitly: what the environment and the file give differs from the default.
    let without_socket = |key: &str| {
        if key == "DECKHAND_API_SOCKET" {
            None
        } else {
            environment(key)
        }
    };
    let default_socket = Config::from_sources(None, &without_socket, scope)
        .map(|defaults| defaults.api_socket)
        .ok();
    let explicitly = environment("DECKHAND_API_SOCKET").is_some_and(|value| !value.is_empty())
        || default_socket.as_deref() != Some(config.api_socket.as_path());
    let candidates = socket_candidates(None, &config.api_socket, explicitly, scope);
    pick_socket(&candidates, |path| {
        std::os::unix::net::UnixStream::connect(path).map(drop)
    })
}

/// Reads a definition from FILE or stdin (`-`), refusing more than the API accepts.
pub fn read_definition(file: &str) -> Result<Vec<u8>, CliFailure> {
    let mut bytes = Vec::new();
    let limit = MAX_REQUEST_BODY_BYTES as u64 + 1;
    let result = if file == "-" {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|opened| opened.take(limit).read_to_end(&mut bytes))
    };
    let name = if file == "-" { "standard input" } else { file };
    // As `deckhand validate`: an unreadable file is a runtime failure (exit 1).
    result.map_err(|error| CliFailure::Runtime(format!("cannot read {name}: {error}")))?;
    if bytes.len() > MAX_REQUEST_BODY_BYTES {
        return Err(CliFailure::invalid(format!(
            "{name} is larger than the {MAX_REQUEST_BODY_BYTES} bytes a task definition may have"
        )));
    }
    Ok(bytes)
}

fn write_out(out: &mut dyn Write, text: &str) -> Result<(), CliFailure> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // A closed pipe (`deckhand events -f | head`) just ends the output.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(CliFailure::Runtime(format!("cannot write output: {error}"))),
    }
}

/// Where a submit goes: `/v1/tasks`, with a `stopSignal=CONTAINER:SIGNAL` parameter for each
/// container a Compose `stop_signal` gave one (the task-definition JSON has no field for it).
pub fn submit_target(definition: &TaskDefinition) -> String {
    let parameters: Vec<String> = definition
        .containers
        .iter()
        .filter_map(|container| {
            let signal = container.stop_signal.as_deref()?;
            let value = format!("{}:{signal}", container.name);
            Some(format!("stopSignal={}", percent_encode(&value)))
        })
        .collect();
    if parameters.is_empty() {
        "/v1/tasks".to_string()
    } else {
        format!("/v1/tasks?{}", parameters.join("&"))
    }
}

/// `deckhand submit FILE`: validate locally, submit, print the new id.
pub fn submit(client: &ApiClient, file: &str, out: &mut dyn Write) -> Result<(), CliFailure> {
    let bytes = read_definition(file)?;
    // A Compose file is converted here; the agent receives task-definition JSON.
    let (definition, target) = match parse_input(file, &bytes) {
        Ok(input) => {
            for warning in &input.parsed.warnings {
                eprintln!("warning: {warning}");
            }
            let target = submit_target(&input.parsed.definition);
            (input.json, target)
        }
        Err(errors) => {
            // The same lines as `deckhand validate`.
            return Err(CliFailure::InvalidDefinition(
                errors
                    .iter()
                    .map(|error| format!("error: {error}"))
                    .collect(),
            ));
        }
    };
    let response = client.request("POST", &target, Some(&definition), REQUEST_TIMEOUT)?;
    if response.status != 201 {
        return Err(answer_failure(&response));
    }
    let id = response
        .body
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            CliFailure::Runtime("the agent accepted the task but sent no id".to_string())
        })?;
    write_out(out, &format!("{id}\n"))
}

fn task_target(task: &str) -> String {
    format!("/v1/tasks/{}", percent_encode(task))
}

/// A TASK argument must name something: an empty one would address the task list.
fn check_task_argument(task: &str) -> Result<(), CliFailure> {
    if task.trim().is_empty() {
        return Err(CliFailure::invalid(
            "TASK is empty: give a task id, a unique prefix of it, or its ARN",
        ));
    }
    Ok(())
}

/// `deckhand stop TASK [--wait]`.
pub fn stop(
    client: &ApiClient,
    task: &str,
    wait: bool,
    out: &mut dyn Write,
) -> Result<(), CliFailure> {
    check_task_argument(task)?;
    let response = client.request(
        "POST",
        &format!("{}/stop", task_target(task)),
        Some(b""),
        REQUEST_TIMEOUT,
    )?;
    if response.status != 202 {
        return Err(answer_failure(&response));
    }
    let id = response
        .body
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or(task)
        .to_string();
    if wait {
        wait_until_stopped(client, &id)?;
    }
    write_out(out, &format!("{id}\n"))
}

/// Waits for the task to be STOPPED (or already cleaned up), sleeping in event long polls rather
/// than in fixed intervals: each new event wakes the check.
fn wait_until_stopped(client: &ApiClient, id: &str) -> Result<(), CliFailure> {
    let mut cursor = 0u64;
    loop {
        let response = client.request("GET", &task_target(id), None, REQUEST_TIMEOUT)?;
        match response.status {
            404 => return Ok(()),
            200 => {
                if response.body.get("KnownStatus").and_then(Value::as_str) == Some("STOPPED") {
                    return Ok(());
                }
            }
            _ => return Err(answer_failure(&response)),
        }
        let events = fetch_events(client, cursor, 10)?;
        if let Some(last) = events.last() {
            cursor = last.seq;
        }
    }
}

fn fetch_events(
    client: &ApiClient,
    since: u64,
    wait_seconds: u64,
) -> Result<Vec<Event>, CliFailure> {
    let response = client.request(
        "GET",
        &format!("/v1/events?since={since}&wait={wait_seconds}"),
        None,
        Duration::from_secs(wait_seconds) + REQUEST_TIMEOUT,
    )?;
    if response.status != 200 {
        return Err(answer_failure(&response));
    }
    let events = response.body.get("events").cloned().unwrap_or(Value::Null);
    serde_json::from_value(events)
        .map_err(|error| CliFailure::Runtime(format!("the agent sent unreadable events: {error}")))
}

/// One event as `deckhand events` prints it: the event's fields in order, `time` in RFC 3339.
#[derive(Serialize)]
struct EventLine<'a> {
    seq: u64,
    time: String,
    task: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
    status: &'a str,
    #[serde(rename = "exitCode", skip_serializing_if = "Option::is_none")]
    exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

pub fn event_line(event: &Event) -> String {
    let line = EventLine {
        seq: event.seq,
        time: rfc3339_from_millis(event.time),
        task: &event.task,
        container: event.container.as_deref(),
        status: &event.status,
        exit_code: event.exit_code,
        reason: event.reason.as_deref(),
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// `deckhand events [--follow] [--since N]`.
pub fn events(
    client: &ApiClient,
    follow: bool,
    since: u64,
    out: &mut dyn Write,
) -> Result<(), CliFailure> {
    let mut cursor = since;
    loop {
        let wait = if follow { FOLLOW_WAIT_SECONDS } else { 0 };
        let events = fetch_events(client, cursor, wait)?;
        let mut text = String::new();
        for event in &events {
            text.push_str(&event_line(event));
            text.push('\n');
            cursor = cursor.max(event.seq);
        }
        write_out(out, &text)?;
        if !follow {
            return Ok(());
        }
    }
}

/// What `deckhand logs` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogsRequest<'a> {
    pub task: &'a str,
    pub container: Option<&'a str>,
    pub follow: bool,
    pub tail: Option<u64>,
    pub since: Option<&'a str>,
    pub timestamps: bool,
}

/// The local API target of a logs request. Pure.
pub fn logs_target(request: &LogsRequest<'_>) -> String {
    let mut query = Vec::new();
    if let Some(container) = request.container {
        query.push(format!("container={}", percent_encode(container)));
    }
    if request.follow {
        query.push("follow=1".to_string());
    }
    if let Some(tail) = request.tail {
        query.push(format!("tail={tail}"));
    }
    if let Some(since) = request.since {
        query.push(format!("since={}", percent_encode(since)));
    }
    if request.timestamps {
        query.push("timestamps=1".to_string());
    }
    let mut target = format!("{}/logs", task_target(request.task));
    if !query.is_empty() {
        target.push('?');
        target.push_str(&query.join("&"));
    }
    target
}

/// Writes decoded log pieces; `false` once a reader of ours went away (a closed pipe).
fn write_log_pieces(
    pieces: &mut Vec<(OutputStream, Vec<u8>)>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<bool, CliFailure> {
    for (stream, piece) in pieces.drain(..) {
        let target: &mut dyn Write = match stream {
            OutputStream::Stdout => &mut *out,
            OutputStream::Stderr => &mut *err,
        };
        match target.write_all(&piece).and_then(|()| target.flush()) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => return Ok(false),
            Err(error) => return Err(CliFailure::Runtime(format!("cannot write output: {error}"))),
        }
    }
    Ok(true)
}

/// `deckhand logs TASK [CONTAINER] [--follow] [--tail N] [--since WHEN] [--timestamps]`: the
/// agent sends the lines framed by stream; stdout lines go to `out`, stderr lines to `err`.
pub fn logs(
    client: &ApiClient,
    request: &LogsRequest<'_>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliFailure> {
    check_task_argument(request.task)?;
    let body_timeout = if request.follow {
        None
    } else {
        Some(REQUEST_TIMEOUT)
    };
    let mut body =
        match client.request_stream(&logs_target(request), REQUEST_TIMEOUT, body_timeout)? {
            StreamAnswer::Stream(body) => body,
            StreamAnswer::Answer(response) => return Err(answer_failure(&response)),
        };
    let mut decoder = FrameDecoder::new(false);
    let mut buffer = vec![0u8; 64 * 1024];
    let mut pieces = Vec::new();
    loop {
        let count = match body.read(&mut buffer) {
            Ok(0) => break,
            Ok(count) => count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                return Err(CliFailure::Runtime(format!(
                    "the log stream from the agent broke: {error}"
                )))
            }
        };
        decoder
            .push(&buffer[..count], &mut pieces)
            .map_err(|error| {
                CliFailure::Runtime(format!("the agent sent a bad log stream: {error}"))
            })?;
        if !write_log_pieces(&mut pieces, out, err)? {
            return Ok(());
        }
    }
    decoder
        .finish()
        .map_err(|error| CliFailure::Runtime(format!("the agent sent a bad log stream: {error}")))
}

/// `deckhand inspect TASK`.
pub fn inspect(client: &ApiClient, task: &str, out: &mut dyn Write) -> Result<(), CliFailure> {
    check_task_argument(task)?;
    let response = client.request("GET", &task_target(task), None, REQUEST_TIMEOUT)?;
    if response.status != 200 {
        return Err(answer_failure(&response));
    }
    let text = serde_json::to_string_pretty(&response.body).unwrap_or_default();
    write_out(out, &format!("{text}\n"))
}

/// The age of something created at `created`, as `ps` shows it: exact while it is short, then
/// in its two largest units, then coarser as it grows — `45s`, `3m20s`, `25m`, `5h12m`, `20h`,
/// `3d4h`, `12d`, `2y45d`.
pub fn age(created: Millis, now: Millis) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    const YEAR: u64 = 365 * DAY;
    let seconds = now.saturating_sub(created) / 1000;
    match seconds {
        0..120 => format!("{seconds}s"),
        120..600 => match seconds % MINUTE {
            0 => format!("{}m", seconds / MINUTE),
            rest => format!("{}m{rest}s", seconds / MINUTE),
        },
        600..10_800 => format!("{}m", seconds / MINUTE),
        10_800..28_800 => match (seconds % HOUR) / MINUTE {
            0 => format!("{}h", seconds / HOUR),
            rest => format!("{}h{rest}m", seconds / HOUR),
        },
        28_800..172_800 => format!("{}h", seconds / HOUR),
        172_800..691_200 => match (seconds % DAY) / HOUR {
            0 => format!("{}d", seconds / DAY),
            rest => format!("{}d{rest}h", seconds / DAY),
        },
        691_200..63_072_000 => format!("{}d", seconds / DAY),
        _ => match (seconds % YEAR) / DAY {
            0 => format!("{}y", seconds / YEAR),
            rest => format!("{}y{rest}d", seconds / YEAR),
        },
    }
}

/// The `ps` table over inspect objects; stopped tasks only with `all`.
pub fn ps_table(tasks: &[Value], all: bool, now: Millis) -> String {
    let text = |task: &Value, key: &str| {
        task.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut rows: Vec<[String; 8]> = vec![[
        "TASK ID".into(),
        "FAMILY:REVISION".into(),
        "DESIRED".into(),
        "KNOWN".into(),
        "CONTAINERS".into(),
        "HEALTH".into(),
        "RESTARTS".into(),
        "AGE".into(),
    ]];
    // Newest first, as `docker ps` lists containers.
    let created = |task: &Value| {
        task.get("CreatedAt")
            .and_then(Value::as_str)
            .and_then(millis_from_rfc3339)
    };
    let mut tasks: Vec<&Value> = tasks.iter().collect();
    crate::sorting::sort_by_key(&mut tasks, |task| std::cmp::Reverse(created(task)));
    for task in tasks {
        let known = text(task, "KnownStatus");
        if !all && known == "STOPPED" {
            continue;
        }
        let arn = text(task, "TaskARN");
        let id = task_id_from_arn(&arn).unwrap_or(&arn).to_string();
        // The owner's containers: an awsvpc task's sandbox is deckhand's.
        let containers: Vec<Value> = task
            .get("Containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|container| container.get("Type").and_then(Value::as_str) != Some("CNI_PAUSE"))
            .collect();
        let running = containers
            .iter()
            .filter(|container| {
                container.get("KnownStatus").and_then(Value::as_str) == Some("RUNNING")
            })
            .count();
        let age_text = created(task)
            .map(|created| age(created, now))
            .unwrap_or_else(|| "-".into());
        // A task without a health check has no health to show.
        let health = task
            .get("HealthStatus")
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_string();
        let restarts: u64 = containers
            .iter()
            .filter_map(|container| container.get("RestartCount").and_then(Value::as_u64))
            .sum();
        rows.push([
            id,
            format!("{}:{}", text(task, "Family"), text(task, "Revision")),
            text(task, "DesiredStatus"),
            known,
            format!("{running}/{}", containers.len()),
            health,
            restarts.to_string(),
            age_text,
        ]);
    }
    let mut widths = [0usize; 8];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    for row in &rows {
        let mut line = String::new();
        for (index, cell) in row.iter().enumerate() {
            if index + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}   ", width = widths[index]));
            }
        }
        table.push_str(line.trim_end());
        table.push('\n');
    }
    table
}

/// `deckhand ps [--all] [--json]`.
pub fn ps(
    client: &ApiClient,
    all: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliFailure> {
    let response = client.request("GET", "/v1/tasks", None, REQUEST_TIMEOUT)?;
    if response.status != 200 {
        return Err(answer_failure(&response));
    }
    let tasks = response
        .body
        .get("Tasks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if json {
        let shown: Vec<&Value> = tasks
            .iter()
            .filter(|task| {
                all || task.get("KnownStatus").and_then(Value::as_str) != Some("STOPPED")
            })
            .collect();
        let text = serde_json::to_string_pretty(&shown).unwrap_or_default();
        return write_out(out, &format!("{text}\n"));
    }
    write_out(out, &ps_table(&tasks, all, crate::clock::now_millis()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_targets_carry_only_what_was_asked() {
        // (request, target)
        let table = [
            (
                LogsRequest {
                    task: "abc",
                    ..LogsRequest::default()
                },
                "/v1/tasks/abc/logs",
            ),
            (
                LogsRequest {
                    task: "arn:aws:ecs:local:0:task/c/abc",
                    container: Some("web app"),
                    follow: true,
                    tail: Some(0),
                    since: Some("2024-05-01T12:00:00+02:00"),
                    timestamps: true,
                },
                "/v1/tasks/arn%3Aaws%3Aecs%3Alocal%3A0%3Atask%2Fc%2Fabc/logs?container=web%20app&follow=1&tail=0&since=2024-05-01T12%3A00%3A00%2B02%3A00&timestamps=1",
            ),
        ];
        for (request, expected) in table {
            assert_eq!(logs_target(&request), expected);
        }
    }
    use serde_json::json;

    #[test]
    fn socket_candidates_per_user_and_choice() {
        let user = Path::new("/run/user/1000/deckhand/api.sock");
        let system = Path::new(SYSTEM_API_SOCKET);
        let flag = Path::new("/tmp/flag.sock");
        // (flag, configured, explicitly, scope, expected)
        type Case<'a> = (Option<&'a Path>, &'a Path, bool, Scope, Vec<&'a Path>);
        let table: Vec<Case> = vec![
            (Some(flag), user, false, Scope::User, vec![flag]),
            (Some(flag), system, true, Scope::System, vec![flag]),
            (None, user, false, Scope::User, vec![user, system]),
            (None, user, true, Scope::User, vec![user]),
            (None, system, false, Scope::System, vec![system]),
            (None, system, false, Scope::User, vec![system]),
            (None, flag, true, Scope::System, vec![flag]),
        ];
        for (given, configured, explicitly, scope, expected) in table {
            let expected: Vec<PathBuf> = expected.iter().map(|p| p.to_path_buf()).collect();
            assert_eq!(
                socket_candidates(given, configured, explicitly, scope),
                expected,
                "{given:?} {configured:?} explicitly={explicitly} {scope:?}"
            );
        }
    }

    #[test]
    fn the_first_answering_socket_wins_and_the_error_names_every_one() {
        let user = PathBuf::from("/run/user/1000/deckhand/api.sock");
        let system = PathBuf::from(SYSTEM_API_SOCKET);
        let refuse = |path: &Path| -> std::io::Result<()> {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("nothing at {}", path.display()),
            ))
        };
        let only_system = |path: &Path| {
            if path == Path::new(SYSTEM_API_SOCKET) {
                Ok(())
            } else {
                refuse(path)
            }
        };
        let both = [user.clone(), system.clone()];
        assert_eq!(pick_socket(&both, |_| Ok(())), Ok(user.clone()));
        assert_eq!(pick_socket(&both, only_system), Ok(system.clone()));
        assert_eq!(
            pick_socket(std::slice::from_ref(&user), refuse),
            Ok(user.clone()),
            "a single socket is used as it is: the request says what is wrong"
        );
        let failure = pick_socket(&both, refuse).expect_err("nothing answers");
        assert_eq!(failure.exit_code(), EXIT_RUNTIME);
        let message = failure.messages().join("\n");
        for path in [&user, &system] {
            assert!(
                message.contains(&format!("{} (nothing at", path.display())),
                "{message}"
            );
        }
        assert!(message.contains("deckhand run"), "{message}");
    }

    #[test]
    fn ages_are_exact_while_short_and_coarser_as_they_grow() {
        let second = 1_000;
        let minute = 60 * second;
        let hour = 60 * minute;
        let day = 24 * hour;
        let table = [
            (0, "0s"),
            (999, "0s"),
            (59 * second, "59s"),
            (119 * second, "119s"),
            (2 * minute, "2m"),
            (3 * minute + 20 * second, "3m20s"),
            (9 * minute + 59 * second, "9m59s"),
            (10 * minute + 30 * second, "10m"),
            (179 * minute, "179m"),
            (3 * hour, "3h"),
            (5 * hour + 12 * minute, "5h12m"),
            (8 * hour + 12 * minute, "8h"),
            (47 * hour, "47h"),
            (2 * day, "2d"),
            (3 * day + 4 * hour, "3d4h"),
            (8 * day + 4 * hour, "8d"),
            (729 * day, "729d"),
            (730 * day, "2y"),
            (775 * day, "2y45d"),
        ];
        for (elapsed, expected) in table {
            assert_eq!(
                age(1_000_000, 1_000_000 + elapsed),
                expected,
                "{elapsed} ms"
            );
        }
        assert_eq!(
            age(2_000, 1_000),
            "0s",
            "a clock going back is not negative"
        );
    }

    fn task(id: &str, known: &str, containers: &[&str]) -> Value {
        json!({
            "TaskARN": format!("arn:aws:ecs:local:000000000000:task/default/{id}"),
            "Family": "web",
            "Revision": "2",
            "DesiredStatus": "RUNNING",
            "KnownStatus": known,
            "CreatedAt": "2023-11-14T22:13:20.000Z",
            "Containers": containers.iter().map(|status| json!({"KnownStatus": status})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn ps_shows_the_task_health_and_its_containers_restarts() {
        let mut checked = task("cccc", "RUNNING", &["RUNNING", "RUNNING"]);
        checked["HealthStatus"] = json!("UNHEALTHY");
        checked["Containers"][0]["RestartCount"] = json!(3);
        checked["Containers"][1]["RestartCount"] = json!(2);
        let table = ps_table(&[checked], false, 1_700_000_000_000);
        let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "cccc",
                "web:2",
                "RUNNING",
                "RUNNING",
                "2/2",
                "UNHEALTHY",
                "5",
                "0s"
            ]
        );
    }

    #[test]
    fn ps_lists_running_tasks_and_all_with_all() {
        let tasks = vec![
            task("aaaa", "RUNNING", &["RUNNING", "STOPPED"]),
            task("bbbb", "STOPPED", &["STOPPED"]),
        ];
        let now = 1_700_000_000_000 + 125_000;
        let table = ps_table(&tasks, false, now);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2, "{table}");
        let header: Vec<&str> = lines[0]
            .split("   ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(
            header,
            [
                "TASK ID",
                "FAMILY:REVISION",
                "DESIRED",
                "KNOWN",
                "CONTAINERS",
                "HEALTH",
                "RESTARTS",
                "AGE"
            ]
        );
        let row: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            row,
            ["aaaa", "web:2", "RUNNING", "RUNNING", "1/2", "-", "0", "2m5s"]
        );
        let table = ps_table(&tasks, true, now);
        assert_eq!(table.lines().count(), 3);
        assert!(table
            .lines()
            .nth(2)
            .is_some_and(|line| line.starts_with("bbbb")));
    }

    #[test]
    fn ps_lists_the_newest_task_first() {
        let mut older = task("older", "RUNNING", &["RUNNING"]);
        older["CreatedAt"] = json!("2023-11-14T20:00:00.000Z");
        let mut newer = task("newer", "RUNNING", &["RUNNING"]);
        newer["CreatedAt"] = json!("2023-11-14T22:00:00.000Z");
        let now = millis_from_rfc3339("2023-11-14T23:00:00.000Z").expect("time");
        let table = ps_table(&[older, newer], false, now);
        let first_column: Vec<&str> = table
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().next())
            .collect();
        assert_eq!(first_column, ["newer", "older"], "{table}");
        assert!(
            table
                .lines()
                .nth(2)
                .is_some_and(|line| line.ends_with("3h")),
            "{table}"
        );
    }

    #[test]
    fn event_lines_carry_rfc3339_time_and_omit_what_is_absent() {
        let container_event = Event {
            seq: 7,
            time: 1_700_000_000_123,
            task: "abc".into(),
            container: Some("web".into()),
            status: "STOPPED".into(),
            exit_code: Some(137),
            reason: Some("killed".into()),
        };
        assert_eq!(
            event_line(&container_event),
            r#"{"seq":7,"time":"2023-11-14T22:13:20.123Z","task":"abc","container":"web","status":"STOPPED","exitCode":137,"reason":"killed"}"#
        );
        let task_event = Event {
            container: None,
            exit_code: None,
            reason: None,
            status: "RUNNING".into(),
            ..container_event
        };
        assert_eq!(
            event_line(&task_event),
            r#"{"seq":7,"time":"2023-11-14T22:13:20.123Z","task":"abc","status":"RUNNING"}"#
        );
    }

    #[test]
    fn refusals_are_exit_2_and_agent_errors_exit_1() {
        let table = [
            (
                400,
                json!({"error": "invalid", "errors": ["a: x", "b: y"]}),
                2,
                vec!["a: x", "b: y"],
            ),
            (404, json!({"error": "no task abc"}), 2, vec!["no task abc"]),
            (
                503,
                json!({"error": "shutting down"}),
                1,
                vec!["shutting down"],
            ),
            (500, Value::Null, 1, vec!["the agent answered HTTP 500"]),
        ];
        for (status, body, code, messages) in table {
            let failure = answer_failure(&ApiResponse { status, body });
            assert_eq!(failure.exit_code(), code, "{status}");
            assert_eq!(failure.messages(), messages, "{status}");
        }
    }
}
