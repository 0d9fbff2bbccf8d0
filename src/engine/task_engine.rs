//! `TaskEngine`: accepts tasks and stops, numbers them, and runs one managed-task thread per
//! task; owns the Docker-id → task index, the sequential wait group, the event log and the Docker
//! events thread; serves a read-only snapshot of every task.
//!
//! Commands (submit, stop) are serialised by one lock so sequence numbers follow acceptance order,
//! and a stop is registered in the wait group before the lock is released: a start accepted
//! after it always sees it (ENGINE-SEMANTICS §9). Nothing here writes a task's statuses; only the
//! task's own thread does, and it publishes a snapshot (and writes its checkpoint) after each
//! change.
//!
//! Durability (§11), when the engine has a state store: a sequence number is durable before it
//! is handed out; a submitted task's file is written before `submit` answers; a stop is
//! acknowledged only once the task's thread wrote the checkpoint that holds it; a cleaned-up
//! task's file is deleted. [`TaskEngine::start_durable`] restores saved tasks: it subscribes to
//! Docker events first, routes the saved Docker ids, reconciles each container with Docker
//! (waiting for Docker when it does not answer), reports leftover containers, re-adds stop
//! numbers to the wait group, and only then starts the tasks' loops.

use crate::engine::container_spec::{
    assign_docker_names, create_request, new_task_id, random_hex, LABEL_CLUSTER,
};
use crate::engine::docker_events::{
    event_filter, run_events_thread, DockerObservation, EventsThreadControl, OnReconnect, Reconnect,
};
use crate::engine::handle::{EngineError, EngineHandle};
use crate::engine::managed_task::{
    now_millis, run_managed_task, DesiredCommand, ManagedTask, ManagedTaskSettings, TaskInboxes,
    TaskRoute, DOCKER_EVENT_INBOX_CAPACITY,
};
use crate::engine::restore::{leftover_containers, reconcile_task, relist_plan};
use crate::engine::shared::{Commands, TaskHandle, TaskShared};
use crate::engine::transition::RuleConfig;
use crate::engine::wait_group::SequentialWaitGroup;
use crate::engine::worker_pool::{DockerPool, PoolStats, DEFAULT_DOCKER_CONCURRENCY};
use crate::engine::workers::{StopRetry, WorkerContext};
use crate::report::{Event, EventLog, DEFAULT_EVENT_CAPACITY};
use crate::runtime::{ContainerRuntime, ContainerSummary};
use crate::state::{StateError, StateStore};
use crate::task::{PullBehavior, Task, TaskDefinition, TaskStatus};
use crossbeam_channel::{bounded, unbounded, Sender};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// Engine settings; defaults per ENGINE-SEMANTICS §13.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `ECS_CLUSTER`: used in ARNs, labels and the event subscription.
    pub cluster: String,
    /// `ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION`: from known STOPPED to container removal.
    pub cleanup_wait: Duration,
    /// `ECS_CONTAINER_STOP_TIMEOUT`: SIGTERM → SIGKILL grace when a container sets none.
    pub stop_timeout: Duration,
    /// How often a steady task re-inspects its containers (catches missed events).
    pub steady_check_interval: Duration,
    /// How often a task blocked on a dependency re-inspects (and re-checks start timeouts).
    pub dependency_poll_interval: Duration,
    /// How often cleanup re-checks that STOPPED was reported.
    pub sent_poll_interval: Duration,
    /// `ECS_IMAGE_PULL_BEHAVIOR`.
    pub pull_behavior: PullBehavior,
    /// `ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT`.
    pub pull_dependent_containers_upfront: bool,
    /// `ECS_DISABLE_PRIVILEGED`: reject tasks with a privileged container.
    pub disable_privileged: bool,
    /// Events kept in memory for subscribers.
    pub event_capacity: usize,
    /// Retries of a failed stop call.
    pub stop_retry: StopRetry,
    /// Back-off when the Docker event stream breaks (also used while restore waits for Docker).
    pub events_reconnect: Reconnect,
    /// `DECKHAND_REMOVE_ORPHANS`: remove, at restore, containers of this cluster that no saved
    /// task knows (otherwise they are only reported).
    pub remove_orphans: bool,
    /// How long a stop waits for its checkpoint before it is refused.
    pub durable_ack_timeout: Duration,
    /// `DECKHAND_DOCKER_CONCURRENCY`: Docker calls made at once (the worker pool's size).
    pub docker_concurrency: usize,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            cluster: "default".to_string(),
            cleanup_wait: Duration::from_secs(3 * 3600),
            stop_timeout: Duration::from_secs(30),
            steady_check_interval: Duration::from_secs(5 * 60),
            dependency_poll_interval: Duration::from_secs(5),
            sent_poll_interval: Duration::from_secs(30),
            pull_behavior: PullBehavior::Default,
            pull_dependent_containers_upfront: false,
            disable_privileged: false,
            event_capacity: DEFAULT_EVENT_CAPACITY,
            stop_retry: StopRetry::default(),
            events_reconnect: Reconnect {
                initial: Duration::from_secs(1),
                maximum: Duration::from_secs(30),
            },
            remove_orphans: false,
            durable_ack_timeout: Duration::from_secs(30),
            docker_concurrency: DEFAULT_DOCKER_CONCURRENCY,
        }
    }
}

impl EngineConfig {
    /// The engine's part of the agent configuration; the rest keeps its defaults.
    pub fn from_agent_config(config: &crate::config::Config) -> EngineConfig {
        EngineConfig {
            cluster: config.cluster.clone(),
            cleanup_wait: config.task_cleanup_wait,
            stop_timeout: config.container_stop_timeout,
            steady_check_interval: config.steady_state_check_interval,
            pull_behavior: config.image_pull_behavior.into(),
            pull_dependent_containers_upfront: config.pull_dependent_containers_upfront,
            disable_privileged: config.privileged_disabled,
            remove_orphans: config.remove_orphans,
            docker_concurrency: config.docker_concurrency,
            ..EngineConfig::default()
        }
    }
}

/// How long shutdown waits for the Docker worker pool's threads to end. Idle workers end at
/// once; one still inside a Docker call (a pull can take hours) is left to finish it on its own:
/// every task's loop has ended, so nothing needs its answer, and the process is about to exit.
pub const WORKER_SHUTDOWN_GRACE: Duration = Duration::from_millis(250);

/// What the engine shares with its managed tasks (`TaskShared`, reached through `Deref`), and
/// the engine's configuration.
pub(crate) struct EngineShared {
    pub(crate) config: EngineConfig,
    pub(crate) tasks: Arc<TaskShared>,
}

impl std::ops::Deref for EngineShared {
    type Target = TaskShared;

    fn deref(&self) -> &TaskShared {
        &self.tasks
    }
}

impl EngineShared {
    fn settings(&self) -> ManagedTaskSettings {
        ManagedTaskSettings {
            cluster: self.config.cluster.clone(),
            rules: RuleConfig {
                pull_behavior: self.config.pull_behavior,
                pull_dependent_containers_upfront: self.config.pull_dependent_containers_upfront,
            },
            stop_timeout: self.config.stop_timeout,
            steady_check_interval: self.config.steady_check_interval,
            cleanup_wait: self.config.cleanup_wait,
            dependency_poll_interval: self.config.dependency_poll_interval,
            sent_poll_interval: self.config.sent_poll_interval,
        }
    }
}

/// The task engine. Dropping it without [`TaskEngine::shutdown`] leaves its threads running.
pub struct TaskEngine {
    shared: Arc<EngineShared>,
    events_control: Arc<EventsThreadControl>,
    events_stop: Mutex<Option<Sender<()>>>,
    events_thread: Mutex<Option<JoinHandle<()>>>,
}

impl TaskEngine {
    /// Starts the engine: subscribes to Docker events (before any task runs, so nothing is
    /// missed; if Docker is unreachable the events thread keeps retrying) and starts the events
    /// thread.
    pub fn start(
        runtime: Arc<dyn ContainerRuntime>,
        config: EngineConfig,
    ) -> std::io::Result<TaskEngine> {
        let reporter = EventLog::new(config.event_capacity);
        TaskEngine::start_with(runtime, config, None, reporter)
    }

    /// Starts the engine over a state store and restores `saved` (the tasks the store loaded):
    /// ENGINE-SEMANTICS §11. Returns once every saved task's loop runs; waits (logging why)
    /// while Docker does not answer.
    pub fn start_durable(
        runtime: Arc<dyn ContainerRuntime>,
        config: EngineConfig,
        store: Arc<StateStore>,
        saved: Vec<Task>,
    ) -> Result<TaskEngine, EngineStartError> {
        let reporter = EventLog::durable(config.event_capacity, store.event_log())
            .map_err(EngineStartError::State)?;
        let engine = TaskEngine::start_with(runtime, config, Some(store), reporter)
            .map_err(EngineStartError::Thread)?;
        engine.restore(saved).map_err(EngineStartError::Thread)?;
        Ok(engine)
    }

    fn start_with(
        runtime: Arc<dyn ContainerRuntime>,
        config: EngineConfig,
        store: Option<Arc<StateStore>>,
        reporter: EventLog,
    ) -> std::io::Result<TaskEngine> {
        let docker_pool = DockerPool::start(config.docker_concurrency)?;
        let tasks = Arc::new(TaskShared {
            docker_pool,
            reporter: Arc::new(reporter),
            wait_group: Arc::new(SequentialWaitGroup::new()),
            docker_index: Arc::new(RwLock::new(HashMap::new())),
            worker_context: WorkerContext {
                runtime: Arc::clone(&runtime),
                pull_behavior: config.pull_behavior,
                pulled_images: Arc::new(Mutex::new(HashSet::new())),
                stop_retry: config.stop_retry,
                store: store.clone(),
            },
            store,
            snapshots: Mutex::new(BTreeMap::new()),
            snapshot_changed: Condvar::new(),
            commands: Mutex::new(Commands::default()),
        });
        let shared = Arc::new(EngineShared { config, tasks });
        let filter = event_filter(&shared.config.cluster);
        let subscribed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.events(&filter)));
        let first_stream = match subscribed {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(error)) => {
                log::warn!("cannot subscribe to Docker events yet ({error}); will retry");
                None
            }
            // The events thread subscribes again (and survives its own panics).
            Err(panic) => {
                log::error!(
                    "subscribing to Docker events panicked ({}); will retry",
                    crate::engine::worker_pool::panic_message(panic.as_ref())
                );
                None
            }
        };
        let events_control = Arc::new(EventsThreadControl::default());
        let (events_stop, events_stop_signal) = bounded(1);
        let events_thread = {
            let runtime = Arc::clone(&runtime);
            let cluster = shared.config.cluster.clone();
            let index = Arc::clone(&shared.docker_index);
            let control = Arc::clone(&events_control);
            let reconnect = shared.config.events_reconnect;
            let relist_shared = Arc::clone(&shared);
            let on_reconnect: OnReconnect = Box::new(move || relist_by_label(&relist_shared));
            std::thread::Builder::new()
                .name("docker-events".to_string())
                .spawn(move || {
                    run_events_thread(
                        runtime,
                        cluster,
                        index,
                        control,
                        events_stop_signal,
                        first_stream,
                        reconnect,
                        on_reconnect,
                    )
                })?
        };
        Ok(TaskEngine {
            shared,
            events_control,
            events_stop: Mutex::new(Some(events_stop)),
            events_thread: Mutex::new(Some(events_thread)),
        })
    }

    /// Ends every managed-task loop, the events thread and the Docker worker pool, in that
    /// order, and joins them (a worker still inside a Docker call after
    /// [`WORKER_SHUTDOWN_GRACE`] is left to finish on its own). Containers keep running; no
    /// command is accepted afterwards.
    pub fn shutdown(&self) {
        let handles: Vec<TaskHandle> = {
            let mut commands = self.shared.commands();
            commands.shutting_down = true;
            commands.tasks.drain().map(|(_, handle)| handle).collect()
        };
        for handle in &handles {
            let _ = handle.shutdown.send(());
        }
        for mut handle in handles {
            if let Some(thread) = handle.thread.take() {
                if thread.join().is_err() {
                    log::error!("a managed-task thread panicked");
                }
            }
        }
        self.events_control.stop();
        drop(
            self.events_stop
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .take(),
        );
        let events_thread = self
            .events_thread
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        if let Some(thread) = events_thread {
            if thread.join().is_err() {
                log::error!("the Docker events thread panicked");
            }
        }
        // Last: nothing queues a call any more.
        self.shared.docker_pool.shutdown(WORKER_SHUTDOWN_GRACE);
    }

    /// The Docker worker pool's counters, for diagnostics, tests and the benchmark.
    pub fn docker_pool_stats(&self) -> PoolStats {
        self.shared.docker_pool.stats()
    }

    /// The wait group, for diagnostics and tests.
    pub fn wait_group(&self) -> &SequentialWaitGroup {
        &self.shared.wait_group
    }

    /// The event log.
    pub fn event_log(&self) -> &EventLog {
        &self.shared.reporter
    }

    /// A snapshot of one task.
    pub fn task(&self, task_id: &str) -> Option<Task> {
        self.shared.snapshots().get(task_id).cloned()
    }

    /// Waits until the snapshot of `task_id` (`None` once the task is forgotten) satisfies
    /// `condition`, for at most `timeout`. Returns whether it did.
    pub fn wait_for_task(
        &self,
        task_id: &str,
        timeout: Duration,
        mut condition: impl FnMut(Option<&Task>) -> bool,
    ) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut snapshots = self.shared.snapshots();
        loop {
            if condition(snapshots.get(task_id)) {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            snapshots = self
                .shared
                .snapshot_changed
                .wait_timeout(snapshots, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poison| poison.into_inner().0);
        }
    }

    /// Number of managed-task threads still running.
    pub fn running_task_count(&self) -> usize {
        self.shared.commands().tasks.len()
    }

    /// The next command sequence number: durable before it is used when there is a store.
    fn next_sequence(&self, commands: &Commands) -> Result<u64, EngineError> {
        match &self.shared.store {
            Some(store) => store
                .next_sequence()
                .map_err(|error| unavailable("cannot save the sequence counter", error)),
            None => Ok(commands.last_sequence + 1),
        }
    }

    /// `unsaved`: the task differs from its checkpoint (its first pass writes it).
    fn spawn_task(
        &self,
        task: Task,
        unfinished_stop: Option<u64>,
        unsaved: bool,
        inboxes: TaskInboxes,
    ) -> std::io::Result<JoinHandle<()>> {
        let id = task.id.clone();
        let mut machine = ManagedTask::new(task, self.shared.settings(), unfinished_stop);
        if unsaved {
            machine = machine.unsaved_changes();
        }
        let shared = Arc::clone(&self.shared.tasks);
        std::thread::Builder::new()
            .name(format!("task-{id}"))
            .spawn(move || run_managed_task(machine, inboxes, shared))
    }

    fn route_containers(&self, task: &Task, route: &TaskRoute) {
        let mut index = self
            .shared
            .docker_index
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        for docker_id in task.containers.iter().filter_map(|c| c.docker_id.as_ref()) {
            index.insert(docker_id.clone(), route.clone());
        }
    }

    /// §11: reconcile every saved task with Docker and start its loop. The Docker event
    /// subscription already exists (made in `start_with`), and each task's saved Docker ids are
    /// routed before any container is inspected, so no change in between is lost.
    fn restore(&self, saved: Vec<Task>) -> std::io::Result<()> {
        let started = std::time::Instant::now();
        let runtime = Arc::clone(&self.shared.worker_context.runtime);
        let mut prepared: Vec<Prepared> = saved
            .into_iter()
            .map(|task| {
                let (desired, shutdown, inboxes) = new_inboxes();
                self.route_containers(&task, &inboxes.route);
                Prepared {
                    task,
                    changed: false,
                    desired,
                    shutdown,
                    inboxes,
                }
            })
            .collect();

        let mut waiting: Vec<usize> = (0..prepared.len()).collect();
        let mut backoff = self.shared.config.events_reconnect.initial;
        let mut round = 0;
        loop {
            round += 1;
            let mut unanswered = Vec::new();
            let mut answered_badly = 0;
            for index in waiting {
                let Prepared {
                    task,
                    changed,
                    inboxes,
                    ..
                } = &mut prepared[index];
                let outcome = reconcile_task(runtime.as_ref(), task, now_millis());
                *changed |= outcome.changed;
                if outcome.adopted {
                    self.route_containers(task, &inboxes.route);
                    // Events about it before its id was routed were dropped: re-inspect.
                    let _ = inboxes.route.resync.try_send(());
                }
                if outcome.docker_unreachable {
                    unanswered.push(index);
                } else if outcome.inspect_failed {
                    if round < RESTORE_INSPECT_ROUNDS {
                        answered_badly += 1;
                        unanswered.push(index);
                    } else {
                        // Docker answers, but keeps failing to inspect a container it still
                        // lists: start the task with that container as it was (never STOPPED
                        // for it), and let its loop inspect again, with back-off, once it runs.
                        log::warn!(
                            "restore: task {}: Docker keeps failing to inspect a container; \
                             starting the task with its saved status, its loop inspects again",
                            task.id
                        );
                        let _ = inboxes.route.resync.try_send(());
                    }
                }
            }
            if unanswered.is_empty() {
                break;
            }
            log::warn!(
                "restore: Docker does not answer (or answers an inspect with an error, for {} of \
                 them); {} saved task(s) wait to be reconciled; retrying in {}s",
                answered_badly,
                unanswered.len(),
                backoff.as_secs_f64()
            );
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(self.shared.config.events_reconnect.maximum);
            waiting = unanswered;
        }

        self.report_leftovers(
            &prepared
                .iter()
                .map(|prepared| prepared.task.clone())
                .collect::<Vec<_>>(),
        );

        let mut commands = self.shared.commands();
        // Every saved stop that has not finished blocks later starts again (§9), before any
        // loop runs.
        for Prepared { task, .. } in &prepared {
            if task.stop_sequence > 0 && task.known_status < TaskStatus::Stopped {
                self.shared.wait_group.add(task.stop_sequence, 1);
            }
            commands.last_sequence = commands
                .last_sequence
                .max(task.start_sequence)
                .max(task.stop_sequence);
        }
        let count = prepared.len();
        for Prepared {
            task,
            changed,
            desired,
            shutdown,
            inboxes,
        } in prepared
        {
            let unfinished_stop = (task.stop_sequence > 0
                && task.known_status < TaskStatus::Stopped)
                .then_some(task.stop_sequence);
            let stop_registered = task.stop_sequence > 0;
            let id = task.id.clone();
            let route = inboxes.route.clone();
            self.shared.publish_snapshot(&task);
            let thread = match self.spawn_task(task, unfinished_stop, changed, inboxes) {
                Ok(thread) => thread,
                Err(error) => {
                    if let Some(sequence) = unfinished_stop {
                        self.shared.wait_group.done(sequence);
                    }
                    return Err(error);
                }
            };
            commands.tasks.insert(
                id,
                TaskHandle {
                    desired,
                    shutdown,
                    stop_registered,
                    thread: Some(thread),
                    route,
                },
            );
        }
        drop(commands);
        if count > 0 {
            log::info!(
                "restored {count} task(s) in {} ms",
                started.elapsed().as_millis()
            );
        }
        Ok(())
    }

    /// Containers of this cluster that no saved task knows: reported, and removed only when
    /// `DECKHAND_REMOVE_ORPHANS=true`.
    fn report_leftovers(&self, tasks: &[Task]) {
        let runtime = &self.shared.worker_context.runtime;
        let filter = vec![format!("{}={}", LABEL_CLUSTER, self.shared.config.cluster)];
        let listed = match runtime.list_containers(&filter) {
            Ok(listed) => listed,
            Err(error) => {
                log::warn!("cannot list this cluster's containers to look for leftovers: {error}");
                return;
            }
        };
        let leftovers: Vec<ContainerSummary> = leftover_containers(&listed, tasks)
            .into_iter()
            .cloned()
            .collect();
        handle_orphans(&self.shared, &leftovers, "at start-up");
    }

    fn reject_if_invalid(&self, task: &Task) -> Result<(), EngineError> {
        if self.shared.config.disable_privileged {
            if let Some(container) = task.containers.iter().find(|c| c.definition.privileged) {
                return Err(EngineError::Rejected {
                    reason: format!(
                        "container {:?} is privileged, and privileged containers are disabled on this host (ECS_DISABLE_PRIVILEGED)",
                        container.name()
                    ),
                });
            }
        }
        for index in 0..task.containers.len() {
            create_request(task, index, &self.shared.config.cluster)
                .map_err(|reason| EngineError::Rejected { reason })?;
        }
        Ok(())
    }
}

fn unavailable(what: &str, error: impl std::fmt::Display) -> EngineError {
    EngineError::Unavailable {
        reason: format!("{what}: {error}"),
    }
}

/// Restore rounds for a task whose containers Docker lists but fails to inspect (a 500, a
/// malformed answer) before its loop starts anyway, with those containers as they were saved.
/// Docker not answering at all is waited for without limit: nothing can be done without it.
const RESTORE_INSPECT_ROUNDS: u32 = 5;

/// A saved task on its way back: reconciled (`changed`: it differs from its file) and routed,
/// its loop not started yet.
struct Prepared {
    task: Task,
    changed: bool,
    desired: Sender<DesiredCommand>,
    shutdown: Sender<()>,
    inboxes: TaskInboxes,
}

/// Why a durable engine could not start.
#[derive(Debug)]
pub enum EngineStartError {
    /// The durable event log could not be read.
    State(StateError),
    /// A thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for EngineStartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineStartError::State(error) => write!(f, "cannot restore state: {error}"),
            EngineStartError::Thread(error) => write!(f, "cannot start a thread: {error}"),
        }
    }
}

impl std::error::Error for EngineStartError {}

/// Containers of this cluster that belong to no task: each is logged, and removed only when
/// `DECKHAND_REMOVE_ORPHANS=true`. `moment` says when they were found, for the log.
fn handle_orphans(shared: &EngineShared, orphans: &[ContainerSummary], moment: &str) {
    let runtime = &shared.worker_context.runtime;
    for orphan in orphans {
        let name = orphan.name.trim_start_matches('/');
        if shared.config.remove_orphans {
            match runtime.remove_container(&orphan.id, true) {
                Ok(()) => log::warn!(
                    "removed leftover container {name} ({}) found {moment}: it carries this \
                     cluster's labels but belongs to no task (DECKHAND_REMOVE_ORPHANS=true)",
                    orphan.id
                ),
                Err(error) => log::warn!(
                    "cannot remove leftover container {name} ({}): {error}",
                    orphan.id
                ),
            }
        } else {
            log::warn!(
                "leftover container {name} ({}) found {moment} carries this cluster's labels but \
                 belongs to no task; leaving it alone (set DECKHAND_REMOVE_ORPHANS=true to remove \
                 such containers)",
                orphan.id
            );
        }
    }
}

/// The re-list by label after the Docker event stream reconnected (Docker restarted, or the
/// connection broke): containers created meanwhile whose task never recorded their id (a
/// create whose answer was lost) are handed to that task, which adopts them by name; containers
/// of this cluster that belong to no task are reported (and removed only when
/// `DECKHAND_REMOVE_ORPHANS=true`). Runs on the events thread; never waits on a task.
fn relist_by_label(shared: &EngineShared) {
    // Docker is back: every task that waits to retry a call Docker was away for makes it now
    // (those with containers in Docker were woken by the events thread already; this reaches
    // the ones still pulling or creating). A full one-slot inbox already holds a wake-up.
    for handle in shared.commands().tasks.values() {
        let _ = handle.route.resync.try_send(());
    }
    // The tasks first, then the list: a container listed after this snapshot was created by a
    // task in it (a newer task's containers are created later), so nothing new looks orphaned.
    let tasks: Vec<Task> = shared.snapshots().values().cloned().collect();
    let filter = vec![format!("{}={}", LABEL_CLUSTER, shared.config.cluster)];
    let listed = match shared.worker_context.runtime.list_containers(&filter) {
        Ok(listed) => listed,
        Err(error) => {
            log::warn!("cannot list this cluster's containers after the reconnect: {error}");
            return;
        }
    };
    let plan = relist_plan(&listed, &tasks);
    handle_orphans(
        shared,
        &plan.orphans,
        "after Docker's event stream reconnected",
    );
    if !plan.adopt.is_empty() {
        let commands = shared.commands();
        for adoption in plan.adopt {
            let Some(handle) = commands.tasks.get(&adoption.task_id) else {
                continue;
            };
            let observation = DockerObservation::FoundByName {
                docker_name: adoption.docker_name,
            };
            if handle
                .route
                .docker_events
                .try_send((adoption.docker_id, observation))
                .is_err()
            {
                log::warn!(
                    "task {}: its inbox is full; a container found by name is adopted at the \
                     next reconnect",
                    adoption.task_id
                );
            }
        }
    }
}

/// A task's inboxes: the engine keeps the senders, the task's thread the receivers.
fn new_inboxes() -> (Sender<DesiredCommand>, Sender<()>, TaskInboxes) {
    let (desired_sender, desired) = unbounded();
    let (shutdown_sender, shutdown) = bounded(1);
    let (docker_events_sender, docker_events) = bounded(DOCKER_EVENT_INBOX_CAPACITY);
    let (resync_sender, resync) = bounded(1);
    let inboxes = TaskInboxes {
        shutdown,
        desired,
        docker_events,
        resync,
        route: TaskRoute {
            docker_events: docker_events_sender,
            resync: resync_sender,
        },
    };
    (desired_sender, shutdown_sender, inboxes)
}

impl TaskEngine {
    /// Accepts a task (see [`EngineHandle::submit`]) with the control source's mark, which is
    /// part of the checkpoint that makes it durable.
    fn submit_with_source(
        &self,
        definition: TaskDefinition,
        source: Option<String>,
    ) -> Result<Task, EngineError> {
        let mut commands = self.shared.commands();
        if commands.shutting_down {
            return Err(EngineError::ShuttingDown);
        }
        let id = new_task_id().map_err(|error| unavailable("cannot make a task id", error))?;
        let suffixes = (0..definition.containers.len())
            .map(|_| random_hex(8))
            .collect::<std::io::Result<Vec<String>>>()
            .map_err(|error| unavailable("cannot make container names", error))?;
        let sequence = self.next_sequence(&commands)?;
        let mut task = Task::new(
            id.clone(),
            &self.shared.config.cluster,
            definition,
            sequence,
            now_millis(),
        );
        task.source = source;
        let mut suffixes = suffixes.into_iter();
        assign_docker_names(&mut task, || suffixes.next().unwrap_or_default());
        self.reject_if_invalid(&task)?;
        // Durable before it is acknowledged, with its containers' fixed names.
        self.shared
            .checkpoint(&task)
            .map_err(|error| unavailable("cannot save the task", error))?;

        let (desired_sender, shutdown_sender, inboxes) = new_inboxes();
        let route = inboxes.route.clone();
        self.shared.publish_snapshot(&task);
        let thread = self
            .spawn_task(task.clone(), None, false, inboxes)
            .map_err(|error| {
                self.shared.snapshots().remove(&id);
                if let Some(store) = &self.shared.store {
                    let _ = store.delete_task(&id);
                }
                unavailable("cannot start the task's thread", error)
            })?;
        commands.last_sequence = sequence;
        commands.tasks.insert(
            id.clone(),
            TaskHandle {
                desired: desired_sender,
                shutdown: shutdown_sender,
                stop_registered: false,
                thread: Some(thread),
                route,
            },
        );
        log::info!(
            "task {id}: accepted {}:{} with sequence number {sequence}",
            task.family,
            task.revision
        );
        Ok(task)
    }
}

impl EngineHandle for TaskEngine {
    fn submit(&self, definition: TaskDefinition) -> Result<Task, EngineError> {
        self.submit_with_source(definition, None)
    }

    fn submit_from_source(
        &self,
        definition: TaskDefinition,
        source: String,
    ) -> Result<Task, EngineError> {
        self.submit_with_source(definition, Some(source))
    }

    fn stop(&self, task_id: &str) -> Result<(), EngineError> {
        let mut commands = self.shared.commands();
        if commands.shutting_down {
            return Err(EngineError::ShuttingDown);
        }
        if !commands.tasks.contains_key(task_id) {
            return Err(EngineError::NotFound {
                task: task_id.to_string(),
            });
        }
        let sequence = self.next_sequence(&commands)?;
        let handle = commands
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| EngineError::NotFound {
                task: task_id.to_string(),
            })?;
        let registered = !handle.stop_registered;
        if registered {
            // Registered here, on the accepting thread, before the next command is accepted.
            self.shared.wait_group.add(sequence, 1);
            handle.stop_registered = true;
        }
        let (durable_sender, durable) = bounded(1);
        let command = DesiredCommand {
            status: TaskStatus::Stopped,
            sequence,
            registered,
            durable: self.shared.store.is_some().then_some(durable_sender),
        };
        if handle.desired.send(command).is_err() && registered {
            // The task's loop is gone (it cannot be: forget() removes the handle first).
            self.shared.wait_group.done(sequence);
        }
        commands.last_sequence = sequence;
        // Wait for the checkpoint without the command lock: the task's thread may need it
        // (to forget itself) before it gets to the stop.
        drop(commands);
        if self.shared.store.is_some() {
            match durable.recv_timeout(self.shared.config.durable_ack_timeout) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    return Err(unavailable("the stop could not be saved", error));
                }
                // The task finished and was forgotten before it read the stop: it is stopped.
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {}
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    return Err(EngineError::Unavailable {
                        reason: format!(
                            "the stop of task {task_id} was not saved within {}s",
                            self.shared.config.durable_ack_timeout.as_secs()
                        ),
                    });
                }
            }
        }
        log::info!("task {task_id}: stop accepted with sequence number {sequence}");
        Ok(())
    }

    fn tasks(&self) -> Vec<Task> {
        self.shared.snapshots().values().cloned().collect()
    }

    fn events_since(&self, after: u64, wait: Duration) -> Vec<Event> {
        self.shared.reporter.events_since(after, wait)
    }

    fn cluster(&self) -> String {
        self.shared.config.cluster.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Scope};
    use std::path::Path;

    #[test]
    fn engine_settings_come_from_the_agent_configuration() {
        let file = "ECS_CLUSTER=edge\nECS_ENGINE_TASK_CLEANUP_WAIT_DURATION=10m\nECS_CONTAINER_STOP_TIMEOUT=7s\nECS_IMAGE_PULL_BEHAVIOR=once\nECS_PULL_DEPENDENT_CONTAINERS_UPFRONT=true\nECS_DISABLE_PRIVILEGED=true\nDECKHAND_DOCKER_CONCURRENCY=3\n";
        let config = Config::from_sources(
            Some((Path::new("/etc/deckhand/deckhand.conf"), file)),
            &|_| None,
            Scope::System,
        )
        .expect("a valid configuration");
        let engine = EngineConfig::from_agent_config(&config);
        assert_eq!(engine.cluster, "edge");
        assert_eq!(engine.cleanup_wait, Duration::from_secs(600));
        assert_eq!(engine.stop_timeout, Duration::from_secs(7));
        assert_eq!(engine.pull_behavior, PullBehavior::Once);
        assert!(engine.pull_dependent_containers_upfront);
        assert!(engine.disable_privileged);
        assert_eq!(engine.docker_concurrency, 3);
        assert_eq!(
            engine.steady_check_interval,
            config.steady_state_check_interval
        );
    }

    #[test]
    fn defaults_follow_the_ecs_defaults() {
        let config = EngineConfig::default();
        assert_eq!(config.cluster, "default");
        assert_eq!(config.cleanup_wait, Duration::from_secs(3 * 3600));
        assert_eq!(config.stop_timeout, Duration::from_secs(30));
        assert_eq!(config.steady_check_interval, Duration::from_secs(300));
        assert_eq!(config.pull_behavior, PullBehavior::Default);
        assert_eq!(config.event_capacity, 10_000);
        assert_eq!(
            config.docker_concurrency,
            Config::from_sources(None, &|_| None, Scope::System)
                .expect("the defaults load")
                .docker_concurrency,
            "the engine's default pool size is the documented DECKHAND_DOCKER_CONCURRENCY"
        );
    }

    fn single_container(family: &str, image: &str) -> TaskDefinition {
        TaskDefinition {
            family: family.to_string(),
            revision: 1,
            network_mode: Default::default(),
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![crate::engine::test_support::container_definition(
                "app", image,
            )],
        }
    }

    #[test]
    fn a_worker_that_panics_answers_its_task_which_still_reaches_stopped() {
        crate::engine::managed_task::test_hooks::PANIC_IN_WORKER_FOR_FAMILIES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push("worker-panics".to_string());
        let (pulls_sender, pulls) = unbounded();
        let runtime = crate::engine::test_support::UnitRuntime {
            pulls: pulls_sender,
            inspect_answer: None,
        };
        let config = EngineConfig {
            cluster: "worker-panic-unit".to_string(),
            cleanup_wait: Duration::from_secs(3600),
            docker_concurrency: 2,
            ..EngineConfig::default()
        };
        let engine = TaskEngine::start(Arc::new(runtime), config).expect("the engine starts");
        let task = engine
            .submit(single_container("worker-panics", "panics/app:1"))
            .expect("accepted");
        // Every call of the task panics before reaching Docker: the pull fails (and, under the
        // default pull behaviour, the task goes on), the create fails, and the task stops.
        assert!(
            engine.wait_for_task(&task.id, Duration::from_secs(20), |task| {
                task.is_some_and(|task| task.known_status == TaskStatus::Stopped)
            }),
            "the task never heard back from its worker: {:?}",
            engine.task(&task.id)
        );
        let snapshot = engine.task(&task.id).expect("kept until cleanup");
        let reason = snapshot.containers[0]
            .applying_error
            .as_ref()
            .map(|error| error.message.clone())
            .unwrap_or_default();
        assert!(
            reason.contains("call panicked: test hook: a worker of family worker-panics panics"),
            "{reason}"
        );
        assert!(pulls.try_recv().is_err(), "no call reached the runtime");
        assert!(engine.docker_pool_stats().panicked >= 2);
        engine.shutdown();
        assert_eq!(engine.docker_pool_stats().workers, 0);
    }

    #[test]
    fn a_panic_in_a_task_loop_drops_the_task_and_releases_its_stop_number() {
        crate::engine::managed_task::test_hooks::PANIC_ON_DESIRED_FOR_FAMILIES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push("panics-on-stop".to_string());
        let (pulls_sender, pulls) = unbounded();
        let runtime = crate::engine::test_support::UnitRuntime {
            pulls: pulls_sender,
            inspect_answer: None,
        };
        let config = EngineConfig {
            cluster: "panic-unit".to_string(),
            cleanup_wait: Duration::from_secs(3600),
            events_reconnect: Reconnect {
                initial: Duration::from_millis(50),
                maximum: Duration::from_millis(50),
            },
            ..EngineConfig::default()
        };
        let engine = TaskEngine::start(Arc::new(runtime), config).expect("the engine starts");
        let deadline = Duration::from_secs(20);
        let doomed = engine
            .submit(single_container("panics-on-stop", "doomed/app:1"))
            .expect("accepted");
        assert_eq!(
            pulls.recv_timeout(deadline).as_deref(),
            Ok("pull doomed/app:1"),
            "the task's loop runs"
        );
        // The stop registers a stop number that every later start waits for; the task's loop
        // panics on it before its state machine takes it over.
        engine.stop(&doomed.id).expect("the stop is accepted");
        assert!(
            engine.wait_for_task(&doomed.id, deadline, |task| task.is_none()),
            "the panicked task is dropped from memory"
        );
        assert_eq!(engine.running_task_count(), 0);
        // A later task starts: the stop number of the panicked task was finished.
        engine
            .submit(single_container("after-the-panic", "follower/app:1"))
            .expect("accepted");
        assert_eq!(
            pulls.recv_timeout(deadline).as_deref(),
            Ok("pull follower/app:1"),
            "the later task waited forever for the panicked task's stop"
        );
        engine.shutdown();
    }
}
