//! deckhand's benchmarks: one command that measures start latency (P1), reaction time (P2),
//! footprint (P3), scale (P4), idle CPU (P5), restore (P6), scale on Docker (P7) and the syncs
//! and bytes of one task's life on this machine, prints a table and writes `docs/PERFORMANCE.md`. Run with
//! `bench/run.sh` (installs what it needs first) or `cargo bench --bench agent`;
//! `BENCH_QUICK=1` runs few samples and writes `target/PERFORMANCE-quick.md` instead, as a
//! smoke check; `BENCH_ONLY=p2,p3` measures only those groups (p1, p2, p3 with p5, p4 with p6,
//! p7, syncs) and writes `target/PERFORMANCE-partial.md`. P1 and P2 include an agent on slow
//! storage (every sync delayed by `DECKHAND_BENCH_SYNC_DELAY_MS`, default 20, through an
//! LD_PRELOAD shim built with `cc`: `slow_storage.rs`).
//!
//! Figures, not tests: nothing here passes or fails on a target; a run fails only when a
//! measurement could not be made (Docker unreachable, a task that never reached RUNNING).
//! Every container made carries `deckhand-bench=<run id>` and is removed before the end, also
//! after a failure.

#[path = "../../tests/support/definitions.rs"]
mod definitions;
#[path = "../../tests/support/docker.rs"]
mod docker_support;
#[path = "../../tests/support/fake_runtime.rs"]
mod fake_runtime;

mod agent_process;
mod docker_scale;
mod footprint;
mod latency;
mod report;
mod scale;
mod slow_storage;
mod stats;
mod syncs;
mod workload;

use agent_process::AgentProcess;
use deckhand::docker::DockerClient;
use deckhand::runtime::{ContainerRuntime as _, Timeouts};
use docker_support::{ensure_busybox_image, unique_id, TempDir, TEST_IMAGE};
use latency::{measure_reaction, ReactionAgent, StartLatencyBench};
use report::{Figures, Settings};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use workload::{remove_labelled, Shape, BENCH_LABEL};

fn settings() -> Settings {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|value| value == "1");
    let only = std::env::var("BENCH_ONLY").ok().map(|groups| {
        groups
            .split(',')
            .map(|group| group.trim().to_ascii_lowercase())
            .collect()
    });
    if quick {
        Settings {
            only,
            quick,
            start_rounds: 3,
            reaction_runs: 10,
            idle_window: Duration::from_secs(10),
            scale_tasks: 200,
            checkpoint_changes: 50,
            docker_scale_tasks: 40,
        }
    } else {
        Settings {
            only,
            quick,
            start_rounds: 10,
            reaction_runs: 60,
            idle_window: Duration::from_secs(60),
            scale_tasks: 1000,
            checkpoint_changes: 300,
            docker_scale_tasks: 200,
        }
    }
}

/// `--phase scale <tasks> <directory>` / `--phase state <directory> <changes>` /
/// `--phase syncs <directory> <lives>`: a measurement in a process of its own (see `scale.rs`,
/// `syncs.rs`).
fn child_phase(args: &[String]) -> ExitCode {
    let result = match args {
        [phase, tasks, directory] if phase == "scale" => tasks
            .parse()
            .map_err(|error| format!("tasks {tasks:?}: {error}"))
            .and_then(|tasks| scale::scale_phase(tasks, std::path::Path::new(directory))),
        [phase, directory, changes] if phase == "state" => changes
            .parse()
            .map_err(|error| format!("changes {changes:?}: {error}"))
            .and_then(|changes| scale::state_phase(std::path::Path::new(directory), changes)),
        [phase, directory, lives] if phase == "syncs" => lives
            .parse()
            .map_err(|error| format!("lives {lives:?}: {error}"))
            .and_then(|lives| syncs::syncs_phase(std::path::Path::new(directory), lives)),
        _ => Err(format!("unknown phase arguments {args:?}")),
    };
    match result {
        Ok(value) => {
            println!("RESULT {value}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

fn compose_version() -> Option<String> {
    let output = std::process::Command::new("docker-compose")
        .arg("version")
        .arg("--short")
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn measure(
    client: &DockerClient,
    settings: &Settings,
    run_id: &str,
    scratch: &TempDir,
    figures: &mut Figures,
) -> Result<(), String> {
    if settings.wants("p1") || settings.wants("p2") {
        latency_phases(client, settings, run_id, scratch, figures)?;
    }
    if settings.wants("p3") {
        footprint_phase(client, settings, run_id, scratch, figures)?;
    }
    if settings.wants("p4") {
        scale_phases(settings, scratch, figures)?;
    }
    if settings.wants("p7") {
        docker_scale_phase(client, settings, run_id, scratch, figures)?;
    }
    if settings.wants("syncs") {
        eprintln!("Syncs and bytes per task life: the durable engine on the fake runtime");
        figures.syncs = Some(scale::run_phase_in_child(
            "syncs",
            &[
                &scratch.path.join("syncs-state").to_string_lossy(),
                &syncs::LIVES.to_string(),
            ],
        )?);
    }
    Ok(())
}

fn latency_phases(
    client: &DockerClient,
    settings: &Settings,
    run_id: &str,
    scratch: &TempDir,
    figures: &mut Figures,
) -> Result<(), String> {
    let image = TEST_IMAGE;
    let compose = figures.compose_version.is_some();
    eprintln!(
        "P1 start latency, P2 reaction time: one agent, {} rounds",
        settings.start_rounds
    );
    let mut agent = AgentProcess::start(
        &scratch.path.join("agent-latency"),
        &format!("deckhand-bench-{run_id}"),
        &[],
    )?;
    // Removed when dropped, like the other scratch directories.
    let tmpfs_directory = TempDir {
        path: std::path::Path::new("/dev/shm").join(format!("deckhand-bench-{run_id}")),
    };
    let mut agent_on_tmpfs = AgentProcess::start(
        &tmpfs_directory.path,
        &format!("deckhand-bench-tmpfs-{run_id}"),
        &[],
    )?;
    let (mut agent_on_slow_storage, slow_sync_counter) = slow_storage::start_agent(
        &scratch.path.join("agent-slow-storage"),
        &format!("deckhand-bench-slow-{run_id}"),
        figures.sync_delay_ms,
    )?;
    let shapes = [
        Shape {
            containers: 1,
            chain: false,
        },
        Shape {
            containers: 5,
            chain: false,
        },
        Shape {
            containers: 5,
            chain: true,
        },
        Shape {
            containers: 20,
            chain: false,
        },
    ];
    for shape in shapes.into_iter().filter(|_| settings.wants("p1")) {
        eprintln!("  P1 {}", shape.label());
        let samples = StartLatencyBench {
            client,
            agent: &mut agent,
            agent_on_tmpfs: &mut agent_on_tmpfs,
            agent_on_slow_storage: &mut agent_on_slow_storage,
            slow_sync_counter: &slow_sync_counter,
            image,
            run_id,
            scratch: &scratch.path,
            compose_available: compose,
        }
        .measure(shape, settings.start_rounds)?;
        figures.start.push((shape, samples));
    }
    if settings.wants("p2") {
        eprintln!(
            "  P2 reaction, {} crashes on the disk and {} on slow storage (each sync +{} ms), taking turns",
            settings.reaction_runs, settings.reaction_runs, figures.sync_delay_ms
        );
        let mut reactions = measure_reaction(
            client,
            &mut [
                ReactionAgent {
                    agent: &mut agent,
                    sync_counter: None,
                },
                ReactionAgent {
                    agent: &mut agent_on_slow_storage,
                    sync_counter: Some(&slow_sync_counter),
                },
                ReactionAgent {
                    agent: &mut agent_on_tmpfs,
                    sync_counter: None,
                },
            ],
            image,
            run_id,
            settings.reaction_runs,
        )?
        .into_iter();
        figures.reaction = reactions.next();
        figures.reaction_slow = reactions.next();
        figures.reaction_tmpfs = reactions.next();
    }
    agent.terminate(Duration::from_secs(10))?;
    agent_on_tmpfs.terminate(Duration::from_secs(10))?;
    // Its shutdown folds the state log into the files: syncs, each delayed.
    agent_on_slow_storage.terminate(Duration::from_secs(30))?;
    Ok(())
}

fn footprint_phase(
    client: &DockerClient,
    settings: &Settings,
    run_id: &str,
    scratch: &TempDir,
    figures: &mut Figures,
) -> Result<(), String> {
    eprintln!("P3 footprint, P5 idle CPU: a fresh agent, 10 then 100 tasks");
    let mut agent = AgentProcess::start(
        &scratch.path.join("agent-footprint"),
        &format!("deckhand-bench-idle-{run_id}"),
        &[],
    )?;
    figures.footprint = Some(footprint::measure_footprint(
        &mut agent,
        TEST_IMAGE,
        run_id,
        settings.idle_window,
    )?);
    remove_labelled(client, &format!("{BENCH_LABEL}={run_id}"))?;
    eprintln!("P3 again with glibc's default malloc settings (DECKHAND_MALLOC_TUNING=off)");
    let mut agent = AgentProcess::start(
        &scratch.path.join("agent-footprint-tunables"),
        &format!("deckhand-bench-tunables-{run_id}"),
        &[("DECKHAND_MALLOC_TUNING", "off")],
    )?;
    figures.footprint_tunables = Some(footprint::measure_footprint(
        &mut agent,
        TEST_IMAGE,
        run_id,
        Duration::ZERO,
    )?);
    remove_labelled(client, &format!("{BENCH_LABEL}={run_id}"))?;
    Ok(())
}

/// glibc malloc settings that trade its per-thread caches for memory: one arena, no tcache.
/// The malloc settings `deckhand run` gives itself (src/main.rs): the in-process phases (P4 on
/// the fake runtime) run with them too, so that they measure what the agent would hold.
pub const ALLOCATOR_TUNABLES: &str = "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1";

fn scale_phases(
    settings: &Settings,
    scratch: &TempDir,
    figures: &mut Figures,
) -> Result<(), String> {
    eprintln!(
        "P4 scale: {} tasks × 3 containers on the fake runtime",
        settings.scale_tasks
    );
    figures.scale = Some(scale::run_phase_in_child(
        "scale",
        &[
            &settings.scale_tasks.to_string(),
            &scratch.path.join("scale-state").to_string_lossy(),
        ],
    )?);
    eprintln!("P4 checkpoint cost, loading a 1,000-task store");
    let state_directory = scratch.path.join("state");
    figures.state = Some(scale::run_phase_in_child(
        "state",
        &[
            &state_directory.to_string_lossy(),
            &settings.checkpoint_changes.to_string(),
        ],
    )?);
    Ok(())
}

fn docker_scale_phase(
    client: &DockerClient,
    settings: &Settings,
    run_id: &str,
    scratch: &TempDir,
    figures: &mut Figures,
) -> Result<(), String> {
    let concurrency = 8;
    eprintln!(
        "P7 scale on Docker: {} one-container tasks submitted at once, then the same directly, {concurrency} calls at a time",
        settings.docker_scale_tasks
    );
    let mut agent = AgentProcess::start(
        &scratch.path.join("agent-docker-scale"),
        &format!("deckhand-bench-scale-{run_id}"),
        &[],
    )?;
    let measured = docker_scale::measure_docker_scale(
        client,
        &mut agent,
        TEST_IMAGE,
        run_id,
        settings.docker_scale_tasks,
        concurrency,
    );
    agent.terminate(Duration::from_secs(30))?;
    remove_labelled(client, &format!("{BENCH_LABEL}={run_id}"))?;
    figures.docker_scale = Some(measured?);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|arg| arg == "--phase") {
        return child_phase(&args[1..]);
    }
    // `cargo bench` passes `--bench`; nothing else is expected.
    let started = Instant::now();
    let settings = settings();
    let client = match DockerClient::from_env(Timeouts::default()) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("bench: Docker is unreachable ({error}); nothing measured");
            return ExitCode::FAILURE;
        }
    };
    ensure_busybox_image(&client);
    // Leftovers of an interrupted earlier run carry the same label key.
    if let Err(error) = remove_labelled(&client, BENCH_LABEL) {
        eprintln!("bench: {error}");
        return ExitCode::FAILURE;
    }
    let run_id = unique_id();
    let scratch = TempDir::new("deckhand-bench");
    let mut figures = Figures::collect_machine(&client, compose_version());
    figures.sync_delay_ms = match slow_storage::sync_delay_ms() {
        Ok(delay) => delay,
        Err(error) => {
            eprintln!("bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = measure(&client, &settings, &run_id, &scratch, &mut figures);
    let cleanup = remove_labelled(&client, BENCH_LABEL);
    figures.elapsed = started.elapsed();
    figures.machine.push((
        "load average at the end".to_string(),
        report::load_average(),
    ));
    if let Err(error) = outcome {
        eprintln!("bench: a measurement failed: {error}");
        return ExitCode::FAILURE;
    }
    let left = match cleanup.and_then(|_| {
        client
            .list_containers(&[BENCH_LABEL.to_string()])
            .map_err(|error| error.to_string())
    }) {
        Ok(left) => left.len(),
        Err(error) => {
            eprintln!("bench: cleanup failed: {error}");
            return ExitCode::FAILURE;
        }
    };
    if left > 0 {
        eprintln!("bench: {left} bench containers are still there after cleanup");
        return ExitCode::FAILURE;
    }
    let markdown = report::markdown(&figures, &settings);
    println!("{}", report::table(&figures));
    let destination = report::destination(&settings);
    // `target/` under the sources is missing when CARGO_TARGET_DIR puts the build elsewhere.
    let written = destination
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&destination, markdown));
    match written {
        Ok(()) => {
            println!(
                "written: {} (the whole run took {:.0} s)",
                destination.display(),
                figures.elapsed.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("bench: cannot write {}: {error}", destination.display());
            ExitCode::FAILURE
        }
    }
}
