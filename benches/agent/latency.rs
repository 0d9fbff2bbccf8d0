//! P1 start latency and P2 reaction time, on the real Docker Engine through a real agent.
//!
//! P1 times three ways of getting the same containers running, alternating which goes first in
//! each round so none always runs while Docker still tears down another's containers:
//! - deckhand: `POST /v1/tasks` on the agent's API → the task's RUNNING event arrives in a long
//!   poll (the agent inspects each container after starting it, so RUNNING is confirmed);
//! - the limit: the same create + start calls made directly on Docker's API by a minimal
//!   client, in the best order: independent containers each created and started on a thread of
//!   their own (and, as a second figure, one after another: on two cores the concurrent order is
//!   not always faster); for a dependency chain the limit is what ECS's `dependsOn` (START)
//!   allows — each link created and started after the one before it started — and the physical
//!   best (every link created at once, started in order) is measured beside it for reference;
//! - compose: `docker-compose up -d` of the equivalent compose file, the whole command.
//!
//! deckhand is measured three times: its state on this disk, on tmpfs (syncs cost nothing), and
//! on "slow storage" (this disk with every sync delayed by the LD_PRELOAD shim of
//! `slow_storage.rs`, as on an SD card); for the last, the shim's count of syncs is read around
//! each start and each exit.
//!
//! P2 kills a task's only container (SIGKILL from outside, as a crash) and times Docker's own
//! `die` event (its `timeNano`) → the task's STOPPED event arriving at the bench.

use crate::agent_process::AgentProcess;
use crate::slow_storage::SyncCounter;
use crate::stats::{median, percentile};
use crate::workload::{
    compose_file, direct_create, remove_labelled, task_definition_json, Shape, BENCH_LABEL,
};
use crossbeam_channel::{unbounded, Receiver};
use deckhand::docker::DockerClient;
use deckhand::runtime::{ContainerRuntime, EventFilter, RuntimeEvent, StreamCanceller};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TASK_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Default)]
pub struct StartSamples {
    pub deckhand: Vec<Duration>,
    /// deckhand with its state directory on tmpfs (no fsync cost).
    pub deckhand_on_tmpfs: Vec<Duration>,
    /// deckhand with every sync delayed (slow storage).
    pub deckhand_slow: Vec<Duration>,
    /// The syncs the slow-storage agent made from submit to the RUNNING event's arrival,
    /// counted by the shim.
    pub slow_start_syncs: Vec<u64>,
    pub direct_concurrent: Vec<Duration>,
    pub direct_sequential: Vec<Duration>,
    pub compose: Vec<Duration>,
    /// A dependency chain: the limit is the sequential order only.
    pub chain: bool,
}

impl StartSamples {
    /// The limit: the faster direct order (by median); for a dependency chain the order ECS
    /// allows, each link created and started after the one before it.
    pub fn limit(&self) -> Option<Duration> {
        if self.chain {
            return median(&self.direct_sequential);
        }
        match (
            median(&self.direct_concurrent),
            median(&self.direct_sequential),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

pub struct StartLatencyBench<'a> {
    pub client: &'a DockerClient,
    pub agent: &'a mut AgentProcess,
    /// The same agent with its state directory on tmpfs, where fsync costs nothing: the
    /// difference is what durability costs on this disk.
    pub agent_on_tmpfs: &'a mut AgentProcess,
    /// The same agent on this disk with every sync delayed, and the shim's count of them.
    pub agent_on_slow_storage: &'a mut AgentProcess,
    pub slow_sync_counter: &'a SyncCounter,
    pub image: &'a str,
    pub run_id: &'a str,
    pub scratch: &'a Path,
    pub compose_available: bool,
}

/// Where the measured agent keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateStorage {
    Disk,
    Tmpfs,
    SlowStorage,
}

impl StartLatencyBench<'_> {
    fn clean(&self) -> Result<(), String> {
        remove_labelled(self.client, &format!("{BENCH_LABEL}={}", self.run_id)).map(|_| ())
    }

    /// One task through the agent on `storage`: submit → RUNNING, and on slow storage the syncs
    /// the shim counted meanwhile.
    fn deckhand_once(
        &mut self,
        shape: Shape,
        sample: usize,
        storage: StateStorage,
    ) -> Result<(Duration, Option<u64>), String> {
        let counter = (storage == StateStorage::SlowStorage).then_some(self.slow_sync_counter);
        let agent: &mut AgentProcess = match storage {
            StateStorage::Disk => self.agent,
            StateStorage::Tmpfs => self.agent_on_tmpfs,
            StateStorage::SlowStorage => self.agent_on_slow_storage,
        };
        let definition = task_definition_json(
            &format!("bench-{}-{sample}", shape.containers),
            self.image,
            shape,
            self.run_id,
        );
        let syncs_before = counter.map(SyncCounter::read).transpose()?;
        let started = Instant::now();
        let (task_id, _) = agent.submit(&definition)?;
        let running = agent.wait_task_status(&task_id, "RUNNING", TASK_DEADLINE)?;
        let took = running.instant - started;
        let start_syncs = match (counter, syncs_before) {
            (Some(counter), Some(before)) => Some(counter.read()?.saturating_sub(before)),
            _ => None,
        };
        agent.stop(&task_id)?;
        agent.wait_task_status(&task_id, "STOPPED", TASK_DEADLINE)?;
        agent.forget(&task_id);
        self.clean()?;
        Ok((took, start_syncs))
    }

    fn direct_once(
        &self,
        shape: Shape,
        sample: usize,
        concurrent: bool,
    ) -> Result<Duration, String> {
        let names: Vec<String> = (0..shape.containers)
            .map(|index| format!("deckhand-bench-{}-{sample}-{index}", self.run_id))
            .collect();
        let started = Instant::now();
        let result = if shape.chain && concurrent {
            self.direct_chain(&names)
        } else if concurrent {
            std::thread::scope(|scope| {
                let threads: Vec<_> = names
                    .iter()
                    .map(|name| {
                        scope.spawn(move || -> Result<(), String> {
                            let id = self
                                .client
                                .create_container(&direct_create(
                                    self.image,
                                    name.clone(),
                                    self.run_id,
                                ))
                                .map_err(|error| format!("create {name}: {error}"))?;
                            self.client
                                .start_container(&id)
                                .map_err(|error| format!("start {name}: {error}"))
                        })
                    })
                    .collect();
                threads
                    .into_iter()
                    .map(|thread| {
                        thread
                            .join()
                            .unwrap_or_else(|_| Err("a thread panicked".into()))
                    })
                    .collect::<Result<Vec<()>, String>>()
            })
            .map(|_| ())
        } else {
            names.iter().try_for_each(|name| {
                let id = self
                    .client
                    .create_container(&direct_create(self.image, name.clone(), self.run_id))
                    .map_err(|error| format!("create {name}: {error}"))?;
                self.client
                    .start_container(&id)
                    .map_err(|error| format!("start {name}: {error}"))
            })
        };
        let took = started.elapsed();
        self.clean()?;
        result.map(|()| took)
    }

    /// Creates every container at once; starts them in chain order, each as soon as it exists.
    fn direct_chain(&self, names: &[String]) -> Result<(), String> {
        std::thread::scope(|scope| {
            let creations: Vec<_> = names
                .iter()
                .map(|name| {
                    scope.spawn(move || {
                        self.client
                            .create_container(&direct_create(self.image, name.clone(), self.run_id))
                            .map_err(|error| format!("create {name}: {error}"))
                    })
                })
                .collect();
            for (creation, name) in creations.into_iter().zip(names) {
                let id = creation
                    .join()
                    .unwrap_or_else(|_| Err("a thread panicked".into()))?;
                self.client
                    .start_container(&id)
                    .map_err(|error| format!("start {name}: {error}"))?;
            }
            Ok(())
        })
    }

    fn compose_once(&self, shape: Shape, sample: usize) -> Result<Duration, String> {
        let file = self
            .scratch
            .join(format!("compose-{}-{sample}.yml", shape.containers));
        std::fs::write(&file, compose_file(self.image, shape, self.run_id))
            .map_err(|error| format!("cannot write {}: {error}", file.display()))?;
        let project = format!("dhbench{}x{sample}", shape.containers);
        let started = Instant::now();
        let output = Command::new("docker-compose")
            .arg("-f")
            .arg(&file)
            .args(["-p", &project, "up", "-d"])
            .output()
            .map_err(|error| format!("cannot run docker-compose: {error}"))?;
        let took = started.elapsed();
        self.clean()?;
        if !output.status.success() {
            return Err(format!(
                "docker-compose up -d failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(took)
    }

    /// `rounds` measured rounds after one warm-up round.
    pub fn measure(&mut self, shape: Shape, rounds: usize) -> Result<StartSamples, String> {
        let mut samples = StartSamples {
            chain: shape.chain,
            ..StartSamples::default()
        };
        for round in 0..=rounds {
            let mut order: Vec<u8> = vec![0, 1, 2, 3, 4, 5];
            order.rotate_left(round % 6);
            for method in order {
                let sample = round * 6 + method as usize;
                let (target, took) = match method {
                    0 => (
                        &mut samples.deckhand,
                        self.deckhand_once(shape, sample, StateStorage::Disk)?.0,
                    ),
                    4 => (
                        &mut samples.deckhand_on_tmpfs,
                        self.deckhand_once(shape, sample, StateStorage::Tmpfs)?.0,
                    ),
                    5 => {
                        let (took, syncs) =
                            self.deckhand_once(shape, sample, StateStorage::SlowStorage)?;
                        if round > 0 {
                            samples.slow_start_syncs.extend(syncs);
                        }
                        (&mut samples.deckhand_slow, took)
                    }
                    1 => (
                        &mut samples.direct_concurrent,
                        self.direct_once(shape, sample, true)?,
                    ),
                    2 if shape.chain || shape.containers > 1 => (
                        &mut samples.direct_sequential,
                        self.direct_once(shape, sample, false)?,
                    ),
                    3 if self.compose_available => {
                        (&mut samples.compose, self.compose_once(shape, sample)?)
                    }
                    _ => continue,
                };
                if round > 0 {
                    target.push(took);
                }
            }
        }
        Ok(samples)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ReactionSamples {
    /// Docker's `die` → the STOPPED event arriving at the bench.
    pub to_arrival: Vec<Duration>,
    /// Docker's `die` → the time the agent recorded on the STOPPED event (millisecond steps).
    pub to_recorded: Vec<Duration>,
    /// Docker's `die` → the same event arriving at the bench's own subscription: Docker's part.
    pub die_delivery: Vec<Duration>,
    /// The `die` event arriving at the bench → the STOPPED event arriving at the bench (both
    /// subscribers hear Docker at about the same moment): deckhand's own part.
    pub deckhand_part: Vec<Duration>,
    /// On slow storage: the syncs the shim counted from the kill to the STOPPED event's arrival.
    pub exit_syncs: Vec<u64>,
}

/// Docker's `die` events for the bench's containers, read on a thread of their own.
struct DieEvents {
    /// Each event with the wall-clock time it arrived.
    events: Receiver<(RuntimeEvent, SystemTime)>,
    canceller: StreamCanceller,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DieEvents {
    fn subscribe(client: &DockerClient, run_id: &str) -> Result<DieEvents, String> {
        let mut stream = client
            .events(&EventFilter {
                labels: vec![format!("{BENCH_LABEL}={run_id}")],
                actions: vec!["die".to_string()],
                since: None,
            })
            .map_err(|error| format!("cannot subscribe to Docker events: {error}"))?;
        let canceller = stream.canceller();
        let (sender, events) = unbounded();
        let thread = std::thread::spawn(move || {
            while let Ok(Some(event)) = stream.next_event() {
                if sender.send((event, SystemTime::now())).is_err() {
                    return;
                }
            }
        });
        Ok(DieEvents {
            events,
            canceller,
            thread: Some(thread),
        })
    }

    fn wait_for(
        &self,
        container_id: &str,
        timeout: Duration,
    ) -> Result<(RuntimeEvent, SystemTime), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let (event, arrived) = self
                .events
                .recv_deadline(deadline)
                .map_err(|_| format!("no die event for {container_id} within {timeout:?}"))?;
            if event.id == container_id {
                return Ok((event, arrived));
            }
        }
    }
}

impl Drop for DieEvents {
    fn drop(&mut self) {
        self.canceller.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn since_epoch(time: SystemTime) -> Duration {
    time.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// An agent P2 crashes tasks on; with `sync_counter` (the slow-storage agent), also the syncs
/// the shim counted on each exit path.
pub struct ReactionAgent<'a> {
    pub agent: &'a mut AgentProcess,
    pub sync_counter: Option<&'a SyncCounter>,
}

/// P2: `runs` crashes of a one-container task on each agent, the agents taking turns crash by
/// crash, so that each series sees the same load on the disk and on Docker (run one after the
/// other, a busy minute on the shared disk lands in one series only). One `ReactionSamples`
/// per agent, in their order.
pub fn measure_reaction(
    client: &DockerClient,
    agents: &mut [ReactionAgent<'_>],
    image: &str,
    run_id: &str,
    runs: usize,
) -> Result<Vec<ReactionSamples>, String> {
    let die_events = DieEvents::subscribe(client, run_id)?;
    let mut samples = vec![ReactionSamples::default(); agents.len()];
    for run in 0..runs {
        for (index, (agent, samples)) in agents.iter_mut().zip(&mut samples).enumerate() {
            crash_once(
                client,
                &die_events,
                agent,
                image,
                run_id,
                &format!("bench-crash-{run}-{index}"),
                samples,
            )?;
        }
    }
    Ok(samples)
}

/// Starts a one-container task, kills its container and records the times into `samples`.
fn crash_once(
    client: &DockerClient,
    die_events: &DieEvents,
    reaction_agent: &mut ReactionAgent<'_>,
    image: &str,
    run_id: &str,
    family: &str,
    samples: &mut ReactionSamples,
) -> Result<(), String> {
    let sync_counter = reaction_agent.sync_counter;
    let agent = &mut *reaction_agent.agent;
    let shape = Shape {
        containers: 1,
        chain: false,
    };
    let definition = task_definition_json(family, image, shape, run_id);
    let (task_id, task_arn) = agent.submit(&definition)?;
    agent.wait_task_status(&task_id, "RUNNING", TASK_DEADLINE)?;
    let containers = client
        .list_containers(&[format!("com.amazonaws.ecs.task-arn={task_arn}")])
        .map_err(|error| format!("listing the task's containers: {error}"))?;
    let container = containers
        .first()
        .ok_or_else(|| format!("task {task_id} is RUNNING but has no container"))?;
    // Docker's kill call returns only once Docker has handled the exit, tens of
    // milliseconds after its `die` event: kill from another thread so that the event long
    // poll is already waiting when the agent records STOPPED.
    let syncs_before = sync_counter.map(SyncCounter::read).transpose()?;
    let killer = {
        let client = client.clone();
        let container = container.clone();
        std::thread::spawn(move || {
            client
                .kill_container(&container.id, "KILL")
                .map_err(|error| format!("kill {}: {error}", container.name))
        })
    };
    let stopped = agent.wait_task_status(&task_id, "STOPPED", TASK_DEADLINE);
    // Read at once: syncs after the STOPPED event are not on the exit path.
    let syncs_after = sync_counter.map(SyncCounter::read).transpose();
    killer
        .join()
        .unwrap_or_else(|_| Err("the kill thread panicked".to_string()))?;
    let stopped = stopped?;
    if let (Some(after), Some(before)) = (syncs_after?, syncs_before) {
        samples.exit_syncs.push(after.saturating_sub(before));
    }
    let (die, die_arrived) = die_events.wait_for(&container.id, TASK_DEADLINE)?;
    let die_at = Duration::from_nanos(u64::try_from(die.time_nano).unwrap_or(0));
    samples
        .to_arrival
        .push(since_epoch(stopped.wall).saturating_sub(die_at));
    samples
        .die_delivery
        .push(since_epoch(die_arrived).saturating_sub(die_at));
    samples
        .deckhand_part
        .push(stopped.wall.duration_since(die_arrived).unwrap_or_default());
    samples
        .to_recorded
        .push(Duration::from_millis(stopped.event_millis).saturating_sub(die_at));
    agent.forget(&task_id);
    remove_labelled(client, &format!("com.amazonaws.ecs.task-arn={task_arn}"))?;
    Ok(())
}

/// p50 and p99 of `samples`.
pub fn p50_p99(samples: &[Duration]) -> (Option<Duration>, Option<Duration>) {
    (percentile(samples, 50.0), percentile(samples, 99.0))
}
