//! Syncs and bytes per task life, counted (what `tests/state_syncs.rs` prints, as a bench phase
//! in a process of its own so that the process-wide counters `state::io_counts` hold only this
//! engine's writes): the durable engine on the scripted fake runtime, a 1-container and a
//! 5-container task, submit → RUNNING → stop → STOPPED, each phase counted from the moment the
//! previous one was seen. Phases: **submit** (until `submit` answered: the task is on disk),
//! **start** (until the task's RUNNING event), **stop** (until `stop` answered), **exit** (until
//! the STOPPED event).
//!
//! Next to what deckhand wrote, two minimums for the same phase:
//! - the disk's own: every sync makes the device write at least one 4 KiB block, whatever the
//!   bytes, so a phase with `n` syncs writes at least `n × 4096` bytes to the medium (more with
//!   the file system's journal); on flash, that block is what wears;
//! - the logical one: the bytes that must be durable at the phase's promise point in the state
//!   log's format — one checkpoint record of the task as it stands at the end of the phase (a
//!   restart needs it) plus the line of every event emitted in the phase (a reader may have
//!   seen them). deckhand's own bookkeeping (the agent record holding the sequence counter) is
//!   left out, so a phase can write a little more than this minimum for good reason.

use crate::definitions::{container, task};
use crate::fake_runtime::FakeRuntime;
use crate::scale::{engine_config, wait_all};
use deckhand::engine::{EngineHandle, TaskEngine};
use deckhand::runtime::ContainerRuntime;
use deckhand::state::{encode_task_file, io_counts, IoCounts, StateStore};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const IMAGE: &str = "bench/syncs:1";
/// Task lives measured per shape: a checkpoint written right after an event can land in the
/// phase before or after it, so a phase's count moves between lives; the report shows the range.
pub const LIVES: usize = 3;
/// What frames a checkpoint record in the state log: `{"checkpoint":` + body + `}\n`.
const CHECKPOINT_RECORD_FRAMING: usize = "{\"checkpoint\":".len() + "}\n".len();

/// The bytes that must be durable at the end of a phase (see the module comment).
fn logical_bytes(engine: &TaskEngine, task_id: &str, events_after: u64) -> Result<u64, String> {
    let snapshot = engine
        .tasks()
        .into_iter()
        .find(|task| task.id == task_id)
        .ok_or_else(|| format!("task {task_id} is not in the engine's snapshot"))?;
    let checkpoint = encode_task_file(&snapshot)
        .map_err(|error| format!("encoding task {task_id}: {error}"))?
        .len()
        + CHECKPOINT_RECORD_FRAMING;
    let mut events = 0;
    for event in engine.events_since(events_after, Duration::ZERO) {
        events += serde_json::to_vec(&event)
            .map_err(|error| format!("encoding event {}: {error}", event.seq))?
            .len()
            + 1;
    }
    Ok((checkpoint + events) as u64)
}

fn last_event_seq(engine: &TaskEngine) -> u64 {
    engine
        .events_since(0, Duration::ZERO)
        .last()
        .map_or(0, |event| event.seq)
}

/// One task life of `containers` containers in a fresh state directory.
fn one_life(containers: usize, life: usize, directory: &Path) -> Result<Vec<Value>, String> {
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    std::fs::create_dir_all(directory)
        .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    let (store, loaded) = StateStore::open(directory)
        .map_err(|error| format!("cannot open the state store: {error}"))?;
    let engine = TaskEngine::start_durable(
        Arc::clone(&fake) as Arc<dyn ContainerRuntime>,
        engine_config(10),
        Arc::new(store),
        loaded.tasks,
    )
    .map_err(|error| format!("the engine did not start: {error}"))?;
    let definition = task(
        &format!("syncs{containers}"),
        (0..containers)
            .map(|index| container(&format!("c{index}"), IMAGE))
            .collect(),
    );
    let mut rows = Vec::new();
    let mut mark = io_counts();
    let mut events_mark = last_event_seq(&engine);
    let mut phase = |name: &str, engine: &TaskEngine, task_id: &str| -> Result<(), String> {
        let now = io_counts();
        let counts: IoCounts = now.since(mark);
        let logical = logical_bytes(engine, task_id, events_mark)?;
        rows.push(json!({
            "containers": containers,
            "life": life,
            "phase": name,
            "file_syncs": counts.file_syncs,
            "directory_syncs": counts.directory_syncs,
            "bytes_written": counts.bytes_written,
            "logical_bytes": logical,
        }));
        mark = now;
        events_mark = last_event_seq(engine);
        Ok(())
    };
    let id = engine
        .submit(definition)
        .map_err(|error| format!("submit: {error}"))?
        .id;
    phase("submit", &engine, &id)?;
    let only = HashSet::from([id.clone()]);
    let cursor = wait_all(&engine, &only, "RUNNING", 0)?;
    phase("start", &engine, &id)?;
    engine
        .stop(&id)
        .map_err(|error| format!("stop {id}: {error}"))?;
    phase("stop", &engine, &id)?;
    wait_all(&engine, &only, "STOPPED", cursor)?;
    phase("exit", &engine, &id)?;
    engine.shutdown();
    Ok(rows)
}

/// The syncs phase: `lives` lives of a 1-container and of a 5-container task.
pub fn syncs_phase(scratch: &Path, lives: usize) -> Result<Value, String> {
    let mut rows = Vec::new();
    for containers in [1usize, 5] {
        for life in 0..lives {
            let directory = scratch.join(format!("{containers}-{life}"));
            rows.extend(one_life(containers, life, &directory)?);
        }
    }
    Ok(json!({ "lives": lives, "rows": rows }))
}
