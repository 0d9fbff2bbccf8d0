//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz, nightly) and for the tests that
//! replay their saved corpora on stable: one function per parser family of bytes that come from
//! outside deckhand. Each takes arbitrary bytes, drives the same code the agent runs on them, and
//! panics only where a parser broke its promise (a panic, or an answer that contradicts itself).
//! Not an API: hidden from the docs, and nothing in the agent calls it.

mod aws;
mod config;
mod ecs;
mod gpus;
mod host_files;
mod s3;
mod tcs;

pub use aws::{aws_answers, aws_references};
pub use config::config_file;
pub use ecs::{acs_frames, acs_task, ecs_credentials, ecs_http, proxy_answers, role_credentials};
pub use gpus::gpu_list;
pub use host_files::{iptables_listing, meminfo, metrics_files, secrets_file};
pub use s3::environment_file;
pub use tcs::tcs_messages;

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::api::http::{read_request, read_response, write_response, MAX_REQUEST_BODY_BYTES};
use crate::api::introspection::IntrospectionApi;
use crate::api::local::LocalApi;
use crate::api::task_metadata::TaskMetadataApi;
use crate::docker::progress::{ProgressJudge, ProgressKind};
use crate::docker::{negotiation, wire};
use crate::engine::managed_task::{Input, ManagedTask, ManagedTaskSettings};
use crate::engine::{EngineError, EngineHandle};
use crate::net::http1::{
    read_line_limited, read_response_head, BodyReader, MAX_BODY_BYTES, MAX_RESPONSE_HEAD_BYTES,
    MAX_STREAM_LINE_BYTES,
};
use crate::report::Event;
use crate::state::MAX_STORED_NUMBER;
use crate::task::{Task, TaskDefinition, TaskStatus};

/// Docker's HTTP framing: a response head, then its body as a whole (Content-Length, chunked or
/// until EOF) and as an NDJSON stream of events and pull-progress lines. The bytes arrive in
/// small reads, as from a socket.
pub fn docker_http(data: &[u8]) {
    for method in ["GET", "HEAD"] {
        for as_stream in [false, true] {
            let _ = docker_response(data, method, as_stream);
        }
    }
}

fn docker_response(data: &[u8], method: &str, as_stream: bool) -> io::Result<()> {
    let step = 1 + data.len() % 13;
    let mut reader = BufReader::new(SplitReader { data, step });
    let head = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES)?;
    let framing = head.body_framing(method)?;
    let mut body = BodyReader::new(reader, framing);
    if !as_stream {
        let bytes = body.read_to_end_limited(MAX_BODY_BYTES)?;
        let _ = wire::error_message(&bytes, &head.reason);
        return Ok(());
    }
    let mut lines = BufReader::new(body);
    let mut line = Vec::new();
    let mut judge = ProgressJudge::new(ProgressKind::Pull, "app:v1");
    while read_line_limited(&mut lines, MAX_STREAM_LINE_BYTES, &mut line)? {
        docker_stream_line(&line);
        let _ = judge.observe_line(&line);
    }
    let _ = judge.finish();
    Ok(())
}

/// One NDJSON line of Docker's event stream, as the events thread reads it.
fn docker_stream_line(line: &[u8]) {
    if let Ok(Some(event)) = wire::parse_event(line) {
        let _ = crate::engine::docker_events::observation_for_event(&event);
    }
}

/// Docker's JSON answers: container inspect (and what the engine and restore read from it),
/// container and volume lists, image inspect, network inspect, container stats, version, create
/// and wait answers, events, pull/import progress lines, and error bodies.
pub fn docker_json(data: &[u8]) {
    if let Ok(info) = wire::parse_container_info(data) {
        let _ = crate::engine::managed_task::status_from_inspect(&info);
        let _ = crate::engine::reconcile::docker_state_status(&info);
        let _ = crate::engine::reconcile::inspected_metadata(&info);
    }
    let _ = wire::parse_container_list(data);
    let _ = wire::parse_volume_list(data);
    let _ = wire::parse_volume_created(data);
    let _ = wire::parse_volume_info(data);
    let _ = wire::parse_image_info(data);
    if let Ok(images) = wire::parse_image_list(data) {
        let tracked = crate::state::ImagesRecord::default();
        let _ = crate::engine::image_cleanup::select_removable(
            &crate::engine::image_cleanup::SelectionInput {
                now: 1_800_000_000_000,
                images: &images,
                tracked: &tracked,
                protected_names: &["busybox".to_string()],
                excluded_names: &[],
                minimum_age: Duration::from_secs(3600),
                untracked_cleanup: true,
                untracked_minimum_age: Duration::ZERO,
            },
        );
    }
    let _ = wire::parse_docker_root_dir(data);
    let _ = wire::parse_created(data);
    let _ = wire::parse_network_gateway(data);
    let _ = wire::parse_network_bridge_name(data);
    let _ = wire::parse_stats(data);
    if let Ok(version) = wire::parse_json::<wire::EngineVersion>(data, "version") {
        let _ = negotiation::negotiate(&version.api_version);
    }
    let _ = negotiation::negotiate(&String::from_utf8_lossy(data));
    let _ = wire::error_message(data, "Internal Server Error");
    for line in data.split(|byte| *byte == b'\n') {
        docker_stream_line(line);
    }
    for kind in [ProgressKind::Pull, ProgressKind::Import] {
        let mut judge = ProgressJudge::new(kind, "app:v1");
        let verdict = data
            .split(|byte| *byte == b'\n')
            .try_for_each(|line| judge.observe_line(line));
        if verdict.is_ok() {
            let _ = judge.finish();
        }
    }
}

/// The local API's, the introspection endpoint's and the task metadata endpoint's HTTP framing
/// and request handling (routes, query strings, tokens, task-definition bodies) against an engine that holds two tasks, and the CLI's
/// reading of the agent's answers.
pub fn api_http(data: &[u8]) {
    let step = 1 + data.len() % 11;
    let mut stream = FakeConnection {
        input: SplitReader { data, step },
        output: Vec::new(),
    };
    if let Ok(request) = read_request(&mut stream, MAX_REQUEST_BODY_BYTES) {
        let engine: Arc<dyn EngineHandle> = Arc::new(FuzzEngine);
        // "Stopping" makes a long-poll for events return after one look instead of waiting.
        let local = LocalApi::new(Arc::clone(&engine), Arc::new(AtomicBool::new(true)))
            .with_role_credentials(crate::role_credentials::CredentialsStore::new());
        let introspection = IntrospectionApi::new(Arc::clone(&engine));
        let task_metadata = TaskMetadataApi::new();
        task_metadata.attach(engine);
        for response in [
            local.handle(&request),
            introspection.handle(&request),
            task_metadata.handle(&request),
        ] {
            let mut written = Vec::new();
            write_response(&mut written, &response).expect("writing to memory cannot fail");
            let read_back = read_response(&mut written.as_slice(), usize::MAX)
                .expect("the agent's own response reads back");
            assert_eq!(read_back.status, response.status);
            assert_eq!(read_back.body, response.body);
        }
    }
    let _ = read_response(&mut SplitReader { data, step }, MAX_REQUEST_BODY_BYTES);
}

/// The files the state store reads at start: a task checkpoint, the agent record and the
/// event log (the same bytes as each).
pub fn state_files(data: &[u8]) {
    let path = Path::new("/var/lib/deckhand/tasks/fuzz.json");
    if let Ok(task) = crate::state::parse_versioned::<Task>(path, data, "task") {
        let cluster = task.arn.clone();
        let _ = crate::api::views::task_metadata(&task, &cluster);
        let _ = crate::api::views::introspection_task(&task);
        let _ = crate::control::tasks_d::stopped_by_itself(&task);
        let _ = crate::control::tasks_d::task_run_time(&task, 1_700_000_000_000);
        let _ = serde_json::to_vec(&task).expect("a loaded task serializes");
        // What restore does with a task the store accepted: the managed task starts from it,
        // then is asked to stop.
        let accepted = task.start_sequence.max(task.stop_sequence) <= MAX_STORED_NUMBER;
        if accepted {
            let now = 1_800_000_000_000;
            let stop_sequence = task.start_sequence.max(task.stop_sequence) + 1;
            let mut machine = ManagedTask::new(task, managed_task_settings(), None);
            let _ = machine.start(now);
            let _ = machine.handle(
                Input::Desired {
                    status: TaskStatus::Stopped,
                    sequence: stop_sequence,
                    registered: true,
                },
                now + 1,
            );
        }
    }
    let _ = crate::state::parse_versioned::<crate::state::AgentRecord>(path, data, "agent");
    let _ = crate::state::parse_versioned::<crate::state::ImagesRecord>(path, data, "images");
    let parsed = crate::state::event_log::parse_log(data);
    // The state log's records, replayed as a restart replays them over the task files.
    let records = parsed.records(data);
    let mut tasks = std::collections::BTreeMap::new();
    if let Ok(agent) = crate::state::replay_records(path, &records, &mut tasks) {
        if let Some(agent) = agent {
            assert!(agent.next_sequence.max(agent.next_event_seq) <= MAX_STORED_NUMBER);
        }
        for (id, task) in &tasks {
            assert_eq!(id, &task.id, "a replayed task is filed under its own id");
        }
    }
    for floor in [0, 1, u64::MAX] {
        let (first, last, next) = parsed.numbering(floor);
        assert!(
            next > last,
            "the next event number {next} is not above the last {last}"
        );
        assert!(first <= next);
    }
}

/// The engine's defaults, as `deckhand run` has them without a configuration file.
fn managed_task_settings() -> ManagedTaskSettings {
    ManagedTaskSettings {
        cluster: "edge".into(),
        rules: Default::default(),
        stop_timeout: Duration::from_secs(30),
        steady_check_interval: Duration::from_secs(300),
        cleanup_wait: Duration::from_secs(3 * 3600),
        dependency_poll_interval: Duration::from_secs(5),
        sent_poll_interval: Duration::from_secs(30),
        task_metadata: None,
        exclude_ipv6_port_bindings: true,
        aws_logs: Default::default(),
        firelens: Default::default(),
    }
}

/// `tasks.d`: the source marks of the tasks the engine holds, one per line (before the first NUL
/// byte), then directory entries separated by `0x01`, each a file name, a newline and the file's
/// contents. Drives the source-mark reader, the scan's name filter, hashing, definition parsing,
/// the diff and the marks written for new tasks.
pub fn tasks_d(data: &[u8]) {
    use crate::control::tasks_d::{
        content_hash, diff, parse_source_mark, source_mark, Action, ScannedFile, TrackedFile,
    };
    let (marks, directory) = match data.iter().position(|byte| *byte == 0) {
        Some(split) => (&data[..split], &data[split + 1..]),
        None => (data, &[][..]),
    };
    // What the watcher learns from the engine: the file and hash each task's mark names.
    let tracked: BTreeMap<String, TrackedFile> = String::from_utf8_lossy(marks)
        .lines()
        .enumerate()
        .filter_map(|(index, mark)| {
            let (file, hash) = parse_source_mark(mark)?;
            let task_id = format!("{index:032x}");
            Some((file, TrackedFile { hash, task_id }))
        })
        .collect();
    let mut scanned = BTreeMap::new();
    for entry in directory.split(|byte| *byte == 1).filter(|e| !e.is_empty()) {
        let (name, content) = match entry.iter().position(|byte| *byte == b'\n') {
            Some(split) => (&entry[..split], &entry[split + 1..]),
            None => (entry, &[][..]),
        };
        // As the scan: names that are not UTF-8, hidden files and other extensions are skipped.
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let _ = crate::control::tasks_d::images_named_in(content);
        let hash = content_hash(content);
        let valid = content.len() <= MAX_REQUEST_BODY_BYTES
            && crate::task::parse_task_definition(content).is_ok();
        scanned.insert(name.to_string(), ScannedFile { hash, valid });
    }
    for action in diff(&tracked, &scanned) {
        // Only a start (or the start half of a replacement) marks its task with the file.
        let (Action::Start { file } | Action::Replace { file, .. }) = &action else {
            continue;
        };
        let hash = scanned.get(file).map_or(0, |scanned| scanned.hash);
        let mark = source_mark(file, hash);
        assert_eq!(
            parse_source_mark(&mark),
            Some((file.clone(), hash)),
            "the source mark {mark:?} does not read back"
        );
    }
    for name in tracked.keys() {
        let _ = parse_source_mark(name);
    }
    let _ = parse_source_mark(&String::from_utf8_lossy(data));
}

/// RFC 3339 times, as Docker writes them and as deckhand writes and reads them back: the parsers
/// agree with each other, and what deckhand writes reads back exactly.
pub fn rfc3339(data: &[u8]) {
    use crate::task::time::{
        millis_from_rfc3339, parse_docker_time, parse_docker_time_nanos, rfc3339_from_millis,
    };
    let text = String::from_utf8_lossy(data);
    let millis = parse_docker_time(&text);
    if let Some(nanos) = parse_docker_time_nanos(&text) {
        assert_eq!(millis, u64::try_from(nanos / 1_000_000).ok(), "{text:?}");
    }
    if let Some(written) = millis_from_rfc3339(&text) {
        assert_eq!(Some(written), millis, "{text:?}");
    }
    if let Some(millis) = millis {
        assert_eq!(
            millis_from_rfc3339(&rfc3339_from_millis(millis)),
            Some(millis)
        );
    }
    if data.len() >= 8 {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&data[..8]);
        // Up to the end of year 9999, the last time a four-digit year can write.
        let millis = u64::from_le_bytes(raw) % 253_402_300_800_000;
        assert_eq!(
            millis_from_rfc3339(&rfc3339_from_millis(millis)),
            Some(millis)
        );
    }
}

/// Compose files (`task::compose`): YAML, interpolation, `.env` and `env_file` text, ports,
/// durations, sizes and shell words. Whatever the bytes, no panic; and a file that converts is a
/// task definition `deckhand validate` accepts as JSON (what `deckhand convert` promises). The
/// first line of the input (up to a NUL) is the `.env` beside the file, so both are fuzzed.
pub fn compose(data: &[u8]) {
    use crate::task::compose::{convert_compose, ComposeContext};
    let (dot_env, file) = match data.iter().position(|byte| *byte == 0) {
        Some(at) => (
            Some(String::from_utf8_lossy(&data[..at]).into_owned()),
            &data[at + 1..],
        ),
        None => (None, data),
    };
    let env_file = dot_env.clone().unwrap_or_default();
    let read = move |path: &Path| -> io::Result<String> {
        if path.ends_with("app.env") {
            Ok(env_file.clone())
        } else {
            Err(io::Error::new(io::ErrorKind::NotFound, "no such file"))
        }
    };
    let environment: BTreeMap<String, String> = [("HOME", "/home/fuzz"), ("TAG", "1")]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    let context = ComposeContext {
        environment,
        dot_env,
        directory_name: Some("Fuzz Project".to_string()),
        directory: Some("/srv/fuzz".into()),
        read_file: &read,
    };
    if let Ok(converted) = convert_compose(file, &context) {
        let json = serde_json::to_vec(&converted.json).expect("a JSON value serialises");
        let parsed = crate::task::parse_task_definition(&json)
            .expect("a converted Compose file is a valid task definition");
        assert_eq!(parsed.definition, converted.parsed.definition);
    }
}

/// Container log streams (`deckhand logs`): Docker's multiplexed framing decoded at any split
/// gives the same bytes per stream as decoded whole; lines never pass the cap and join back to
/// those bytes; what the agent frames again decodes back; and the CLI's reading of a streamed
/// response never panics.
pub fn log_frames(data: &[u8]) {
    use crate::api::log_stream::{
        encode_frames, FrameDecoder, LineSplitter, OutputStream, MAX_LINE_BYTES,
    };
    // Some inputs are read as a TTY container's raw output, most as framed.
    let tty = data.len() % 7 == 3;
    let joined = |pieces: &[(OutputStream, Vec<u8>)], wanted: OutputStream| -> Vec<u8> {
        pieces
            .iter()
            .filter(|(stream, _)| *stream == wanted)
            .flat_map(|(_, bytes)| bytes.iter().copied())
            .collect()
    };
    let mut whole_decoder = FrameDecoder::new(tty);
    let mut whole = Vec::new();
    let whole_result = whole_decoder.push(data, &mut whole);
    let step = 1 + data.len() % 13;
    let mut split_decoder = FrameDecoder::new(tty);
    let mut split = Vec::new();
    let mut split_result = Ok(());
    for chunk in data.chunks(step) {
        split_result = split_decoder.push(chunk, &mut split);
        if split_result.is_err() {
            break;
        }
    }
    assert_eq!(whole_result.is_ok(), split_result.is_ok());
    if whole_result.is_ok() {
        assert_eq!(whole_decoder.finish(), split_decoder.finish());
    }
    for stream in [OutputStream::Stdout, OutputStream::Stderr] {
        assert_eq!(joined(&whole, stream), joined(&split, stream));
    }
    let mut splitter = LineSplitter::new();
    let mut lines = Vec::new();
    for (stream, piece) in &split {
        splitter.push(*stream, piece, &mut lines);
    }
    splitter.finish(&mut lines);
    let mut reframed = Vec::new();
    for (stream, line) in &lines {
        assert!(line.len() <= MAX_LINE_BYTES);
        reframed.extend(encode_frames(*stream, line));
    }
    for stream in [OutputStream::Stdout, OutputStream::Stderr] {
        assert_eq!(joined(&lines, stream), joined(&split, stream));
    }
    let mut again = Vec::new();
    let mut decoder = FrameDecoder::new(false);
    decoder
        .push(&reframed, &mut again)
        .expect("the agent's own framing decodes");
    assert_eq!(decoder.finish(), Ok(()));
    for stream in [OutputStream::Stdout, OutputStream::Stderr] {
        assert_eq!(joined(&again, stream), joined(&lines, stream));
    }
    if let Ok(opened) = crate::api::http::open_response(SplitReader { data, step }) {
        let mut body = opened.body;
        let mut sink = Vec::new();
        let _ = body.read_to_end(&mut sink);
    }
}

/// A fuzz target's entry point.
pub type Target = fn(&[u8]);

/// Every fuzz target by name, for the corpus replay.
pub const TARGETS: &[(&str, Target)] = &[
    ("docker_http", docker_http),
    ("docker_json", docker_json),
    ("api_http", api_http),
    ("state_files", state_files),
    ("config_file", config_file),
    ("tasks_d", tasks_d),
    ("rfc3339", rfc3339),
    ("meminfo", meminfo),
    ("gpu_list", gpu_list),
    ("iptables_listing", iptables_listing),
    ("compose", compose),
    ("log_frames", log_frames),
    ("metrics_files", metrics_files),
    ("secrets_file", secrets_file),
    ("ecs_http", ecs_http),
    ("ecs_credentials", ecs_credentials),
    ("acs_task", acs_task),
    ("acs_frames", acs_frames),
    ("role_credentials", role_credentials),
    ("proxy_answers", proxy_answers),
    ("tcs_messages", tcs_messages),
    ("environment_file", environment_file),
    ("aws_answers", aws_answers),
    ("aws_references", aws_references),
];

/// Bytes handed out at most `step` at a time, as a socket does.
pub(super) struct SplitReader<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for SplitReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let count = self.data.len().min(buffer.len()).min(self.step);
        buffer[..count].copy_from_slice(&self.data[..count]);
        self.data = &self.data[count..];
        Ok(count)
    }
}

/// A client connection: the request's bytes in, whatever the agent writes (`100 Continue`) out.
pub(super) struct FakeConnection<'a> {
    input: SplitReader<'a>,
    output: Vec<u8>,
}

impl Read for FakeConnection<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.input.read(buffer)
    }
}

impl Write for FakeConnection<'_> {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        self.output.write(buffer)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An engine holding two tasks (so that lookups by id, prefix, ARN and Docker id have something
/// to find) that accepts every submitted definition and stops what it holds.
struct FuzzEngine;

impl FuzzEngine {
    fn task(id: &str, docker_id: &str) -> Task {
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "web".into(),
            revision: 1,
            network_mode: crate::task::NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![crate::task::ContainerDefinition::new(
                "app",
                "busybox:latest",
            )],
            pid_mode: None,
            ipc_mode: None,
        };
        let mut task = Task::new(id.into(), "edge", definition, 1, 1_700_000_000_000);
        task.containers[0].docker_id = Some(docker_id.into());
        // The token seeds use: `tok-` and the task id.
        task.containers[0].metadata_token = Some(format!("tok-{id}"));
        task
    }
}

impl EngineHandle for FuzzEngine {
    fn submit(&self, definition: TaskDefinition) -> Result<Task, EngineError> {
        Ok(Task::new(
            "fuzz".into(),
            "edge",
            definition,
            3,
            1_700_000_000_000,
        ))
    }

    fn submit_from_source(
        &self,
        definition: TaskDefinition,
        _source: String,
    ) -> Result<Task, EngineError> {
        self.submit(definition)
    }

    fn stop(&self, task_id: &str) -> Result<(), EngineError> {
        if self.tasks().iter().any(|task| task.id == task_id) {
            Ok(())
        } else {
            Err(EngineError::NotFound {
                task: task_id.to_string(),
            })
        }
    }

    fn tasks(&self) -> Vec<Task> {
        vec![
            FuzzEngine::task("0f3c2a9e7b5d4c1a", &"ab12".repeat(16)),
            FuzzEngine::task("0f3c9999e0e0e0e0", &"cd34".repeat(16)),
        ]
    }

    fn events_since(&self, _after: u64, _wait: Duration) -> Vec<Event> {
        Vec::new()
    }

    fn cluster(&self) -> String {
        "edge".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every saved input of every target (the seeds and each crash ever found) runs through the
    /// target's entry point on stable, in `cargo test`.
    #[test]
    fn every_fuzz_corpus_replays_without_panics() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for (target, run) in TARGETS {
            let directory = root.join(target);
            let mut replayed = 0;
            let entries = std::fs::read_dir(&directory)
                .unwrap_or_else(|error| panic!("{}: {error}", directory.display()));
            for entry in entries {
                let path = entry.expect("corpus entry").path();
                let bytes = std::fs::read(&path)
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
                let outcome = std::panic::catch_unwind(|| run(&bytes));
                assert!(outcome.is_ok(), "{target}: {} panics", path.display());
                replayed += 1;
            }
            assert!(
                replayed >= 5,
                "{target}: the corpus at {} has only {replayed} inputs",
                directory.display()
            );
        }
    }

    #[test]
    fn split_reads_hand_out_every_byte_in_order() {
        let mut reader = SplitReader {
            data: b"hello world",
            step: 3,
        };
        let mut all = Vec::new();
        reader.read_to_end(&mut all).expect("memory");
        assert_eq!(all, b"hello world");
    }
}
