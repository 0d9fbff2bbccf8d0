//! Tests of `tasks.d`: the plan's tables, the scan's hashes and marks, the watcher surviving a
//! panic.

use super::watcher::test_hooks;
use super::*;
use crate::clock::now_millis;
use crate::engine::{EngineError, EngineHandle};
use crate::task::{parse_task_definition, Task, TaskDefinition, TaskStatus};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn tracked(entries: &[(&str, u64, &str)]) -> BTreeMap<String, TrackedFile> {
    entries
        .iter()
        .map(|(file, hash, task_id)| {
            (
                file.to_string(),
                TrackedFile {
                    hash: *hash,
                    task_id: task_id.to_string(),
                },
            )
        })
        .collect()
}

fn scanned(entries: &[(&str, u64, bool)]) -> BTreeMap<String, ScannedFile> {
    entries
        .iter()
        .map(|(file, hash, valid)| {
            (
                file.to_string(),
                ScannedFile {
                    hash: *hash,
                    valid: *valid,
                },
            )
        })
        .collect()
}

fn start(file: &str) -> Action {
    Action::Start { file: file.into() }
}
fn stop(file: &str, task_id: &str) -> Action {
    Action::Stop {
        file: file.into(),
        task_id: task_id.into(),
    }
}
fn replace(file: &str, old: &str) -> Action {
    Action::Replace {
        file: file.into(),
        old_task_id: old.into(),
    }
}

type DiffCase = (
    &'static str,
    BTreeMap<String, TrackedFile>,
    BTreeMap<String, ScannedFile>,
    Vec<Action>,
);

#[test]
fn diff_table() {
    let table: Vec<DiffCase> = vec![
        ("nothing at all", tracked(&[]), scanned(&[]), vec![]),
        (
            "new valid file starts",
            tracked(&[]),
            scanned(&[("a.json", 1, true)]),
            vec![start("a.json")],
        ),
        (
            "new invalid file does nothing",
            tracked(&[]),
            scanned(&[("a.json", 1, false)]),
            vec![],
        ),
        (
            "unchanged file does nothing",
            tracked(&[("a.json", 1, "t1")]),
            scanned(&[("a.json", 1, true)]),
            vec![],
        ),
        (
            "removed file stops",
            tracked(&[("a.json", 1, "t1")]),
            scanned(&[]),
            vec![stop("a.json", "t1")],
        ),
        (
            "changed valid file replaces",
            tracked(&[("a.json", 1, "t1")]),
            scanned(&[("a.json", 2, true)]),
            vec![replace("a.json", "t1")],
        ),
        (
            "changed invalid file keeps the old task",
            tracked(&[("a.json", 1, "t1")]),
            scanned(&[("a.json", 2, false)]),
            vec![],
        ),
        (
            "stops come before starts and replaces",
            tracked(&[("b.json", 1, "t1"), ("z.json", 5, "t5")]),
            scanned(&[("a.json", 3, true), ("b.json", 2, true)]),
            vec![
                stop("z.json", "t5"),
                start("a.json"),
                replace("b.json", "t1"),
            ],
        ),
        (
            "a mix leaves the untouched alone",
            tracked(&[("keep.json", 1, "t1"), ("gone.json", 2, "t2")]),
            scanned(&[
                ("keep.json", 1, true),
                ("bad.json", 9, false),
                ("new.json", 4, true),
            ]),
            vec![stop("gone.json", "t2"), start("new.json")],
        ),
    ];
    for (name, previous, current, expected) in table {
        assert_eq!(diff(&previous, &current), expected, "{name}");
    }
}

#[test]
fn restart_pause_doubles_to_the_maximum_and_resets_after_a_long_run() {
    let backoff = RestartBackoff::default();
    let seconds = Duration::from_secs;
    let minutes = |m: u64| Duration::from_secs(60 * m);
    // (pause before the current task, how long it ran, expected pause)
    let table = [
        (None, seconds(1), seconds(10)),
        (None, minutes(60), seconds(10)),
        (Some(seconds(10)), seconds(1), seconds(20)),
        (Some(seconds(20)), seconds(3), seconds(40)),
        (Some(seconds(160)), seconds(3), seconds(300)),
        (Some(seconds(300)), seconds(3), seconds(300)),
        (Some(seconds(300)), minutes(9), seconds(300)),
        (Some(seconds(300)), minutes(10), seconds(10)),
        (Some(seconds(40)), minutes(11), seconds(10)),
    ];
    for (previous, ran_for, expected) in table {
        assert_eq!(
            restart_delay(previous, ran_for, &backoff),
            expected,
            "previous {previous:?}, ran {ran_for:?}"
        );
    }
    let quick = RestartBackoff {
        initial: Duration::from_millis(100),
        maximum: Duration::from_millis(250),
        reset_after_running: Duration::from_secs(1),
    };
    assert_eq!(
        restart_delay(Some(Duration::from_millis(200)), Duration::ZERO, &quick),
        Duration::from_millis(250)
    );
}

/// An engine that accepts every command and only records the tasks submitted.
#[derive(Default)]
struct RecordingEngine {
    tasks: std::sync::Mutex<Vec<Task>>,
    submitted: std::sync::Condvar,
}

impl RecordingEngine {
    fn wait_for_submits(&self, count: usize, timeout: Duration) -> Vec<Task> {
        let deadline = Instant::now() + timeout;
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        while tasks.len() < count && Instant::now() < deadline {
            tasks = self
                .submitted
                .wait_timeout(tasks, deadline - Instant::now())
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        tasks.clone()
    }
}

impl EngineHandle for RecordingEngine {
    fn submit(&self, definition: TaskDefinition) -> Result<Task, EngineError> {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let task = Task::new(format!("t{}", tasks.len() + 1), "default", definition, 1, 0);
        tasks.push(task.clone());
        self.submitted.notify_all();
        Ok(task)
    }
    fn submit_from_source(
        &self,
        definition: TaskDefinition,
        source: String,
    ) -> Result<Task, EngineError> {
        let mut task = self.submit(definition)?;
        task.source = Some(source);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = tasks.last_mut() {
            last.source = task.source.clone();
        }
        Ok(task)
    }
    fn stop(&self, _task_id: &str) -> Result<(), EngineError> {
        Ok(())
    }
    fn tasks(&self) -> Vec<Task> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn events_since(&self, _after: u64, _wait: Duration) -> Vec<crate::report::Event> {
        Vec::new()
    }
    fn cluster(&self) -> String {
        "default".to_string()
    }
}

#[test]
fn a_scan_that_panics_is_logged_and_the_watcher_carries_on() {
    let directory = std::env::temp_dir().join(format!(
        "deckhand-tasks-d-panic-{}-{}",
        std::process::id(),
        now_millis()
    ));
    std::fs::create_dir_all(&directory).expect("a scratch directory");
    std::fs::write(
        directory.join("web.json"),
        br#"{"family": "web", "containerDefinitions": [{"name": "app", "image": "busybox", "essential": true}]}"#,
    )
    .expect("a task file");
    test_hooks::PANIC_ON_SCAN_OF
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(directory.clone());
    let engine = Arc::new(RecordingEngine::default());
    // No periodic scan within the test: only the restart after the panic scans.
    let mut watcher =
        TasksDirWatcher::start(engine.clone(), directory.clone(), Duration::from_secs(3600))
            .expect("the watcher starts");
    let deadline = Duration::from_secs(20);
    let submitted = engine.wait_for_submits(1, deadline);
    assert_eq!(
        submitted.len(),
        1,
        "the scan after the panic starts the file's task"
    );
    let summary = watcher
        .rescan_and_wait(deadline)
        .expect("the watcher still answers");
    assert!(summary.failed.is_empty(), "{summary:?}");
    assert_eq!(engine.tasks().len(), 1, "the file's task is started once");
    watcher.shutdown();
    let _ = std::fs::remove_dir_all(&directory);
}

fn task_with(known: TaskStatus, stop_sequence: u64) -> Task {
    let definition = parse_task_definition(
        br#"{"family": "f", "containerDefinitions": [{"name": "c", "image": "i", "essential": true}]}"#,
    )
    .expect("valid definition")
    .definition;
    let mut task = Task::new("t1".into(), "default", definition, 1, 1_000_000);
    task.known_status = known;
    task.stop_sequence = stop_sequence;
    task
}

#[test]
fn only_a_task_stopped_without_a_stop_command_stopped_by_itself() {
    // (known status, stop sequence, stopped by itself)
    let table = [
        (TaskStatus::Stopped, 0, true),
        (TaskStatus::Stopped, 7, false),
        (TaskStatus::Running, 0, false),
        (TaskStatus::Running, 7, false),
        (TaskStatus::None, 0, false),
    ];
    for (known, stop_sequence, expected) in table {
        assert_eq!(
            stopped_by_itself(&task_with(known, stop_sequence)),
            expected,
            "{known:?} stop {stop_sequence}"
        );
    }
}

#[test]
fn run_time_is_from_acceptance_to_the_stop() {
    let mut task = task_with(TaskStatus::Stopped, 0);
    assert_eq!(
        task_run_time(&task, 1_005_000),
        Duration::from_secs(5),
        "no stop time recorded: until now"
    );
    task.known_status_time = Some(1_003_000);
    assert_eq!(task_run_time(&task, 1_005_000), Duration::from_secs(3));
    task.execution_stopped_at = Some(1_002_000);
    assert_eq!(task_run_time(&task, 1_005_000), Duration::from_secs(2));
    task.execution_stopped_at = Some(10);
    assert_eq!(
        task_run_time(&task, 1_005_000),
        Duration::ZERO,
        "clock went back"
    );
}

#[test]
fn content_hash_is_fnv1a_and_stable() {
    // Published FNV-1a 64 test vectors: the hash is persisted, so it must never change.
    assert_eq!(content_hash(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(content_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(content_hash(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn source_marks_round_trip_and_other_sources_are_not_marks() {
    let mark = source_mark("web:v2.json", 0x00ab_cdef_0123_4567);
    assert_eq!(mark, "tasks.d:web:v2.json:00abcdef01234567");
    assert_eq!(
        parse_source_mark(&mark),
        Some(("web:v2.json".to_string(), 0x00ab_cdef_0123_4567))
    );
    // A checkpoint written before tasks recorded a source still loads, with none.
    let mut marked = task_with(TaskStatus::Running, 0);
    marked.source = Some(mark.clone());
    let mut saved = serde_json::to_value(&marked).expect("serialize");
    assert_eq!(saved["source"], mark.as_str());
    saved.as_object_mut().expect("object").remove("source");
    let loaded: Task = serde_json::from_value(saved).expect("an old checkpoint loads");
    assert_eq!(loaded.source, None);
    for other in [
        "",
        "api",
        "tasks.d:",
        "tasks.d:web.json",
        "tasks.d::00abcdef01234567",
        "tasks.d:web.json:xyz",
        "tasks.d:web.json:abc",
        "other:web.json:00abcdef01234567",
    ] {
        assert_eq!(parse_source_mark(other), None, "{other:?}");
    }
}

/// A task for the tracking table: (id, source file and hash, desired, known, start and stop
/// sequence numbers).
fn sourced(
    id: &str,
    source: Option<(&str, u64)>,
    desired: TaskStatus,
    known: TaskStatus,
    start_sequence: u64,
    stop_sequence: u64,
) -> Task {
    let mut task = task_with(known, stop_sequence);
    task.id = id.to_string();
    task.source = source.map(|(file, hash)| source_mark(file, hash));
    task.desired_status = desired;
    task.start_sequence = start_sequence;
    task
}

type TrackingCase = (&'static str, Vec<Task>, bool, BTreeMap<String, TrackedFile>);

#[test]
fn files_are_matched_to_the_engines_tasks_by_source_mark() {
    use TaskStatus::{Running, Stopped};
    let table: Vec<TrackingCase> = vec![
        ("no tasks", vec![], true, tracked(&[])),
        (
            "a running task is its file's",
            vec![sourced("t1", Some(("a.json", 1)), Running, Running, 1, 0)],
            true,
            tracked(&[("a.json", 1, "t1")]),
        ),
        (
            "a task accepted but not yet running counts",
            vec![sourced(
                "t1",
                Some(("a.json", 1)),
                Running,
                TaskStatus::None,
                1,
                0,
            )],
            false,
            tracked(&[("a.json", 1, "t1")]),
        ),
        (
            "API tasks have no file",
            vec![sourced("t1", None, Running, Running, 1, 0)],
            true,
            tracked(&[]),
        ),
        (
            "stopped by itself: the file starts a new one",
            vec![sourced("t1", Some(("a.json", 1)), Stopped, Stopped, 1, 0)],
            true,
            tracked(&[]),
        ),
        (
            "stopping by itself: likewise",
            vec![sourced("t1", Some(("a.json", 1)), Stopped, Running, 1, 0)],
            true,
            tracked(&[]),
        ),
        (
            "stopped by request counts at start",
            vec![sourced("t1", Some(("a.json", 1)), Stopped, Stopped, 1, 2)],
            true,
            tracked(&[("a.json", 1, "t1")]),
        ),
        (
            "stopped by request does not count at a scan",
            vec![sourced("t1", Some(("a.json", 1)), Stopped, Stopped, 1, 2)],
            false,
            tracked(&[]),
        ),
        (
            "a replacement wins over the task it replaced",
            vec![
                sourced("new", Some(("a.json", 2)), Running, Running, 4, 0),
                sourced("old", Some(("a.json", 1)), Stopped, Stopped, 1, 3),
            ],
            true,
            tracked(&[("a.json", 2, "new")]),
        ),
        (
            "a restart wins over the task that stopped by itself",
            vec![
                sourced("first", Some(("a.json", 1)), Stopped, Stopped, 1, 0),
                sourced("again", Some(("a.json", 1)), Running, Running, 2, 0),
            ],
            true,
            tracked(&[("a.json", 1, "again")]),
        ),
        (
            "of two running tasks the latest accepted",
            vec![
                sourced("later", Some(("a.json", 1)), Running, Running, 7, 0),
                sourced("earlier", Some(("a.json", 1)), Running, Running, 5, 0),
            ],
            true,
            tracked(&[("a.json", 1, "later")]),
        ),
        (
            "files are matched independently",
            vec![
                sourced("ta", Some(("a.json", 1)), Running, Running, 1, 0),
                sourced("tb", Some(("b.json", 9)), Running, Running, 2, 0),
            ],
            false,
            tracked(&[("a.json", 1, "ta"), ("b.json", 9, "tb")]),
        ),
    ];
    for (case, tasks, include_stopped_by_request, expected) in table {
        assert_eq!(
            tracked_from_engine(&tasks, include_stopped_by_request),
            expected,
            "{case}"
        );
    }
}

#[test]
fn declared_images_are_read_from_valid_and_broken_task_files() {
    let valid = br#"{"family": "web", "containerDefinitions": [
        {"name": "app", "image": "registry.local:5000/app:v2", "memory": 64},
        {"name": "side", "image": "busybox", "memory": 64}]}"#;
    assert_eq!(
        images_named_in(valid),
        ["registry.local:5000/app:v2", "busybox"]
    );
    // Mid-edit: not a valid task, its images still count.
    let broken = br#"{"family": "web", "containerDefinitions": [{"image": "db:16", "bogus": 1}]}"#;
    assert_eq!(images_named_in(broken), ["db:16"]);
    assert!(images_named_in(b"not json").is_empty());

    let dir = crate::state::scratch::ScratchDir::new("deckhand-declared-images");
    std::fs::write(dir.path.join("web.json"), valid).expect("write");
    std::fs::write(dir.path.join("db.json"), broken).expect("write");
    std::fs::write(dir.path.join(".hidden.json"), br#"{"image": "hidden:1"}"#).expect("write");
    std::fs::write(dir.path.join("notes.txt"), br#"{"image": "notes:1"}"#).expect("write");
    // Compose files and directories declare the images of their services.
    std::fs::write(
        dir.path.join("cache.yaml"),
        "services:\n  redis:\n    image: redis:7\n",
    )
    .expect("write");
    std::fs::create_dir_all(dir.path.join("shop")).expect("shop");
    std::fs::write(
        dir.path.join("shop/compose.yaml"),
        "services:\n  web:\n    image: nginx:1.25\n",
    )
    .expect("write");
    assert_eq!(
        declared_images(&dir.path).expect("readable"),
        [
            "busybox",
            "db:16",
            "nginx:1.25",
            "redis:7",
            "registry.local:5000/app:v2"
        ]
    );
    assert_eq!(
        declared_images(&dir.path.join("missing")).expect("a missing directory declares nothing"),
        Vec::<String>::new()
    );
}
