//! The `tasks.d` watcher on a real directory, against an in-memory engine: files added, changed,
//! removed and broken, the order of stop and start, restarts (files matched to tasks by their
//! source marks), and the periodic rescan.

#[path = "support/api.rs"]
mod api_support;
#[path = "support/memory_engine.rs"]
mod memory_engine;

use api_support::{TempDir, INVALID_DEFINITION, WEB_DEFINITION};
use deckhand::clock::now_millis;
use deckhand::control::tasks_d::{RestartBackoff, ScanSummary, TasksDirWatcher};
use deckhand::task::TaskStatus;
use memory_engine::{Call, MemoryEngine};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);
/// Long enough that only explicit rescans run during a test.
const NO_TICK: Duration = Duration::from_secs(3600);

/// The web definition with another command: a different content hash, the same host port.
const WEB_DEFINITION_V2: &str = r#"{
  "family": "web",
  "containerDefinitions": [
    {
      "name": "web",
      "image": "busybox:latest",
      "command": ["httpd", "-f", "-v", "-p", "8080"],
      "portMappings": [{"containerPort": 8080, "hostPort": 8080}]
    }
  ]
}"#;

const WORKER_DEFINITION: &str = r#"{
  "family": "worker",
  "containerDefinitions": [{"name": "worker", "image": "busybox:latest", "command": ["sleep", "3600"]}]
}"#;

struct Setup {
    engine: Arc<MemoryEngine>,
    directory: TempDir,
    tasks_dir: PathBuf,
}

fn setup() -> Setup {
    let directory = TempDir::new("tasks-d");
    let tasks_dir = directory.path().join("tasks.d");
    std::fs::create_dir_all(&tasks_dir).expect("tasks.d");
    Setup {
        engine: Arc::new(MemoryEngine::new("tasks-d")),
        directory,
        tasks_dir,
    }
}

impl Setup {
    fn watcher(&self, interval: Duration) -> TasksDirWatcher {
        TasksDirWatcher::start(self.engine.clone(), self.tasks_dir.clone(), interval)
            .expect("start watcher")
    }

    fn watcher_with_backoff(&self, backoff: RestartBackoff) -> TasksDirWatcher {
        TasksDirWatcher::start_with_backoff(
            self.engine.clone(),
            self.tasks_dir.clone(),
            NO_TICK,
            backoff,
        )
        .expect("start watcher")
    }

    fn write(&self, name: &str, content: &str) {
        write_atomically(&self.tasks_dir.join(name), content);
    }

    fn remove(&self, name: &str) {
        std::fs::remove_file(self.tasks_dir.join(name)).expect("remove");
    }
}

/// Writes through a temp file and rename, as editors and config tools do.
fn write_atomically(path: &Path, content: &str) {
    let temporary = path.with_file_name(".incoming.tmp");
    std::fs::write(&temporary, content).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

fn rescan(watcher: &TasksDirWatcher) -> ScanSummary {
    watcher
        .rescan_and_wait(DEADLINE)
        .expect("the scan finished")
}

fn submitted_ids(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|call| match call {
            Call::Submit { id, .. } => Some(id.clone()),
            Call::Stop { .. } => None,
        })
        .collect()
}

#[test]
fn a_new_file_starts_its_task_once() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    let watcher = setup.watcher(NO_TICK);
    // The first scan runs at start; a rescan after it finds nothing new.
    assert_eq!(rescan(&watcher), ScanSummary::default());
    let calls = setup.engine.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(matches!(&calls[0], Call::Submit { family, .. } if family == "web"));

    setup.write("worker.json", WORKER_DEFINITION);
    let summary = rescan(&watcher);
    assert_eq!(summary.started, vec!["worker.json".to_string()]);
    assert_eq!(submitted_ids(&setup.engine.calls()).len(), 2);
}

#[test]
fn a_changed_file_stops_the_old_task_before_starting_the_new_one() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    let watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    let old_id = submitted_ids(&setup.engine.calls())[0].clone();

    setup.write("web.json", WEB_DEFINITION_V2);
    let summary = rescan(&watcher);
    assert_eq!(summary.replaced, vec!["web.json".to_string()]);
    let calls = setup.engine.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[1], Call::Stop { id: old_id.clone() }, "stop first");
    assert!(
        matches!(&calls[2], Call::Submit { id, family } if *id != old_id && family == "web"),
        "then start: {calls:?}"
    );
    // The same content again changes nothing.
    assert_eq!(rescan(&watcher), ScanSummary::default());
    assert_eq!(setup.engine.calls().len(), 3);
}

#[test]
fn stops_of_one_scan_all_come_before_its_starts() {
    let setup = setup();
    setup.write("a-old.json", WEB_DEFINITION);
    let watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    let old_id = submitted_ids(&setup.engine.calls())[0].clone();
    // The port moves from one file to another in a single change.
    setup.remove("a-old.json");
    setup.write("0-new.json", WEB_DEFINITION_V2);
    let summary = rescan(&watcher);
    assert_eq!(summary.stopped, vec!["a-old.json".to_string()]);
    assert_eq!(summary.started, vec!["0-new.json".to_string()]);
    let calls = setup.engine.calls();
    assert_eq!(calls[1], Call::Stop { id: old_id }, "{calls:?}");
    assert!(matches!(calls[2], Call::Submit { .. }), "{calls:?}");
}

#[test]
fn a_removed_file_stops_its_task() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    setup.write("worker.json", WORKER_DEFINITION);
    let watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    let calls = setup.engine.calls();
    let worker_id = calls
        .iter()
        .find_map(|call| match call {
            Call::Submit { id, family } if family == "worker" => Some(id.clone()),
            _ => None,
        })
        .expect("worker started");
    setup.remove("worker.json");
    let summary = rescan(&watcher);
    assert_eq!(summary.stopped, vec!["worker.json".to_string()]);
    assert_eq!(
        setup.engine.calls().last(),
        Some(&Call::Stop { id: worker_id })
    );
    assert_eq!(setup.engine.calls().len(), 3);
}

#[test]
fn an_invalid_file_starts_nothing_and_keeps_the_task_it_would_replace() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    setup.write("broken.json", INVALID_DEFINITION);
    let watcher = setup.watcher(NO_TICK);
    let summary = rescan(&watcher);
    assert_eq!(summary.invalid, vec!["broken.json".to_string()]);
    assert_eq!(setup.engine.calls().len(), 1, "only web.json started");

    setup.write("web.json", "{ this is not json");
    let summary = rescan(&watcher);
    assert_eq!(
        summary.invalid,
        vec!["broken.json".to_string(), "web.json".to_string()]
    );
    assert!(summary.stopped.is_empty() && summary.replaced.is_empty());
    assert_eq!(
        setup.engine.calls().len(),
        1,
        "the running task was not stopped"
    );

    // Fixing the file replaces the task.
    setup.write("web.json", WEB_DEFINITION_V2);
    let summary = rescan(&watcher);
    assert_eq!(summary.replaced, vec!["web.json".to_string()]);
}

#[test]
fn hidden_and_non_json_files_are_ignored() {
    let setup = setup();
    setup.write(".web.json", WEB_DEFINITION);
    setup.write("web.json.bak", WEB_DEFINITION);
    setup.write("notes.txt", "hello");
    std::fs::create_dir_all(setup.tasks_dir.join("dir.json")).expect("dir");
    let watcher = setup.watcher(NO_TICK);
    assert_eq!(rescan(&watcher), ScanSummary::default());
    assert!(setup.engine.calls().is_empty());
}

#[test]
fn a_missing_directory_changes_nothing_but_an_empty_one_stops_everything() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    let watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    let moved = setup.directory.path().join("elsewhere");
    std::fs::rename(&setup.tasks_dir, &moved).expect("move away");
    let summary = rescan(&watcher);
    assert!(summary.directory_missing);
    assert_eq!(setup.engine.calls().len(), 1, "nothing stopped");
    std::fs::create_dir_all(&setup.tasks_dir).expect("recreate empty");
    let summary = rescan(&watcher);
    assert_eq!(summary.stopped, vec!["web.json".to_string()]);
}

#[test]
fn a_restart_neither_duplicates_nor_forgets_tasks() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    let mut watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    watcher.shutdown();
    assert_eq!(setup.engine.calls().len(), 1);

    // The engine still holds the task: the new watcher adopts it.
    let mut watcher = setup.watcher(NO_TICK);
    assert_eq!(rescan(&watcher), ScanSummary::default());
    assert_eq!(
        setup.engine.calls().len(),
        1,
        "no duplicate after a restart"
    );
    // A change made while the agent was down is applied.
    watcher.shutdown();
    setup.write("web.json", WEB_DEFINITION_V2);
    let watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    let calls = setup.engine.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(matches!(calls[1], Call::Stop { .. }) && matches!(calls[2], Call::Submit { .. }));
    drop(watcher);

    // The engine lost the task (it was cleaned up): the file starts a new one.
    let current = submitted_ids(&calls).last().cloned().expect("id");
    setup.engine.remove_task(&current);
    let watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    assert_eq!(submitted_ids(&setup.engine.calls()).len(), 3);
}

#[test]
fn a_task_whose_submit_was_never_recorded_is_found_by_its_source_mark() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    setup.write("worker.json", WORKER_DEFINITION);
    let mut watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    watcher.shutdown();
    let first = submitted_ids(&setup.engine.calls());
    assert_eq!(first.len(), 2);
    let sources: Vec<String> = deckhand::engine::EngineHandle::tasks(setup.engine.as_ref())
        .into_iter()
        .filter_map(|task| task.source)
        .collect();
    assert_eq!(sources.len(), 2, "every file's task carries its mark");
    assert!(
        sources
            .iter()
            .any(|source| source.starts_with("tasks.d:web.json:")),
        "{sources:?}"
    );

    // A crash right after the submits: the watcher keeps nothing of its own, the marks speak.
    let mut watcher = setup.watcher(NO_TICK);
    assert_eq!(rescan(&watcher), ScanSummary::default());
    assert_eq!(
        submitted_ids(&setup.engine.calls()),
        first,
        "no file started a second task"
    );
    // The file is tracked again: removing it stops the task it started.
    setup.remove("worker.json");
    let summary = rescan(&watcher);
    assert_eq!(summary.stopped, vec!["worker.json".to_string()]);
    watcher.shutdown();

    // A task stopped by request stays stopped across a restart.
    use deckhand::engine::EngineHandle;
    let web = first
        .iter()
        .find(|id| {
            setup
                .engine
                .tasks()
                .iter()
                .any(|task| &task.id == *id && task.family == "web")
        })
        .expect("web task")
        .clone();
    setup.engine.stop(&web).expect("stop");
    setup.engine.finish_stop(&web);
    let watcher = setup.watcher(NO_TICK);
    assert_eq!(rescan(&watcher), ScanSummary::default());
    assert_eq!(submitted_ids(&setup.engine.calls()), first);
}

#[test]
fn the_directory_is_rescanned_without_being_asked() {
    let setup = setup();
    let watcher = setup.watcher(Duration::from_millis(100));
    setup.write("web.json", WEB_DEFINITION);
    assert!(
        setup
            .engine
            .wait_for_calls(DEADLINE, |calls| !calls.is_empty()),
        "the periodic rescan never started the task"
    );
    drop(watcher);
}

#[test]
fn a_rescan_trigger_works_from_another_thread() {
    let setup = setup();
    let watcher = setup.watcher(NO_TICK);
    rescan(&watcher);
    setup.write("web.json", WEB_DEFINITION);
    let trigger = watcher.rescan_trigger();
    std::thread::spawn(move || trigger.rescan())
        .join()
        .expect("trigger thread");
    assert!(setup
        .engine
        .wait_for_calls(DEADLINE, |calls| !calls.is_empty()));
}

/// Marks a task STOPPED as the engine does when its essential container exits: no stop command.
fn stop_by_itself(engine: &MemoryEngine, id: &str) {
    engine.update_task(id, |task| {
        task.desired_status = TaskStatus::Stopped;
        task.stopped_reason = Some("Essential container in task exited".into());
        task.known_status_time = Some(now_millis());
    });
    engine.finish_stop(id);
}

/// Waits for the next submit after the `already` first ones; returns its id and when it came.
fn wait_for_submit(engine: &MemoryEngine, already: usize) -> (String, Instant) {
    assert!(
        engine.wait_for_calls(DEADLINE, |calls| submitted_ids(calls).len() > already),
        "no restart within {DEADLINE:?}: {:?}",
        engine.calls()
    );
    (
        submitted_ids(&engine.calls())[already].clone(),
        Instant::now(),
    )
}

#[test]
fn a_task_that_stops_by_itself_is_started_again_with_a_growing_pause() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    let backoff = RestartBackoff {
        initial: Duration::from_millis(300),
        maximum: Duration::from_millis(700),
        reset_after_running: Duration::from_secs(3600),
    };
    // No periodic rescan: only the restart timer can start the new tasks.
    let watcher = setup.watcher_with_backoff(backoff);
    rescan(&watcher);
    let mut current = submitted_ids(&setup.engine.calls())[0].clone();
    // The pause doubles (300 ms, 600 ms) up to the maximum (700 ms, 700 ms).
    for (round, expected_pause_ms) in [300u64, 600, 700, 700].into_iter().enumerate() {
        let stopped = Instant::now();
        stop_by_itself(&setup.engine, &current);
        rescan(&watcher); // notices the stop and schedules the restart
        let (next, started) = wait_for_submit(&setup.engine, round + 1);
        let pause = started.duration_since(stopped);
        // The pause counts from the stop time the task records, in whole milliseconds of the
        // wall clock: allow those few milliseconds of truncation.
        assert!(
            pause + Duration::from_millis(5) >= Duration::from_millis(expected_pause_ms),
            "round {round}: restarted after {pause:?}, before the {expected_pause_ms} ms pause"
        );
        assert_ne!(next, current, "a fresh task, not the old one");
        current = next;
    }
    let calls = setup.engine.calls();
    assert!(
        calls.iter().all(|call| matches!(call, Call::Submit { .. })),
        "restarts stop nothing: {calls:?}"
    );
    // The newest task carries the file's mark, so an agent restart does not start another.
    rescan(&watcher);
    drop(watcher);
    let restarted = setup.watcher(NO_TICK);
    assert_eq!(rescan(&restarted), ScanSummary::default());
    let submitted = submitted_ids(&setup.engine.calls());
    assert_eq!(submitted.last(), Some(&current), "{submitted:?}");
}

#[test]
fn a_task_stopped_by_request_or_whose_file_changed_is_not_restarted() {
    let setup = setup();
    setup.write("web.json", WEB_DEFINITION);
    setup.write("worker.json", WORKER_DEFINITION);
    let backoff = RestartBackoff {
        initial: Duration::from_millis(100),
        maximum: Duration::from_millis(100),
        reset_after_running: Duration::from_secs(3600),
    };
    let watcher = setup.watcher_with_backoff(backoff);
    rescan(&watcher);
    let ids = submitted_ids(&setup.engine.calls());
    let families: Vec<String> = setup
        .engine
        .calls()
        .iter()
        .filter_map(|call| match call {
            Call::Submit { family, .. } => Some(family.clone()),
            Call::Stop { .. } => None,
        })
        .collect();
    let web = ids[families.iter().position(|f| f == "web").expect("web")].clone();
    let worker = ids[families.iter().position(|f| f == "worker").expect("worker")].clone();

    // Stopped by request (`deckhand stop`): stays stopped.
    use deckhand::engine::EngineHandle;
    setup.engine.stop(&web).expect("stop");
    setup.engine.finish_stop(&web);
    // Stopped by itself, but its file changed into an invalid one: the file is not what ran.
    stop_by_itself(&setup.engine, &worker);
    setup.write("worker.json", INVALID_DEFINITION);
    let summary = rescan(&watcher);
    assert!(summary.restarted.is_empty(), "{summary:?}");
    // Nothing is submitted well past the pause (a restart timer would fire after 100 ms).
    assert!(
        !setup
            .engine
            .wait_for_calls(Duration::from_millis(600), |calls| submitted_ids(calls)
                .len()
                > 2),
        "restarted: {:?}",
        setup.engine.calls()
    );
    let summary = rescan(&watcher);
    assert!(summary.restarted.is_empty(), "{summary:?}");
    // A valid edit starts the file's task again, as a change always does.
    setup.write(
        "worker.json",
        WORKER_DEFINITION.replace("3600", "60").as_str(),
    );
    let summary = rescan(&watcher);
    assert_eq!(summary.replaced, vec!["worker.json".to_string()]);
}

#[test]
fn compose_files_and_compose_directories_are_tasks() {
    let setup = setup();
    // A file: its project name is the file's name. Its .env is the directory's.
    setup.write(".env", "IMAGE=busybox:latest\n");
    setup.write(
        "cache.yaml",
        "services:\n  redis:\n    image: ${IMAGE}\n    command: sleep 3600\n",
    );
    // A directory with compose.yaml and its own .env: its project name is the directory's.
    let project = setup.tasks_dir.join("shop");
    std::fs::create_dir_all(&project).expect("shop");
    std::fs::write(project.join(".env"), "TAG=latest\n").expect(".env");
    write_atomically(
        &project.join("compose.yaml"),
        "services:\n  web:\n    image: busybox:${TAG}\n",
    );
    // A directory with no Compose file is not a task; nor is a hidden one.
    std::fs::create_dir_all(setup.tasks_dir.join("notes")).expect("notes");
    std::fs::create_dir_all(setup.tasks_dir.join(".hidden")).expect("hidden");
    write_atomically(
        &setup.tasks_dir.join(".hidden/compose.yaml"),
        "services:\n  a:\n    image: a\n",
    );
    let watcher = setup.watcher(NO_TICK);
    assert_eq!(rescan(&watcher), ScanSummary::default());
    let mut families: Vec<String> = setup
        .engine
        .calls()
        .iter()
        .filter_map(|call| match call {
            Call::Submit { family, .. } => Some(family.clone()),
            Call::Stop { .. } => None,
        })
        .collect();
    families.sort();
    assert_eq!(families, ["cache", "shop"]);

    // Editing a .env changes the tasks that read it: they are replaced.
    std::fs::write(project.join(".env"), "TAG=1.36\n").expect(".env");
    let summary = rescan(&watcher);
    assert_eq!(summary.replaced, vec!["shop/".to_string()], "{summary:?}");
    setup.write(".env", "IMAGE=busybox:1.36\n");
    let summary = rescan(&watcher);
    assert_eq!(
        summary.replaced,
        vec!["cache.yaml".to_string()],
        "{summary:?}"
    );
}

#[test]
fn a_compose_files_warnings_are_logged_once_per_content() {
    let setup = setup();
    let with_warning = "services:\n  web:\n    image: busybox:latest\n    container_name: my-web\n";
    setup.write("web.yaml", with_warning);
    setup.write("worker.json", WORKER_DEFINITION);
    let watcher = setup.watcher(NO_TICK);
    // Logged by the first scan, at start: a rescan of the unchanged files logs nothing again.
    assert_eq!(rescan(&watcher), ScanSummary::default());
    assert_eq!(rescan(&watcher).warned, Vec::<String>::new());

    // A new version of the file is loaded: its warnings are logged, once.
    setup.write("web.yaml", &format!("{with_warning}    expose: ['80']\n"));
    let summary = rescan(&watcher);
    assert_eq!(
        summary.replaced,
        vec!["web.yaml".to_string()],
        "{summary:?}"
    );
    assert_eq!(summary.warned, vec!["web.yaml".to_string()], "{summary:?}");
    assert_eq!(rescan(&watcher).warned, Vec::<String>::new());

    // A file without warnings logs none; a new file with warnings logs them when it is loaded.
    setup.write("quiet.yaml", "services:\n  q:\n    image: busybox:latest\n");
    setup.write(
        "cache.yml",
        "services:\n  redis:\n    image: busybox:latest\n    pull_policy: always\n",
    );
    let summary = rescan(&watcher);
    assert_eq!(summary.warned, vec!["cache.yml".to_string()], "{summary:?}");
    assert_eq!(rescan(&watcher), ScanSummary::default());
}
