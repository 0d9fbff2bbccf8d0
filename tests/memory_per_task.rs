//! What one managed task costs in memory, measured rather than guessed: an ignored test that
//! runs 1,000 three-container tasks (the P4 scale shape) on the fake runtime with a durable
//! engine and prints the process's RSS, its threads, the resident thread stacks, the live heap
//! (counted by a wrapping global allocator) and glibc's view of its arenas, each per task, and
//! the live bytes of the pieces a task is made of. Figures, not assertions: run it with
//! `cargo test --release --test memory_per_task -- --ignored --nocapture` (`MEMORY_TASKS=n`
//! changes the count).

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::managed_task::{OwnerCommand, DOCKER_EVENT_INBOX_CAPACITY};
use deckhand::engine::messages::RoutedDockerEvent;
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::ContainerRuntime;
use deckhand::state::StateStore;
use deckhand::task::{PullBehavior, Task, TaskDefinition, TaskStatus};
use fake_runtime::FakeRuntime;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The system allocator, counting the bytes currently allocated (what the program asked for,
/// without malloc's headers, caches or free lists).
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        System.dealloc(pointer, layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        System.realloc(pointer, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// glibc's `struct mallinfo2` (every field a `size_t`).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MallInfo2 {
    arena: usize,
    ordblks: usize,
    smblks: usize,
    hblks: usize,
    hblkhd: usize,
    usmblks: usize,
    fsmblks: usize,
    uordblks: usize,
    fordblks: usize,
    keepcost: usize,
}

extern "C" {
    fn mallinfo2() -> MallInfo2;
}

const FAKE_IMAGE: &str = "bench/fake:latest";

fn three_container_definition(index: usize) -> TaskDefinition {
    definitions::three_container_task(index, FAKE_IMAGE)
}

#[derive(Debug, Default, Clone)]
struct Process {
    rss: u64,
    anonymous: u64,
    threads: u64,
    /// Anonymous writable mappings by size: (size, how many, resident bytes), most resident
    /// first. Thread stacks are the many mappings of one size (the stack size asked for).
    anonymous_by_size: Vec<(u64, u64, u64)>,
}

/// The number after `key:` in a `/proc` status-like text.
fn number_field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse::<u64>().ok())
        .unwrap_or(0)
}

/// A `Key:   123 kB` field, in bytes.
fn kib_field(text: &str, key: &str) -> u64 {
    number_field(text, key) * 1024
}

fn process() -> Process {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut by_size = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    let mut current = None;
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let range = fields.first().and_then(|first| {
            let (start, end) = first.split_once('-')?;
            Some((
                u64::from_str_radix(start, 16).ok()?,
                u64::from_str_radix(end, 16).ok()?,
            ))
        });
        if let Some((start, end)) = range {
            // address perms offset device inode [path]: no path means anonymous.
            current = (fields.len() == 5 && fields[1] == "rw-p").then_some(end - start);
            continue;
        }
        if let (Some(size), true) = (current, line.starts_with("Rss:")) {
            let entry = by_size.entry(size).or_default();
            entry.0 += 1;
            entry.1 += kib_field(line, "Rss");
        }
    }
    let mut anonymous_by_size: Vec<(u64, u64, u64)> = by_size
        .into_iter()
        .map(|(size, (count, resident))| (size, count, resident))
        .collect();
    anonymous_by_size.sort_by_key(|(_, _, resident)| std::cmp::Reverse(*resident));
    Process {
        rss: kib_field(&status, "VmRSS"),
        anonymous: kib_field(&status, "RssAnon"),
        threads: number_field(&status, "Threads"),
        anonymous_by_size,
    }
}

/// Live heap bytes that `make` leaves allocated (single-threaded: nothing else runs then).
fn bytes_held_by<T>(make: impl FnOnce() -> T) -> (T, isize) {
    let before = live_bytes();
    let value = make();
    (value, live_bytes() - before)
}

fn wait_all(engine: &TaskEngine, count: usize, status: TaskStatus) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let reached = engine
            .tasks()
            .iter()
            .filter(|task| task.known_status == status)
            .count();
        if reached == count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{reached} of {count} tasks reached {status:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn per_task(bytes: f64, tasks: usize) -> String {
    format!("{:>9.0} B", bytes / tasks as f64)
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn memory_of_one_thousand_three_container_tasks() {
    let tasks: usize = std::env::var("MEMORY_TASKS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(1000);

    // The pieces, one at a time, before any thread exists.
    let (definition, definition_bytes) = bytes_held_by(|| three_container_definition(0));
    let (model, model_bytes) = bytes_held_by(|| {
        Task::new(
            format!("{:032x}", 7),
            "bench-scale",
            definition.clone(),
            1,
            1_700_000_000_000,
        )
    });
    let (_copy, copy_bytes) = bytes_held_by(|| model.clone());
    let (_events_inbox, events_inbox_bytes) = bytes_held_by(|| {
        crossbeam_channel::bounded::<RoutedDockerEvent>(DOCKER_EVENT_INBOX_CAPACITY)
    });
    let (_desired_inbox, desired_inbox_bytes) = bytes_held_by(|| {
        let (sender, receiver) = crossbeam_channel::unbounded::<OwnerCommand>();
        let _ = sender.send(OwnerCommand::ControlPlaneReported(TaskStatus::Running));
        let _ = receiver.try_recv();
        (sender, receiver)
    });
    let (_signal, signal_bytes) = bytes_held_by(|| crossbeam_channel::bounded::<()>(1));
    let json = serde_json::to_vec(&model).expect("a task serialises");
    println!("pieces (live heap):");
    println!("  task definition, 3 containers: {definition_bytes:>7} B");
    println!("  Task model made from it:       {model_bytes:>7} B");
    println!("  one more copy of the Task:     {copy_bytes:>7} B");
    println!(
        "  Docker-event inbox ({DOCKER_EVENT_INBOX_CAPACITY} slots of {} B): {events_inbox_bytes:>7} B",
        std::mem::size_of::<RoutedDockerEvent>()
    );
    println!("  desired inbox after one command: {desired_inbox_bytes:>5} B");
    println!("  a bounded(1) signal channel:   {signal_bytes:>7} B");
    println!("  its checkpoint JSON (on disk): {:>7} B", json.len());

    let directory = std::env::temp_dir().join(format!("deckhand-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let fake = FakeRuntime::new();
    fake.add_image(FAKE_IMAGE);
    let (store, loaded) = StateStore::open(&directory).expect("the state store opens");
    let config = EngineConfig {
        cluster: "bench-scale".to_string(),
        pull_behavior: PullBehavior::PreferCached,
        cleanup_wait: Duration::from_secs(3600),
        event_capacity: tasks * 10,
        ..EngineConfig::default()
    };
    let engine = TaskEngine::start_durable(
        Arc::clone(&fake) as Arc<dyn ContainerRuntime>,
        config,
        Arc::new(store),
        loaded.tasks,
    )
    .expect("the engine starts");
    let idle = process();
    let idle_live = live_bytes();
    // SAFETY: mallinfo2 only reads malloc's statistics.
    let idle_malloc = unsafe { mallinfo2() };

    for index in 0..tasks {
        engine
            .submit(three_container_definition(index))
            .expect("submit");
    }
    wait_all(&engine, tasks, TaskStatus::Running);
    // Let the last events and checkpoints settle, as a long-running agent would.
    std::thread::sleep(Duration::from_millis(500));
    let running = process();
    let running_live = live_bytes();
    // SAFETY: as above.
    let running_malloc = unsafe { mallinfo2() };

    engine.shutdown();
    drop(engine);
    let fake_live = live_bytes();

    let difference = |after: u64, before: u64| after as f64 - before as f64;
    let live = (running_live - idle_live) as f64;
    let fake_share = (fake_live - idle_live) as f64;
    // In use: chunks in the arenas (live, or held in a thread's cache) and chunks of their own
    // mapping (large allocations).
    let malloc_used = difference(
        (running_malloc.uordblks + running_malloc.hblkhd) as u64,
        (idle_malloc.uordblks + idle_malloc.hblkhd) as u64,
    );
    let malloc_free = difference(running_malloc.fordblks as u64, idle_malloc.fordblks as u64);
    let rss = difference(running.rss, idle.rss);
    println!("{tasks} tasks × 3 containers, fake runtime, durable engine:");
    println!(
        "  RSS idle {:.2} MiB, at RUNNING {:.2} MiB (anonymous {:.2} MiB); threads {} → {}",
        idle.rss as f64 / 1048576.0,
        running.rss as f64 / 1048576.0,
        running.anonymous as f64 / 1048576.0,
        idle.threads,
        running.threads
    );
    println!("per task, beyond idle:");
    println!(
        "  RSS                                   {}",
        per_task(rss, tasks)
    );
    println!(
        "  live heap, engine (asked for)         {}",
        per_task(live - fake_share, tasks)
    );
    println!(
        "  live heap, fake runtime's records     {}",
        per_task(fake_share, tasks)
    );
    println!(
        "  malloc in use beyond live (headers, per-thread caches) {}",
        per_task(malloc_used - live, tasks)
    );
    println!(
        "  malloc free, kept in arenas           {}",
        per_task(malloc_free, tasks)
    );
    println!(
        "  malloc arenas' size                   {}",
        per_task(
            difference(
                (running_malloc.arena + running_malloc.hblkhd) as u64,
                (idle_malloc.arena + idle_malloc.hblkhd) as u64
            ),
            tasks
        )
    );
    println!("anonymous writable mappings at RUNNING, most resident first:");
    for (size, count, resident) in running.anonymous_by_size.iter().take(6) {
        println!(
            "  {count:>5} of {:>8} KiB: {:>8.2} MiB resident, {:>7.0} B per mapping",
            size / 1024,
            *resident as f64 / 1048576.0,
            *resident as f64 / *count as f64
        );
    }
    drop(fake);
    let _ = std::fs::remove_dir_all(&directory);
}
