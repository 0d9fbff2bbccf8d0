//! A seeded, single-threaded simulator of the engine (tests only): several managed tasks, the
//! real sequential wait group, a simulated Docker, a virtual clock, and crashes at any step.
//!
//! # The model
//!
//! A seed decides everything: 1–4 tasks (random containers, dependencies, health checks,
//! restart policies, pull behaviour), a schedule of commands and a schedule of faults. The
//! simulator plays the engine's part as `task_engine.rs` does, around the real
//! [`ManagedTask`] state machines:
//!
//! - **Commands.** A submit takes the next sequence number as the task's start number and is
//!   checkpointed before it is acknowledged. A stop takes the next number, is registered in the
//!   real [`SequentialWaitGroup`] on the accepting side (only the first stop of a task), and is
//!   acknowledged once the task handled it without a crash. A replacement stops task A and, once
//!   A's stop is acknowledged, submits B (as `tasks.d` does for a changed file). A stop that a
//!   crash swallowed is sent again, as a client retries.
//! - **Docker** (`docker.rs`): containers, names and images behind the real `ContainerRuntime`
//!   trait; the real worker code (`workers::run_docker_call`: pull decisions, create-or-adopt on
//!   a name conflict, stop retries and the ping) runs against it. A call first acts (Docker
//!   changes state and sends its events), its answer reaches the task on a later step, so events
//!   overtake answers. Calls fail with 500s, time out (having acted or not), and Docker goes
//!   unreachable for a few seconds. Containers exit by themselves (codes 0, 1, 137 with an
//!   `oom`), health flips, and now and then a user removes a container by hand.
//! - **Events** are routed by Docker id as the events thread does (an id a task has not tracked
//!   yet is dropped), and delivered mostly in order, sometimes out of order, twice, or never. The
//!   stream also breaks: everything undelivered is lost, and on reconnect every task is told to
//!   re-inspect and the re-list by label adopts containers by name (`restore::relist_plan`).
//! - **Host resources.** Half the seeds give the host 1,024 MiB and each task 256–1,024 MiB at
//!   task level (and now and then host port 8080): the real [`HostResourceQueue`] queues a task
//!   at its submit, admits it when it fits and earlier ones are in, and takes back what it held
//!   at STOPPED; restore re-consumes and re-queues as `TaskEngine::restore` does.
//! - **Timers** fire in virtual time; a waiting task learns that its earlier stops finished from
//!   the wait group's own receiver.
//! - **Crashes.** Before any effect is performed, and as a step of its own, the process may
//!   die. Every `ManagedTask`, timer, undelivered event and wait-group entry is thrown away;
//!   calls not yet made by Docker happen now, never, or while the new process restores (a
//!   request the daemon had read: a create that lands after restore looked its name up is
//!   adopted on the 409 of the new create); Docker's containers and names survive. Restore
//!   then follows §11 as `TaskEngine::restore` does: each task comes back from its last
//!   `Checkpoint` effect only,
//!   through the state store's own file encoding (`state::encode_task_file` /
//!   `decode_task_file`, so the schema round-trips on every crash), its saved Docker ids are
//!   routed, each is reconciled with the real `restore::reconcile_task` (retried while Docker
//!   does not answer), unfinished stop numbers are re-added to a fresh wait group, and a new
//!   machine starts (`ManagedTask::new(task, settings, unfinished_stop)`, then `start`).
//! - **The disk and the event log** fail now and then (a seed picks a rate for each, from a
//!   random stream of its own): a `Checkpoint` effect's write fails (the machine is answered
//!   `CheckpointFailed`, the file keeps its older content), and the reporter fails to record an
//!   event (answered `ReportFailed`; the machine emits it again at a later re-check). A stop is
//!   acknowledged only by the machine's `AcknowledgeDesired` effect: a refused one (its
//!   checkpoint failed twice) is sent again, as a client retries.
//!
//! After a chaotic phase the faults stop, Docker behaves, every undelivered stop is sent
//! again, and the simulation runs until nothing moves; then every task is stopped and run to
//! its cleanup.
//!
//! # The invariants
//!
//! Checked after every step (and, for the ordering ones, at every effect):
//!
//! 1. Known and desired statuses only rise, within a machine's life and across crashes relative
//!    to the last checkpoint (a restored task is never behind its checkpoint, nor behind an
//!    event already in the event log).
//! 2. A checkpoint precedes every Docker call and every event: when a task issues a call or
//!    emits an event, its last checkpoint equals its state (apart from `sent`, which the
//!    event's receipt raises, and the never-persisted `applied`). So a create is only issued
//!    for a name on disk, and an event's status is on disk before the event.
//! 3. No container is created twice for one name, and a task's container, once it has a Docker
//!    id, never gets another.
//! 4. Never two transition calls in flight for one container; nothing pulled, created or
//!    started while the task waits for earlier stops.
//! 5. Stop-before-start across tasks: no container of task B is created while a task whose
//!    acknowledged stop is numbered ≤ B's start number still has a running container (a stop the
//!    worker gave up on while Docker still answered, §6's ping rule, is exempt and counted).
//! 6. Events per task in order without gaps: per container and per task, RUNNING before
//!    STOPPED, never the same status twice except for the redelivery after a crash of an event
//!    whose `sent` was not checkpointed yet (at-least-once); a container's event before the task
//!    event it caused; at the end every task's and container's final status is in the log.
//! 7. A wait-group number is finished only by the task that holds it; at the end none is
//!    outstanding.
//! 8. Host resources (§9a): what admitted tasks hold never exceeds the host's memory, and no
//!    task holds a port another holds; nothing is pulled, created or started for a task desired
//!    RUNNING that is not admitted; no task waits in the queue behind a later admitted one
//!    (first come, first served).
//! 9. At the end, once calm: every task reached its desired status (RUNNING unless a
//!    dependency still legitimately blocks it, or it waits for host resources), Docker agrees with every RUNNING container;
//!    after the final stop every task is known STOPPED, cleaned up and forgotten, and no
//!    container it created is left running.
//! 9. No container is created before the named Docker volumes it mounts exist (every other task
//!    mounts a task-scoped volume, every third one a shared autoprovisioned one).
//! 10. In an awsvpc task (every fourth one), no container is created before the sandbox whose
//!     network namespace it joins was; the simulated Docker refuses to start one while its sandbox
//!     is not running, as Docker does, so a start before the sandbox runs is an error the task
//!     would report.
//!
//! # What the simulator tolerates, and why
//!
//! - Docker answers a restore-time inspection with success, 404, "unreachable", a time-out, or
//!   (with [`INSPECT_ERRORS_AT_RESTORE`]) a 500 or a malformed answer, which `engine::reconcile`
//!   retries rather than taking as "vanished".
//! - A failed removal at cleanup is not retried by the engine: the containers it named stay in
//!   Docker (counted as `leftovers`, not failed).
//! - A container whose stop the worker gave up on while Docker answered its ping (§6) may still
//!   run; it is exempt from the stop-before-start check (counted as `wedged`).
//! - A checkpoint that failed is not durable: until a later write succeeds, the task's calls and
//!   events are not checked against it (invariant 2), and the process does not crash (the
//!   engine goes on without the file, and promises nothing about a crash then).
//! - An event the log failed to record comes again later, after events it would precede (a
//!   container's STOPPED after the task's): invariant 6's order is not asked of it (counted as
//!   `late_events`); that it reaches the log in the end still is.
//! - A name a user freed by removing a container deckhand never learnt the id of may be created
//!   again.
//! - A start that the daemon carries out for the crashed process only after the new process
//!   looked at the container is not simulated: the task may hold that container STOPPED until
//!   its `start` event brings §7's one re-stop, which runs in the background.
//!
//! `cargo test` runs a few thousand seeds; `DECKHAND_SIM_SEEDS=N` runs N, `DECKHAND_SIM_SEED=S`
//! replays one seed with its whole step log. A failure prints the command that replays it.

mod docker;

use crate::engine::container_spec::{assign_docker_names, assign_metadata_tokens};
use crate::engine::docker_events::{observation_for_event, DockerObservation};
use crate::engine::host_resources::{HostCapacity, HostResourceQueue};
use crate::engine::managed_task::{
    DockerCall, Effect, Input, ManagedTask, ManagedTaskSettings, TimerKind,
};
use crate::engine::restore::{reconcile_task, relist_plan};
use crate::engine::transition::{next_state, NextState, RuleConfig};
use crate::engine::wait_group::SequentialWaitGroup;
use crate::engine::workers::{run_docker_call, StopRetry, WorkerContext};
use crate::report::NewEvent;
use crate::runtime::{ContainerRuntime, RuntimeEvent};
use crate::task::metadata_endpoint::MetadataEndpoint;
use crate::task::{
    ContainerDefinition, ContainerStatus, Dependency, DependencyCondition,
    DockerVolumeConfiguration, HealthCheck, Millis, MountPoint, NetworkMode, PullBehavior, Task,
    TaskDefinition, TaskStatus, Volume, VolumeScope,
};
use crossbeam_channel::Receiver;
use docker::{SimDocker, SimState};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// xorshift64*: small, seedable, good enough to shuffle a schedule.
struct Random(u64);

impl Random {
    fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn chance_per_mille(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

const CLUSTER: &str = "sim";

/// Whether Docker answers inspections at restore with errors other than "unreachable" and
/// time-outs (a 500, a malformed answer). Only a 404 counts as "vanished", so these must leave
/// the container as it was.
const INSPECT_ERRORS_AT_RESTORE: bool = true;

/// An entity of the event log: a container (by name) or the task itself.
type Entity = Option<String>;

/// One task as the simulated engine holds it.
struct SimTask {
    id: String,
    arn: String,
    start_sequence: u64,
    /// `None` while crashed, and once cleaned up.
    machine: Option<ManagedTask>,
    /// What the last `Checkpoint` effect wrote; `None` once the file is deleted (cleaned up).
    checkpoint: Option<Task>,
    forgotten: bool,
    timers: BTreeMap<TimerKind, Millis>,
    wait_ready: Option<Receiver<()>>,
    waiting_for_stops: bool,
    /// The host-resource queue's receiver, while the task waits to be admitted.
    resources_ready: Option<Receiver<Vec<String>>>,
    /// Inputs the engine hands the task outside Docker's answers (resync, found-by-name).
    inbox: VecDeque<Input>,
    /// The engine's flag: a stop number was registered for this task (only the first is).
    stop_registered: bool,
    /// The owner wants it stopped; `stop_acked` once a stop was acknowledged.
    stop_wanted: bool,
    stop_acked: bool,
    /// A task to submit once this one's stop is acknowledged (a replacement).
    replaced_by_pending: bool,
    /// Acknowledged stops numbered below this task's start: (task index, stop number).
    follows: Vec<(usize, u64)>,
    /// Transition calls in flight per container.
    in_flight: HashMap<String, usize>,
    /// The state after the previous step (statuses only rise within a machine's life).
    last_seen: Option<Task>,
    /// The durable event log, this task's part.
    events: Vec<NewEvent>,
    /// Last logged status per entity, and whether one redelivery of it is allowed (a crash
    /// came before its `sent` was checkpointed).
    logged: HashMap<Entity, (String, bool)>,
    /// Docker id each container ever recorded.
    docker_ids: HashMap<String, String>,
    reached_running: bool,
    /// The last checkpoint write failed: the file is older than the task, so it does not count
    /// as durable (see the module doc) until a write succeeds.
    checkpoint_behind: bool,
    /// The answer of the last `AcknowledgeDesired` effect, taken by `stop`.
    acknowledgement: Option<Result<(), String>>,
    /// Entities with an event the log failed to record and has not recorded since: the task
    /// emits it again at its next re-check, so it may come after events it would precede.
    unrecorded: HashSet<Entity>,
}

/// A Docker call made by a task: Docker acts on one step, the answer arrives on a later one.
struct Pending {
    task: usize,
    call: DockerCall,
    /// Set once Docker acted: the answer to deliver (`None` inside: nothing to deliver).
    answer: Option<Option<Input>>,
    /// A call of a crashed process that Docker had already read: it acts later (while the
    /// new process restores), unanswered.
    ghost: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    steps: u64,
    inputs: u64,
    crashes: u64,
    docker_calls: u64,
    docker_failures: u64,
    creates: u64,
    tasks: u64,
    reached_running: u64,
    replacements: u64,
    restarts: u64,
    gave_up: u64,
    wedged: u64,
    adopted: u64,
    stream_breaks: u64,
    redeliveries: u64,
    leftovers: u64,
    never_removed: u64,
    checkpoint_failures: u64,
    report_failures: u64,
    refused_stops: u64,
    /// Events that came after one they would precede, because the log had failed to record it.
    late_events: u64,
    /// Times a task waited for host resources (not admitted when it first asked).
    resource_waits: u64,
}

impl Stats {
    fn add(&mut self, other: &Stats) {
        self.steps += other.steps;
        self.inputs += other.inputs;
        self.crashes += other.crashes;
        self.docker_calls += other.docker_calls;
        self.docker_failures += other.docker_failures;
        self.creates += other.creates;
        self.tasks += other.tasks;
        self.reached_running += other.reached_running;
        self.replacements += other.replacements;
        self.restarts += other.restarts;
        self.gave_up += other.gave_up;
        self.wedged += other.wedged;
        self.adopted += other.adopted;
        self.stream_breaks += other.stream_breaks;
        self.redeliveries += other.redeliveries;
        self.leftovers += other.leftovers;
        self.never_removed += other.never_removed;
        self.checkpoint_failures += other.checkpoint_failures;
        self.report_failures += other.report_failures;
        self.refused_stops += other.refused_stops;
        self.late_events += other.late_events;
        self.resource_waits += other.resource_waits;
    }
}

struct Simulation {
    seed: u64,
    random: Random,
    now: Millis,
    docker: Arc<SimDocker>,
    context: WorkerContext,
    settings: ManagedTaskSettings,
    wait_group: SequentialWaitGroup,
    /// The host's memory and ports, who holds them and who waits (a fresh one at each crash,
    /// rebuilt by restore).
    host_resources: HostResourceQueue,
    host_capacity: HostCapacity,
    /// Draws the tasks' sizes, from a stream of its own (the rest of a seed's schedule does not
    /// depend on it); `None`: this seed does not size its tasks.
    sizes: Option<Random>,
    /// Stop numbers registered since the last crash, and the task that holds each.
    registered_stops: HashMap<u64, usize>,
    tasks: Vec<SimTask>,
    /// How many tasks this seed submits in all.
    task_budget: usize,
    next_sequence: u64,
    pending: Vec<Pending>,
    /// The event subscription: undelivered events, oldest first.
    stream: Vec<RuntimeEvent>,
    stream_up: bool,
    /// Docker id → task, as the engine's index routes events.
    docker_index: HashMap<String, usize>,
    /// Containers whose stop the worker gave up on while Docker answered (§6 ping rule).
    wedged: HashSet<String>,
    /// Containers a cleanup's removal failed for (not retried: see the module doc).
    removal_failed: HashSet<String>,
    /// Names of containers a user removed by hand.
    removed_by_user: HashSet<String>,
    chaos: bool,
    crash_per_mille_effect: u64,
    crash_per_mille_step: u64,
    crash_pending: bool,
    /// The disk and the event log's own faults, drawn from a stream of their own so that the
    /// rest of a seed's schedule does not depend on them.
    faults: Random,
    checkpoint_fail_per_mille: u64,
    report_fail_per_mille: u64,
    /// Set while Docker acts on a call of a process that crashed since.
    acting_for_the_dead: bool,
    /// Containers left in Docker (not running) after every task was cleaned up: a create of a
    /// crashed process that Docker made after the new process had looked for it by name.
    leftovers: u64,
    /// Of those, containers no cleanup ever tried to remove.
    never_removed: u64,
    log: Vec<String>,
    /// Keep the whole log (a replayed seed), not only the tail.
    full_log: bool,
    stats: Stats,
}

fn random_task(random: &mut Random, index: usize, start_sequence: u64, now: Millis) -> Task {
    let count = 1 + random.below(3) as usize;
    let mut containers: Vec<ContainerDefinition> = Vec::new();
    for position in 0..count {
        let name = format!("c{position}");
        let mut container = crate::engine::test_support::container_definition(
            &name,
            &format!("sim/{name}:{}", random.below(2)),
        );
        container.essential = position == 0 || random.chance(50);
        if random.chance(30) {
            container.health_check = Some(HealthCheck {
                command: vec!["CMD-SHELL".into(), "true".into()],
                interval_secs: 1,
                timeout_secs: 1,
                retries: 1,
                start_period_secs: 0,
            });
            if random.chance(30) {
                container.start_timeout_secs = Some(1 + random.below(3));
            }
        }
        if random.chance(15) {
            container.restart_policy = Some(crate::task::RestartPolicy {
                enabled: true,
                ignored_exit_codes: vec![0],
                restart_attempt_period_secs: random.below(2),
            });
        }
        // Edges only onto earlier containers: acyclic by construction.
        for earlier in containers.iter() {
            if random.chance(30) {
                let condition = match random.below(4) {
                    0 => DependencyCondition::Start,
                    1 => DependencyCondition::Complete,
                    2 => DependencyCondition::Success,
                    _ if earlier.health_check.is_some() => DependencyCondition::Healthy,
                    _ => DependencyCondition::Start,
                };
                container.depends_on.push(Dependency {
                    container_name: earlier.name.clone(),
                    condition,
                });
            }
        }
        containers.push(container);
    }
    // Every other task mounts a task-scoped volume and every third one a shared, autoprovisioned
    // one (by index, not by a draw: the generator's stream stays as it was).
    let mut volumes = Vec::new();
    let mut mount = |volume: Volume| {
        containers[0].mount_points.push(MountPoint {
            source_volume: volume.name.clone(),
            container_path: format!("/{}", volume.name),
            read_only: false,
        });
        volumes.push(volume);
    };
    if index.is_multiple_of(2) {
        mount(Volume::new("data"));
    }
    if index.is_multiple_of(3) {
        mount(Volume {
            docker_volume_configuration: Some(DockerVolumeConfiguration {
                scope: VolumeScope::Shared,
                autoprovision: true,
                driver: "local".into(),
                driver_opts: BTreeMap::new(),
                labels: BTreeMap::new(),
            }),
            ..Volume::new("sim-shared")
        });
    }
    let definition = TaskDefinition {
        roles: Default::default(),
        family: format!("sim{index}"),
        revision: 1,
        // Every fourth task is an awsvpc one, with its sandbox (invariant 10).
        network_mode: if index % 4 == 3 {
            NetworkMode::Awsvpc
        } else {
            NetworkMode::Bridge
        },
        cpu: None,
        memory_mib: None,
        volumes,
        containers,
        pid_mode: None,
        ipc_mode: None,
    };
    let mut task = Task::new(
        format!("{:032x}", index + 1),
        CLUSTER,
        definition,
        start_sequence,
        now,
    );
    let mut counter = 0;
    assign_docker_names(&mut task, || {
        counter += 1;
        format!("{index:04x}{counter:04x}")
    });
    // Tokens ride through every checkpoint and restore like the names (§14).
    assign_metadata_tokens(&mut task, || {
        counter += 1;
        format!("{index:016x}{counter:016x}")
    });
    task
}

/// The task as compared against its checkpoint: `applied` is never persisted and `sent` is
/// raised by the receipt of the very event the checkpoint had to precede.
fn comparable(task: &Task) -> Task {
    let mut task = task.clone();
    task.sent_status = TaskStatus::None;
    for container in &mut task.containers {
        container.applied_status = None;
        container.sent_status = ContainerStatus::None;
    }
    task
}

fn status_rank(status: &str) -> u8 {
    match status {
        "RUNNING" => 1,
        "STOPPED" => 2,
        _ => 0,
    }
}

impl SimTask {
    fn new(task: &Task) -> SimTask {
        SimTask {
            id: task.id.clone(),
            arn: task.arn.clone(),
            start_sequence: task.start_sequence,
            machine: None,
            checkpoint: None,
            forgotten: false,
            timers: BTreeMap::new(),
            wait_ready: None,
            waiting_for_stops: false,
            resources_ready: None,
            inbox: VecDeque::new(),
            stop_registered: false,
            stop_wanted: false,
            stop_acked: false,
            replaced_by_pending: false,
            follows: Vec::new(),
            in_flight: HashMap::new(),
            last_seen: None,
            events: Vec::new(),
            logged: HashMap::new(),
            docker_ids: HashMap::new(),
            reached_running: false,
            checkpoint_behind: false,
            acknowledgement: None,
            unrecorded: HashSet::new(),
        }
    }

    fn live(&self) -> bool {
        self.machine.is_some()
    }
}

impl Simulation {
    fn new(seed: u64, full_log: bool) -> Simulation {
        let mut random = Random::new(seed);
        let docker_random = Random::new(seed ^ 0x5EED_D0C4_E12D_0001);
        let failure_percent = [0, 3, 6, 12][random.below(4) as usize];
        let docker = Arc::new(SimDocker::new(docker_random, failure_percent));
        let pull_behavior = match random.below(4) {
            0 => PullBehavior::Default,
            1 => PullBehavior::Always,
            2 => PullBehavior::Once,
            _ => PullBehavior::PreferCached,
        };
        let settings = ManagedTaskSettings {
            cluster: CLUSTER.into(),
            rules: RuleConfig {
                pull_behavior,
                pull_dependent_containers_upfront: random.chance(30),
            },
            stop_timeout: Duration::from_secs(30),
            steady_check_interval: Duration::from_secs(300),
            cleanup_wait: Duration::from_secs(if random.chance(50) { 0 } else { 3 }),
            dependency_poll_interval: Duration::from_secs(5),
            sent_poll_interval: Duration::from_secs(30),
            // From the seed, not a draw: the worlds of existing seeds stay as they were.
            task_metadata: seed.is_multiple_of(2).then_some(MetadataEndpoint {
                bridge_address: Some(std::net::Ipv4Addr::new(172, 17, 0, 1)),
                loopback: true,
                port: 51679,
            }),
            exclude_ipv6_port_bindings: true,
            aws_logs: Default::default(),
            firelens: Default::default(),
        };
        let context = Self::worker_context(&docker, pull_behavior);
        let (crash_per_mille_step, crash_per_mille_effect) = match random.below(4) {
            0 => (0, 0),
            1 => (3, 1),
            2 => (8, 3),
            _ => (20, 8),
        };
        let task_budget = 1 + random.below(4) as usize;
        let mut faults = Random::new(seed ^ 0x5EED_F00D);
        let mut fault_rate = || [0, 0, 30, 150][faults.below(4) as usize];
        let checkpoint_fail_per_mille = fault_rate();
        let report_fail_per_mille = fault_rate();
        let mut sizes = Random::new(seed ^ 0x5EED_0512_0000_0001);
        let host_capacity = HostCapacity {
            memory_mib: 1024,
            cpu_units: 2048,
            ..HostCapacity::unlimited()
        };
        let sizes = sizes.chance(50).then_some(sizes);
        Simulation {
            seed,
            random,
            now: 1_000,
            docker,
            context,
            settings,
            wait_group: SequentialWaitGroup::new(),
            host_resources: HostResourceQueue::new(host_capacity.clone()),
            host_capacity,
            sizes,
            registered_stops: HashMap::new(),
            tasks: Vec::new(),
            task_budget,
            next_sequence: 1,
            pending: Vec::new(),
            stream: Vec::new(),
            stream_up: true,
            docker_index: HashMap::new(),
            wedged: HashSet::new(),
            removal_failed: HashSet::new(),
            removed_by_user: HashSet::new(),
            chaos: true,
            crash_per_mille_effect,
            crash_per_mille_step,
            crash_pending: false,
            faults,
            checkpoint_fail_per_mille,
            report_fail_per_mille,
            acting_for_the_dead: false,
            leftovers: 0,
            never_removed: 0,
            log: Vec::new(),
            full_log,
            stats: Stats::default(),
        }
    }

    fn worker_context(docker: &Arc<SimDocker>, pull_behavior: PullBehavior) -> WorkerContext {
        WorkerContext {
            runtime: Arc::clone(docker) as Arc<dyn ContainerRuntime>,
            pull_behavior,
            pulled_images: Arc::new(Mutex::new(HashSet::new())),
            // The worker's own retries, without real sleeps.
            stop_retry: StopRetry {
                attempts: 2,
                initial_backoff: Duration::ZERO,
                maximum_backoff: Duration::ZERO,
            },
            store: None,
            registry_credentials: Default::default(),
            secrets_file: None,
            environment_files: None,
            images: None,
            execution_role: None,
            role_credentials: Default::default(),
        }
    }

    fn note(&mut self, line: String) {
        let line: String = line.chars().take(240).collect();
        self.log.push(format!("t={} {line}", self.now));
        if !self.full_log && self.log.len() > 400 {
            self.log.drain(..200);
        }
    }

    fn fail(&self, message: String) -> ! {
        let shown: Vec<&String> = if self.full_log {
            self.log.iter().collect()
        } else {
            let skip = self.log.len().saturating_sub(80);
            self.log.iter().skip(skip).collect()
        };
        let tasks: Vec<Option<&Task>> = self
            .tasks
            .iter()
            .map(|task| task.machine.as_ref().map(ManagedTask::task))
            .collect();
        panic!(
            "seed {}: {message}\n--- steps (oldest first{}) ---\n{}\n--- tasks ---\n{tasks:#?}",
            self.seed,
            if self.full_log { "" } else { ", the last 80" },
            shown
                .iter()
                .map(|line| line.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }

    fn sync_docker_clock(&self) {
        let mut docker = self.docker.state();
        docker.now = self.now;
        docker.chaos = self.chaos;
    }

    // ---- commands -------------------------------------------------------------------------

    fn take_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }

    /// A submit: numbered, checkpointed (durable before it is acknowledged), then started.
    fn submit(&mut self) -> usize {
        let index = self.tasks.len();
        let sequence = self.take_sequence();
        let mut task = random_task(&mut self.random, index, sequence, self.now);
        if let Some(sizes) = self.sizes.as_mut() {
            task.memory_mib = Some(256 * (1 + sizes.below(4)));
            if sizes.chance(25) {
                std::sync::Arc::make_mut(&mut task.containers[0].definition).port_mappings =
                    vec![crate::task::PortMapping {
                        container_port: 80,
                        host_port: Some(8080),
                        protocol: crate::task::Protocol::Tcp,
                        container_port_range: None,
                    }];
            }
        }
        let mut sim_task = SimTask::new(&task);
        sim_task.follows = self
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, earlier)| earlier.stop_acked)
            .filter_map(|(earlier_index, earlier)| {
                let stop = earlier.checkpoint.as_ref().map(|t| t.stop_sequence)?;
                (stop > 0 && stop < sequence).then_some((earlier_index, stop))
            })
            .collect();
        sim_task.checkpoint = Some(task.clone());
        sim_task.last_seen = Some(task.clone());
        self.stats.tasks += 1;
        self.note(format!(
            "submit task {index} with start number {sequence}: {} container(s)",
            task.containers.len()
        ));
        self.tasks.push(sim_task);
        // Queued on the accepting side, as the engine does under its command lock.
        self.host_resources.enqueue(&task);
        let mut machine = ManagedTask::new(task, self.settings.clone(), None);
        let effects = machine.start(self.now);
        self.tasks[index].machine = Some(machine);
        self.perform(index, effects);
        index
    }

    /// A stop: numbered and registered on the accepting side, then handed to the task.
    fn stop(&mut self, index: usize) {
        if !self.tasks[index].live() {
            return;
        }
        self.tasks[index].stop_wanted = true;
        let sequence = self.take_sequence();
        let registered = !self.tasks[index].stop_registered;
        if registered {
            self.wait_group.add(sequence, 1);
            self.registered_stops.insert(sequence, index);
            self.tasks[index].stop_registered = true;
        }
        self.note(format!(
            "stop task {index} with number {sequence} (registered: {registered})"
        ));
        self.tasks[index].acknowledgement = None;
        self.feed(
            index,
            Input::Desired {
                status: TaskStatus::Stopped,
                sequence,
                registered,
            },
        );
        if self.crash_pending {
            return;
        }
        let task = &self.tasks[index];
        match (&task.machine, task.acknowledgement.clone()) {
            (Some(_), None) => self.fail(format!(
                "task {index}: a stop was handled but never acknowledged nor refused"
            )),
            (_, Some(Err(error))) => {
                // Not durable: refused, and the client sends the stop again later.
                self.stats.refused_stops += 1;
                self.note(format!("task {index}: stop refused: {error}"));
                return;
            }
            _ => {}
        }
        // Acknowledged: what was handled is durable (checked) or the task is already gone.
        let task = &self.tasks[index];
        if let Some(checkpoint) = &task.checkpoint {
            if checkpoint.desired_status != TaskStatus::Stopped {
                self.fail(format!(
                    "task {index}: stop acknowledged but its checkpoint is desired {}",
                    checkpoint.desired_status
                ));
            }
        }
        self.tasks[index].stop_acked = true;
        if self.tasks[index].replaced_by_pending {
            self.tasks[index].replaced_by_pending = false;
            if self.tasks.len() < self.task_budget {
                self.stats.replacements += 1;
                self.note(format!("task {index} is replaced"));
                self.submit();
            }
        }
    }

    // ---- feeding the machines -------------------------------------------------------------

    fn feed(&mut self, index: usize, input: Input) {
        let Some(machine) = self.tasks[index].machine.as_mut() else {
            return;
        };
        self.stats.inputs += 1;
        let line = format!("task {index} <- {input:?}");
        let effects = machine.handle(input, self.now);
        let summary = if self.full_log {
            let task = machine.task();
            let containers: Vec<String> = task
                .containers
                .iter()
                .map(|c| {
                    format!(
                        "{}:{}/{}{}",
                        c.name(),
                        c.known_status,
                        c.desired_status,
                        c.applied_status
                            .map(|a| format!(" applied {a}"))
                            .unwrap_or_default()
                    )
                })
                .collect();
            format!(
                "   [task {}/{}: {}]",
                task.known_status,
                task.desired_status,
                containers.join(", ")
            )
        } else {
            String::new()
        };
        self.note(line);
        if !summary.is_empty() {
            self.log.push(summary);
        }
        self.perform(index, effects);
    }

    /// Performs effects in order as the task's loop does; the process may die before any one.
    fn perform(&mut self, index: usize, effects: Vec<Effect>) {
        let mut queue: VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            if self.chaos
                && self.random.chance_per_mille(self.crash_per_mille_effect)
                && self.may_crash()
            {
                self.note(format!("task {index}: crash before {effect:?}"));
                self.crash_pending = true;
                return;
            }
            if self.tasks[index].machine.is_none() {
                return;
            }
            match effect {
                Effect::Docker(call) => self.issue(index, call),
                Effect::Emit { event, reported } => {
                    let receipt =
                        if self.chaos && self.faults.chance_per_mille(self.report_fail_per_mille) {
                            self.stats.report_failures += 1;
                            self.tasks[index].unrecorded.insert(event.container.clone());
                            self.note(format!(
                                "task {index}: the event log fails to record {event:?}"
                            ));
                            Input::ReportFailed {
                                reported,
                                error: "simulated: the event log cannot write".to_string(),
                            }
                        } else {
                            self.record_event(index, event);
                            Input::Reported(reported)
                        };
                    if let Some(machine) = self.tasks[index].machine.as_mut() {
                        queue.extend(machine.handle(receipt, self.now));
                    }
                }
                Effect::Checkpoint => {
                    let receipt = if self.chaos
                        && self.faults.chance_per_mille(self.checkpoint_fail_per_mille)
                    {
                        self.stats.checkpoint_failures += 1;
                        self.note(format!("task {index}: the checkpoint write fails"));
                        self.tasks[index].checkpoint_behind = true;
                        Input::CheckpointFailed {
                            error: "simulated: no space left on device".to_string(),
                        }
                    } else {
                        self.checkpoint(index);
                        Input::CheckpointWritten
                    };
                    if let Some(machine) = self.tasks[index].machine.as_mut() {
                        queue.extend(machine.handle(receipt, self.now));
                    }
                }
                Effect::AcknowledgeDesired { result } => {
                    self.tasks[index].acknowledgement = Some(result);
                }
                Effect::Log { .. } => {}
                Effect::ArmTimer { timer, at } => {
                    self.tasks[index].timers.insert(timer, at);
                }
                Effect::WaitForStops { sequence } => {
                    let task = &mut self.tasks[index];
                    task.wait_ready = Some(self.wait_group.ready(sequence));
                    task.waiting_for_stops = true;
                }
                Effect::StopWaitingForStops => {
                    let task = &mut self.tasks[index];
                    task.wait_ready = None;
                    task.waiting_for_stops = false;
                }
                Effect::WaitForResources => {
                    let id = self.tasks[index].id.clone();
                    let ready = self.host_resources.ready(&id);
                    if ready.is_empty() {
                        self.stats.resource_waits += 1;
                        self.note(format!(
                            "task {index}: waits for host resources ({})",
                            self.host_resources.waiting_reason(&id).unwrap_or_default()
                        ));
                    }
                    self.tasks[index].resources_ready = Some(ready);
                }
                Effect::ReleaseResources => {
                    let id = self.tasks[index].id.clone();
                    self.tasks[index].resources_ready = None;
                    self.note(format!("task {index}: releases its host resources"));
                    self.host_resources.release(&id);
                    self.check_host_resources();
                }
                Effect::DropTaskRoleCredentials => {
                    self.note(format!(
                        "task {index}: its task role's credentials are dropped"
                    ));
                }
                Effect::WaitGroupDone { sequence } => {
                    match self.registered_stops.remove(&sequence) {
                        Some(holder) if holder == index => {}
                        Some(holder) => self.fail(format!(
                            "task {index} finished stop number {sequence}, held by task {holder}"
                        )),
                        None => self.fail(format!(
                            "task {index} finished stop number {sequence}, which is not \
                             outstanding"
                        )),
                    }
                    self.note(format!("task {index}: done({sequence})"));
                    self.wait_group.done(sequence);
                }
                Effect::TrackContainer { docker_id } => {
                    self.docker_index.insert(docker_id, index);
                }
                Effect::Done => {
                    // The engine forgets the task and deletes its file.
                    self.note(format!("task {index}: cleaned up and forgotten"));
                    let task = &mut self.tasks[index];
                    task.machine = None;
                    task.checkpoint = None;
                    task.forgotten = true;
                    task.timers.clear();
                    task.inbox.clear();
                    self.docker_index.retain(|_, owner| *owner != index);
                    return;
                }
            }
        }
        self.check_statuses(index);
    }

    /// The machine's state must be on disk before anything leaves it, unless the last write
    /// failed: the engine goes on then, and promises nothing about a crash (none is simulated
    /// while a checkpoint is behind).
    fn check_checkpointed(&self, index: usize, what: &str) {
        let task = &self.tasks[index];
        if task.checkpoint_behind {
            return;
        }
        let (Some(machine), Some(checkpoint)) = (&task.machine, &task.checkpoint) else {
            self.fail(format!("task {index}: {what} without a checkpoint"));
        };
        if comparable(machine.task()) != comparable(checkpoint) {
            self.fail(format!(
                "task {index}: {what} before its change was checkpointed\n checkpoint: \
                 {checkpoint:?}\n state: {:?}",
                machine.task()
            ));
        }
    }

    fn issue(&mut self, index: usize, call: DockerCall) {
        self.check_checkpointed(index, &format!("{call:?}"));
        let task = &self.tasks[index];
        let transition_of = match &call {
            DockerCall::Pull { container, .. }
            | DockerCall::Create { container, .. }
            | DockerCall::Start { container, .. }
            | DockerCall::Restart { container, .. } => Some(container.clone()),
            DockerCall::Stop {
                container,
                background: false,
                ..
            } => Some(container.clone()),
            _ => None,
        };
        let starts_something = matches!(
            call,
            DockerCall::Pull { .. }
                | DockerCall::Create { .. }
                | DockerCall::Start { .. }
                | DockerCall::Restart { .. }
        );
        if starts_something {
            // A restart (§12) answers an exit of a container that ran before; it is not the
            // task's progress past the wait, which the wait group check below covers.
            if task.waiting_for_stops && !matches!(call, DockerCall::Restart { .. }) {
                self.fail(format!(
                    "task {index}: {call:?} while waiting for earlier stops"
                ));
            }
            let desired = task.machine.as_ref().map(|m| m.task().desired_status);
            if desired == Some(TaskStatus::Running)
                && !matches!(call, DockerCall::Restart { .. })
                && !self.host_resources.ledger().is_admitted(&task.id)
            {
                self.fail(format!(
                    "task {index}: {call:?} while it is not admitted to the host's resources"
                ));
            }
            if desired == Some(TaskStatus::Running)
                && self.wait_group.is_blocked(task.start_sequence)
            {
                self.fail(format!(
                    "task {index}: {call:?} while a stop numbered <= {} is outstanding ({:?})",
                    task.start_sequence,
                    self.wait_group.outstanding()
                ));
            }
        }
        if let Some(container) = transition_of {
            let count = self.tasks[index]
                .in_flight
                .entry(container.clone())
                .or_insert(0);
            *count += 1;
            if *count > 1 {
                self.fail(format!(
                    "task {index}: two calls in flight for {container}: {call:?}"
                ));
            }
        }
        if matches!(call, DockerCall::Restart { .. }) {
            self.stats.restarts += 1;
        }
        self.note(format!("task {index} -> docker {}", short_call(&call)));
        self.pending.push(Pending {
            task: index,
            call,
            answer: None,
            ghost: false,
        });
    }

    fn checkpoint(&mut self, index: usize) {
        let Some(machine) = &self.tasks[index].machine else {
            return;
        };
        let task = machine.task().clone();
        if let Some(previous) = &self.tasks[index].checkpoint {
            self.check_rise(index, previous, &task, "checkpoint");
        }
        for container in &task.containers {
            if let Some(docker_id) = &container.docker_id {
                let first = self.tasks[index]
                    .docker_ids
                    .entry(container.name().to_string())
                    .or_insert_with(|| docker_id.clone());
                if first != docker_id {
                    let first = first.clone();
                    self.fail(format!(
                        "task {index}: container {} had Docker id {first}, now {docker_id}",
                        container.name()
                    ));
                }
            }
        }
        self.tasks[index].checkpoint = Some(task);
        self.tasks[index].checkpoint_behind = false;
    }

    /// The process may die unless a task's checkpoint is behind: its events and calls went
    /// out with the file older than the task, which a crash would turn into a restore behind
    /// the event log (the engine's promise covers written checkpoints only).
    fn may_crash(&self) -> bool {
        !self
            .tasks
            .iter()
            .any(|task| task.machine.is_some() && task.checkpoint_behind)
    }

    /// Known and desired statuses never fall from `before` to `after`.
    fn check_rise(&self, index: usize, before: &Task, after: &Task, when: &str) {
        if after.known_status < before.known_status {
            self.fail(format!(
                "task {index}: known fell from {} to {} ({when})",
                before.known_status, after.known_status
            ));
        }
        if after.desired_status < before.desired_status {
            self.fail(format!("task {index}: desired fell ({when})"));
        }
        for (old, new) in before.containers.iter().zip(&after.containers) {
            if new.known_status < old.known_status {
                self.fail(format!(
                    "task {index}: container {} known fell from {} to {} ({when})",
                    new.name(),
                    old.known_status,
                    new.known_status
                ));
            }
            if new.desired_status < old.desired_status {
                self.fail(format!(
                    "task {index}: container {} desired fell ({when})",
                    new.name()
                ));
            }
        }
    }

    fn check_statuses(&mut self, index: usize) {
        let Some(machine) = &self.tasks[index].machine else {
            return;
        };
        let now = machine.task().clone();
        if let Some(before) = &self.tasks[index].last_seen {
            self.check_rise(index, before, &now, "in memory");
        }
        if now.known_status == TaskStatus::Running {
            self.tasks[index].reached_running = true;
        }
        self.tasks[index].last_seen = Some(now);
    }

    fn record_event(&mut self, index: usize, event: NewEvent) {
        self.check_checkpointed(
            index,
            &format!("event {} {:?}", event.status, event.container),
        );
        self.note(format!(
            "task {index} event: {} {} {:?}",
            event.container.as_deref().unwrap_or("task"),
            event.status,
            event.reason
        ));
        // Docker being away is nobody's fault: it is never the reason a container or a task
        // stopped (its calls wait and retry instead).
        if let Some(reason) = &event.reason {
            if reason.contains("Docker unreachable") {
                self.fail(format!(
                    "task {index}: {} stopped for Docker being away: {reason}",
                    event.container.as_deref().unwrap_or("the task")
                ));
            }
        }
        let Some(machine) = &self.tasks[index].machine else {
            return;
        };
        let task = machine.task();
        let entity: Entity = event.container.clone();
        let rank = status_rank(&event.status);
        let task_log = &self.tasks[index];
        let mut redelivery = false;
        if let Some((last, redeliverable)) = task_log.logged.get(&entity) {
            let last_rank = status_rank(last);
            if rank < last_rank {
                self.fail(format!(
                    "task {index}: {entity:?} {} after {last}",
                    event.status
                ));
            }
            if rank == last_rank {
                if !redeliverable {
                    self.fail(format!(
                        "task {index}: duplicate event {entity:?} {}",
                        event.status
                    ));
                }
                redelivery = true;
            }
        }
        let task_stopped_logged = task_log
            .logged
            .get(&None)
            .is_some_and(|(status, _)| status == "STOPPED");
        let mut late = false;
        match &event.container {
            Some(_) if task_stopped_logged && task_log.unrecorded.contains(&entity) => late = true,
            Some(name) if task_stopped_logged && !redelivery => {
                self.fail(format!(
                    "task {index}: container {name} {} after the task's STOPPED",
                    event.status
                ));
            }
            Some(_) => {}
            None => {
                let gave_up = event
                    .reason
                    .as_deref()
                    .is_some_and(|reason| reason.starts_with("TaskStateError"));
                // The sandbox's states are never reported (docs/ENGINE.md §16).
                for container in task.containers.iter().filter(|c| !c.is_sandbox()) {
                    let logged = task_log
                        .logged
                        .get(&Some(container.name().to_string()))
                        .map(|(status, _)| status.as_str());
                    let ok = match event.status.as_str() {
                        "RUNNING" => logged.is_some(),
                        _ => gave_up || logged == Some("STOPPED"),
                    };
                    if !ok
                        && task_log
                            .unrecorded
                            .contains(&Some(container.name().to_string()))
                    {
                        late = true;
                    } else if !ok {
                        self.fail(format!(
                            "task {index}: task {} before container {} reported it (logged: \
                             {logged:?})",
                            event.status,
                            container.name()
                        ));
                    }
                }
                if gave_up {
                    self.stats.gave_up += 1;
                }
            }
        }
        if redelivery {
            self.stats.redeliveries += 1;
        }
        if late {
            self.stats.late_events += 1;
        }
        let task_log = &mut self.tasks[index];
        task_log.unrecorded.remove(&entity);
        task_log
            .logged
            .insert(entity, (event.status.clone(), false));
        task_log.events.push(event);
    }

    // ---- Docker -----------------------------------------------------------------------------

    /// Docker acts on a pending call (the answer is kept for later).
    fn act(&mut self, position: usize) {
        self.sync_docker_clock();
        let call = self.pending[position].call.clone();
        self.acting_for_the_dead = self.pending[position].ghost;
        let answer = run_docker_call(&self.context, call.clone());
        let task = self.pending[position].task;
        self.note(format!(
            "docker acts on task {task}'s {}{}",
            short_call(&call),
            if self.pending[position].ghost {
                " (from before the crash)"
            } else {
                ""
            }
        ));
        // A stop the worker reported done while the container still runs: it gave up after
        // its retries because Docker answered a ping (§6's recommended rule).
        if let (
            DockerCall::Stop {
                docker_id,
                background: false,
                ..
            },
            Some(Input::Transition { result: Ok(_), .. }),
        ) = (&call, &answer)
        {
            let running = self
                .docker
                .state()
                .containers
                .get(docker_id)
                .is_some_and(|c| c.state == SimState::Running);
            if running {
                self.note(format!(
                    "container {docker_id} is wedged: its stop was given up"
                ));
                self.wedged.insert(docker_id.clone());
                self.stats.wedged += 1;
            }
        }
        // Cleanup does not retry a removal that failed: the container is left behind.
        if let DockerCall::Remove { docker_ids, .. } = &call {
            let docker = self.docker.state();
            for id in docker_ids {
                if let Some(id) = docker.resolve(id) {
                    self.removal_failed.insert(id);
                }
            }
        }
        self.pending[position].answer = Some(answer);
        self.collect_docker();
        self.acting_for_the_dead = false;
    }

    /// Moves Docker's new events to the stream and checks new containers.
    fn collect_docker(&mut self) {
        let (events, created, unreachable) = {
            let mut docker = self.docker.state();
            (
                std::mem::take(&mut docker.events),
                std::mem::take(&mut docker.created),
                docker.now < docker.unreachable_until,
            )
        };
        if unreachable && self.stream_up {
            // The daemon went away: the event stream broke with it.
            self.break_stream();
        }
        if self.stream_up {
            self.stream.extend(events);
        }
        for created in created {
            self.stats.creates += 1;
            self.check_create(&created);
        }
    }

    /// No container created twice for one name; stop-before-start across tasks; every named
    /// volume it mounts made before it.
    fn check_create(&self, created: &docker::Created) {
        if let Some(holder) = &created.missing_namespace_holder {
            self.fail(format!(
                "container {} created before the sandbox {holder} whose namespace it joins",
                created.name
            ));
        }
        if !created.missing_volumes.is_empty() {
            self.fail(format!(
                "container {} created before its volumes {:?} were",
                created.name, created.missing_volumes
            ));
        }
        let count = self
            .docker
            .state()
            .creates_per_name
            .get(&created.name)
            .copied()
            .unwrap_or(0);
        // A user who removes a container deckhand never learnt the id of (its create's answer
        // was lost in a crash) frees the name: a second create is then the only way on.
        let freed_by_user = self.removed_by_user.contains(&created.name);
        if count > 1 && !freed_by_user {
            self.fail(format!(
                "container name {} created {count} times (now as {})",
                created.name, created.docker_id
            ));
        }
        let Some(index) = self.tasks.iter().position(|t| t.arn == created.task_arn) else {
            self.fail(format!("container {} of no task created", created.name));
        };
        let in_checkpoint = self.tasks[index].checkpoint.as_ref().is_some_and(|task| {
            task.containers
                .iter()
                .any(|c| c.docker_name.as_deref() == Some(created.name.as_str()))
        });
        // (A create of a crashed process was checked when it was issued; its task may be
        // gone since.)
        if !in_checkpoint && !self.acting_for_the_dead {
            self.fail(format!(
                "task {index}: container {} created for a name not in its checkpoint",
                created.name
            ));
        }
        for (earlier, stop) in &self.tasks[index].follows {
            let running: Vec<String> = self
                .docker
                .state()
                .running_ids_of(&self.tasks[*earlier].arn)
                .into_iter()
                .filter(|id| !self.wedged.contains(id))
                .collect();
            if !running.is_empty() {
                self.fail(format!(
                    "task {index} (start number {}) created container {} while task {earlier} \
                     (stop number {stop}) still runs {running:?}",
                    self.tasks[index].start_sequence, created.name
                ));
            }
        }
    }

    /// Delivers a pending call's answer.
    fn answer(&mut self, position: usize) {
        let pending = self.pending.swap_remove(position);
        let Some(Some(input)) = pending.answer else {
            return;
        };
        if pending.ghost {
            return;
        }
        if let Input::Transition { container, .. } | Input::Restarted { container, .. } = &input {
            if let Some(count) = self.tasks[pending.task].in_flight.get_mut(container) {
                *count = count.saturating_sub(1);
            }
        }
        self.feed(pending.task, input);
    }

    fn break_stream(&mut self) {
        self.note("the event stream broke".to_string());
        self.stats.stream_breaks += 1;
        self.stream.clear();
        self.stream_up = false;
    }

    /// The events thread subscribes again: every task re-inspects, and the re-list by label
    /// hands containers found by name to their task.
    fn reconnect(&mut self) {
        self.note("the event stream reconnected".to_string());
        self.stream_up = true;
        let tracked: HashSet<usize> = self.docker_index.values().copied().collect();
        for index in tracked {
            if self.tasks[index].live() && !self.tasks[index].inbox.contains(&Input::Resync) {
                self.tasks[index].inbox.push_back(Input::Resync);
            }
        }
        self.sync_docker_clock();
        let listed = match self.docker.list_containers(&[]) {
            Ok(listed) => listed,
            Err(_) => return,
        };
        let snapshots: Vec<Task> = self
            .tasks
            .iter()
            .filter(|task| task.live())
            .filter_map(|task| task.checkpoint.clone())
            .collect();
        for adoption in relist_plan(&listed, &snapshots).adopt {
            if let Some(index) = self.tasks.iter().position(|t| t.id == adoption.task_id) {
                self.stats.adopted += 1;
                self.tasks[index].inbox.push_back(Input::DockerEvent {
                    docker_id: adoption.docker_id,
                    observation: DockerObservation::FoundByName {
                        docker_name: adoption.docker_name,
                    },
                });
            }
        }
    }

    fn deliver_event(&mut self) {
        let position = if self.random.chance(80) {
            0
        } else {
            self.random.below(self.stream.len() as u64) as usize
        };
        if self.chaos && self.random.chance(3) {
            let event = self.stream.remove(position);
            self.note(format!("event {} {} lost", event.action, &event.id[56..]));
            return;
        }
        let event = if self.chaos && self.random.chance(3) {
            self.stream[position].clone()
        } else {
            self.stream.remove(position)
        };
        let Some(observation) = observation_for_event(&event) else {
            return;
        };
        let Some(&index) = self.docker_index.get(&event.id) else {
            return;
        };
        self.feed(
            index,
            Input::DockerEvent {
                docker_id: event.id,
                observation,
            },
        );
    }

    // ---- crash and restore ------------------------------------------------------------------

    fn crash_and_restore(&mut self) {
        self.crash_pending = false;
        self.stats.crashes += 1;
        self.note("=== CRASH ===".to_string());
        // Calls Docker had not made yet: made now, never, or later (a request already read).
        let pending = std::mem::take(&mut self.pending);
        for mut call in pending {
            if call.answer.is_some() {
                continue;
            }
            match self.random.below(3) {
                0 => {
                    self.sync_docker_clock();
                    self.note(format!(
                        "docker acts on {} as the process dies",
                        short_call(&call.call)
                    ));
                    self.acting_for_the_dead = true;
                    let _ = run_docker_call(&self.context, call.call.clone());
                    self.collect_docker();
                    self.acting_for_the_dead = false;
                }
                1 => {
                    call.ghost = true;
                    self.pending.push(call);
                }
                _ => {}
            }
        }
        // The new process subscribes before it reconciles; what was undelivered is gone.
        self.stream.clear();
        self.docker.state().events.clear();
        self.stream_up = true;
        self.docker_index.clear();
        self.wait_group = SequentialWaitGroup::new();
        self.host_resources = HostResourceQueue::new(self.host_capacity.clone());
        self.registered_stops.clear();
        self.context = Self::worker_context(&self.docker, self.settings.rules.pull_behavior);
        for task in &mut self.tasks {
            task.machine = None;
            task.timers.clear();
            task.wait_ready = None;
            task.waiting_for_stops = false;
            task.resources_ready = None;
            task.inbox.clear();
            task.in_flight.clear();
            task.stop_registered = false;
            task.last_seen = None;
            // An event logged whose receipt did not reach the checkpoint is sent again.
            if let Some(checkpoint) = &task.checkpoint {
                for (entity, (status, redeliverable)) in task.logged.iter_mut() {
                    let sent = match entity {
                        None => status_rank(checkpoint.sent_status.as_str()),
                        Some(name) => checkpoint
                            .container(name)
                            .map_or(0, |c| status_rank(c.sent_status.as_str())),
                    };
                    *redeliverable = sent < status_rank(status);
                }
            }
        }
        self.now += self.random.below(5_000);
        // Numbering resumes after the reserved block.
        self.next_sequence += self.random.below(64);
        self.restore();
    }

    /// §11, as `TaskEngine::restore` does it.
    fn restore(&mut self) {
        let mut prepared: Vec<(usize, Task, bool)> = Vec::new();
        for index in 0..self.tasks.len() {
            let Some(checkpoint) = &self.tasks[index].checkpoint else {
                continue;
            };
            let bytes = match crate::state::encode_task_file(checkpoint) {
                Ok(bytes) => bytes,
                Err(error) => self.fail(format!("task {index}: checkpoint not encodable: {error}")),
            };
            let task = match crate::state::decode_task_file(&bytes) {
                Ok(task) => task,
                Err(error) => self.fail(format!("task {index}: checkpoint not readable: {error}")),
            };
            if comparable(&task) != comparable(checkpoint)
                || task.sent_status != checkpoint.sent_status
            {
                self.fail(format!(
                    "task {index}: the checkpoint does not round-trip\n wrote: {checkpoint:?}\n \
                     read: {task:?}"
                ));
            }
            for docker_id in task.containers.iter().filter_map(|c| c.docker_id.clone()) {
                self.docker_index.insert(docker_id, index);
            }
            prepared.push((index, task, false));
        }
        // Reconcile, waiting while Docker does not answer.
        self.docker.state().only_unanswered_faults = !INSPECT_ERRORS_AT_RESTORE;
        let mut waiting: Vec<usize> = (0..prepared.len()).collect();
        let mut rounds = 0;
        while !waiting.is_empty() {
            rounds += 1;
            if rounds > 100 {
                self.fail("restore: Docker never answered".into());
            }
            self.sync_docker_clock();
            let mut unanswered = Vec::new();
            for position in waiting {
                // Requests the dead process sent are carried out by Docker now, between the new
                // process's look-ups: a create before or after its name is looked up (after: the
                // new create's 409 adopts it); anything else before its container is looked at.
                // (A start Docker makes only after that is answered by §7's one re-stop when
                // its event arrives; until then the task may hold that container STOPPED.)
                let task_index = prepared[position].0;
                while let Some(ghost) = self.pending.iter().position(|p| {
                    p.ghost && p.task == task_index && !matches!(p.call, DockerCall::Create { .. })
                }) {
                    self.act(ghost);
                    self.pending.swap_remove(ghost);
                }
                if self.random.chance(50) {
                    self.act_one_ghost();
                }
                let (index, task, changed) = &mut prepared[position];
                let outcome = reconcile_task(self.docker.as_ref(), task, self.now, true);
                *changed |= outcome.changed;
                if outcome.adopted {
                    self.stats.adopted += 1;
                    for docker_id in task.containers.iter().filter_map(|c| c.docker_id.clone()) {
                        self.docker_index.insert(docker_id, *index);
                    }
                    self.tasks[*index].inbox.push_back(Input::Resync);
                }
                if outcome.docker_unreachable {
                    unanswered.push(position);
                }
            }
            waiting = unanswered;
            if !waiting.is_empty() {
                self.now += 1_000;
            }
        }
        self.docker.state().only_unanswered_faults = false;
        while self.pending.iter().any(|p| p.ghost) {
            self.act_one_ghost();
        }
        self.collect_docker();
        // Unfinished stops block later starts again before any loop runs.
        for (index, task, _) in &prepared {
            if task.stop_sequence > 0 && task.known_status < TaskStatus::Stopped {
                self.wait_group.add(task.stop_sequence, 1);
                self.registered_stops.insert(task.stop_sequence, *index);
            }
            self.next_sequence = self
                .next_sequence
                .max(task.start_sequence + 1)
                .max(task.stop_sequence + 1);
        }
        self.host_resources
            .restore(prepared.iter().map(|(_, task, _)| task));
        self.check_host_resources();
        for (index, task, changed) in prepared {
            let checkpoint = self.tasks[index]
                .checkpoint
                .clone()
                .expect("prepared only tasks with a checkpoint");
            self.check_rise(index, &checkpoint, &task, "restored from the checkpoint");
            self.check_not_behind_log(index, &task);
            let unfinished_stop = (task.stop_sequence > 0
                && task.known_status < TaskStatus::Stopped)
                .then_some(task.stop_sequence);
            self.tasks[index].stop_registered = task.stop_sequence > 0;
            self.tasks[index].last_seen = Some(task.clone());
            self.note(format!(
                "restore task {index}: known {}, desired {}, changed {changed}",
                task.known_status, task.desired_status
            ));
            let mut machine = ManagedTask::new(task, self.settings.clone(), unfinished_stop);
            if changed {
                machine = machine.unsaved_changes();
            }
            let effects = machine.start(self.now);
            self.tasks[index].machine = Some(machine);
            self.perform(index, effects);
            if self.crash_pending {
                break;
            }
        }
        if self.crash_pending {
            self.crash_and_restore();
        }
    }

    fn act_one_ghost(&mut self) {
        if let Some(position) = self.pending.iter().position(|p| p.ghost) {
            self.act(position);
            self.pending.swap_remove(position);
        }
    }

    /// A restored task is never behind an event already in the log.
    fn check_not_behind_log(&self, index: usize, task: &Task) {
        for (entity, (status, _)) in &self.tasks[index].logged {
            let known = match entity {
                None => status_rank(task.known_status.as_str()),
                Some(name) => task
                    .container(name)
                    .map_or(0, |c| status_rank(c.known_status.as_str())),
            };
            if known < status_rank(status) {
                self.fail(format!(
                    "task {index}: restored {entity:?} behind its logged {status}"
                ));
            }
        }
    }

    // ---- the schedule -------------------------------------------------------------------------

    /// One random step. Returns false when nothing at all can happen.
    fn step(&mut self) -> bool {
        self.stats.steps += 1;
        self.now += self.random.below(300);
        self.sync_docker_clock();
        #[derive(Clone, Copy)]
        enum Choice {
            Act,
            Answer,
            Event,
            Timer,
            WaitGroup,
            Admitted,
            Inbox,
            Submit,
            Stop,
            Replace,
            ResendStop,
            Exit,
            Health,
            UserRemoves,
            BreakStream,
            Reconnect,
            Crash,
        }
        let mut choices: Vec<Choice> = Vec::new();
        let unacted = self.pending.iter().filter(|p| p.answer.is_none()).count();
        if unacted > 0 {
            choices.extend([Choice::Act; 3]);
        }
        if unacted < self.pending.len() {
            choices.extend([Choice::Answer; 3]);
        }
        if !self.stream.is_empty() {
            choices.extend([Choice::Event; 3]);
        }
        // A timer fires when due; the clock jumps to it when nothing else is going on, and
        // (chaos: a slow Docker) now and then while calls are still out.
        let earliest_timer = self
            .tasks
            .iter()
            .filter(|t| t.live())
            .flat_map(|t| t.timers.values().copied())
            .min();
        if let Some(at) = earliest_timer {
            let nothing_else = self.pending.is_empty() && self.stream.is_empty();
            if at <= self.now || nothing_else || (self.chaos && self.random.chance(10)) {
                choices.push(Choice::Timer);
            }
        }
        if self
            .tasks
            .iter()
            .any(|t| t.wait_ready.as_ref().is_some_and(|ready| !ready.is_empty()))
        {
            choices.extend([Choice::WaitGroup; 2]);
        }
        if self.tasks.iter().any(|t| {
            t.resources_ready
                .as_ref()
                .is_some_and(|ready| !ready.is_empty())
        }) {
            choices.extend([Choice::Admitted; 2]);
        }
        if self.tasks.iter().any(|t| t.live() && !t.inbox.is_empty()) {
            choices.extend([Choice::Inbox; 2]);
        }
        if !self.stream_up && self.now >= self.docker.state().unreachable_until {
            choices.push(Choice::Reconnect);
        }
        let live_unstopped = self.tasks.iter().any(|t| t.live() && !t.stop_wanted);
        if self
            .tasks
            .iter()
            .any(|t| t.live() && t.stop_wanted && !t.stop_acked)
        {
            choices.push(Choice::ResendStop);
        }
        if self.chaos {
            if self.tasks.len() < self.task_budget && self.random.chance(5) {
                choices.push(Choice::Submit);
            }
            if live_unstopped && self.random.chance(3) {
                choices.push(Choice::Stop);
            }
            if live_unstopped && self.tasks.len() < self.task_budget && self.random.chance(4) {
                choices.push(Choice::Replace);
            }
            let running = self
                .docker
                .state()
                .containers
                .values()
                .any(|c| c.state == SimState::Running);
            if running && self.random.chance(10) {
                choices.extend([Choice::Exit, Choice::Health]);
            }
            if self.random.chance_per_mille(3) {
                choices.push(Choice::UserRemoves);
            }
            if self.stream_up && self.random.chance_per_mille(5) {
                choices.push(Choice::BreakStream);
            }
            if self.random.chance_per_mille(self.crash_per_mille_step) && self.may_crash() {
                choices.push(Choice::Crash);
            }
        }
        if choices.is_empty() {
            return false;
        }
        let choice = choices[self.random.below(choices.len() as u64) as usize];
        match choice {
            Choice::Act => {
                let unacted: Vec<usize> = (0..self.pending.len())
                    .filter(|&p| self.pending[p].answer.is_none())
                    .collect();
                let position = unacted[self.random.below(unacted.len() as u64) as usize];
                self.act(position);
                if self.pending[position].ghost {
                    self.pending.swap_remove(position);
                }
            }
            Choice::Answer => {
                let answered: Vec<usize> = (0..self.pending.len())
                    .filter(|&p| self.pending[p].answer.is_some())
                    .collect();
                let position = answered[self.random.below(answered.len() as u64) as usize];
                self.answer(position);
            }
            Choice::Event => self.deliver_event(),
            Choice::Timer => {
                let (index, kind, at) = self
                    .tasks
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.live())
                    .flat_map(|(index, t)| t.timers.iter().map(move |(k, at)| (index, *k, *at)))
                    .min_by_key(|(_, _, at)| *at)
                    .expect("a live task has a timer");
                self.tasks[index].timers.remove(&kind);
                self.now = self.now.max(at);
                self.sync_docker_clock();
                self.feed(index, Input::TimerFired(kind));
            }
            Choice::WaitGroup => {
                let index = self
                    .tasks
                    .iter()
                    .position(|t| t.wait_ready.as_ref().is_some_and(|ready| !ready.is_empty()))
                    .expect("a task's wait is over");
                let task = &mut self.tasks[index];
                task.wait_ready = None;
                task.waiting_for_stops = false;
                self.feed(index, Input::WaitGroupReady);
            }
            Choice::Admitted => {
                let index = self
                    .tasks
                    .iter()
                    .position(|t| {
                        t.resources_ready
                            .as_ref()
                            .is_some_and(|ready| !ready.is_empty())
                    })
                    .expect("a task was admitted");
                let gpu_ids = self.tasks[index]
                    .resources_ready
                    .take()
                    .and_then(|ready| ready.try_recv().ok())
                    .unwrap_or_default();
                self.feed(index, Input::ResourcesReady { gpu_ids });
            }
            Choice::Inbox => {
                let candidates: Vec<usize> = (0..self.tasks.len())
                    .filter(|&i| self.tasks[i].live() && !self.tasks[i].inbox.is_empty())
                    .collect();
                let index = candidates[self.random.below(candidates.len() as u64) as usize];
                if let Some(input) = self.tasks[index].inbox.pop_front() {
                    self.feed(index, input);
                }
            }
            Choice::Submit => {
                self.submit();
            }
            Choice::Stop | Choice::Replace => {
                let candidates: Vec<usize> = (0..self.tasks.len())
                    .filter(|&i| self.tasks[i].live() && !self.tasks[i].stop_wanted)
                    .collect();
                let index = candidates[self.random.below(candidates.len() as u64) as usize];
                self.tasks[index].replaced_by_pending = matches!(choice, Choice::Replace);
                self.stop(index);
            }
            Choice::ResendStop => {
                let index = self
                    .tasks
                    .iter()
                    .position(|t| t.live() && t.stop_wanted && !t.stop_acked)
                    .expect("an unacknowledged stop");
                self.stop(index);
            }
            Choice::Exit => {
                let mut docker = self.docker.state();
                let id = random_running_container(&docker.containers, &mut self.random);
                let (code, oom) = match self.random.below(5) {
                    0 | 1 => (0, false),
                    2 | 3 => (1, false),
                    _ => (137, true),
                };
                docker.exit(&id, code, oom);
                drop(docker);
                self.note(format!("container {} exits with {code}", &id[56..]));
                self.collect_docker();
            }
            Choice::Health => {
                let mut docker = self.docker.state();
                let id = random_running_container(&docker.containers, &mut self.random);
                let health = if self.random.chance(70) {
                    "healthy"
                } else {
                    "unhealthy"
                };
                if let Some(container) = docker.containers.get_mut(&id) {
                    container.health = Some(health.to_string());
                }
                docker.event(&id, &format!("health_status: {health}"), None);
                drop(docker);
                self.collect_docker();
            }
            Choice::UserRemoves => {
                let mut docker = self.docker.state();
                let ids: Vec<String> = docker.containers.keys().cloned().collect();
                if !ids.is_empty() {
                    let id = ids[self.random.below(ids.len() as u64) as usize].clone();
                    if let Some(container) = docker.containers.get(&id) {
                        self.removed_by_user.insert(container.name.clone());
                    }
                    docker.remove(&id);
                    drop(docker);
                    self.note(format!("a user removes container {}", &id[56..]));
                    self.collect_docker();
                }
            }
            Choice::BreakStream => self.break_stream(),
            Choice::Reconnect => self.reconnect(),
            Choice::Crash => self.crash_pending = true,
        }
        if self.crash_pending {
            self.crash_and_restore();
        }
        self.check_host_resources();
        true
    }

    /// Whether only timers (steady re-checks, dependency polls) are left.
    fn quiet(&self) -> bool {
        self.pending.is_empty()
            && self.stream.is_empty()
            && self.stream_up
            && self.tasks.iter().all(|t| {
                t.inbox.is_empty()
                    && t.wait_ready.as_ref().is_none_or(|ready| ready.is_empty())
                    && t.resources_ready
                        .as_ref()
                        .is_none_or(|ready| ready.is_empty())
                    && !(t.stop_wanted && !t.stop_acked && t.live())
            })
    }

    /// Runs without chaos until `until` holds, or (when calm) until virtual time passed three
    /// steady re-checks and nothing but re-check timers is left.
    fn settle(&mut self, what: &str, until: impl Fn(&Simulation) -> bool) {
        let mut budget = 50_000;
        let deadline = self.now + 16 * 60 * 1000;
        while !until(self) {
            budget -= 1;
            if budget == 0 {
                self.fail(format!("{what}: did not settle within the step budget"));
            }
            if what == "calm" && self.now > deadline && self.quiet() {
                return;
            }
            if !self.step() {
                // Nothing at all can happen: fine when calm, stuck when tasks should finish.
                if until(self) || what == "calm" {
                    return;
                }
                self.fail(format!(
                    "{what}: stuck: nothing pending, no event, no timer, and not done"
                ));
            }
        }
    }

    fn run(&mut self, chaotic_steps: usize) {
        let first_tasks = 1 + self.random.below(self.task_budget as u64) as usize;
        for _ in 0..first_tasks {
            self.submit();
            if self.crash_pending {
                self.crash_and_restore();
            }
        }
        for _ in 0..chaotic_steps {
            if !self.step() {
                break;
            }
        }
        // Calm: Docker behaves, nothing exits, the process stays up.
        self.chaos = false;
        {
            let mut docker = self.docker.state();
            docker.chaos = false;
            docker.unreachable_until = 0;
        }
        self.note("=== calm ===".to_string());
        self.settle("calm", |_| false);
        self.check_desired_reached();
        // Then every task is stopped and cleaned up.
        for index in 0..self.tasks.len() {
            if self.tasks[index].live() && !self.tasks[index].stop_acked {
                self.stop(index);
            }
        }
        self.note("=== everything stopped ===".to_string());
        self.settle("final stop", |simulation| {
            simulation.tasks.iter().all(|task| task.forgotten)
        });
        self.check_finished();
    }

    fn check_desired_reached(&self) {
        for (index, sim_task) in self.tasks.iter().enumerate() {
            let Some(machine) = &sim_task.machine else {
                continue;
            };
            let task = machine.task();
            match task.desired_status {
                TaskStatus::Stopped => {
                    if task.known_status != TaskStatus::Stopped {
                        self.fail(format!(
                            "task {index}: desired STOPPED but known {} once calm",
                            task.known_status
                        ));
                    }
                }
                _ => {
                    let blocked = (0..task.containers.len()).any(|container| {
                        matches!(
                            next_state(task, container, &self.settings.rules, self.now),
                            NextState::Blocked { .. }
                        )
                    });
                    let waits_for_resources = task.known_status == TaskStatus::None
                        && self.host_resources.ledger().is_queued(&task.id);
                    if task.known_status != TaskStatus::Running && !blocked && !waits_for_resources
                    {
                        self.fail(format!(
                            "task {index}: desired RUNNING but known {} once calm, and no \
                             dependency blocks it",
                            task.known_status
                        ));
                    }
                }
            }
            // Docker agrees with every container known RUNNING.
            let docker = self.docker.state();
            for container in &task.containers {
                if container.known_status != ContainerStatus::Running {
                    continue;
                }
                let running = container
                    .docker_id
                    .as_ref()
                    .and_then(|id| docker.containers.get(id))
                    .is_some_and(|c| c.state == SimState::Running);
                if !running {
                    self.fail(format!(
                        "task {index}: container {} known RUNNING, but Docker does not run it",
                        container.name()
                    ));
                }
            }
        }
    }

    /// Invariant 8: the host is never over-committed, a port has one holder, and the queue is
    /// first come, first served (no waiting task is earlier than an admitted one).
    fn check_host_resources(&self) {
        let ledger = self.host_resources.ledger();
        let (memory, _) = ledger.used();
        if memory > self.host_capacity.memory_mib {
            self.fail(format!(
                "admitted tasks hold {memory} MiB of the host's {} MiB: {:?}",
                self.host_capacity.memory_mib,
                ledger.admitted()
            ));
        }
        let start_of = |id: &String| {
            self.tasks
                .iter()
                .find(|task| &task.id == id)
                .map_or(0, |task| task.start_sequence)
        };
        let earliest_waiting = ledger.queued().iter().map(start_of).min();
        let latest_admitted = ledger.admitted().iter().map(start_of).max();
        if let (Some(waiting), Some(admitted)) = (earliest_waiting, latest_admitted) {
            if waiting < admitted {
                self.fail(format!(
                    "the task with start number {waiting} waits for host resources while the                      later {admitted} is admitted (queue {:?}, admitted {:?})",
                    ledger.queued(),
                    ledger.admitted()
                ));
            }
        }
    }

    fn check_finished(&mut self) {
        let outstanding = self.wait_group.outstanding();
        if !outstanding.is_empty() {
            self.fail(format!("stop numbers never finished: {outstanding:?}"));
        }
        let ledger = self.host_resources.ledger();
        if !ledger.admitted().is_empty() || !ledger.queued().is_empty() {
            self.fail(format!(
                "host resources still held after every task was cleaned up: admitted {:?},                  queued {:?}",
                ledger.admitted(),
                ledger.queued()
            ));
        }
        let docker = self.docker.state();
        self.leftovers = docker.containers.len() as u64;
        self.never_removed = docker
            .containers
            .keys()
            .filter(|id| !self.removal_failed.contains(*id))
            .count() as u64;
        for (id, container) in &docker.containers {
            if container.state == SimState::Running
                && !self.wedged.contains(id)
                && !self.removal_failed.contains(id)
            {
                self.fail(format!(
                    "container {} still runs after every task was cleaned up",
                    container.name
                ));
            }
        }
        drop(docker);
        for (index, task) in self.tasks.iter().enumerate() {
            let stopped = task
                .logged
                .get(&None)
                .is_some_and(|(status, _)| status == "STOPPED");
            if !stopped {
                self.fail(format!("task {index}: cleaned up without a STOPPED event"));
            }
        }
        self.stats.reached_running = self.tasks.iter().filter(|t| t.reached_running).count() as u64;
        let docker = self.docker.state();
        self.stats.docker_calls = docker.calls;
        self.stats.docker_failures = docker.failures;
        self.stats.leftovers = self.leftovers;
        self.stats.never_removed = self.never_removed;
    }
}

/// One of the simulated Docker's running containers, picked at random (the caller offers an
/// exit or a health change only while one runs).
fn random_running_container(
    containers: &BTreeMap<String, docker::SimContainer>,
    random: &mut Random,
) -> String {
    let running: Vec<&String> = containers
        .iter()
        .filter(|(_, container)| container.state == SimState::Running)
        .map(|(id, _)| id)
        .collect();
    running[random.below(running.len() as u64) as usize].clone()
}

fn short_call(call: &DockerCall) -> String {
    match call {
        DockerCall::Create {
            container, spec, ..
        } => format!("Create {container} as {}", spec.name),
        other => format!("{other:?}"),
    }
}

/// The command that replays one seed.
fn replay_command(seed: u64) -> String {
    format!("DECKHAND_SIM_SEED={seed} cargo test --lib engine::simulation -- --nocapture")
}

fn run_seed(seed: u64, full_log: bool) -> Result<Stats, String> {
    let outcome = std::panic::catch_unwind(|| {
        let mut simulation = Simulation::new(seed, full_log);
        simulation.run(300);
        if full_log {
            eprintln!("{}", simulation.log.join("\n"));
        }
        simulation.stats
    });
    outcome.map_err(|panic| crate::text::panic_message(panic.as_ref()))
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.trim().parse().ok())
}

#[test]
fn the_engine_keeps_its_promises_over_many_seeds_with_crashes() {
    if let Some(seed) = env_number("DECKHAND_SIM_SEED") {
        if let Err(message) = run_seed(seed, true) {
            panic!(
                "simulation seed {seed} failed: {message}\nreplay: {}",
                replay_command(seed)
            );
        }
        return;
    }
    let seeds = env_number("DECKHAND_SIM_SEEDS")
        .or_else(|| env_number("DECKHAND_SIMULATION_SEEDS"))
        .unwrap_or(2_000);
    let first = env_number("DECKHAND_SIM_FIRST_SEED").unwrap_or(0);
    // The panic hook would print every caught failure; one report is enough.
    let started = std::time::Instant::now();
    let mut total = Stats::default();
    let mut failures: Vec<(u64, String)> = Vec::new();
    // Only this thread's panics are silenced: the hook is global, and tests running beside
    // this one must keep their failure messages.
    let previous: std::sync::Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
        std::sync::Arc::from(std::panic::take_hook());
    let simulating = std::thread::current().id();
    let for_others = std::sync::Arc::clone(&previous);
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != simulating {
            for_others(info);
        }
    }));
    for seed in first..first + seeds {
        match run_seed(seed, false) {
            Ok(stats) => total.add(&stats),
            Err(message) => {
                failures.push((seed, message));
                if failures.len() >= 3 {
                    break;
                }
            }
        }
    }
    let _ours = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| previous(info)));
    eprintln!(
        "simulated {seeds} seeds in {:.1}s: {total:?}",
        started.elapsed().as_secs_f64()
    );
    if let Some((seed, message)) = failures.first() {
        let others: Vec<u64> = failures.iter().skip(1).map(|(seed, _)| *seed).collect();
        panic!(
            "simulation seed {seed} failed (other failing seeds: {others:?}): {message}\n\
             replay it with: {}",
            replay_command(*seed)
        );
    }
    // What the seeds covered, so a simulator that stopped exploring fails loudly.
    if seeds >= 500 {
        assert!(total.crashes > seeds / 2, "too few crashes: {total:?}");
        assert!(
            total.reached_running * 3 > total.tasks,
            "too few tasks ran: {total:?}"
        );
        assert!(total.replacements > 0, "no replacement: {total:?}");
        assert!(total.adopted > 0, "no container adopted by name: {total:?}");
        assert!(
            total.redeliveries > 0,
            "no event redelivered after a crash: {total:?}"
        );
        assert!(
            total.checkpoint_failures > 0 && total.refused_stops > 0,
            "no checkpoint failed, or no stop was refused for it: {total:?}"
        );
        assert!(total.report_failures > 0, "no report failed: {total:?}");
        assert!(
            total.resource_waits > 0,
            "no task waited for host resources: {total:?}"
        );
    }
}
