//! P4 scale and P6 restore, on the scripted fake runtime (no Docker), each in a process of its
//! own so its peak RSS is its own: the bench re-runs its own binary with `--phase scale` or
//! `--phase state`, and reads one JSON line back.
//!
//! - scale: 1,000 tasks × 3 containers submitted to an in-process engine, run to RUNNING, then
//!   stopped; total time, time per task, threads at the peak, peak RSS (which includes the fake
//!   runtime's own bookkeeping: it records every call it receives).
//! - state: the checkpoint cost of one change (`StateStore::save_task`: serialise, append the
//!   task's record line to the state log, fdatasync the log) while 10, 100 and 1,000 tasks are
//!   saved, next to the file system alone doing the same (the same bytes appended to one file,
//!   fdatasync) and doing what the former per-file layout did (temp file, fsync, rename, fsync of
//!   the directory); and the time to open the store and load 1,000 saved tasks (the disk side of
//!   a restart).

use crate::fake_runtime::FakeRuntime;
use crate::footprint::{memory_of, peak_rss_of};
use crate::stats::{median, percentile};
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::ContainerRuntime;
use deckhand::state::{encode_task_file, StateStore};
use deckhand::task::{PullBehavior, Task, TaskDefinition, TaskStatus};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const FAKE_IMAGE: &str = "bench/fake:latest";
const DEADLINE: Duration = Duration::from_secs(600);

fn three_container_definition(index: usize) -> TaskDefinition {
    crate::definitions::three_container_task(index, FAKE_IMAGE)
}

/// Reads events until every task in `tasks` reported `status`; returns the event cursor.
pub fn wait_all(
    engine: &TaskEngine,
    tasks: &HashSet<String>,
    status: &str,
    mut cursor: u64,
) -> Result<u64, String> {
    let deadline = Instant::now() + DEADLINE;
    let mut reached = HashSet::new();
    while reached.len() < tasks.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "{} of {} tasks reached {status} within {DEADLINE:?}",
                reached.len(),
                tasks.len()
            ));
        }
        for event in engine.events_since(cursor, left) {
            cursor = cursor.max(event.seq);
            if event.container.is_none() && event.status == status && tasks.contains(&event.task) {
                reached.insert(event.task);
            }
        }
    }
    Ok(cursor)
}

pub fn engine_config(tasks: usize) -> EngineConfig {
    EngineConfig {
        cluster: "bench-scale".to_string(),
        pull_behavior: PullBehavior::PreferCached,
        cleanup_wait: Duration::from_secs(3600),
        // Room for every RUNNING and STOPPED event of the run, so none is dropped.
        event_capacity: tasks * 10,
        ..EngineConfig::default()
    }
}

fn open_durable_engine(
    fake: &Arc<FakeRuntime>,
    directory: &Path,
    tasks: usize,
) -> Result<(TaskEngine, usize), String> {
    let (store, loaded) = StateStore::open(directory)
        .map_err(|error| format!("cannot open the state store: {error}"))?;
    let restored = loaded.tasks.len();
    let engine = TaskEngine::start_durable(
        Arc::clone(fake) as Arc<dyn ContainerRuntime>,
        engine_config(tasks),
        Arc::new(store),
        loaded.tasks,
    )
    .map_err(|error| format!("the engine did not start: {error}"))?;
    Ok((engine, restored))
}

/// The scale phase (P4, and P6 in between): the engine checkpoints under `directory` as
/// `deckhand run` does. Submit → all RUNNING; shut the engine down (containers keep running)
/// and start a new one over the same directory and runtime — that start-up, which loads and
/// reconciles every saved task, is P6; then stop → all STOPPED. Prints nothing, returns JSON.
pub fn scale_phase(tasks: usize, directory: &Path) -> Result<Value, String> {
    let fake = FakeRuntime::new();
    fake.add_image(FAKE_IMAGE);
    let (engine, _) = open_durable_engine(&fake, directory, tasks)?;
    let pid = std::process::id();
    let before = memory_of(pid)?;
    let started = Instant::now();
    let mut ids = HashSet::new();
    for index in 0..tasks {
        let accepted = engine
            .submit(three_container_definition(index))
            .map_err(|error| format!("submit {index}: {error}"))?;
        ids.insert(accepted.id);
    }
    let submitted = started.elapsed();
    wait_all(&engine, &ids, "RUNNING", 0)?;
    let running = started.elapsed();
    let at_peak = memory_of(pid)?;
    let peak_rss = peak_rss_of(pid)?;
    engine.shutdown();
    drop(engine);

    let restarting = Instant::now();
    let (engine, restored) = open_durable_engine(&fake, directory, tasks)?;
    let restore = restarting.elapsed();
    let all_running = engine
        .tasks()
        .iter()
        .filter(|task| ids.contains(&task.id) && task.known_status == TaskStatus::Running)
        .count();

    let stopping = Instant::now();
    let cursor = engine
        .events_since(0, Duration::ZERO)
        .last()
        .map_or(0, |event| event.seq);
    for id in &ids {
        engine
            .stop(id)
            .map_err(|error| format!("stop {id}: {error}"))?;
    }
    wait_all(&engine, &ids, "STOPPED", cursor)?;
    let stopped = stopping.elapsed();
    engine.shutdown();
    Ok(json!({
        "tasks": tasks,
        "containers_per_task": 3,
        "submit_seconds": submitted.as_secs_f64(),
        "to_running_seconds": running.as_secs_f64(),
        "stop_seconds": stopped.as_secs_f64(),
        "total_seconds": (running + stopped).as_secs_f64(),
        "rss_before_bytes": before.rss_bytes,
        "rss_running_bytes": at_peak.rss_bytes,
        "threads_running": at_peak.threads,
        "peak_rss_bytes": peak_rss,
        "restore_seconds": restore.as_secs_f64(),
        "restored_tasks": restored,
        "restored_running": all_running,
    }))
}

fn saved_task(index: usize) -> Result<Task, String> {
    let mut saved = Task::new(
        format!("{index:032x}"),
        "bench-state",
        three_container_definition(index),
        index as u64 + 1,
        1_700_000_000_000,
    );
    for (position, container) in saved.containers.iter_mut().enumerate() {
        container.docker_name = Some(format!("ecs-scale-{index}-{position}"));
        container.docker_id = Some(format!("{index:032x}{position:032x}"));
    }
    Ok(saved)
}

fn checkpoint_cost(directory: &Path, tasks: usize, changes: usize) -> Result<Value, String> {
    let (store, _) = StateStore::open(directory)
        .map_err(|error| format!("cannot open the state store: {error}"))?;
    let saved: Vec<Task> = (0..tasks).map(saved_task).collect::<Result<_, _>>()?;
    for one in &saved {
        store
            .save_task(one)
            .map_err(|error| format!("save: {error}"))?;
    }
    let mut samples = Vec::with_capacity(changes);
    for change in 0..changes {
        let mut changed = saved[(change * 7919) % tasks].clone();
        changed.pull_started_at = Some(1_700_000_000_000 + change as u64);
        let started = Instant::now();
        store
            .save_task(&changed)
            .map_err(|error| format!("save: {error}"))?;
        samples.push(started.elapsed());
    }
    // The file system alone, on the same disk, with no serialisation and no locking: each
    // change's bytes (the record line `save_task` appends) appended to one file and
    // fdatasynced, as the state log does.
    let body = encode_task_file(&saved[0]).map_err(|error| error.to_string())?;
    let mut record = Vec::with_capacity(body.len() + 16);
    record.extend_from_slice(b"{\"checkpoint\":");
    record.extend_from_slice(&body);
    record.extend_from_slice(b"}\n");
    let bare_log_path = directory.join("bare-append.log");
    let mut bare_log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&bare_log_path)
        .map_err(|error| format!("cannot open {}: {error}", bare_log_path.display()))?;
    let mut bare_append = Vec::with_capacity(changes);
    for _ in 0..changes {
        let started = Instant::now();
        bare_append_sync(&mut bare_log, &record)
            .map_err(|error| format!("bare append to {}: {error}", bare_log_path.display()))?;
        bare_append.push(started.elapsed());
    }
    // And what the former layout did, one file per task: a directory holding as many files
    // of the same size, each change written atomically (temp file, fsync, rename, fsync of
    // the directory).
    let bytes = body;
    let bare_directory = directory.join("bare");
    std::fs::create_dir_all(&bare_directory)
        .map_err(|error| format!("cannot create {}: {error}", bare_directory.display()))?;
    for index in 0..tasks {
        std::fs::write(bare_directory.join(format!("{index}.json")), &bytes)
            .map_err(|error| format!("cannot write into {}: {error}", bare_directory.display()))?;
    }
    let mut bare = Vec::with_capacity(changes);
    for change in 0..changes {
        let path = bare_directory.join(format!("{}.json", (change * 7919) % tasks));
        let started = Instant::now();
        bare_atomic_write(&bare_directory, &path, &bytes)
            .map_err(|error| format!("bare write of {}: {error}", path.display()))?;
        bare.push(started.elapsed());
    }
    let micros = |duration: Option<Duration>| duration.map_or(0.0, |d| d.as_secs_f64() * 1e6);
    Ok(json!({
        "tasks": tasks,
        "changes": changes,
        "median_micros": micros(median(&samples)),
        "p99_micros": micros(percentile(&samples, 99.0)),
        "bare_append_median_micros": micros(median(&bare_append)),
        "bare_median_micros": micros(median(&bare)),
        "bytes": record.len(),
    }))
}

fn bare_append_sync(log: &mut std::fs::File, record: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    log.write_all(record)?;
    log.sync_data()
}

fn bare_atomic_write(directory: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let temporary = path.with_extension("json.bare-tmp");
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    drop(file);
    std::fs::rename(&temporary, path)?;
    std::fs::File::open(directory)?.sync_all()
}

/// The state phase: checkpoint cost at 10, 100, 1,000 saved tasks; restore of 1,000.
pub fn state_phase(scratch: &Path, changes: usize) -> Result<Value, String> {
    let mut costs = Vec::new();
    for tasks in [10usize, 100, 1000] {
        let directory = scratch.join(format!("state-{tasks}"));
        costs.push(checkpoint_cost(&directory, tasks, changes)?);
    }
    // The disk side of a restart: open the 1,000-task store afresh, as `deckhand run` does.
    let directory = scratch.join("state-1000");
    let mut opens = Vec::new();
    let mut loaded = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let (_store, state) = StateStore::open(&directory)
            .map_err(|error| format!("cannot reopen the state store: {error}"))?;
        opens.push(started.elapsed());
        loaded = state.tasks.len();
    }
    Ok(json!({
        "checkpoint": costs,
        "restore_tasks_loaded": loaded,
        "restore_open_median_millis": median(&opens).map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    }))
}

/// Runs this bench binary again with `--phase <phase>`; returns the JSON line it printed.
pub fn run_phase_in_child(phase: &str, args: &[&str]) -> Result<Value, String> {
    let executable = std::env::current_exe()
        .map_err(|error| format!("cannot find the bench executable: {error}"))?;
    let output = std::process::Command::new(executable)
        .args(["--phase", phase])
        .args(args)
        .env("RUST_LOG", "warn")
        .env("GLIBC_TUNABLES", crate::ALLOCATOR_TUNABLES)
        .output()
        .map_err(|error| format!("cannot run the {phase} phase: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "the {phase} phase failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("RESULT "))
        .ok_or_else(|| format!("the {phase} phase printed no RESULT line: {stdout}"))?;
    serde_json::from_str(line).map_err(|error| format!("the {phase} phase result: {error}"))
}
