//! `TaskEngine`: accepts tasks and stops, numbers them, and runs one managed-task thread per
//! task; owns the Docker-id → task index, the sequential wait group, the event log and the Docker
//! events thread; serves a read-only snapshot of every task.
//!
//! Commands (submit, stop) are serialised by one lock so sequence numbers follow acceptance order,
//! and a stop is registered in the wait group before the lock is released: a start accepted
//! after it always sees it (docs/ENGINE.md §9). Nothing here writes a task's statuses; only the
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
//!
//! Rooms: this file holds the engine's shared state, its threads' start and shutdown, and the
//! reads; `accept.rs` takes the commands (submit, stop), `restore.rs` brings saved tasks back
//! and re-lists by label after a reconnect. The agent maps its configuration onto
//! [`EngineConfig`] (`agent.rs`), so the engine reads no configuration file format.

use crate::engine::docker_events::{
    event_filter, run_events_thread, EventsThreadControl, OnReconnect, Reconnect,
};
use crate::engine::firelens::FirelensSetup;
use crate::engine::host_resources::{HostCapacity, HostResourceQueue, HostResources};
use crate::engine::image_cleanup::{
    forget_pulled_images, ImageCleaner, ImageCleanupCounters, ImageCleanupSettings, ImageTracker,
    ProtectedImages,
};
use crate::engine::log_driver::AwsLogsSetup;
use crate::engine::managed_task::{
    run_managed_task, ManagedTask, ManagedTaskSettings, OwnerCommand, TaskInboxes, TaskRoute,
    DOCKER_EVENT_INBOX_CAPACITY,
};
use crate::engine::shared::{Commands, TaskHandle, TaskShared};
use crate::engine::transition::RuleConfig;
use crate::engine::wait_group::SequentialWaitGroup;
use crate::engine::worker_pool::{DockerPool, PoolStats, DEFAULT_DOCKER_CONCURRENCY};
use crate::engine::workers::{StopRetry, WorkerContext};
use crate::registry::RegistryCredentials;
use crate::report::{EventLog, DEFAULT_EVENT_CAPACITY};
use crate::role_credentials::CredentialsStore;
use crate::runtime::ContainerRuntime;
use crate::state::{StateError, StateStore};
use crate::task::metadata_endpoint::MetadataEndpoint;
use crate::task::{PullBehavior, Task};
use crossbeam_channel::{bounded, unbounded, Sender};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// Engine settings; defaults per docs/ENGINE.md §13.
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
    /// How long a Docker worker waits for a call before its thread ends (tests shorten it).
    pub docker_worker_idle_timeout: Duration,
    /// What the host offers tasks (§9a): `MemTotal` less `ECS_RESERVED_MEMORY`, 1024 CPU units
    /// per core, and the reserved ports. Unlimited memory and CPU by default (tests); the agent
    /// reads the host's.
    pub host_capacity: HostCapacity,
    /// Where the agent serves the task metadata endpoint (§14), which every container created
    /// is pointed at; `None` when it is off (`DECKHAND_TASK_METADATA=false`, or its port taken).
    pub task_metadata: Option<MetadataEndpoint>,
    /// `ECS_ENGINE_AUTH_TYPE`/`ECS_ENGINE_AUTH_DATA`: the credentials each pull sends for its
    /// image's registry (§13). Its `Debug` output shows no password.
    pub registry_credentials: Arc<RegistryCredentials>,
    /// `ECS_EXCLUDE_IPV6_PORTBINDING`: record a container's port bindings without the IPv6 twins
    /// of its IPv4 ones (`ports::reported_port_bindings`).
    pub exclude_ipv6_port_bindings: bool,
    /// `DECKHAND_SECRETS_FILE`: the local secret store, read at submit and at each create and
    /// pull that needs a secret; `None`: there is none, and a task that needs one is refused.
    pub secrets_file: Option<PathBuf>,
    /// What says whether awslogs containers can ship their logs (§13).
    pub aws_logs: AwsLogsSetup,
    /// `ECS_DATADIR`, where a FireLens router's files are written (`firelens/<task id>/`);
    /// `None`: FireLens tasks are refused.
    pub data_dir: Option<PathBuf>,
    /// `DECKHAND_ENVIRONMENT_FILES_DIR`: the operator's mirror of S3 objects (`<bucket>/<key>`),
    /// which serves FireLens `config-file-type: s3` files (`environment_files` reads it first
    /// too: the agent builds that source over the same directory).
    pub environment_files_dir: Option<PathBuf>,
    /// Where `environmentFiles` are read from at create; `None`: nowhere, and a container that
    /// has one fails its create with `ResourceInitializationError`.
    pub environment_files: Option<Arc<dyn crate::engine::environment_files::EnvironmentFileSource>>,
    /// The credentials of tasks' IAM roles, in memory: the engine marks a task's ids expected
    /// when it accepts or restores the task, and forgets them when it removes the task.
    pub role_credentials: CredentialsStore,
    /// SSM, Secrets Manager and ECR, for what the local secret store lacks (with a task's
    /// execution role) and ECR images' logins; `None`: no AWS.
    pub execution_role: Option<Arc<dyn crate::engine::workers::ExecutionRoleAws>>,
    /// `DECKHAND_TASK_ROLES=assume|host`: who gives local tasks' roles their credentials; a
    /// local task with a `taskRoleArn` or `executionRoleArn` gets credentials ids only then.
    /// `None` (`off`): those roles are ignored.
    pub local_roles: Option<Arc<dyn crate::role_credentials::local::LocalRoles>>,
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
            docker_worker_idle_timeout: crate::worker_threads::DEFAULT_IDLE_TIMEOUT,
            host_capacity: HostCapacity::unlimited(),
            task_metadata: None,
            registry_credentials: Arc::new(RegistryCredentials::default()),
            exclude_ipv6_port_bindings: true,
            secrets_file: None,
            environment_files: None,
            aws_logs: AwsLogsSetup::default(),
            data_dir: None,
            environment_files_dir: None,
            role_credentials: CredentialsStore::new(),
            execution_role: None,
            local_roles: None,
        }
    }
}

impl EngineConfig {
    /// Where FireLens files go and S3 configuration files come from.
    pub fn firelens(&self) -> FirelensSetup {
        FirelensSetup {
            data_dir: self.data_dir.clone(),
            environment_files_dir: self.environment_files_dir.clone(),
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
    /// This host's container instance ARN once the control plane registered it (ECS).
    pub(crate) container_instance_arn: Mutex<Option<String>>,
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
            task_metadata: self.config.task_metadata,
            exclude_ipv6_port_bindings: self.config.exclude_ipv6_port_bindings,
            aws_logs: self.config.aws_logs.clone(),
            firelens: self.config.firelens(),
        }
    }
}

/// The task engine. Dropping it without [`TaskEngine::shutdown`] leaves its threads running.
pub struct TaskEngine {
    pub(super) shared: Arc<EngineShared>,
    events_control: Arc<EventsThreadControl>,
    events_stop: Mutex<Option<Sender<()>>>,
    events_thread: Mutex<Option<JoinHandle<()>>>,
    /// Image cleanup's thread and its stop signal, once started (§15).
    image_cleanup: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
    /// Image cleanup's counters, once started (for metrics).
    image_cleanup_counters: Mutex<Option<Arc<ImageCleanupCounters>>>,
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
    /// docs/ENGINE.md §11. Returns once every saved task's loop runs; waits (logging why)
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
        // Restored tasks' credentials ids are known at once: their endpoint says 503, not 400,
        // until the control plane sends the credentials again.
        for task in &saved {
            crate::engine::accept::expect_credentials(&engine.shared.config, task);
        }
        engine.restore(saved).map_err(EngineStartError::Thread)?;
        // A task cleaned up just before a crash may still hold its images in `images.json`.
        if let Some(images) = &engine.shared.worker_context.images {
            let live = crate::sorting::set_of(engine.shared.snapshots().keys().cloned());
            images.keep_holders(&live);
        }
        Ok(engine)
    }

    fn start_with(
        runtime: Arc<dyn ContainerRuntime>,
        config: EngineConfig,
        store: Option<Arc<StateStore>>,
        reporter: EventLog,
    ) -> std::io::Result<TaskEngine> {
        let docker_pool = DockerPool::with_idle_timeout(
            config.docker_concurrency,
            config.docker_worker_idle_timeout,
        );
        let shared = Arc::new(EngineShared {
            tasks: Arc::new(TaskShared {
                docker_pool,
                reporter: Arc::new(reporter),
                wait_group: Arc::new(SequentialWaitGroup::new()),
                host_resources: HostResourceQueue::new(config.host_capacity.clone()),
                docker_index: Arc::new(RwLock::new(HashMap::new())),
                worker_context: WorkerContext {
                    runtime: Arc::clone(&runtime),
                    pull_behavior: config.pull_behavior,
                    pulled_images: Arc::new(Mutex::new(HashSet::new())),
                    stop_retry: config.stop_retry,
                    store: store.clone(),
                    registry_credentials: Arc::clone(&config.registry_credentials),
                    secrets_file: config.secrets_file.clone(),
                    environment_files: config.environment_files.clone(),
                    execution_role: config.execution_role.clone(),
                    role_credentials: config.role_credentials.clone(),
                    images: Some(Arc::new(ImageTracker::new(
                        store
                            .as_ref()
                            .map(|store| store.images())
                            .unwrap_or_default(),
                        store.clone(),
                    ))),
                },
                store,
                snapshots: Mutex::new(BTreeMap::new()),
                snapshot_changed: Condvar::new(),
                commands: Mutex::new(Commands::default()),
                role_credentials: config.role_credentials.clone(),
            }),
            config,
            container_instance_arn: Mutex::new(None),
        });
        let filter = event_filter(&shared.config.cluster);
        let subscribed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::docker_events::note_docker_answer(runtime.events(&filter))
        }));
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
                    crate::text::panic_message(panic.as_ref())
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
            let on_reconnect: OnReconnect = Box::new(move || relist_shared.relist_by_label());
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
            image_cleanup: Mutex::new(None),
            image_cleanup_counters: Mutex::new(None),
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
        let image_cleanup = self
            .image_cleanup
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        if let Some((stop, thread)) = image_cleanup {
            drop(stop);
            if thread.join().is_err() {
                log::error!("the image cleanup thread panicked");
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
        // The image uses the workers recorded in memory only.
        if let Some(images) = &self.shared.worker_context.images {
            images.flush();
        }
        // The state log's records folded into the task files: after a clean stop the files
        // alone hold the whole state (what an older deckhand, which reads only them, needs).
        if let Some(store) = &self.shared.store {
            if let Err(error) = store.compact() {
                log::warn!("cannot fold the state log into the task files at shutdown: {error}");
            }
        }
    }

    /// The record of the images tasks use (§15).
    pub fn image_tracker(&self) -> Option<Arc<ImageTracker>> {
        self.shared.worker_context.images.clone()
    }

    /// Every image name and id a task the engine still has uses: these are never removed.
    pub fn live_images(&self) -> ProtectedImages {
        let shared = Arc::clone(&self.shared.tasks);
        Arc::new(move || {
            let snapshots = shared.snapshots();
            let mut names = Vec::new();
            for container in snapshots.values().flat_map(|task| &task.containers) {
                names.push(container.definition.image.clone());
                names.extend(container.image_id.clone());
            }
            Ok(names)
        })
    }

    /// The image cleaner over this engine's runtime, tracker and live tasks; `declared` names
    /// the images of `tasks.d` (the agent wires it).
    pub fn image_cleaner(
        &self,
        settings: ImageCleanupSettings,
        declared: ProtectedImages,
    ) -> Option<ImageCleaner> {
        let tracker = self.image_tracker()?;
        Some(ImageCleaner::new(
            Arc::clone(&self.shared.worker_context.runtime),
            tracker,
            settings,
            declared,
            self.live_images(),
            forget_pulled_images(
                Arc::clone(&self.shared.worker_context.pulled_images),
                self.shared.store.clone(),
            ),
        ))
    }

    /// Starts image cleanup's thread (§15), joined by [`TaskEngine::shutdown`]. Returns its
    /// counters.
    pub fn start_image_cleanup(
        &self,
        settings: ImageCleanupSettings,
        declared: ProtectedImages,
    ) -> std::io::Result<Arc<ImageCleanupCounters>> {
        let cleaner = Arc::new(
            self.image_cleaner(settings, declared)
                .ok_or_else(|| std::io::Error::other("the engine tracks no images"))?,
        );
        let counters = cleaner.counters();
        let (stop, stop_signal) = bounded(1);
        let thread = cleaner.spawn(stop_signal)?;
        let previous = self
            .image_cleanup
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .replace((stop, thread));
        if let Some((stop, thread)) = previous {
            drop(stop);
            let _ = thread.join();
        }
        *self
            .image_cleanup_counters
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(Arc::clone(&counters));
        Ok(counters)
    }

    /// Image cleanup's counters (images removed, the last disk usage), once it started.
    pub fn image_cleanup_counters(&self) -> Option<Arc<ImageCleanupCounters>> {
        self.image_cleanup_counters
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// The Docker worker pool's counters, for diagnostics, tests and the benchmark.
    pub fn docker_pool_stats(&self) -> PoolStats {
        self.shared.docker_pool.stats()
    }

    /// Waits until exactly `count` Docker workers are alive (they end after
    /// `docker_worker_idle_timeout` without a call), or `deadline` passes; the counters then.
    pub fn wait_for_docker_workers(&self, count: usize, deadline: Duration) -> PoolStats {
        self.shared.docker_pool.wait_for_workers(count, deadline)
    }

    /// The wait group, for diagnostics and tests.
    pub fn wait_group(&self) -> &SequentialWaitGroup {
        &self.shared.wait_group
    }

    /// A copy of the host-resource ledger (§9a), for diagnostics and tests.
    pub fn host_resources(&self) -> HostResources {
        self.shared.host_resources.ledger()
    }

    /// The event log.
    pub fn event_log(&self) -> &EventLog {
        &self.shared.reporter
    }

    /// A snapshot of one task.
    pub fn task(&self, task_id: &str) -> Option<Task> {
        let mut task = self.shared.snapshots().get(task_id).cloned()?;
        task.waiting_for = self.shared.host_resources.waiting_reason(task_id);
        Some(task)
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

    /// `unsaved`: the task differs from its checkpoint (its first pass writes it).
    pub(super) fn spawn_task(
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

    pub(super) fn route_containers(&self, task: &Task, route: &TaskRoute) {
        let mut index = self
            .shared
            .docker_index
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        for docker_id in task.containers.iter().filter_map(|c| c.docker_id.as_ref()) {
            index.insert(docker_id.clone(), route.clone());
        }
    }
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

/// A task's inboxes: the engine keeps the senders, the task's thread the receivers.
pub(super) fn new_inboxes() -> (Sender<OwnerCommand>, Sender<()>, TaskInboxes) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineHandle;
    use crate::task::{TaskDefinition, TaskStatus};

    #[test]
    fn defaults_follow_the_ecs_defaults() {
        let config = EngineConfig::default();
        assert_eq!(config.cluster, "default");
        assert_eq!(config.cleanup_wait, Duration::from_secs(3 * 3600));
        assert_eq!(config.stop_timeout, Duration::from_secs(30));
        assert_eq!(config.steady_check_interval, Duration::from_secs(300));
        assert_eq!(config.pull_behavior, PullBehavior::Default);
        assert_eq!(config.event_capacity, 10_000);
    }

    fn single_container(family: &str, image: &str) -> TaskDefinition {
        TaskDefinition {
            roles: Default::default(),
            family: family.to_string(),
            revision: 1,
            network_mode: Default::default(),
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![crate::engine::test_support::container_definition(
                "app", image,
            )],
            pid_mode: None,
            ipc_mode: None,
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
