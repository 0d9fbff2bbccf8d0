//! How the size of the Docker worker pool (`DECKHAND_DOCKER_CONCURRENCY`) changes start and stop
//! latency on the real Docker Engine: printed rather than asserted (the figures depend on the
//! machine and on what else Docker is doing). Run with
//!
//! ```text
//! cargo test --release --test docker_concurrency -- --ignored --nocapture
//! ```
//!
//! For each pool size (`DECKHAND_BENCH_POOL_SIZES`, default `1,2,4,8,16,32,64`; 64, the
//! largest allowed, stands in for the former thread per call), an engine on the
//! real Docker submits `DECKHAND_BENCH_TASKS` (default 100) one-container tasks at once and
//! measures submit → every task RUNNING; then 3 inspections of every container through a pool of
//! that size (what a re-list after a reconnect costs: each task re-inspects its containers); then
//! stop → every task STOPPED. Each size prints the wall times, the most Docker calls that ran at
//! once, and the most threads the process had. A second measurement times one task of
//! `DECKHAND_BENCH_WIDE` (default 20) containers, submit → RUNNING, 5 rounds per size (median):
//! the start latency of a single wide task, where the pool caps the calls of one task. Needs Docker (fails without it only when
//! `DECKHAND_REQUIRE_DOCKER=1`); every container is removed at the end of its round.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/docker.rs"]
mod docker_support;

use deckhand::docker::DockerClient;
use deckhand::engine::worker_pool::{CallClass, DockerPool, Job};
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::ContainerRuntime;
use deckhand::task::{PullBehavior, TaskStatus};
use definitions::{container, task, with_command};
use docker_support::{docker_client_or_skip, ensure_busybox_image, unique_id, TEST_IMAGE};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs until SIGTERM, then exits 0 at once.
const SERVE: &[&str] = &["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];
const DEADLINE: Duration = Duration::from_secs(600);

fn threads_now() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Threads:"))
                .and_then(|count| count.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Samples the process's thread count every millisecond until dropped; `peak()` is the most seen.
struct ThreadSampler {
    peak: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ThreadSampler {
    fn start() -> ThreadSampler {
        let peak = Arc::new(AtomicUsize::new(threads_now()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (Arc::clone(&peak), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(threads_now(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        ThreadSampler {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for ThreadSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|text| {
            text.split(',')
                .filter_map(|part| part.trim().parse().ok())
                .collect()
        })
        .unwrap_or_else(|| default.to_vec())
}

/// Runs `jobs` (each a Docker call) on a pool of `size` workers and waits for all of them.
fn run_on_pool(size: usize, jobs: Vec<Box<dyn FnOnce() + Send>>) -> (Duration, usize) {
    let pool = DockerPool::start(size).expect("the pool starts");
    let (done, finished) = crossbeam_channel::unbounded();
    let count = jobs.len();
    let started = Instant::now();
    for work in jobs {
        let done = done.clone();
        pool.submit(Job {
            class: CallClass::Inspect,
            label: "measurement".to_string(),
            work: Box::new(move || {
                work();
                let _ = done.send(());
            }),
            on_panic: Box::new(|message| panic!("a measured call panicked: {message}")),
            unwanted: None,
        })
        .expect("queued");
    }
    for _ in 0..count {
        finished
            .recv_timeout(DEADLINE)
            .expect("every measured call finishes");
    }
    let elapsed = started.elapsed();
    let peak = pool.stats().peak_busy;
    pool.shutdown(Duration::from_secs(5));
    (elapsed, peak)
}

struct Round {
    size: usize,
    start: Duration,
    start_peak_calls: usize,
    start_peak_threads: usize,
    inspect: Duration,
    stop: Duration,
}

/// Force-removes every container of `cluster`.
fn remove_cluster(client: &DockerClient, cluster: &str) {
    let listed = client
        .list_containers(&[format!("com.amazonaws.ecs.cluster={cluster}")])
        .expect("list this round's containers");
    let removals: Vec<Box<dyn FnOnce() + Send>> = listed
        .into_iter()
        .map(|summary| {
            let client = client.clone();
            Box::new(move || {
                let _ = client.remove_container(&summary.id, true);
            }) as Box<dyn FnOnce() + Send>
        })
        .collect();
    run_on_pool(4, removals);
}

fn measure_round(client: &DockerClient, size: usize, tasks: usize) -> Round {
    let cluster = format!("deckhand-bench-pool-{}", unique_id());
    let config = EngineConfig {
        cluster: cluster.clone(),
        pull_behavior: PullBehavior::PreferCached,
        stop_timeout: Duration::from_secs(10),
        docker_concurrency: size,
        ..EngineConfig::default()
    };
    let baseline_threads = threads_now();
    let engine = TaskEngine::start(Arc::new(client.clone()), config).expect("the engine starts");
    let sampler = ThreadSampler::start();
    let started = Instant::now();
    let ids: Vec<String> = (0..tasks)
        .map(|number| {
            engine
                .submit(task(
                    &format!("pool{number}"),
                    vec![with_command(container("app", TEST_IMAGE), SERVE)],
                ))
                .expect("accepted")
                .id
        })
        .collect();
    for id in &ids {
        assert!(
            engine.wait_for_task(id, DEADLINE, |task| task
                .is_some_and(|t| t.known_status >= TaskStatus::Running)),
            "task {id} did not reach RUNNING: {:?}",
            engine.task(id)
        );
    }
    let start = started.elapsed();
    let start_peak_calls = engine.docker_pool_stats().peak_busy;
    // The sampler thread itself is one of the threads counted.
    let start_peak_threads = sampler.peak().saturating_sub(baseline_threads + 1);
    drop(sampler);

    let docker_ids: Vec<String> = ids
        .iter()
        .filter_map(|id| engine.task(id)?.containers[0].docker_id.clone())
        .collect();
    let inspections: Vec<Box<dyn FnOnce() + Send>> = (0..3)
        .flat_map(|_| docker_ids.iter().cloned())
        .map(|docker_id| {
            let client = client.clone();
            Box::new(move || {
                client
                    .inspect_container(&docker_id)
                    .expect("a running container inspects");
            }) as Box<dyn FnOnce() + Send>
        })
        .collect();
    let (inspect, _) = run_on_pool(size, inspections);

    let stopping = Instant::now();
    for id in &ids {
        engine.stop(id).expect("the stop is accepted");
    }
    for id in &ids {
        assert!(
            engine.wait_for_task(id, DEADLINE, |task| task
                .is_some_and(|t| t.known_status == TaskStatus::Stopped)),
            "task {id} did not reach STOPPED"
        );
    }
    let stop = stopping.elapsed();
    engine.shutdown();
    remove_cluster(client, &cluster);
    Round {
        size,
        start,
        start_peak_calls,
        start_peak_threads,
        inspect,
        stop,
    }
}

#[test]
#[ignore = "a measurement on the real Docker Engine; run with --ignored --nocapture"]
fn docker_pool_size_against_start_inspect_and_stop_latency() {
    let Some(client) =
        docker_client_or_skip("docker_pool_size_against_start_inspect_and_stop_latency")
    else {
        return;
    };
    ensure_busybox_image(&client);
    let sizes = env_list("DECKHAND_BENCH_POOL_SIZES", &[1, 2, 4, 8, 16, 32, 64]);
    let tasks = env_list("DECKHAND_BENCH_TASKS", &[100])
        .first()
        .copied()
        .unwrap_or(100);
    println!(
        "{tasks} one-container tasks on the real Docker Engine, {} CPU(s), load average {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "| pool size | submit → all RUNNING | most calls at once | most threads (engine) | {} inspections | stop → all STOPPED |",
        tasks * 3
    );
    println!("|---|---|---|---|---|---|");
    for size in sizes {
        let round = measure_round(&client, size, tasks);
        println!(
            "| {} | {:.2} s | {} | {} | {:.0} ms | {:.2} s |",
            round.size,
            round.start.as_secs_f64(),
            round.start_peak_calls,
            round.start_peak_threads,
            round.inspect.as_secs_f64() * 1000.0,
            round.stop.as_secs_f64()
        );
    }
}

/// Submit → RUNNING of one task of `width` containers on a pool of `size`; then stop it and
/// remove its containers.
fn wide_task_start(client: &DockerClient, size: usize, width: usize) -> Duration {
    let cluster = format!("deckhand-bench-wide-{}", unique_id());
    let config = EngineConfig {
        cluster: cluster.clone(),
        pull_behavior: PullBehavior::PreferCached,
        stop_timeout: Duration::from_secs(10),
        docker_concurrency: size,
        ..EngineConfig::default()
    };
    let engine = TaskEngine::start(Arc::new(client.clone()), config).expect("the engine starts");
    let containers = (0..width)
        .map(|number| with_command(container(&format!("c{number}"), TEST_IMAGE), SERVE))
        .collect();
    let started = Instant::now();
    let id = engine
        .submit(task("wide", containers))
        .expect("accepted")
        .id;
    assert!(
        engine.wait_for_task(&id, DEADLINE, |task| task
            .is_some_and(|t| t.known_status >= TaskStatus::Running)),
        "the wide task did not reach RUNNING: {:?}",
        engine.task(&id)
    );
    let elapsed = started.elapsed();
    engine.stop(&id).expect("the stop is accepted");
    assert!(engine.wait_for_task(&id, DEADLINE, |task| task
        .is_some_and(|t| t.known_status == TaskStatus::Stopped)));
    engine.shutdown();
    remove_cluster(client, &cluster);
    elapsed
}

#[test]
#[ignore = "a measurement on the real Docker Engine; run with --ignored --nocapture"]
fn docker_pool_size_against_the_start_of_one_wide_task() {
    let Some(client) = docker_client_or_skip("docker_pool_size_against_the_start_of_one_wide_task")
    else {
        return;
    };
    ensure_busybox_image(&client);
    let sizes = env_list("DECKHAND_BENCH_POOL_SIZES", &[1, 2, 4, 8, 16, 32, 64]);
    let width = env_list("DECKHAND_BENCH_WIDE", &[20])
        .first()
        .copied()
        .unwrap_or(20);
    const ROUNDS: usize = 5;
    println!("| pool size | one task of {width} containers: submit → RUNNING, median of {ROUNDS} | min | max |");
    println!("|---|---|---|---|");
    for size in sizes {
        let mut times: Vec<Duration> = (0..ROUNDS)
            .map(|_| wide_task_start(&client, size, width))
            .collect();
        times.sort();
        println!(
            "| {size} | {:.2} s | {:.2} s | {:.2} s |",
            times[ROUNDS / 2].as_secs_f64(),
            times[0].as_secs_f64(),
            times[ROUNDS - 1].as_secs_f64()
        );
    }
}
