//! Start latency on the real Docker Engine: submit → task RUNNING for a 1-container and a
//! 5-container task, next to the same Docker create + start calls made directly with the client.
//! Run with `cargo bench --bench start_latency`; prints medians (and min/max) over several runs.
//!
//! The engine's path adds, per container, an image inspection (pull behaviour `prefer-cached`,
//! since the test image exists only locally), an inspection after start, the thread hops of the
//! managed task and its workers, and the event log. Its containers start concurrently; the
//! direct figures are sequential create + start calls.

#[path = "../tests/support/definitions.rs"]
mod definitions;
#[path = "../tests/support/docker.rs"]
mod docker_support;

use deckhand::docker::DockerClient;
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::{ContainerRuntime, CreateContainer, Timeouts};
use deckhand::task::{PullBehavior, TaskDefinition};
use definitions::{container, task, with_command};
use docker_support::{ensure_busybox_image, unique_id, TEST_IMAGE};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 7;
const SERVE: &[&str] = &["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];
const DEADLINE: Duration = Duration::from_secs(60);

fn definition(containers: usize) -> TaskDefinition {
    task(
        "bench",
        (0..containers)
            .map(|index| with_command(container(&format!("c{index}"), TEST_IMAGE), SERVE))
            .collect(),
    )
}

/// Waits for the task's RUNNING (or STOPPED) event; returns when it came.
fn wait_task_status(engine: &TaskEngine, task_id: &str, status: &str) -> Result<Instant, String> {
    let deadline = Instant::now() + DEADLINE;
    let mut after = 0;
    while Instant::now() < deadline {
        for event in engine.events_since(after, deadline.saturating_duration_since(Instant::now()))
        {
            after = event.seq;
            if event.task == task_id && event.container.is_none() && event.status == status {
                return Ok(Instant::now());
            }
        }
    }
    Err(format!(
        "task {task_id} did not reach {status} within {DEADLINE:?}"
    ))
}

fn engine_run(engine: &TaskEngine, containers: usize) -> Result<Duration, String> {
    let started = Instant::now();
    let task_id = engine
        .submit(definition(containers))
        .map_err(|error| error.to_string())?
        .id;
    let running = wait_task_status(engine, &task_id, "RUNNING")?;
    engine.stop(&task_id).map_err(|error| error.to_string())?;
    wait_task_status(engine, &task_id, "STOPPED")?;
    Ok(running - started)
}

fn direct_run(client: &DockerClient, cluster: &str, containers: usize) -> Result<Duration, String> {
    let started = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..containers {
        let spec = CreateContainer {
            name: format!("deckhand-bench-direct-{}", unique_id()),
            image: TEST_IMAGE.to_string(),
            labels: BTreeMap::from([(
                "com.amazonaws.ecs.cluster".to_string(),
                cluster.to_string(),
            )]),
            cmd: Some(SERVE.iter().map(|part| part.to_string()).collect()),
            ..CreateContainer::default()
        };
        let id = client.create_container(&spec).map_err(|e| e.to_string())?;
        client.start_container(&id).map_err(|e| e.to_string())?;
        ids.push(id);
    }
    let took = started.elapsed();
    for id in ids {
        let _ = client.remove_container(&id, true);
    }
    Ok(took)
}

fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    let millis = |duration: Duration| duration.as_secs_f64() * 1000.0;
    format!(
        "median {:7.1} ms   min {:7.1} ms   max {:7.1} ms   ({} runs)",
        millis(samples[samples.len() / 2]),
        millis(samples[0]),
        millis(samples[samples.len() - 1]),
        samples.len()
    )
}

fn remove_cluster(client: &DockerClient, cluster: &str) {
    if let Ok(containers) =
        client.list_containers(&[format!("com.amazonaws.ecs.cluster={cluster}")])
    {
        for container in containers {
            let _ = client.remove_container(&container.id, true);
        }
    }
}

fn main() {
    let client = match DockerClient::from_env(Timeouts::default()) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("start_latency: Docker is unreachable ({error}); nothing measured");
            std::process::exit(1);
        }
    };
    ensure_busybox_image(&client);
    let cluster = format!("deckhand-bench-{}", unique_id());
    let engine = TaskEngine::start(
        Arc::new(client.clone()),
        EngineConfig {
            cluster: cluster.clone(),
            pull_behavior: PullBehavior::PreferCached,
            // Removal is not part of the figure; keep containers until the end.
            cleanup_wait: Duration::from_secs(3600),
            ..EngineConfig::default()
        },
    )
    .expect("the engine starts");

    println!("start latency on the real Docker Engine ({RUNS} runs each, after one warm-up)");
    let mut failed = false;
    for containers in [1usize, 5] {
        let mut through_engine = Vec::new();
        let mut direct = Vec::new();
        for run in 0..=RUNS {
            // Alternate which goes first, so neither always runs while Docker is still
            // tearing down the other's containers.
            let (engine_sample, direct_sample) = if run % 2 == 0 {
                let engine_sample = engine_run(&engine, containers);
                (engine_sample, direct_run(&client, &cluster, containers))
            } else {
                let direct_sample = direct_run(&client, &cluster, containers);
                (engine_run(&engine, containers), direct_sample)
            };
            match (engine_sample, direct_sample) {
                (Ok(engine_took), Ok(direct_took)) if run > 0 => {
                    through_engine.push(engine_took);
                    direct.push(direct_took);
                }
                (Ok(_), Ok(_)) => {}
                (Err(error), _) | (_, Err(error)) => {
                    eprintln!("run failed: {error}");
                    failed = true;
                }
            }
        }
        if !through_engine.is_empty() {
            println!(
                "{containers}-container task, submit → task RUNNING:       {}",
                summary(&mut through_engine)
            );
            println!(
                "{containers} × direct create + start (sequential):     {}",
                summary(&mut direct)
            );
        }
    }
    engine.shutdown();
    remove_cluster(&client, &cluster);
    if failed {
        std::process::exit(1);
    }
}
