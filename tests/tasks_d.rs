//! The `tasks.d` watcher on a real directory, against an in-memory engine: files added, changed,
//! removed and broken, the order of stop and start, restarts with the state file, and the
//! periodic rescan.

#[path = "support/api.rs"]
mod api_support;
#[path = "support/memory_engine.rs"]
mod memory_engine;

use api_support::{TempDir, INVALID_DEFINITION, WEB_DEFINITION};
use deckhand::control::tasks_d::{ScanSummary, TasksDirWatcher};
use memory_engine::{Call, MemoryEngine};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
    state: PathBuf,
}

fn setup() -> Setup {
    let directory = TempDir::new("tasks-d");
    let tasks_dir = directory.path().join("tasks.d");
    std::fs::create_dir_all(&tasks_dir).expect("tasks.d");
    let state = directory.path().join("state").join("tasks-d.json");
    Setup {
        engine: Arc::new(MemoryEngine::new("tasks-d")),
        directory,
        tasks_dir,
        state,
    }
}

impl Setup {
    fn watcher(&self, interval: Duration) -> TasksDirWatcher {
        TasksDirWatcher::start(
            self.engine.clone(),
            self.tasks_dir.clone(),
            Some(self.state.clone()),
            interval,
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
