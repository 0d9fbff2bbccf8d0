//! P7 scale on real Docker: many one-container tasks submitted at once to a fresh `deckhand run`,
//! timed from the first submit to the last task's RUNNING event, against the same creates and
//! starts made directly on Docker's API at the same concurrency (deckhand's Docker worker pool,
//! 8 calls at once by default), and the agent's memory once they all run.
//!
//! Why the same concurrency: on a 2-core host Docker does little of a create or a start in
//! parallel, and more calls at once than the pool makes would only measure a different load on
//! Docker; the direct figure is what the same number of callers gets from Docker alone.

use crate::agent_process::AgentProcess;
use crate::footprint::memory_of;
use crate::workload::{direct_create, task_definition_json, Shape};
use deckhand::docker::DockerClient;
use deckhand::runtime::ContainerRuntime;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const TASK_DEADLINE: Duration = Duration::from_secs(600);

/// The figures of one run.
#[derive(Debug, Clone, Default)]
pub struct DockerScale {
    pub tasks: usize,
    pub concurrency: usize,
    /// First submit → every task's RUNNING event read by the bench.
    pub deckhand: Duration,
    /// How long the submits alone took (every one answered: the task is on disk).
    pub submits: Duration,
    /// The same creates and starts made directly, `concurrency` at a time.
    pub direct: Duration,
    pub rss_bytes_at_running: u64,
    pub threads_at_running: u64,
    /// Every task STOPPED after the stops were asked (each container exits at once on SIGTERM).
    pub stop_all: Duration,
}

/// Runs the deckhand side on `agent` (fresh, used for nothing else), then the direct side.
/// Every container carries the run's label; the caller removes them.
pub fn measure_docker_scale(
    client: &DockerClient,
    agent: &mut AgentProcess,
    image: &str,
    run_id: &str,
    tasks: usize,
    concurrency: usize,
) -> Result<DockerScale, String> {
    let shape = Shape {
        containers: 1,
        chain: false,
    };
    let started = Instant::now();
    let mut ids = Vec::with_capacity(tasks);
    for index in 0..tasks {
        let definition = task_definition_json(&format!("scale{index}"), image, shape, run_id);
        ids.push(agent.submit(&definition)?.0);
    }
    let submits = started.elapsed();
    for id in &ids {
        agent.wait_task_status(id, "RUNNING", TASK_DEADLINE)?;
    }
    let deckhand = started.elapsed();
    let memory = memory_of(agent.pid())?;
    let stopping = Instant::now();
    for id in &ids {
        agent.stop(id)?;
    }
    for id in &ids {
        agent.wait_task_status(id, "STOPPED", TASK_DEADLINE)?;
        agent.forget(id);
    }
    let stop_all = stopping.elapsed();

    let direct = direct_creates_and_starts(client, image, run_id, tasks, concurrency)?;
    Ok(DockerScale {
        tasks,
        concurrency,
        deckhand,
        submits,
        direct,
        rss_bytes_at_running: memory.rss_bytes,
        threads_at_running: memory.threads,
        stop_all,
    })
}

/// `count` containers created and started directly, `concurrency` callers taking the next one
/// as each finishes its last.
fn direct_creates_and_starts(
    client: &DockerClient,
    image: &str,
    run_id: &str,
    count: usize,
    concurrency: usize,
) -> Result<Duration, String> {
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        let callers: Vec<_> = (0..concurrency.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<(), String> {
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        if index >= count {
                            return Ok(());
                        }
                        let name = format!("deckhand-bench-{run_id}-direct-scale-{index}");
                        let id = client
                            .create_container(&direct_create(image, name.clone(), run_id))
                            .map_err(|error| format!("create {name}: {error}"))?;
                        client
                            .start_container(&id)
                            .map_err(|error| format!("start {name}: {error}"))?;
                    }
                })
            })
            .collect();
        callers
            .into_iter()
            .map(|caller| {
                caller
                    .join()
                    .unwrap_or_else(|_| Err("a caller thread panicked".into()))
            })
            .collect::<Result<Vec<()>, String>>()
    })?;
    Ok(started.elapsed())
}
