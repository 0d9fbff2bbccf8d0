//! The durable state store against a real file system: layout, round trips, quarantine, future
//! schemas, the sequence counter, injected faults at every write step, a real full and a real
//! read-only file system (a tiny tmpfs, mounted by the test as root), many writer threads, and
//! `kill -9` of a writing process at an arbitrary instant.

#[path = "support/scratch.rs"]
mod scratch;

use deckhand::report::Event;
use deckhand::state::{
    AgentRecord, FaultInjector, FsStep, StateError, StateStore, SCHEMA_VERSION, SEQUENCE_BLOCK,
};
use deckhand::task::{
    ContainerDefinition, ContainerError, ContainerErrorKind, ContainerStatus, Task, TaskDefinition,
    TaskStatus,
};
use scratch::TempDir;
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn container_definition(name: &str) -> ContainerDefinition {
    ContainerDefinition {
        command: Some(vec!["sleep".to_string(), "3600".to_string()]),
        environment: vec![("MODE".to_string(), "edge".to_string())],
        stop_timeout_secs: Some(10),
        memory_mib: Some(64),
        ..ContainerDefinition::new(name, "busybox:latest")
    }
}

/// A task with two containers and a recognisable id.
fn task(number: u64) -> Task {
    let definition = TaskDefinition {
        roles: Default::default(),
        family: "web".to_string(),
        revision: 3,
        network_mode: Default::default(),
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers: vec![container_definition("app"), container_definition("sidecar")],
        pid_mode: None,
        ipc_mode: None,
    };
    Task::new(
        format!("{number:032x}"),
        "default",
        definition,
        number,
        1_700_000_000_000,
    )
}

fn event(seq: u64) -> Event {
    Event {
        seq,
        time: 1_700_000_000_000 + seq,
        task: format!("{:032x}", 1),
        container: None,
        status: "RUNNING".to_string(),
        exit_code: None,
        reason: None,
    }
}

/// Names in `dir` that are temp files.
fn temp_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp."))
                .collect()
        })
        .unwrap_or_default()
}

fn all_temp_files(datadir: &Path) -> Vec<String> {
    let mut all = temp_files(datadir);
    all.extend(temp_files(&datadir.join("tasks")));
    all
}

#[test]
fn open_creates_the_layout_and_starts_empty() {
    let scratch = TempDir::new("deckhand-state-layout");
    let datadir = scratch.path.join("data");
    let (store, loaded) = StateStore::open(&datadir).expect("open");
    assert!(datadir.join("tasks").is_dir());
    assert!(datadir.join("quarantine").is_dir());
    assert!(datadir.join("events.log").is_file());
    assert!(loaded.tasks.is_empty() && loaded.quarantined.is_empty());
    assert_eq!(loaded.events.next_seq, 1);
    assert_eq!(store.next_sequence().expect("sequence"), 1);
    assert!(
        store.agent().next_sequence > 1,
        "the first number reserved a block"
    );
    store.compact().expect("compaction");
    assert!(
        datadir.join("agent.json").is_file(),
        "compaction folded the reservation into agent.json"
    );
}

#[test]
fn tasks_round_trip_with_their_run_time_state_and_delete_removes_them() {
    let scratch = TempDir::new("deckhand-state-roundtrip");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    let mut first = task(7);
    first.known_status = TaskStatus::Running;
    first.stop_sequence = 9;
    first.containers[0].docker_name = Some("deckhand-web-3-app-00ff".to_string());
    first.containers[0].docker_id = Some("ab".repeat(32));
    first.containers[0].known_status = ContainerStatus::Running;
    first.containers[0].applied_status = Some(ContainerStatus::Stopped);
    first.containers[1].exit_code = Some(143);
    first.containers[1].applying_error = Some(ContainerError {
        kind: ContainerErrorKind::DependencyTerminal,
        message: "app never started".to_string(),
    });
    let second = task(3);
    store.save_task(&first).expect("save first");
    store.save_task(&second).expect("save second");
    first.containers[0].exit_code = Some(0);
    store.save_task(&first).expect("save first again");
    drop(store);

    let (store, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.tasks.len(), 2);
    assert_eq!(loaded.tasks[0], second, "ordered by start sequence");
    let mut expected = first.clone();
    expected.containers[0].applied_status = None;
    assert_eq!(
        loaded.tasks[1], expected,
        "applied status is never persisted"
    );
    store.compact().expect("compaction writes the task files");
    let on_disk: serde_json::Value =
        serde_json::from_slice(&fs::read(store.task_path(&first.id).expect("path")).expect("read"))
            .expect("json");
    assert_eq!(on_disk["schema"], SCHEMA_VERSION);

    store.delete_task(&first.id).expect("delete");
    store
        .delete_task(&first.id)
        .expect("deleting twice is not an error");
    drop(store);
    let (_, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.tasks, vec![second]);
}

#[test]
fn a_task_id_that_could_escape_the_directory_is_refused() {
    let scratch = TempDir::new("deckhand-state-badid");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    for id in ["", "../agent", "a/b", "x.tmp.1", &"a".repeat(129)] {
        let mut bad = task(1);
        bad.id = id.to_string();
        let error = store.save_task(&bad).expect_err("refused");
        assert!(
            matches!(error, StateError::InvalidTaskId { .. }),
            "{id:?}: {error}"
        );
    }
    assert!(store.delete_task("../agent").is_err());
    assert!(scratch.path.join("agent.json").exists() || !scratch.path.join("agent").exists());
}

#[test]
fn corrupt_task_files_are_quarantined_and_the_rest_load() {
    let scratch = TempDir::new("deckhand-state-quarantine");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    for number in 1..=3 {
        store.save_task(&task(number)).expect("save");
    }
    store.compact().expect("compaction writes the task files");
    drop(store);
    let tasks_dir = scratch.path.join("tasks");
    let truncated = tasks_dir.join(format!("{:032x}.json", 2));
    let bytes = fs::read(&truncated).expect("read");
    fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("truncate");
    let wrong_shape = tasks_dir.join(format!("{:032x}.json", 4));
    fs::write(&wrong_shape, br#"{"schema": 1, "task": {"id": 4}}"#).expect("write");
    let no_schema = tasks_dir.join(format!("{:032x}.json", 5));
    fs::write(&no_schema, br#"{"task": {}}"#).expect("write");
    let misnamed = tasks_dir.join(format!("{:032x}.json", 6));
    fs::copy(tasks_dir.join(format!("{:032x}.json", 3)), &misnamed).expect("copy");

    let (_, loaded) = StateStore::open(&scratch.path).expect("open goes on past bad files");
    let ids: Vec<&str> = loaded.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, vec![format!("{:032x}", 1), format!("{:032x}", 3)]);
    let mut originals: Vec<PathBuf> = loaded
        .quarantined
        .iter()
        .map(|q| q.original.clone())
        .collect();
    originals.sort();
    assert_eq!(
        originals,
        vec![truncated.clone(), wrong_shape, no_schema, misnamed]
    );
    for file in &loaded.quarantined {
        assert!(
            !file.original.exists(),
            "{} moved away",
            file.original.display()
        );
        assert!(file.moved_to.starts_with(scratch.path.join("quarantine")));
        assert!(file.moved_to.exists());
        assert!(file
            .to_string()
            .contains(&file.original.display().to_string()));
    }
    let truncated_entry = loaded
        .quarantined
        .iter()
        .find(|q| q.original == truncated)
        .expect("truncated file reported");
    assert!(
        truncated_entry.error.contains("not valid JSON"),
        "{}",
        truncated_entry.error
    );
    assert_eq!(
        fs::read(&truncated_entry.moved_to).expect("kept for a human"),
        &bytes[..bytes.len() / 2]
    );
}

#[test]
fn a_file_from_a_newer_schema_stops_start_up_and_moves_nothing() {
    let scratch = TempDir::new("deckhand-state-future");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    store.save_task(&task(1)).expect("save");
    drop(store);
    let tasks_dir = scratch.path.join("tasks");
    let corrupt = tasks_dir.join(format!("{:032x}.json", 2));
    fs::write(&corrupt, b"{").expect("write");
    let future = tasks_dir.join(format!("{:032x}.json", 9));
    fs::write(&future, br#"{"schema": 2, "task": {"id": "new layout"}}"#).expect("write");

    let error = StateStore::open(&scratch.path).expect_err("refused");
    match &error {
        StateError::FutureSchema {
            path,
            found,
            supported,
        } => {
            assert_eq!(path, &future);
            assert_eq!((*found, *supported), (2, SCHEMA_VERSION));
        }
        other => panic!("expected FutureSchema, got {other}"),
    }
    assert!(error.is_future_schema());
    let message = error.to_string();
    assert!(
        message.contains(&future.display().to_string()) && message.contains("newer"),
        "{message}"
    );
    assert!(corrupt.exists(), "a refused start-up quarantines nothing");
    assert_eq!(
        fs::read_dir(scratch.path.join("quarantine"))
            .expect("dir")
            .count(),
        0
    );

    fs::remove_file(&future).expect("remove");
    fs::write(
        scratch.path.join("agent.json"),
        br#"{"schema": 7, "agent": {}}"#,
    )
    .expect("write");
    let error = StateStore::open(&scratch.path).expect_err("refused");
    assert!(
        matches!(error, StateError::FutureSchema { found: 7, .. }),
        "{error}"
    );
}

#[test]
fn sequence_numbers_are_durable_in_blocks_and_never_reused() {
    let scratch = TempDir::new("deckhand-state-sequence");
    let faults = Arc::new(FaultInjector::new());
    let (store, _) =
        StateStore::open_with_faults(&scratch.path, Arc::clone(&faults), 100).expect("open");
    assert_eq!(store.next_sequence().expect("first"), 1);
    // The rest of the block needs no write: make every state-log write fail and keep going.
    faults.fail_always(FsStep::Write, "events.log", 28);
    for expected in 2..=SEQUENCE_BLOCK {
        assert_eq!(store.next_sequence().expect("within the block"), expected);
    }
    assert_eq!(faults.fired(), 0, "no write within a block");
    let error = store
        .next_sequence()
        .expect_err("a new block must be written first");
    assert_eq!(faults.fired(), 1);
    let message = error.to_string();
    assert!(
        message.contains("events.log") && message.contains("No space left"),
        "{message}"
    );
    faults.clear();
    assert_eq!(
        store.next_sequence().expect("after the disk recovers"),
        SEQUENCE_BLOCK + 1,
        "a failed reservation hands out nothing"
    );
    drop(store);

    let (store, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert!(loaded.agent.next_sequence > SEQUENCE_BLOCK + 1);
    let after_restart = store.next_sequence().expect("after restart");
    assert!(
        after_restart > SEQUENCE_BLOCK + 1,
        "never reused: {after_restart}"
    );
    assert!(
        after_restart <= 2 * SEQUENCE_BLOCK + 1,
        "skips at most one block: {after_restart}"
    );
}

#[test]
fn the_agent_record_cannot_lower_the_counters_and_keeps_pulled_images() {
    let scratch = TempDir::new("deckhand-state-agent");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    let last = (0..5)
        .map(|_| store.next_sequence().expect("seq"))
        .last()
        .expect("five");
    store.event_log().append(&event(1)).expect("event");
    store
        .record_image_pulled("busybox:latest", 111)
        .expect("pulled");
    assert!(store.image_pulled("busybox:latest"));
    let mut stale = AgentRecord::default();
    stale.images_pulled.insert("redis:7".to_string(), 222);
    store.save_agent(&stale).expect("save");
    assert!(
        store.next_sequence().expect("seq") > last,
        "an old copy cannot lower the counter"
    );
    drop(store);
    let (store, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.agent.images_pulled.get("redis:7"), Some(&222));
    assert!(
        !store.image_pulled("busybox:latest"),
        "images_pulled is replaced as given"
    );
    assert_eq!(loaded.agent.next_event_seq, 2);
    assert!(store.next_sequence().expect("seq") > last);
}

#[test]
fn a_corrupt_agent_record_is_quarantined_and_numbering_resumes_above_every_task() {
    let scratch = TempDir::new("deckhand-state-agentcorrupt");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    let mut stopping = task(500);
    stopping.stop_sequence = 900;
    store.save_task(&stopping).expect("save");
    store.save_task(&task(20)).expect("save");
    drop(store);
    fs::write(scratch.path.join("agent.json"), b"\0\0\0").expect("damage");
    let (store, loaded) = StateStore::open(&scratch.path).expect("open");
    assert_eq!(loaded.quarantined.len(), 1);
    assert_eq!(
        loaded.quarantined[0].original,
        scratch.path.join("agent.json")
    );
    assert_eq!(loaded.tasks.len(), 2);
    assert!(store.next_sequence().expect("seq") > 900);
}

/// Numbers no agent reaches (a damaged or hand-edited file) are damage: counting on from
/// `u64::MAX` overflowed (a panic in debug builds, numbers reused from 0 in release).
#[test]
fn sequence_numbers_past_any_agents_reach_are_damage_not_overflow() {
    let scratch = TempDir::new("deckhand-state-hugenumbers");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    store.save_task(&task(7)).expect("save");
    let mut huge = task(u64::MAX);
    huge.stop_sequence = u64::MAX;
    store.save_task(&huge).expect("save");
    store.compact().expect("compaction writes the task files");
    drop(store);
    fs::write(
        scratch.path.join("agent.json"),
        format!(
            r#"{{"schema":1,"agent":{{"next_sequence":{0},"next_event_seq":{0}}}}}"#,
            u64::MAX
        ),
    )
    .expect("agent record");
    fs::write(
        scratch.path.join("events.log"),
        [
            event(1),
            Event {
                seq: u64::MAX,
                ..event(2)
            },
            event(2),
        ]
        .iter()
        .map(|event| serde_json::to_string(event).expect("encode") + "\n")
        .collect::<String>(),
    )
    .expect("event log");
    let (store, loaded) = StateStore::open(&scratch.path).expect("open");
    let ids: Vec<&str> = loaded.tasks.iter().map(|task| task.id.as_str()).collect();
    assert_eq!(ids, vec![task(7).id.as_str()]);
    // The task file, the agent record and the event log.
    assert_eq!(loaded.quarantined.len(), 3, "{:?}", loaded.quarantined);
    let next = store.next_sequence().expect("seq");
    assert!(
        (8..=deckhand::state::MAX_STORED_NUMBER).contains(&next),
        "{next}"
    );
    assert_eq!(loaded.events.last_seq, 1);
    // Above the readable event after the damage: numbers are not reused.
    assert_eq!(loaded.events.next_seq, 3);
}

#[test]
fn temp_files_left_by_a_crash_are_removed_at_open() {
    let scratch = TempDir::new("deckhand-state-sweep");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    store.save_task(&task(1)).expect("save");
    drop(store);
    fs::write(
        scratch
            .path
            .join("tasks")
            .join(format!("{:032x}.json.tmp.99.1", 1)),
        b"{",
    )
    .expect("w");
    fs::write(scratch.path.join("agent.json.tmp.99.2"), b"{").expect("w");
    let (_, loaded) = StateStore::open(&scratch.path).expect("open");
    assert_eq!(loaded.temp_files_removed, 2);
    assert!(all_temp_files(&scratch.path).is_empty());
    assert_eq!(loaded.tasks.len(), 1);
}

#[test]
fn a_failed_checkpoint_write_keeps_the_old_state_and_names_the_file_and_the_os_error() {
    // Row by row: the step that fails, the OS error, the words the message must carry.
    let table = [
        (FsStep::Write, 28, "No space left on device"),
        (FsStep::SyncFile, 5, "Input/output error"),
    ];
    for (step, os_error, words) in table {
        let scratch = TempDir::new("deckhand-state-faults");
        let faults = Arc::new(FaultInjector::new());
        let (store, _) =
            StateStore::open_with_faults(&scratch.path, Arc::clone(&faults), 100).expect("open");
        let original = task(1);
        store.save_task(&original).expect("first save");
        // Another task's change, written but not synced yet: a failed sync must not lose it.
        let mut other = task(2);
        store.save_task(&other).expect("save");
        other.known_status = TaskStatus::Running;
        store.record_task(&other).expect("written");
        let mut changed = original.clone();
        changed.desired_status = TaskStatus::Stopped;
        faults.fail_times(step, "events.log", os_error, 1);
        let error = store.save_task(&changed).expect_err("injected failure");
        assert_eq!(faults.fired(), 1, "{step:?}");
        let message = error.to_string();
        assert!(message.contains("events.log"), "{step:?}: {message}");
        assert!(message.contains(words), "{step:?}: {message}");
        store.sync().expect("the other task's change syncs");
        drop(store);
        let (_, loaded) = StateStore::open(&scratch.path).expect("reopen");
        assert_eq!(
            loaded.tasks,
            vec![original.clone(), other],
            "{step:?}: the failed change is not there, the other task's is"
        );
        assert!(loaded.quarantined.is_empty(), "{step:?}");
        assert_eq!(loaded.events.cut_bytes, 0, "{step:?}: no half line left");
    }
}

#[test]
fn a_failed_delete_keeps_the_task_loadable() {
    let scratch = TempDir::new("deckhand-state-faildelete");
    let faults = Arc::new(FaultInjector::new());
    let (store, _) =
        StateStore::open_with_faults(&scratch.path, Arc::clone(&faults), 100).expect("open");
    store.save_task(&task(1)).expect("save");
    faults.fail_times(FsStep::Write, "events.log", 30, 1);
    let error = store.delete_task(&task(1).id).expect_err("injected");
    assert!(
        error.to_string().contains("Read-only file system"),
        "{error}"
    );
    drop(store);
    let (_, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.tasks.len(), 1);
}

#[test]
fn an_event_in_the_log_counts_as_sent_even_if_the_checkpoint_noting_it_was_lost() {
    let scratch = TempDir::new("deckhand-state-sent");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    let mut saved = task(1);
    saved.known_status = TaskStatus::Running;
    saved.containers[0].known_status = ContainerStatus::Running;
    store.save_task(&saved).expect("save");
    let container_event = Event {
        container: Some("app".to_string()),
        ..event(1)
    };
    store
        .event_log()
        .append_batch(&[container_event, event(2)])
        .expect("events");
    // No checkpoint with the raised sent statuses follows (a power cut took it).
    drop(store);
    let (_, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.tasks[0].sent_status, TaskStatus::Running);
    assert_eq!(
        loaded.tasks[0].containers[0].sent_status,
        ContainerStatus::Running
    );
    assert_eq!(
        loaded.tasks[0].containers[1].sent_status,
        ContainerStatus::None,
        "another container's status is not touched"
    );
}

#[test]
fn a_task_forgotten_stays_forgotten_and_compaction_removes_its_file() {
    let scratch = TempDir::new("deckhand-state-forget");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    store.save_task(&task(1)).expect("save");
    store.save_task(&task(2)).expect("save");
    store.compact().expect("compaction");
    assert!(store.task_path(&task(1).id).expect("path").is_file());
    store.delete_task(&task(1).id).expect("forget");
    drop(store);
    let (store, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.tasks, vec![task(2)], "the forget record replays");
    store.compact().expect("compaction");
    assert!(!store.task_path(&task(1).id).expect("path").exists());
    assert_eq!(store.event_log().record_bytes(), 0, "every record folded");
    drop(store);
    let (_, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.tasks, vec![task(2)]);
}

#[test]
fn many_threads_checkpoint_their_own_tasks_at_once() {
    let scratch = TempDir::new("deckhand-state-threads");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    let store = Arc::new(store);
    let threads: Vec<_> = (0..8u64)
        .map(|thread| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut own = task(thread + 1);
                for version in 1..=40u64 {
                    own.known_status_time = Some(version);
                    store.save_task(&own).expect("save");
                    store.next_sequence().expect("sequence");
                }
            })
        })
        .collect();
    for handle in threads {
        handle.join().expect("writer thread");
    }
    let mut numbers: Vec<u64> = (0..10)
        .map(|_| store.next_sequence().expect("seq"))
        .collect();
    numbers.dedup();
    assert_eq!(numbers.len(), 10);
    assert!(
        numbers[0] > 320,
        "8 x 40 numbers were handed out before: {}",
        numbers[0]
    );
    drop(store);
    let (_, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!(loaded.tasks.len(), 8);
    assert!(loaded.tasks.iter().all(|t| t.known_status_time == Some(40)));
    assert!(all_temp_files(&scratch.path).is_empty());
}

#[test]
fn events_appended_through_the_store_survive_reopen_and_a_torn_line() {
    let scratch = TempDir::new("deckhand-state-events");
    let (store, _) = StateStore::open(&scratch.path).expect("open");
    let log = store.event_log();
    log.append_batch(&[event(1), event(2), event(3)])
        .expect("append");
    drop((store, log));
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(scratch.path.join("events.log"))
        .expect("open log");
    std::io::Write::write_all(&mut file, b"{\"seq\":4,\"ti").expect("torn");
    drop(file);
    let (store, loaded) = StateStore::open(&scratch.path).expect("reopen");
    assert_eq!((loaded.events.last_seq, loaded.events.next_seq), (3, 4));
    assert!(loaded.events.cut_bytes > 0);
    assert_eq!(loaded.agent.next_event_seq, 4);
    let read = store.event_log().read_since(1, 10).expect("read");
    assert_eq!(read, vec![event(2), event(3)]);
}

// ---- a real full and a real read-only file system ----

fn running_as_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .map(|status| {
            status
                .lines()
                .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop. `None` (with a message)
/// when not root, unless `DECKHAND_REQUIRE_DOCKER=1`, which makes that a failure; as root a
/// failing mount fails the test.
struct Tmpfs {
    mount_point: PathBuf,
    _scratch: TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        if !running_as_root() {
            // CI (DECKHAND_REQUIRE_DOCKER=1) runs as root: there a test that did not run fails.
            if std::env::var("DECKHAND_REQUIRE_DOCKER").is_ok_and(|value| value == "1") {
                panic!(
                    "mounting a tmpfs needs root, and DECKHAND_REQUIRE_DOCKER=1 asks for every \
                     test to run: run the tests as root"
                );
            }
            eprintln!(
                "SKIPPED: mounting a tmpfs needs root; set DECKHAND_REQUIRE_DOCKER=1 to fail instead"
            );
            return None;
        }
        let scratch = TempDir::new("deckhand-state-tmpfs");
        let mount_point = scratch.path.join("mnt");
        fs::create_dir_all(&mount_point).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount_point)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount -t tmpfs failed as root");
        Some(Tmpfs {
            mount_point,
            _scratch: scratch,
        })
    }

    fn remount(&self, mode: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.mount_point)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {mode}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-R")
            .arg(&self.mount_point)
            .status();
    }
}

#[test]
fn a_full_disk_fails_the_checkpoint_without_damage() {
    let Some(tmpfs) = Tmpfs::mount("256k") else {
        return;
    };
    let datadir = tmpfs.mount_point.join("data");
    let (store, _) = StateStore::open(&datadir).expect("open");
    let original = task(1);
    store
        .save_task(&original)
        .expect("save while there is room");
    store
        .event_log()
        .append(&event(1))
        .expect("event while there is room");
    let last_sequence = store.next_sequence().expect("sequence");

    // Fill the file system to the last page.
    let filler_path = tmpfs.mount_point.join("filler");
    let mut filler = fs::File::create(&filler_path).expect("filler");
    let chunk = vec![0xAAu8; 4096];
    loop {
        if let Err(error) = std::io::Write::write_all(&mut filler, &chunk) {
            assert_eq!(error.raw_os_error(), Some(28), "filled to ENOSPC");
            break;
        }
    }
    drop(filler);

    let mut changed = original.clone();
    changed.desired_status = TaskStatus::Stopped;
    changed.stopped_reason = Some("x".repeat(8192));
    let error = store.save_task(&changed).expect_err("disk is full");
    let message = error.to_string();
    assert!(
        message.contains("events.log") && message.contains("No space left"),
        "{message}"
    );
    assert!(all_temp_files(&datadir).is_empty(), "temp file cleaned");
    let big_events: Vec<Event> = (2..200).map(event).collect();
    let error = store
        .event_log()
        .append_batch(&big_events)
        .expect_err("disk is full");
    assert!(error.to_string().contains("No space left"), "{error}");
    assert_eq!(store.event_log().next_seq(), 2);

    fs::remove_file(&filler_path).expect("free the disk");
    store
        .save_task(&changed)
        .expect("save once there is room again");
    store
        .event_log()
        .append(&event(2))
        .expect("append once there is room again");
    drop(store);
    let (store, loaded) = StateStore::open(&datadir).expect("reopen");
    // The log holds task 1's RUNNING events: recorded, so counted as sent.
    changed.sent_status = TaskStatus::Running;
    assert_eq!(loaded.tasks, vec![changed]);
    assert_eq!((loaded.events.last_seq, loaded.events.cut_bytes), (2, 0));
    assert!(store.next_sequence().expect("sequence") > last_sequence);
}

#[test]
fn a_read_only_file_system_fails_writes_and_keeps_every_file() {
    let Some(tmpfs) = Tmpfs::mount("1m") else {
        return;
    };
    let datadir = tmpfs.mount_point.join("data");
    let tasks_dir = datadir.join("tasks");
    let (store, _) = StateStore::open(&datadir).expect("open");
    let original = task(1);
    store.save_task(&original).expect("save");

    // The store holds the state log open for writing, so the whole file system cannot turn
    // read-only under it; a read-only bind mount of `tasks/` can, as a remount would under a
    // process that held nothing open. Checkpoints go on (they are records of the log);
    // compaction, which writes the task files, fails naming the file and keeps every record.
    let bind = |args: &[&str]| {
        let status = Command::new("mount")
            .args(args)
            .arg(&tasks_dir)
            .arg(&tasks_dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount {args:?}");
    };
    bind(&["--bind"]);
    let status = Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(&tasks_dir)
        .status()
        .expect("run mount");
    assert!(status.success(), "remount the bind read-only");
    let mut changed = original.clone();
    changed.desired_status = TaskStatus::Stopped;
    store
        .save_task(&changed)
        .expect("the state log is writable");
    let error = store.compact().expect_err("read-only");
    let message = error.to_string();
    assert!(
        message.contains(&original.id) && message.contains("Read-only file system"),
        "{message}"
    );
    assert!(store.event_log().record_bytes() > 0, "the records are kept");
    let status = Command::new("umount")
        .arg(&tasks_dir)
        .status()
        .expect("umount");
    assert!(status.success(), "umount the bind");
    let original = changed;
    assert!(all_temp_files(&datadir).is_empty());
    drop(store);

    // A data directory that is read-only at start-up: open fails, naming the file it needed.
    tmpfs.remount("ro");
    let error = StateStore::open(&datadir).expect_err("cannot open for writing");
    assert!(
        error.to_string().contains("Read-only file system"),
        "{error}"
    );
    assert!(error.to_string().contains("events.log"), "{error}");
    tmpfs.remount("rw");
    let (_, loaded) = StateStore::open(&datadir).expect("reopen read-write");
    assert_eq!(loaded.tasks, vec![original]);
}

// ---- kill -9 at an arbitrary instant ----

const CRASH_DIR_VARIABLE: &str = "DECKHAND_STATE_CRASH_DIR";

/// The writer that `kill_9_loses_nothing_acknowledged` runs in a child process and kills: four
/// threads checkpoint their own tasks over and over, one appends events, one takes sequence
/// numbers; each prints `ACK` only after the store returned.
#[test]
#[ignore = "helper process, started by kill_9_loses_nothing_acknowledged"]
fn state_crash_child() {
    let dir = std::env::var(CRASH_DIR_VARIABLE)
        .expect("run by kill_9_loses_nothing_acknowledged, which sets the data directory");
    let (store, _) = StateStore::open(Path::new(&dir)).expect("open");
    let store = Arc::new(store);
    let mut threads = Vec::new();
    for thread in 0..4u64 {
        let store = Arc::clone(&store);
        threads.push(std::thread::spawn(move || {
            let mut tasks: Vec<Task> = (0..5).map(|i| task(thread * 10 + i + 1)).collect();
            for version in 1.. {
                for own in tasks.iter_mut() {
                    own.known_status_time = Some(version);
                    store.save_task(own).expect("save");
                    println!("ACK task {} {version}", own.id);
                }
            }
        }));
    }
    {
        let store = Arc::clone(&store);
        threads.push(std::thread::spawn(move || {
            let log = store.event_log();
            for seq in 1.. {
                log.append(&event(seq)).expect("append");
                println!("ACK event {seq}");
            }
        }));
    }
    threads.push(std::thread::spawn(move || loop {
        let number = store.next_sequence().expect("sequence");
        println!("ACK sequence {number}");
    }));
    for handle in threads {
        handle.join().expect("writer");
    }
}

#[test]
fn kill_9_loses_nothing_acknowledged() {
    for acks_before_kill in [40usize, 700, 3000] {
        let scratch = TempDir::new("deckhand-state-crash");
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "state_crash_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DIR_VARIABLE, &scratch.path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the writer");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut acked_tasks: BTreeMap<String, u64> = BTreeMap::new();
        let mut acked_event = 0u64;
        let mut acked_sequence = 0u64;
        let mut acks = 0usize;
        let mut killed = false;
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Some(Ok(line)) = lines.next() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["ACK", "task", id, version] => {
                    let version: u64 = version.parse().expect("version");
                    let entry = acked_tasks.entry(id.to_string()).or_default();
                    *entry = (*entry).max(version);
                }
                ["ACK", "event", seq] => acked_event = acked_event.max(seq.parse().expect("seq")),
                ["ACK", "sequence", n] => {
                    acked_sequence = acked_sequence.max(n.parse().expect("n"))
                }
                _ => continue,
            }
            acks += 1;
            if !killed && (acks >= acks_before_kill || Instant::now() > deadline) {
                child.kill().expect("SIGKILL the writer");
                killed = true;
                // Keep reading: acknowledgements already in the pipe count too.
            }
        }
        child.wait().expect("reap");
        assert!(
            killed && acks >= acks_before_kill,
            "the writer made progress before the kill"
        );

        let (store, loaded) = StateStore::open(&scratch.path).expect("open after kill -9");
        assert!(loaded.quarantined.is_empty(), "{:?}", loaded.quarantined);
        assert_eq!(loaded.events.quarantined, None);
        for (id, version) in &acked_tasks {
            let found = loaded
                .tasks
                .iter()
                .find(|t| &t.id == id)
                .unwrap_or_else(|| panic!("acknowledged task {id} lost"));
            let on_disk = found.known_status_time.unwrap_or(0);
            assert!(
                on_disk >= *version,
                "task {id}: acknowledged {version}, found {on_disk}"
            );
        }
        assert!(
            loaded.events.last_seq >= acked_event,
            "event {acked_event} lost"
        );
        let next = store.next_sequence().expect("sequence");
        assert!(
            next > acked_sequence,
            "sequence {acked_sequence} would be reused ({next})"
        );
        assert!(all_temp_files(&scratch.path).is_empty());
    }
}
