//! What a checkpoint costs, printed rather than asserted (timings depend on the disk):
//! `cargo test --release --test state_cost -- --ignored --nocapture state_cost`.
//!
//! - time of `save_task` for one task with 10, 100 and 1,000 tasks on disk (must not grow with
//!   the number of tasks: each task has its own file);
//! - time of `StateStore::open` loading 1,000 tasks;
//! - event-log appends one by one against batches (group commit);
//! - `next_sequence`, which writes only once per block.
//!
//! `DECKHAND_STATE_COST_DIR` chooses where to measure (default: the system temp directory), so
//! the figures can be taken on the disk a host will really use; `DECKHAND_STATE_COST_COLD=1`
//! (as root) drops the page cache before the first load.

use deckhand::report::Event;
use deckhand::state::StateStore;
use deckhand::task::{ContainerDefinition, Task, TaskDefinition};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn container_definition(name: &str) -> ContainerDefinition {
    ContainerDefinition {
        command: Some(vec!["/bin/service".to_string(), "--port=8080".to_string()]),
        environment: (0..8)
            .map(|i| (format!("VARIABLE_{i}"), format!("value-{i}")))
            .collect(),
        stop_timeout_secs: Some(10),
        memory_mib: Some(128),
        cpu: Some(256),
        ..ContainerDefinition::new(name, "registry.local/team/service:1.2.3")
    }
}

fn task(number: u64) -> Task {
    let definition = TaskDefinition {
        roles: Default::default(),
        family: "service".to_string(),
        revision: 12,
        network_mode: Default::default(),
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers: vec![container_definition("app"), container_definition("proxy")],
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

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn base_dir() -> PathBuf {
    std::env::var_os("DECKHAND_STATE_COST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("deckhand-state-cost-{}", std::process::id()))
}

#[test]
#[ignore = "measurement; run with --release -- --ignored --nocapture state_cost"]
fn state_cost() {
    let base = base_dir();
    let _ = std::fs::remove_dir_all(&base);
    println!("measuring in {}", base.display());
    for tasks_on_disk in [10u64, 100, 1_000] {
        let datadir = base.join(format!("n{tasks_on_disk}"));
        let (store, _) = StateStore::open(&datadir).expect("open");
        for number in 1..=tasks_on_disk {
            store.save_task(&task(number)).expect("save");
        }
        // Flush the set-up writes first, so that their writeback is not billed to the saves
        // being measured.
        let _ = std::process::Command::new("sync").status();
        let mut changing = task(tasks_on_disk / 2 + 1);
        let file_size = std::fs::metadata(store.task_path(&changing.id).expect("path"))
            .expect("meta")
            .len();
        let mut samples = Vec::new();
        for version in 0..300u64 {
            changing.known_status_time = Some(version);
            let started = Instant::now();
            store.save_task(&changing).expect("save");
            samples.push(started.elapsed());
        }
        samples.sort();
        println!(
            "save_task, {tasks_on_disk:>5} tasks on disk, {file_size} B file: median {:>7.1} us, p90 {:>7.1} us, max {:>7.1} us",
            micros(percentile(&samples, 0.5)),
            micros(percentile(&samples, 0.9)),
            micros(percentile(&samples, 1.0)),
        );
    }

    let datadir = base.join("n1000");
    // With DECKHAND_STATE_COST_COLD=1 (and root), drop the page cache so that the first load
    // is a cold one, as after a power cycle. Off by default: it slows everything on the host.
    let _ = std::process::Command::new("sync").status();
    let cold = std::env::var_os("DECKHAND_STATE_COST_COLD").is_some_and(|v| v == "1")
        && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok();
    println!(
        "first load below is {}",
        if cold {
            "cold (page cache dropped)"
        } else {
            "warm"
        }
    );
    let mut load_samples = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (_store, loaded) = StateStore::open(&datadir).expect("open");
        load_samples.push(started.elapsed());
        assert_eq!(
            loaded.tasks.len(),
            1_000,
            "the load being timed loaded every task"
        );
    }
    println!(
        "open + load 1000 tasks, first: {:.1} ms",
        load_samples[0].as_secs_f64() * 1e3
    );
    load_samples.sort();
    println!(
        "open + load 1000 tasks: median {:.1} ms, max {:.1} ms",
        percentile(&load_samples, 0.5).as_secs_f64() * 1e3,
        percentile(&load_samples, 1.0).as_secs_f64() * 1e3
    );

    let (store, _) = StateStore::open(&base.join("events")).expect("open");
    let log = store.event_log();
    let event = |seq: u64| Event {
        seq,
        time: 1_700_000_000_000 + seq,
        task: format!("{:032x}", seq % 50),
        container: Some("app".to_string()),
        status: "STOPPED".to_string(),
        exit_code: Some(0),
        reason: Some("Essential container in task exited".to_string()),
    };
    let single = 2_000u64;
    let started = Instant::now();
    for seq in 1..=single {
        log.append(&event(seq)).expect("append");
    }
    let one_by_one = started.elapsed();
    let batches = 200u64;
    let batch_size = 64u64;
    let started = Instant::now();
    for batch in 0..batches {
        let first = single + 1 + batch * batch_size;
        let events: Vec<Event> = (first..first + batch_size).map(event).collect();
        log.append_batch(&events).expect("append batch");
    }
    let grouped = started.elapsed();
    println!(
        "event append one by one: {:.1} us/event ({:.0} events/s); in batches of {batch_size}: {:.1} us/event ({:.0} events/s); log holds {} events after compaction",
        micros(one_by_one) / single as f64,
        single as f64 / one_by_one.as_secs_f64(),
        micros(grouped) / (batches * batch_size) as f64,
        (batches * batch_size) as f64 / grouped.as_secs_f64(),
        log.len(),
    );
    let started = Instant::now();
    let started_at = log.next_seq();
    let read = log.read_since(started_at - 5_000, 100).expect("read");
    println!(
        "read_since 100 events from the middle: {:.1} us",
        micros(started.elapsed())
    );
    assert_eq!(read.len(), 100);

    let count = 10_000u64;
    let started = Instant::now();
    for _ in 0..count {
        store.next_sequence().expect("sequence");
    }
    println!(
        "next_sequence: {:.2} us per number (one agent.json write per {} numbers)",
        micros(started.elapsed()) / count as f64,
        deckhand::state::SEQUENCE_BLOCK
    );
    let _ = std::fs::remove_dir_all(&base);
}
