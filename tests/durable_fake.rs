//! The durable engine (`TaskEngine::start_durable` over a real state directory) against the
//! scripted fake runtime: restore after a restart (adopt by name, vanished containers, stop
//! numbers), a Docker event stream cut while a container exits, refused commands on a failing
//! disk, the re-list by label when the event stream reconnects, and the restore time of 1,000 saved tasks (printed, not asserted:
//! `cargo test --release --test durable_fake -- --nocapture restore_of_a_thousand`).

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::docker_events::Reconnect;
use deckhand::engine::workers::StopRetry;
use deckhand::engine::{EngineConfig, EngineError, EngineHandle, TaskEngine};
use deckhand::runtime::{ContainerRuntime, CreateContainer, RuntimeError};
use deckhand::state::{FaultInjector, FsStep, StateStore, DEFAULT_RETAIN_EVENTS};
use deckhand::task::{ContainerErrorKind, ContainerStatus, Task, TaskDefinition, TaskStatus};
use definitions::{container, task};
use fake_runtime::{FakeRuntime, Op, Script};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const APP_IMAGE: &str = "test/app:1";
const DEADLINE: Duration = Duration::from_secs(30);
/// ENOSPC on Linux.
const NO_SPACE: i32 = 28;

fn fast_config() -> EngineConfig {
    EngineConfig {
        cluster: "durable-cluster".to_string(),
        cleanup_wait: Duration::from_secs(3600),
        stop_timeout: Duration::from_secs(2),
        steady_check_interval: Duration::from_secs(3600),
        dependency_poll_interval: Duration::from_millis(20),
        sent_poll_interval: Duration::from_millis(20),
        stop_retry: StopRetry {
            attempts: 2,
            initial_backoff: Duration::from_millis(5),
            maximum_backoff: Duration::from_millis(10),
        },
        events_reconnect: Reconnect {
            initial: Duration::from_millis(10),
            maximum: Duration::from_millis(50),
        },
        ..EngineConfig::default()
    }
}

struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> ScratchDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("dh-durable-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("scratch dir");
        ScratchDir(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens the store under `datadir` and starts a durable engine that restores what it holds.
fn start_engine(datadir: &Path, fake: &Arc<FakeRuntime>) -> (TaskEngine, Arc<StateStore>) {
    let (store, loaded) = StateStore::open(datadir).expect("the state store opens");
    let store = Arc::new(store);
    let engine = TaskEngine::start_durable(
        fake.clone(),
        fast_config(),
        Arc::clone(&store),
        loaded.tasks,
    )
    .expect("the engine starts");
    (engine, store)
}

fn one_container(family: &str) -> TaskDefinition {
    task(family, vec![container("app", APP_IMAGE)])
}

fn wait_known(engine: &TaskEngine, id: &str, status: TaskStatus) -> Task {
    assert!(
        engine.wait_for_task(id, DEADLINE, |task| task
            .is_some_and(|task| task.known_status == status)),
        "task {id} never reached {status:?}: {:?}",
        engine.task(id)
    );
    engine.task(id).expect("the task is held")
}

/// The task as a restart would load it (its file, then the state log's records over it), as
/// the JSON of its checkpoint file.
fn saved_task(datadir: &Path, id: &str) -> serde_json::Value {
    let saved = deckhand::state::read_saved_tasks(datadir).expect("the data directory reads");
    let task = saved.get(id).expect("the task's checkpoint exists");
    serde_json::json!({ "schema": 1, "task": task })
}

#[test]
fn a_submitted_task_is_on_disk_when_submit_answers_and_restored_with_its_containers() {
    let dir = ScratchDir::new("restore");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (engine, _) = start_engine(&dir.0, &fake);
    let gate = fake.hold_next(Op::Pull, "app");
    let id = engine
        .submit(one_container("restore"))
        .expect("accepted")
        .id;
    // Durable before the answer, with its container's fixed name.
    let saved = saved_task(&dir.0, &id);
    assert_eq!(saved["schema"], 1);
    assert_eq!(saved["task"]["id"], id.as_str());
    assert!(saved["task"]["containers"][0]["docker_name"]
        .as_str()
        .is_some_and(|name| name.starts_with("deckhand-restore-1-app-")));
    gate.release();
    wait_known(&engine, &id, TaskStatus::Running);
    // Reported (and the report saved): both RUNNING events are in the durable log.
    assert!(engine.wait_for_task(&id, DEADLINE, |task| task
        .is_some_and(|task| task.sent_status == TaskStatus::Running)));
    let running = engine.task(&id).expect("held");
    let docker_id = running.containers[0].docker_id.clone().expect("an id");
    let events_before = engine.event_log().last_sequence();
    engine.shutdown();

    let (engine, _) = start_engine(&dir.0, &fake);
    let restored = wait_known(&engine, &id, TaskStatus::Running);
    assert_eq!(
        restored.containers[0].docker_id.as_deref(),
        Some(&*docker_id)
    );
    assert_eq!(fake.count(Op::Create, "app"), 1, "no second container");
    assert_eq!(
        engine.event_log().last_sequence(),
        events_before,
        "everything was reported before: nothing is emitted again"
    );
    let old_events = engine.events_since(0, Duration::ZERO);
    assert_eq!(old_events.len() as u64, events_before, "old events survive");
    engine.stop(&id).expect("stop accepted");
    wait_known(&engine, &id, TaskStatus::Stopped);
    let numbers: Vec<u64> = engine
        .events_since(0, Duration::ZERO)
        .iter()
        .map(|event| event.seq)
        .collect();
    let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "numbering continues without gaps");
    engine.shutdown();
}

#[test]
fn a_container_created_but_not_recorded_before_a_crash_is_adopted_by_name() {
    let dir = ScratchDir::new("adopt");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (engine, _) = start_engine(&dir.0, &fake);
    let gate = fake.hold_next(Op::Create, "app");
    let id = engine.submit(one_container("adopt")).expect("accepted").id;
    fake.wait_for_calls(Op::Create, "app", 1, DEADLINE)
        .expect("the call comes");
    // The agent goes away while the create is in Docker's hands; Docker then creates it.
    engine.shutdown();
    gate.release();
    fake.wait_for(DEADLINE, |fake| fake.container("app").is_some())
        .expect("Docker creates it");
    let created = fake.container("app").expect("created");

    let (engine, _) = start_engine(&dir.0, &fake);
    let restored = wait_known(&engine, &id, TaskStatus::Running);
    assert_eq!(
        restored.containers[0].docker_id.as_deref(),
        Some(created.id.as_str()),
        "the container Docker created is adopted"
    );
    assert_eq!(fake.count(Op::Create, "app"), 1, "no second create");
    assert_eq!(fake.containers().len(), 1);
    engine.shutdown();
}

#[test]
fn a_container_that_vanished_while_the_agent_was_down_stops_the_task_with_a_reason() {
    let dir = ScratchDir::new("vanished");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (engine, _) = start_engine(&dir.0, &fake);
    let id = engine
        .submit(one_container("vanished"))
        .expect("accepted")
        .id;
    let running = wait_known(&engine, &id, TaskStatus::Running);
    engine.shutdown();
    let docker_id = running.containers[0].docker_id.clone().expect("an id");
    fake.remove_container(&docker_id, true).expect("removed");

    let (engine, _) = start_engine(&dir.0, &fake);
    let stopped = wait_known(&engine, &id, TaskStatus::Stopped);
    let app = &stopped.containers[0];
    assert_eq!(app.known_status, ContainerStatus::Stopped);
    let error = app.applying_error.as_ref().expect("a reason is recorded");
    assert_eq!(error.kind, ContainerErrorKind::Vanished);
    assert!(error.message.contains(&docker_id), "{}", error.message);
    assert!(
        error
            .reason()
            .starts_with("ContainerVanishedError: container app ("),
        "{}",
        error.reason()
    );
    let task_reason = stopped.stopped_reason.as_deref().unwrap_or_default();
    assert!(
        task_reason.starts_with("ContainerVanishedError: container \"app\": "),
        "{task_reason}"
    );
    assert_eq!(fake.count(Op::Create, "app"), 1, "not recreated");
    engine.shutdown();
}

#[test]
fn a_saved_stop_still_holds_back_a_later_start_after_a_restart() {
    let dir = ScratchDir::new("order");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    fake.add_image("test/new:1");
    let (engine, _) = start_engine(&dir.0, &fake);
    let old = engine.submit(one_container("old")).expect("accepted").id;
    wait_known(&engine, &old, TaskStatus::Running);
    // The stop is accepted and saved, but Docker has not answered it when the agent goes away.
    let stop_gate = fake.hold_next(Op::Stop, "app");
    engine.stop(&old).expect("stop accepted");
    assert_eq!(
        saved_task(&dir.0, &old)["task"]["desired_status"],
        "STOPPED"
    );
    fake.wait_for_calls(Op::Stop, "app", 1, DEADLINE)
        .expect("the call comes");
    let new = engine
        .submit(task("new", vec![container("new", "test/new:1")]))
        .expect("accepted")
        .id;
    engine.shutdown();
    let second_stop = fake.hold_next(Op::Stop, "app");

    let (engine, _) = start_engine(&dir.0, &fake);
    // The new task waits for the old one's stop, saved before the restart.
    fake.wait_for_calls(Op::Stop, "app", 2, DEADLINE)
        .expect("the call comes");
    assert_eq!(
        fake.count(Op::Create, "new"),
        0,
        "the later start waits for the earlier stop"
    );
    second_stop.release();
    stop_gate.release();
    wait_known(&engine, &old, TaskStatus::Stopped);
    wait_known(&engine, &new, TaskStatus::Running);
    engine.shutdown();
}

#[test]
fn a_stream_cut_while_a_container_exits_is_reconciled_and_survives_a_restart() {
    let dir = ScratchDir::new("cut");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (engine, _) = start_engine(&dir.0, &fake);
    let id = engine.submit(one_container("cut")).expect("accepted").id;
    wait_known(&engine, &id, TaskStatus::Running);
    // Docker goes away: the stream breaks, the container dies meanwhile, its event is lost.
    fake.set_docker_down(true);
    fake.set_drop_events(true);
    let subscriptions = fake.count(Op::Events, "");
    fake.break_event_streams();
    fake.wait_for_calls(Op::Events, "", subscriptions + 1, DEADLINE)
        .expect("the call comes");
    fake.exit("app", 9);
    fake.set_drop_events(false);
    fake.set_docker_down(false);
    let stopped = wait_known(&engine, &id, TaskStatus::Stopped);
    assert_eq!(stopped.containers[0].exit_code, Some(9));
    engine.shutdown();

    let saved = saved_task(&dir.0, &id);
    assert_eq!(saved["task"]["known_status"], "STOPPED");
    let (engine, _) = start_engine(&dir.0, &fake);
    let restored = wait_known(&engine, &id, TaskStatus::Stopped);
    assert_eq!(restored.containers[0].exit_code, Some(9));
    engine.shutdown();
}

/// A container of this cluster that no task created (`docker run` by hand with its labels).
fn stray_container(fake: &FakeRuntime, cluster: &str) -> String {
    let spec = CreateContainer {
        name: format!("stray-{cluster}"),
        image: APP_IMAGE.to_string(),
        labels: [
            ("com.amazonaws.ecs.cluster".to_string(), cluster.to_string()),
            (
                "com.amazonaws.ecs.container-name".to_string(),
                "stray".to_string(),
            ),
        ]
        .into_iter()
        .collect(),
        ..CreateContainer::default()
    };
    fake.create_container(&spec).expect("the stray container")
}

/// Submits a task whose create happens in Docker but is answered with an error (a 500 after
/// the container was made): the task stops holding the container's fixed name and no id.
/// Returns the task id and the container's id. (A create that timed out is no longer one: the
/// task makes it again and adopts the container by its name.)
fn submit_with_lost_create_answer(engine: &TaskEngine, fake: &FakeRuntime) -> (String, String) {
    fake.script(
        Op::Create,
        "app",
        Script::EffectThenFail(RuntimeError::Api {
            status: 500,
            message: "the container was made, then the daemon failed".to_string(),
        }),
    );
    let id = engine.submit(one_container("lost")).expect("accepted").id;
    fake.wait_for(DEADLINE, |fake| fake.container("app").is_some())
        .expect("the create happened in Docker");
    let docker_id = fake.container("app").expect("created in Docker").id;
    let task = wait_known(engine, &id, TaskStatus::Stopped);
    assert_eq!(task.containers[0].docker_id, None, "the answer was lost");
    (id, docker_id)
}

/// Breaks the event streams and waits until the task holds a Docker id for its container.
fn reconnect_and_wait_for_adoption(engine: &TaskEngine, fake: &FakeRuntime, id: &str) -> Task {
    let subscriptions = fake.count(Op::Events, "");
    fake.break_event_streams();
    fake.wait_for_calls(Op::Events, "", subscriptions + 1, DEADLINE)
        .expect("the events thread subscribes again");
    assert!(
        engine.wait_for_task(id, DEADLINE, |task| task
            .is_some_and(|task| task.containers[0].docker_id.is_some())),
        "the container was never adopted: {:?}",
        engine.task(id)
    );
    engine.task(id).expect("held")
}

#[test]
fn a_reconnect_adopts_by_name_a_container_whose_id_was_never_recorded() {
    let dir = ScratchDir::new("relist");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (engine, _) = start_engine(&dir.0, &fake);
    let (id, docker_id) = submit_with_lost_create_answer(&engine, &fake);
    stray_container(&fake, "durable-cluster");

    let adopted = reconnect_and_wait_for_adoption(&engine, &fake, &id);
    assert_eq!(
        adopted.containers[0].docker_id.as_deref(),
        Some(docker_id.as_str())
    );
    assert_eq!(
        saved_task(&dir.0, &id)["task"]["containers"][0]["docker_id"],
        docker_id.as_str()
    );
    // Orphans are handled before adoptions: the stray container was reported and left alone.
    assert!(
        fake.container("stray").is_some(),
        "removed without DECKHAND_REMOVE_ORPHANS"
    );
    assert_eq!(fake.count(Op::Remove, "stray"), 0);
    assert_eq!(
        fake.count(Op::Remove, "app"),
        0,
        "the adopted container is the task's"
    );
    engine.shutdown();
}

#[test]
fn a_reconnect_removes_orphans_only_when_asked_to() {
    let dir = ScratchDir::new("relist-remove");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (store, loaded) = StateStore::open(&dir.0).expect("the state store opens");
    let config = EngineConfig {
        remove_orphans: true,
        ..fast_config()
    };
    let engine = TaskEngine::start_durable(fake.clone(), config, Arc::new(store), loaded.tasks)
        .expect("the engine starts");
    let (id, docker_id) = submit_with_lost_create_answer(&engine, &fake);
    stray_container(&fake, "durable-cluster");
    // Another cluster's container is not this agent's business, orphan or not.
    stray_container(&fake, "another-cluster");

    let adopted = reconnect_and_wait_for_adoption(&engine, &fake, &id);
    assert_eq!(
        adopted.containers[0].docker_id.as_deref(),
        Some(docker_id.as_str())
    );
    let removed: Vec<String> = fake
        .calls_of(Op::Remove)
        .into_iter()
        .filter_map(|call| call.docker_id)
        .collect();
    assert_eq!(
        removed.len(),
        1,
        "only this cluster's stray container: {removed:?}"
    );
    let left: Vec<_> = fake
        .containers()
        .into_iter()
        .map(|c| c.spec.labels)
        .collect();
    assert!(
        left.iter().any(
            |labels| labels.get("com.amazonaws.ecs.cluster").map(String::as_str)
                == Some("another-cluster")
        ),
        "{left:?}"
    );
    assert!(
        fake.container("app").is_some(),
        "the adopted container stays"
    );
    engine.shutdown();
}

#[test]
fn a_failing_disk_refuses_commands_and_keeps_the_files_intact() {
    let dir = ScratchDir::new("disk");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let faults = Arc::new(FaultInjector::new());
    let (store, loaded) =
        StateStore::open_with_faults(&dir.0, Arc::clone(&faults), DEFAULT_RETAIN_EVENTS)
            .expect("open");
    let store = Arc::new(store);
    let engine = TaskEngine::start_durable(fake.clone(), fast_config(), store, loaded.tasks)
        .expect("the engine starts");
    let id = engine.submit(one_container("disk")).expect("accepted").id;
    wait_known(&engine, &id, TaskStatus::Running);
    faults.fail_always(FsStep::Write, "events.log", NO_SPACE);
    match engine.submit(one_container("refused")) {
        Err(EngineError::Unavailable { reason }) => {
            assert!(reason.contains("cannot save the task"), "{reason}")
        }
        other => panic!("a submit on a full disk must be refused: {other:?}"),
    }
    match engine.stop(&id) {
        Err(EngineError::Unavailable { reason }) => {
            assert!(reason.contains("No space left"), "{reason}")
        }
        other => panic!("a stop on a full disk must be refused: {other:?}"),
    }
    // What is on disk is the last good checkpoint: whole, and without the refused stop.
    let after = saved_task(&dir.0, &id);
    assert_eq!(after["task"]["desired_status"], "RUNNING");
    assert_eq!(after["task"]["stop_sequence"], 0);
    let saved: Vec<String> = deckhand::state::read_saved_tasks(&dir.0)
        .expect("the data directory reads")
        .into_keys()
        .collect();
    assert_eq!(saved, vec![id.clone()], "the refused task left nothing");

    faults.clear();
    engine
        .stop(&id)
        .expect("the stop is accepted once the disk has room");
    assert_eq!(saved_task(&dir.0, &id)["task"]["desired_status"], "STOPPED");
    wait_known(&engine, &id, TaskStatus::Stopped);
    engine.shutdown();
}

/// The task event `status` of `id`, waiting for it up to the deadline.
fn wait_task_event(engine: &TaskEngine, id: &str, status: &str) -> deckhand::report::Event {
    let deadline = Instant::now() + DEADLINE;
    let mut after = 0;
    loop {
        for event in engine.events_since(after, Duration::from_millis(50)) {
            after = event.seq;
            if event.task == id && event.container.is_none() && event.status == status {
                return event;
            }
        }
        assert!(Instant::now() < deadline, "no {status} event for {id}");
    }
}

/// What a power cut leaves of a data directory: the files as they are and the state log up to
/// its last sync (the lines written after it were still in the kernel's cache), copied into
/// `into`.
fn power_cut_copy(datadir: &Path, store: &StateStore, into: &Path) {
    let durable = store.event_log().durable_len() as usize;
    std::fs::create_dir_all(into.join("tasks")).expect("tasks dir");
    for entry in std::fs::read_dir(datadir.join("tasks")).expect("list tasks") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("a file name");
        std::fs::copy(&path, into.join("tasks").join(name)).expect("copy a task file");
    }
    if datadir.join("agent.json").exists() {
        std::fs::copy(datadir.join("agent.json"), into.join("agent.json")).expect("agent.json");
    }
    let log = std::fs::read(datadir.join("events.log")).expect("read the state log");
    std::fs::write(into.join("events.log"), &log[..durable.min(log.len())])
        .expect("write the durable part");
}

#[test]
fn a_power_cut_after_running_loses_no_event_and_duplicates_no_container_or_event() {
    let dir = ScratchDir::new("powercut");
    let after_cut = ScratchDir::new("powercut-restored");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (engine, store) = start_engine(&dir.0, &fake);
    let id = engine
        .submit(one_container("powercut"))
        .expect("accepted")
        .id;
    let running = wait_known(&engine, &id, TaskStatus::Running);
    let docker_id = running.containers[0].docker_id.clone().expect("an id");
    let task_running = wait_task_event(&engine, &id, "RUNNING");
    // The checkpoints noting that the events were recorded come after the events' sync: a
    // power cut now loses them.
    power_cut_copy(&dir.0, &store, &after_cut.0);
    drop(engine);
    drop(store);

    let (engine, _store) = start_engine(&after_cut.0, &fake);
    let restored = wait_known(&engine, &id, TaskStatus::Running);
    assert_eq!(
        restored.containers[0].docker_id.as_deref(),
        Some(docker_id.as_str()),
        "the container is adopted, not made again"
    );
    assert_eq!(fake.calls_of(Op::Create).len(), 1);
    engine.stop(&id).expect("stop accepted");
    wait_task_event(&engine, &id, "STOPPED");
    let events: Vec<(Option<String>, String)> = engine
        .events_since(0, Duration::ZERO)
        .into_iter()
        .filter(|event| event.task == id)
        .map(|event| (event.container, event.status))
        .collect();
    let count = |container: Option<&str>, status: &str| {
        events
            .iter()
            .filter(|(c, s)| c.as_deref() == container && s == status)
            .count()
    };
    assert!(task_running.seq > 0);
    assert_eq!(count(None, "RUNNING"), 1, "{events:?}");
    assert_eq!(count(Some("app"), "RUNNING"), 1, "{events:?}");
    assert_eq!(count(None, "STOPPED"), 1, "{events:?}");
    engine.shutdown();
}

#[test]
fn restore_of_a_thousand_saved_tasks() {
    const TASKS: usize = 1000;
    let dir = ScratchDir::new("thousand");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (engine, _) = start_engine(&dir.0, &fake);
    let submitted = Instant::now();
    let ids: Vec<String> = (0..TASKS)
        .map(|index| {
            engine
                .submit(one_container(&format!("many{index}")))
                .expect("accepted")
                .id
        })
        .collect();
    let submit_time = submitted.elapsed();
    let docker_ids: Vec<String> = ids
        .iter()
        .map(|id| {
            wait_known(&engine, id, TaskStatus::Running).containers[0]
                .docker_id
                .clone()
                .expect("an id")
        })
        .collect();
    engine.shutdown();
    let creates = fake.calls_of(Op::Create).len();
    assert_eq!(creates, TASKS);

    let restore_started = Instant::now();
    let (engine, _) = start_engine(&dir.0, &fake);
    let restore_time = restore_started.elapsed();
    for (id, docker_id) in ids.iter().zip(&docker_ids) {
        let task = wait_known(&engine, id, TaskStatus::Running);
        assert_eq!(
            task.containers[0].docker_id.as_deref(),
            Some(docker_id.as_str())
        );
    }
    let all_running = restore_started.elapsed();
    assert_eq!(fake.calls_of(Op::Create).len(), TASKS, "nothing recreated");
    println!(
        "restore of {TASKS} saved tasks on the fake runtime: store open + reconcile + loops started in {:.0} ms, all RUNNING in snapshots after {:.0} ms (submitting them, each durable: {:.0} ms)",
        restore_time.as_secs_f64() * 1000.0,
        all_running.as_secs_f64() * 1000.0,
        submit_time.as_secs_f64() * 1000.0
    );
    engine.shutdown();
}

/// A container labelled for this cluster that no saved task knows (state deleted by hand).
fn leftover(fake: &Arc<FakeRuntime>) -> String {
    let spec = deckhand::runtime::CreateContainer {
        name: "deckhand-gone-1-app-0123456789abcdef".to_string(),
        image: APP_IMAGE.to_string(),
        labels: [
            ("com.amazonaws.ecs.cluster", "durable-cluster"),
            ("com.amazonaws.ecs.container-name", "leftover"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect(),
        ..Default::default()
    };
    fake.create_container(&spec).expect("created")
}

#[test]
fn a_leftover_container_is_left_alone_unless_orphans_are_to_be_removed() {
    let dir = ScratchDir::new("leftover");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let id = leftover(&fake);
    let (engine, _) = start_engine(&dir.0, &fake);
    engine.shutdown();
    assert!(
        fake.containers().iter().any(|container| container.id == id),
        "reported, not removed, by default"
    );
    assert_eq!(fake.count(Op::Remove, "leftover"), 0);

    let (store, loaded) = StateStore::open(&dir.0).expect("open");
    let engine = TaskEngine::start_durable(
        fake.clone(),
        EngineConfig {
            remove_orphans: true,
            ..fast_config()
        },
        Arc::new(store),
        loaded.tasks,
    )
    .expect("the engine starts");
    engine.shutdown();
    assert!(
        fake.containers().iter().all(|container| container.id != id),
        "removed with DECKHAND_REMOVE_ORPHANS=true"
    );
}

/// Runs a one-container task, shuts the agent down, and returns the task and its container's id.
fn running_then_shut_down(dir: &Path, fake: &Arc<FakeRuntime>, family: &str) -> (String, String) {
    let (engine, _) = start_engine(dir, fake);
    let id = engine.submit(one_container(family)).expect("accepted").id;
    let running = wait_known(&engine, &id, TaskStatus::Running);
    engine.shutdown();
    let docker_id = running.containers[0].docker_id.clone().expect("an id");
    (id, docker_id)
}

fn server_error() -> RuntimeError {
    RuntimeError::Api {
        status: 500,
        message: "Internal Server Error".to_string(),
    }
}

#[test]
fn a_restore_whose_inspect_fails_for_a_while_keeps_the_task_running_and_stoppable() {
    let dir = ScratchDir::new("inspect-500");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (id, _) = running_then_shut_down(&dir.0, &fake, "inspect-500");
    // Docker answers the inspect with a 500, then a malformed answer, then another 500.
    let inspections = fake.count(Op::Inspect, "app");
    fake.fail_next(Op::Inspect, "app", server_error());
    fake.fail_next(
        Op::Inspect,
        "app",
        RuntimeError::Protocol {
            message: "inspect answer: EOF while parsing an object".to_string(),
        },
    );
    fake.fail_next(Op::Inspect, "app", server_error());

    let (engine, _) = start_engine(&dir.0, &fake);
    assert!(
        fake.count(Op::Inspect, "app") >= inspections + 4,
        "reconciled again until Docker answered"
    );
    let restored = engine.task(&id).expect("restored");
    assert_eq!(restored.known_status, TaskStatus::Running, "{restored:#?}");
    assert_eq!(
        restored.containers[0].known_status,
        ContainerStatus::Running
    );
    assert_eq!(restored.containers[0].applying_error, None);
    // And the task still stops its container, which Docker runs.
    engine.stop(&id).expect("stop accepted");
    wait_known(&engine, &id, TaskStatus::Stopped);
    assert_eq!(fake.count(Op::Stop, "app"), 1, "the container is stopped");
    engine.shutdown();
}

#[test]
fn a_restore_whose_inspect_keeps_failing_starts_the_task_with_its_saved_status() {
    let dir = ScratchDir::new("inspect-500-forever");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (id, _) = running_then_shut_down(&dir.0, &fake, "inspect-500-forever");
    for _ in 0..20 {
        fake.fail_next(Op::Inspect, "app", server_error());
    }
    let (engine, _) = start_engine(&dir.0, &fake);
    let restored = engine
        .task(&id)
        .expect("restored without waiting for Docker forever");
    assert_eq!(restored.known_status, TaskStatus::Running, "{restored:#?}");
    assert_eq!(
        restored.containers[0].known_status,
        ContainerStatus::Running
    );
    // Its loop keeps inspecting (with back-off) and never marks it STOPPED for that.
    let inspections = fake.count(Op::Inspect, "app");
    fake.wait_for_calls(Op::Inspect, "app", inspections + 1, DEADLINE)
        .expect("the loop inspects again");
    let task = engine.task(&id).expect("held");
    assert_eq!(task.known_status, TaskStatus::Running, "{task:#?}");
    assert_eq!(task.desired_status, TaskStatus::Running);
    engine.shutdown();
}

#[test]
fn a_restore_whose_inspect_fails_and_whose_list_lacks_the_container_marks_it_vanished() {
    let dir = ScratchDir::new("inspect-500-gone");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let (id, docker_id) = running_then_shut_down(&dir.0, &fake, "inspect-500-gone");
    fake.remove_container(&docker_id, true).expect("removed");
    fake.fail_next(Op::Inspect, &docker_id, server_error());
    let (engine, _) = start_engine(&dir.0, &fake);
    let stopped = wait_known(&engine, &id, TaskStatus::Stopped);
    let error = stopped.containers[0]
        .applying_error
        .as_ref()
        .expect("a reason is recorded");
    assert_eq!(error.kind, ContainerErrorKind::Vanished);
    assert!(error.message.contains("500"), "{}", error.message);
    engine.shutdown();
}
