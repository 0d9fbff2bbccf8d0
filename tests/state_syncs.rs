//! How many synchronous writes (file and directory fsyncs) and bytes deckhand's state store makes
//! over one task's life, counted at the file layer (`state::io_counts`), not estimated: the
//! durable engine on the scripted fake runtime, a 1-container and a 5-container task, submit →
//! RUNNING → stop → STOPPED, each phase measured from the moment the previous one was seen.
//! Printed rather than asserted (a measurement of where the sync budget goes, issue-driven
//! work in docs/PERFORMANCE.md):
//! `cargo test --test state_syncs -- --ignored --nocapture`.
//!
//! Phases: **submit** (until `submit` answered: the task is on disk), **start** (until the task's
//! RUNNING event), **stop** (until `stop` answered: the stop is on disk), **exit** (until the
//! STOPPED event). The process's other writers (the event log, the sequence counter) count where
//! they happen, as they would on a host.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::{EngineHandle, TaskEngine};
use deckhand::state::{io_counts, IoCounts, StateStore};
use definitions::{container, task};
use fake_runtime::FakeRuntime;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const IMAGE: &str = "test/app:1";
const DEADLINE: Duration = Duration::from_secs(20);

fn measure(containers: usize, directory: &std::path::Path) -> Vec<(&'static str, IoCounts)> {
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let (store, loaded) = StateStore::open(directory).expect("the state store opens");
    let engine = TaskEngine::start_durable(
        fake.clone(),
        engine_events::fast_engine_config("syncs"),
        Arc::new(store),
        loaded.tasks,
    )
    .expect("the engine starts");
    let definition = task(
        &format!("syncs{containers}"),
        (0..containers)
            .map(|index| container(&format!("c{index}"), IMAGE))
            .collect(),
    );
    let mut phases = Vec::new();
    let mut mark = io_counts();
    let mut phase = |name: &'static str, phases: &mut Vec<(&'static str, IoCounts)>| {
        let now = io_counts();
        phases.push((name, now.since(mark)));
        mark = now;
    };
    let id = engine.submit(definition).expect("accepted").id;
    phase("submit", &mut phases);
    engine_events::wait_event(&engine, &id, None, "RUNNING", DEADLINE);
    phase("start", &mut phases);
    engine.stop(&id).expect("stop accepted");
    phase("stop", &mut phases);
    engine_events::wait_event(&engine, &id, None, "STOPPED", DEADLINE);
    phase("exit", &mut phases);
    engine.shutdown();
    phases
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn state_syncs_per_task_lifecycle() {
    let root = std::env::var_os("DECKHAND_STATE_COST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("deckhand-state-syncs-{}", std::process::id()));
    println!("| task | phase | file fsyncs | directory fsyncs | all syncs | bytes written |");
    println!("|---|---|---|---|---|---|");
    for containers in [1, 5] {
        let directory = root.join(format!("{containers}"));
        std::fs::create_dir_all(&directory).expect("scratch directory");
        let phases = measure(containers, &directory);
        let mut total = IoCounts::default();
        for (name, counts) in &phases {
            println!(
                "| {containers} container(s) | {name} | {} | {} | {} | {} |",
                counts.file_syncs,
                counts.directory_syncs,
                counts.syncs(),
                counts.bytes_written
            );
            total.file_syncs += counts.file_syncs;
            total.directory_syncs += counts.directory_syncs;
            total.bytes_written += counts.bytes_written;
        }
        println!(
            "| {containers} container(s) | whole life | {} | {} | {} | {} |",
            total.file_syncs,
            total.directory_syncs,
            total.syncs(),
            total.bytes_written
        );
        assert!(total.syncs() > 0, "the durable engine wrote nothing");
    }
    let _ = std::fs::remove_dir_all(&root);
}
