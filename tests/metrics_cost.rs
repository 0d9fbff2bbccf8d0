//! What a `GET /metrics` scrape costs with 100 running tasks (one container each) on the fake
//! runtime, printed rather than asserted (timings depend on the machine):
//! `cargo test --release --test metrics_cost -- --ignored --nocapture`.
//!
//! - the page alone (`metrics::scrape` over the engine's snapshot), when every container's
//!   cgroup files are found (a made-up cgroup tree, as on a host where deckhand sees its
//!   containers' cgroups) and when none is (the fake runtime's ids under the real
//!   `/sys/fs/cgroup`: every layout is tried for every container, the worst case);
//! - the engine's snapshot (`EngineHandle::tasks`) on its own, and a page with no task (the
//!   fixed part: counters, histograms, `/proc/self`);
//! - a whole request over TCP to the introspection server (connect, request, page, close).
//!
//! Allocations are counted on the measuring thread only (a counting global allocator with a
//! thread-local tally), so the engine's idle threads do not blur them.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::api::http::{HttpRequest, HttpResponse};
use deckhand::api::introspection::IntrospectionApi;
use deckhand::api::server::{HttpServer, ListenAddress};
use deckhand::engine::{EngineHandle, TaskEngine};
use deckhand::metrics::cgroup::{CgroupLayout, CgroupRoot};
use deckhand::metrics::process::ProcessFiles;
use deckhand::metrics::{self, Sources};
use deckhand::task::TaskStatus;
use definitions::{container, task};
use engine_events::fast_engine_config;
use fake_runtime::FakeRuntime;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TASKS: usize = 100;
const SCRAPES: usize = 200;
const IMAGE: &str = "test/app:1";

/// Counts allocations (and bytes asked for) on the thread that makes them.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static ALLOCATED_BYTES: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
    let _ = ALLOCATED_BYTES.try_with(|total| total.set(total.get() + bytes as u64));
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        System.dealloc(pointer, layout)
    }
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        System.realloc(pointer, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> (u64, u64) {
    (ALLOCATIONS.with(Cell::get), ALLOCATED_BYTES.with(Cell::get))
}

/// Runs `work` `SCRAPES` times; prints the median and 99th percentile time and the allocations
/// per run.
fn measure(what: &str, mut work: impl FnMut() -> usize) {
    let mut times = Vec::with_capacity(SCRAPES);
    let mut page_bytes = 0;
    let (allocations_before, bytes_before) = allocations();
    for _ in 0..SCRAPES {
        let started = Instant::now();
        page_bytes = work();
        times.push(started.elapsed());
    }
    let (allocations_after, bytes_after) = allocations();
    times.sort();
    let micros = |duration: Duration| duration.as_secs_f64() * 1e6;
    println!(
        "{what:<58} median {:>8.1} µs  p99 {:>8.1} µs  {:>6} allocations ({:>7} bytes) per run  page {page_bytes} bytes",
        micros(times[times.len() / 2]),
        micros(times[(times.len() * 99) / 100]),
        (allocations_after - allocations_before) / SCRAPES as u64,
        (bytes_after - bytes_before) / SCRAPES as u64,
    );
}

/// A cgroup tree (v2, systemd layout) with files for every container of `engine`'s tasks.
fn made_up_cgroups(engine: &TaskEngine, root: &std::path::Path) {
    for task in engine.tasks() {
        for container in &task.containers {
            let id = container.docker_id.as_deref().expect("a created container");
            let memory = CgroupLayout::V2Systemd.memory_file(root, id);
            std::fs::create_dir_all(memory.parent().expect("a directory")).expect("cgroup dir");
            std::fs::write(&memory, "12345678\n").expect("memory.current");
            let cpu = &CgroupLayout::V2Systemd.cpu_files(root, id)[0];
            std::fs::write(cpu, "usage_usec 987654\nuser_usec 1\nsystem_usec 2\n")
                .expect("cpu.stat");
        }
    }
}

#[test]
#[ignore = "a measurement: run with --release --ignored --nocapture"]
fn metrics_cost() {
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let engine = Arc::new(
        TaskEngine::start(fake.clone(), fast_engine_config("metrics-cost")).expect("engine"),
    );
    let ids: Vec<String> = (0..TASKS)
        .map(|number| {
            let definition = task(&format!("service-{number}"), vec![container("app", IMAGE)]);
            engine.submit(definition).expect("accepted").id
        })
        .collect();
    for id in &ids {
        assert!(
            engine.wait_for_task(id, Duration::from_secs(60), |task| {
                task.is_some_and(|task| task.known_status == TaskStatus::Running)
            }),
            "task {id} did not reach RUNNING"
        );
    }
    println!(
        "{TASKS} running tasks of one container each on the fake runtime, {SCRAPES} runs each:"
    );

    let scratch =
        std::env::temp_dir().join(format!("deckhand-metrics-cost-{}", std::process::id()));
    let cgroup_root = scratch.join("cgroup");
    made_up_cgroups(&engine, &cgroup_root);
    let found = Sources {
        process: ProcessFiles::default(),
        cgroups: CgroupRoot::new(&cgroup_root),
    };
    let page = metrics::scrape(metrics::global(), &engine.tasks(), &found);
    let memory_series = page
        .lines()
        .filter(|line| line.starts_with("deckhand_container_memory_usage_bytes{"))
        .count();
    assert_eq!(memory_series, TASKS, "every container's cgroup was read");

    measure("snapshot only (EngineHandle::tasks)", || {
        engine.tasks().len()
    });
    measure(
        "page without tasks (counters and process files only)",
        || metrics::scrape(metrics::global(), &[], &found).len(),
    );
    measure("page, every container's cgroup files found", || {
        metrics::scrape(metrics::global(), &engine.tasks(), &found).len()
    });
    let missing = Sources::default();
    measure(
        "page, no container's cgroup files found (worst case)",
        || metrics::scrape(metrics::global(), &engine.tasks(), &missing).len(),
    );
    let handle: Arc<dyn EngineHandle> = engine.clone();
    let api = Arc::new(IntrospectionApi::new(handle));
    let request = HttpRequest {
        method: "GET".into(),
        path: "/metrics".into(),
        query: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    measure("introspection handler (real /sys/fs/cgroup)", || {
        let response: HttpResponse = api.handle(&request);
        response.body.len()
    });
    let handler_api = api.clone();
    let mut server = HttpServer::serve_tcp(
        "introspection",
        "127.0.0.1:0".parse().expect("an address"),
        2,
        Arc::new(move |request: &HttpRequest| handler_api.handle(request)),
    )
    .expect("listen");
    let ListenAddress::Tcp(address) = server.address().clone() else {
        panic!("a TCP server");
    };
    measure("GET /metrics over TCP (client side, whole request)", || {
        let mut stream = TcpStream::connect(address).expect("connect");
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            .expect("request");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("answer");
        answer.len()
    });
    server.shutdown();
    engine.shutdown();
    let _ = std::fs::remove_dir_all(&scratch);
}
